//! The LLM setup's state logic (issues 13–15, 23): which fields apply to the mode and the
//! fine-tuning method, their values and options, and applying a field's text to the core's typed
//! settings (`TrainConfig`'s fine-tuning, generation and weights, the `DistConfig`). Pure (no
//! web-sys): tested natively; `components::llm` renders the fields.

use vramcalc_core::distributed::{DistConfig, Offload, Strategy};
use vramcalc_core::finetune::names::{default_targets, module_names, NameStyle};
use vramcalc_core::finetune::{BaseFormat, LinearRole, Method, NameList};
use vramcalc_core::formats::{WeightFormat, WEIGHT_NAMES};
use vramcalc_core::spec::ModelSpec;
use crate::state::SetupMode;
use vramcalc_core::{KvCacheKind, KvDType, Precision, TrainConfig};

/// How a field is edited.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// One of the options (`""`: the default, shown as —).
    Select(Vec<&'static str>),
    /// Free text, committed as it is typed when it reads as a value.
    Text,
    /// Ticked options (the LoRA targets).
    Checks(Vec<&'static str>),
}

/// One control of the setup.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The id the control, its `data-testid` and [`set`] use (`lora-r`).
    pub id: &'static str,
    pub kind: Kind,
    /// The current text (a select's option, a text's value).
    pub value: String,
    /// A checklist's ticked options.
    pub ticked: Vec<&'static str>,
}

/// The setup with the text of field `id` applied; the error says what the field expects (the
/// settings are then unchanged).
pub fn with(config: &TrainConfig, dist: &DistConfig, id: &str, text: &str) -> Result<(TrainConfig, DistConfig), String> {
    let (mut c, mut d) = (*config, *dist);
    set(&mut c, &mut d, id, text.trim())?;
    Ok((c, d))
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
        "autocast-cache" => c.autocast_cache = text != "off",
        other => return Err(format!("no LLM setting `{other}`")),
    }
    Ok(())
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

/// The fields that apply to the mode and fine-tuning method, in order (generation's lengths
/// first: the setup panel shows them with the batch). The prompt shows the length it runs at:
/// its own, or the sequence length when it has none.
pub fn fields(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, mode: SetupMode) -> Vec<Field> {
    let (ft, g) = (&c.finetune, &c.generate);
    let select = |id: &'static str, value: &str, options: &[&'static str]| Field { id, kind: Kind::Select(options.to_vec()), value: value.to_string(), ticked: Vec::new() };
    let text = |id: &'static str, value: String| Field { id, kind: Kind::Text, value, ticked: Vec::new() };
    let on_off = |b: bool| if b { "on" } else { "off" };
    let mut out = Vec::new();
    if mode == SetupMode::Generate {
        out.push(text("prompt-len", g.prompt_len.or(spec.seq_len(c.seq_len)).map(|p| p.to_string()).unwrap_or_default()));
        out.push(text("new-tokens", g.new_tokens.to_string()));
    }
    if mode.trains() {
        out.push(select("finetune", ft.method.name(), &["full", "freeze", "lora", "qlora"]));
        if ft.method == Method::Freeze {
            out.push(text("train-only", ft.train_only.as_str().into()));
        }
        if ft.method != Method::Full {
            out.push(select("base-format", ft.base_format.map_or("", BaseFormat::name), &["", "nf4", "fp4", "int8", "bf16", "fp16"]));
            out.push(select("double-quant", on_off(ft.double_quant), &["off", "on"]));
        }
        if ft.has_adapters() {
            out.push(text("lora-r", ft.lora_r.to_string()));
            out.push(text("lora-alpha", ft.lora_alpha.to_string()));
            out.push(text("lora-dropout", ft.lora_dropout.to_string()));
            // nothing chosen means peft's default for the architecture (shown ticked)
            let style = style(spec);
            let mut names = vec!["all-linear"];
            names.extend(linear_names(style));
            let chosen: Vec<&str> = if ft.lora_targets.is_empty() { default_targets(style).to_vec() } else { ft.lora_targets.iter().collect() };
            let ticked: Vec<&'static str> = if chosen.contains(&"all-linear") { names.clone() } else { names.iter().copied().filter(|n| chosen.contains(n)).collect() };
            out.push(Field { id: "lora-targets", kind: Kind::Checks(names), value: String::new(), ticked });
        }
    } else {
        let mut weights = vec![""];
        weights.extend(WEIGHT_NAMES);
        out.push(select("weights", &c.weights.map(WeightFormat::name).unwrap_or_default(), &weights));
    }
    if mode == SetupMode::Generate {
        out.push(select("kv-cache", g.cache.name(), &["dynamic", "static", "paged"]));
    }
    if matches!(mode, SetupMode::Generate | SetupMode::Serve) {
        out.push(select("kv-dtype", g.kv_dtype.map_or("", KvDType::name), &["", "fp16", "bf16", "fp8", "int8"]));
    }
    // torch.autocast(cache_enabled): its cached weight copies (`Breakdown::weight_casts`)
    if mode.trains() && matches!(c.precision, Precision::AmpBf16 | Precision::AmpFp16) {
        out.push(select("autocast-cache", on_off(c.autocast_cache), &["on", "off"]));
    }
    out.push(text("gpus", d.gpus.to_string()));
    out.push(select("strategy", d.strategy.name(), &["ddp", "zero1", "zero2", "zero3", "fsdp", "tp"]));
    if mode.trains() {
        out.push(select("offload", d.offload.name(), &["none", "optimizer", "params"]));
    }
    // sequence parallelism splits what tensor parallelism replicates: offered with a TP degree
    if !d.is_single() && d.tp_degree() > 1 {
        out.push(select("sequence-parallel", on_off(d.sequence_parallel), &["off", "on"]));
    }
    out
}

/// The LoRA targets' text after clicking `option` in the checklist (for [`with`]).
pub fn toggle_target(ticked: &[&str], option: &str) -> String {
    let ticked: Vec<String> = ticked.iter().map(|s| s.to_string()).collect();
    toggled(&ticked, option).join(",")
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
mod tests;
