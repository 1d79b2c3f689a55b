//! The setup panel's LLM fields (issues 13–15): fine-tuning (full, freeze, LoRA, QLoRA), generate
//! mode's settings, the weights' storage format, and GPUs × strategy. Built here, with the full
//! core's types, as a list of plain fields the app renders generically: the app's first-load
//! bundle has neither these types' (de)serialisers nor their rules, and keeps the settings as the
//! JSON this module writes (`{"finetune", "generate", "weights", "dist"}`, each only when it is not
//! the default), exactly as the core's serde writes them in a `TrainConfig` and a `ShareState`.

use serde_json::{json, Map, Value};
use vramcalc_core::distributed::{DistConfig, Offload, Strategy};
use vramcalc_core::finetune::names::{default_targets, module_names, NameStyle};
use vramcalc_core::finetune::{BaseFormat, LinearRole, Method, NameList};
use vramcalc_core::formats::{WeightFormat, WEIGHT_NAMES};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{ByteUnit, KvCacheKind, KvDType, Mode, TrainConfig};

/// The form's request: the model, its setup (with the LLM settings), the multi-GPU job, the
/// language, and optionally one field's new text.
pub(crate) struct Request {
    pub spec: ModelSpec,
    pub config: TrainConfig,
    pub dist: DistConfig,
    pub zh: bool,
    set: Option<(String, String)>,
    /// The GPU's memory in bytes (0: not given) and the app's byte unit, for the answers.
    pub capacity: u64,
    pub unit: ByteUnit,
}

pub(crate) fn request(json: &str) -> Result<Request, String> {
    let mut v: Value = serde_json::from_str(json).map_err(|e| format!("request: {e}"))?;
    let spec = serde_json::from_value(v["spec"].take()).map_err(|e| format!("request `spec`: {e}"))?;
    let config = serde_json::from_value(v["config"].take()).map_err(|e| format!("request `config`: {e}"))?;
    let dist = match v["dist"].take() {
        Value::Null => DistConfig::default(),
        d => serde_json::from_value(d).map_err(|e| format!("request `dist`: {e}"))?,
    };
    let set = match (v["set"]["field"].as_str(), v["set"]["value"].as_str()) {
        (Some(f), Some(t)) => Some((f.to_string(), t.to_string())),
        _ => None,
    };
    let unit = if v["unit"] == "MiB" { ByteUnit::Mib } else { ByteUnit::Mb };
    Ok(Request { spec, config, dist, zh: v["lang"] == "zh", set, capacity: v["capacity"].as_u64().unwrap_or(0), unit })
}

/// `{"llm": settings, "fields": [field, …], "html": the fields' controls}`, plus
/// `"error": {"field", "message"}` when the new text of `set` is not a valid value (the settings
/// are then unchanged). A field is `{"id", "label", "kind": "select" | "text" | "checks",
/// "value", "options"?}`; a `checks` field's value is the list of ticked options. The app inserts
/// `html` as it is and listens for `change` events: the control's `data-llm` names the field,
/// its value (or a checkbox's `data-next`, the list after the click) is the new text.
pub fn llm_form(request_json: &str) -> Result<String, String> {
    let mut r = request(request_json)?;
    let mut error = Value::Null;
    if let Some((field, text)) = r.set.take() {
        if let Err(message) = set(&mut r.config, &mut r.dist, &field, text.trim()) {
            error = json!({ "field": field, "message": message });
        }
    }
    let fields = fields(&r);
    let html: String = fields.iter().map(control).collect::<String>() + &crate::llm_answers::answers(&r.spec, &r.config, &r.dist, r.capacity, r.unit, r.zh);
    let mut answer = json!({ "llm": settings(&r.config, &r.dist), "fields": fields, "html": html });
    if !error.is_null() {
        answer["error"] = error;
    }
    Ok(answer.to_string())
}

/// The LLM settings as the core's serde writes them, defaults left out.
pub(crate) fn settings(c: &TrainConfig, dist: &DistConfig) -> Map<String, Value> {
    let mut out = Map::new();
    if let Ok(Value::Object(cfg)) = serde_json::to_value(c) {
        for key in ["finetune", "generate", "weights"] {
            match cfg.get(key) {
                Some(v) if !v.is_null() => {
                    out.insert(key.into(), v.clone());
                }
                _ => {}
            }
        }
    }
    if !dist.is_default() {
        out.insert("dist".into(), serde_json::to_value(dist).unwrap_or_default());
    }
    out
}

fn whole(text: &str, min: u64) -> Result<u64, String> {
    text.parse::<u64>().ok().filter(|&n| n >= min).ok_or_else(|| format!("expected a whole number of at least {min}"))
}

fn number(text: &str) -> Result<f64, String> {
    text.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| "expected a number".to_string())
}

fn one_of<T>(parsed: Option<T>, options: &[&str]) -> Result<T, String> {
    parsed.ok_or_else(|| format!("expected one of {}", options.join(", ")))
}

/// `None` for an empty text (the setting's default).
fn optional(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

/// Applies `text` to field `id`; the error says what the field expects.
fn set(c: &mut TrainConfig, d: &mut DistConfig, id: &str, text: &str) -> Result<(), String> {
    let ft = &mut c.finetune;
    let g = &mut c.generate;
    match id {
        "finetune" => ft.method = one_of(Method::parse(text), &["full", "freeze", "lora", "qlora"])?,
        "train-only" => ft.train_only = NameList::parse(text)?,
        "base-format" => {
            ft.base_format = match optional(text) {
                None => None,
                Some(t) => Some(one_of(BaseFormat::parse(t), &BaseFormat::ALL.iter().map(|b| b.name()).collect::<Vec<_>>())?),
            }
        }
        "double-quant" => ft.double_quant = text == "on",
        "lora-r" => ft.lora_r = u32::try_from(whole(text, 1)?).map_err(|_| "too large".to_string())?,
        "lora-alpha" => ft.lora_alpha = number(text)?,
        "lora-dropout" => ft.lora_dropout = number(text).and_then(|p| if (0.0..1.0).contains(&p) { Ok(p) } else { Err("expected a probability in [0, 1)".into()) })?,
        "lora-targets" => ft.lora_targets = NameList::parse(text)?,
        "prompt-len" => g.prompt_len = optional(text).map(|t| whole(t, 1)).transpose()?,
        "new-tokens" => g.new_tokens = whole(text, 1)?,
        "kv-cache" => g.cache = one_of(KvCacheKind::parse(text), &["dynamic", "static", "paged"])?,
        "kv-dtype" => g.kv_dtype = optional(text).map(|t| one_of(KvDType::parse(t), &["fp16", "bf16", "fp8", "int8"])).transpose()?,
        "weights" => c.weights = optional(text).map(|t| WeightFormat::parse(t).map_err(|e| e.to_string())).transpose()?,
        "gpus" => d.gpus = whole(text, 1)?,
        "strategy" => d.strategy = one_of(Strategy::parse(text), &["ddp", "zero1", "zero2", "zero3", "fsdp", "tp"])?,
        "offload" => d.offload = one_of(Offload::parse(text), &["none", "optimizer", "params"])?,
        "sequence-parallel" => d.sequence_parallel = text == "on",
        other => return Err(format!("no LLM setting `{other}`")),
    }
    Ok(())
}

/// A field's label in the app's language.
fn label(zh: bool, id: &str) -> &'static str {
    let (en, cn) = match id {
        "finetune" => ("Fine-tuning", "微调"),
        "train-only" => ("Train only (names)", "仅训练（模块名）"),
        "base-format" => ("Base format", "基座格式"),
        "double-quant" => ("Double quant", "双重量化"),
        "lora-r" => ("LoRA r", "LoRA 秩 r"),
        "lora-alpha" => ("LoRA alpha", "LoRA alpha"),
        "lora-dropout" => ("LoRA dropout", "LoRA dropout"),
        "lora-targets" => ("LoRA targets", "LoRA 目标模块"),
        "prompt-len" => ("Prompt length", "提示长度"),
        "new-tokens" => ("New tokens", "新生成 token 数"),
        "kv-cache" => ("KV cache", "KV 缓存"),
        "kv-dtype" => ("KV dtype", "KV 数据类型"),
        "weights" => ("Weights", "权重格式"),
        "gpus" => ("GPUs", "GPU 数"),
        "strategy" => ("Strategy", "并行策略"),
        "offload" => ("Offload", "卸载"),
        "sequence-parallel" => ("Sequence parallelism (Megatron)", "序列并行（Megatron）"),
        _ => ("", ""),
    };
    if zh { cn } else { en }
}

/// The naming style of the model's transformer layers, as the core lowers them
/// (`NameStyle::of`: Llama's with a gated MLP or rotary embeddings, GPT-2's with a fused Q/K/V).
fn style(spec: &ModelSpec) -> NameStyle {
    let json = serde_json::to_string(spec).unwrap_or_default();
    NameStyle::of(json.contains(r#""gated_mlp":true"#) || json.contains(r#""rotary":true"#), json.contains(r#""fused_qkv":true"#))
}

/// The short module names peft matches (`q_proj`, `dense`, `c_attn`), from the core's HF names.
fn linear_names(style: NameStyle) -> Vec<&'static str> {
    use LinearRole::*;
    let roles: &[LinearRole] = if style == NameStyle::Llama { &[Q, K, V, O, Gate, Up, Down] } else { &[Qkv, Q, K, V, O, FfnIn, FfnOut] };
    let mut out: Vec<&str> = Vec::new();
    for &r in roles {
        let n = module_names(r, style)[0];
        let short = n.rsplit('.').next().unwrap_or(n);
        if !out.contains(&short) {
            out.push(short);
        }
    }
    out
}

/// The fields that apply to the mode and fine-tuning method, in order.
fn fields(r: &Request) -> Vec<Value> {
    let (c, d) = (&r.config, &r.dist);
    let (ft, g) = (&c.finetune, &c.generate);
    let field = |id: &str, kind: &str, value: Value, options: &[&str]| {
        let mut f = json!({ "id": id, "label": label(r.zh, id), "kind": kind, "value": value });
        if !options.is_empty() {
            f["options"] = json!(options);
        }
        f
    };
    let text = |id: &str, value: String| field(id, "text", Value::String(value), &[]);
    let mut out = Vec::new();
    if c.mode == Mode::Train {
        out.push(field("finetune", "select", ft.method.name().into(), &["full", "freeze", "lora", "qlora"]));
        if ft.method == Method::Freeze {
            out.push(text("train-only", ft.train_only.as_str().into()));
        }
        if ft.method != Method::Full {
            out.push(field("base-format", "select", ft.base_format.map_or("", BaseFormat::name).into(), &["", "nf4", "fp4", "int8", "bf16", "fp16"]));
            out.push(field("double-quant", "select", (if ft.double_quant { "on" } else { "off" }).into(), &["off", "on"]));
        }
        if ft.has_adapters() {
            out.push(text("lora-r", ft.lora_r.to_string()));
            out.push(text("lora-alpha", ft.lora_alpha.to_string()));
            out.push(text("lora-dropout", ft.lora_dropout.to_string()));
            // nothing chosen means peft's default for the architecture (shown ticked)
            let style = style(&r.spec);
            let chosen: Vec<&str> = if ft.lora_targets.is_empty() { default_targets(style).to_vec() } else { ft.lora_targets.iter().collect() };
            let mut names = vec!["all-linear"];
            names.extend(linear_names(style));
            let ticked: Vec<&str> = if chosen.contains(&"all-linear") { names.clone() } else { chosen };
            out.push(field("lora-targets", "checks", json!(ticked), &names));
        }
    } else {
        let mut weights = vec![""];
        weights.extend(WEIGHT_NAMES);
        out.push(field("weights", "select", c.weights.map(WeightFormat::name).unwrap_or_default().into(), &weights));
    }
    if c.mode == Mode::Generate {
        out.push(text("prompt-len", g.prompt_len.map(|p| p.to_string()).unwrap_or_default()));
        out.push(text("new-tokens", g.new_tokens.to_string()));
        out.push(field("kv-cache", "select", g.cache.name().into(), &["dynamic", "static", "paged"]));
        out.push(field("kv-dtype", "select", g.kv_dtype.map_or("", KvDType::name).into(), &["", "fp16", "bf16", "fp8", "int8"]));
    }
    out.push(text("gpus", d.gpus.to_string()));
    out.push(field("strategy", "select", d.strategy.name().into(), &["ddp", "zero1", "zero2", "zero3", "fsdp", "tp"]));
    out.push(field("offload", "select", d.offload.name().into(), &["none", "optimizer", "params"]));
    // sequence parallelism splits what tensor parallelism replicates: offered with a TP degree
    if !d.is_single() && d.tp_degree() > 1 {
        out.push(field("sequence-parallel", "select", (if d.sequence_parallel { "on" } else { "off" }).into(), &["off", "on"]));
    }
    out
}

/// `text` for HTML text and attribute values.
pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A field's control as HTML, with the app's classes and the browser tests' `data-testid`s.
fn control(f: &Value) -> String {
    let text = |k: &str| escape(f[k].as_str().unwrap_or_default());
    let (id, label) = (text("id"), text("label"));
    let options: Vec<String> = f["options"].as_array().map(|o| o.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
    match f["kind"].as_str() {
        Some("select") => {
            let value = f["value"].as_str().unwrap_or_default();
            let items: String = options
                .iter()
                .map(|o| {
                    let selected = if o == value { " selected" } else { "" };
                    format!(r#"<option value="{}"{selected}>{}</option>"#, escape(o), if o.is_empty() { "—".into() } else { escape(o) })
                })
                .collect();
            format!(r#"<div class="field"><label for="{id}">{label}</label><select id="{id}" data-testid="{id}" data-llm="{id}">{items}</select></div>"#)
        }
        Some("checks") => {
            let ticked: Vec<String> = f["value"].as_array().map(|o| o.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
            let items: String = options
                .iter()
                .map(|o| {
                    let checked = if ticked.contains(o) { " checked" } else { "" };
                    let next = escape(&toggled(&ticked, o).join(","));
                    let o = escape(o);
                    format!(r#"<div class="field check"><input id="{id}-{o}" type="checkbox"{checked} data-testid="target-{o}" data-llm="{id}" data-next="{next}"><label for="{id}-{o}">{o}</label></div>"#)
                })
                .collect();
            format!(r#"<div class="targets" role="group" aria-label="{label}" data-testid="{id}">{items}</div>"#)
        }
        _ => format!(
            r#"<div class="field"><label for="{id}">{label}</label><input id="{id}" type="text" value="{}" data-testid="{id}" data-llm="{id}"></div>"#,
            text("value")
        ),
    }
}

/// A checklist's list after clicking `option`: `all-linear` stands for every name, and
/// unticking it goes back to peft's default (an empty list).
fn toggled(ticked: &[String], option: &str) -> Vec<String> {
    const ALL: &str = "all-linear";
    let rest = ticked.iter().filter(|t| *t != ALL && *t != option).cloned();
    match (ticked.iter().any(|t| t == option), option == ALL) {
        (true, true) => Vec::new(),
        (true, false) => rest.collect(),
        (false, true) => vec![ALL.to_string()],
        (false, false) => rest.chain([option.to_string()]).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(spec: &ModelSpec, config: &TrainConfig, set: Option<(&str, &str)>) -> String {
        let mut r = json!({ "spec": spec, "config": config, "lang": "en" });
        if let Some((f, v)) = set {
            r["set"] = json!({ "field": f, "value": v });
        }
        r.to_string()
    }

    fn form(json: &str) -> Value {
        serde_json::from_str(&llm_form(json).unwrap()).unwrap()
    }

    fn ids(v: &Value) -> Vec<String> {
        v["fields"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap().to_string()).collect()
    }

    /// The settings the form writes read back as the core's typed setup (what the CLI's flags
    /// give), so the app can pass them through as JSON.
    #[test]
    fn settings_are_the_cores_serde_and_read_back() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let mut config = TrainConfig::default();
        let mut llm = Map::new();
        for (f, v) in [("finetune", "qlora"), ("lora-r", "16"), ("lora-alpha", "32"), ("lora-targets", "all-linear"), ("double-quant", "on")] {
            let mut r: Value = serde_json::from_str(&req(&spec, &config, Some((f, v)))).unwrap();
            r["config"].as_object_mut().unwrap().extend(llm.clone());
            let answer = form(&r.to_string());
            assert!(answer["error"].is_null(), "{f}: {}", answer["error"]);
            llm = answer["llm"].as_object().unwrap().clone();
            let mut c = serde_json::to_value(TrainConfig::default()).unwrap();
            c.as_object_mut().unwrap().extend(llm.clone());
            config = serde_json::from_value(c).unwrap();
        }
        let ft = config.finetune;
        assert_eq!((ft.method, ft.lora_r, ft.lora_alpha, ft.double_quant), (Method::Qlora, 16, 32.0, true));
        assert_eq!(ft.lora_targets.as_str(), "all-linear");
        let answer = form(&req(&spec, &config, None));
        assert_eq!(ids(&answer), ["finetune", "base-format", "double-quant", "lora-r", "lora-alpha", "lora-dropout", "lora-targets", "gpus", "strategy", "offload"]);
        let targets = &answer["fields"][6];
        assert_eq!(targets["options"][1], "c_attn", "GPT-2's fused Q/K/V");
        assert_eq!(targets["value"], targets["options"], "all-linear ticks every linear");
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_checklist_toggles_names_and_all_linear() {
        let all = names(&["all-linear", "q_proj", "v_proj"]);
        assert_eq!(toggled(&names(&["q_proj"]), "v_proj"), names(&["q_proj", "v_proj"]));
        assert_eq!(toggled(&names(&["q_proj", "v_proj"]), "q_proj"), names(&["v_proj"]));
        assert_eq!(toggled(&names(&["q_proj"]), "all-linear"), names(&["all-linear"]));
        assert_eq!(toggled(&all, "all-linear"), Vec::<String>::new(), "back to peft's default");
        assert_eq!(toggled(&all, "q_proj"), names(&["v_proj"]));
    }

    /// The controls name their field and carry the value; what the user typed is escaped.
    #[test]
    fn the_html_has_one_control_per_field_and_escapes_text() {
        let spec = vramcalc_core::presets::build("resnet18").unwrap();
        let config = TrainConfig::default();
        let mut r: Value = serde_json::from_str(&req(&spec, &config, Some(("finetune", "freeze")))).unwrap();
        let llm = form(&r.to_string())["llm"].clone();
        r["config"].as_object_mut().unwrap().extend(llm.as_object().unwrap().clone());
        r["set"] = json!({ "field": "train-only", "value": "fc,<b>" });
        let answer = form(&r.to_string());
        let html = answer["html"].as_str().unwrap();
        for id in ids(&answer) {
            assert!(html.contains(&format!(r#"data-llm="{id}""#)), "{id}: {html}");
        }
        assert!(html.contains(r#"value="fc,&lt;b&gt;""#) && !html.contains("<b>"), "{html}");
        assert!(html.contains(r#"<option value="freeze" selected>"#), "{html}");
    }

    #[test]
    fn a_bad_value_names_the_field_and_changes_nothing() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let config = TrainConfig::default();
        for (f, v) in [("lora-r", "0"), ("gpus", "eight"), ("lora-dropout", "1.5"), ("weights", "q9"), ("nonsense", "1")] {
            let answer = form(&req(&spec, &config, Some((f, v))));
            assert_eq!(answer["error"]["field"], f);
            assert!(!answer["error"]["message"].as_str().unwrap().is_empty());
            assert_eq!(answer["llm"], json!({}), "{f}");
        }
    }

    #[test]
    fn fields_follow_the_mode_and_the_language() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let generate = TrainConfig { mode: Mode::Generate, ..Default::default() };
        let answer = form(&req(&spec, &generate, Some(("kv-dtype", "fp8"))));
        assert_eq!(ids(&answer), ["weights", "prompt-len", "new-tokens", "kv-cache", "kv-dtype", "gpus", "strategy", "offload"]);
        assert_eq!(answer["llm"]["generate"]["kv_dtype"], "fp8");
        let mut zh: Value = serde_json::from_str(&req(&spec, &TrainConfig::default(), None)).unwrap();
        zh["lang"] = "zh".into();
        assert_eq!(form(&zh.to_string())["fields"][0]["label"], "微调");
        let d: Value = serde_json::from_str(&req(&spec, &TrainConfig::default(), Some(("gpus", "4")))).unwrap();
        assert_eq!(form(&d.to_string())["llm"], json!({ "dist": DistConfig { gpus: 4, ..Default::default() } }));
    }

    /// Sequence parallelism is offered once the job has a tensor-parallel degree, and sets the
    /// core's `DistConfig::sequence_parallel`.
    #[test]
    fn sequence_parallelism_comes_with_tensor_parallelism() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let mut r: Value = serde_json::from_str(&req(&spec, &TrainConfig::default(), Some(("strategy", "tp")))).unwrap();
        assert!(!ids(&form(&r.to_string())).contains(&"sequence-parallel".to_string()), "one GPU: no TP degree");
        r["dist"] = json!({ "gpus": 4, "strategy": "tp" });
        r["set"] = json!({ "field": "sequence-parallel", "value": "on" });
        let answer = form(&r.to_string());
        assert_eq!(ids(&answer).last().unwrap(), "sequence-parallel");
        assert_eq!(answer["llm"]["dist"]["sequence_parallel"], true);
    }
}
