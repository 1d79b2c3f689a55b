//! The modules a `quantization_config` keeps unquantised (`modules_to_not_convert`,
//! bitsandbytes' `llm_int8_skip_modules`, compressed-tensors' `ignore`), matched the way the
//! loaders match them, and which of them the role-based formats ([`super::apply`]) do not see.
//!
//! transformers 5.24 `quantizers/quantizers_utils.py` `should_convert_module(full_name, patterns)`
//! skips a module when a pattern matches the name from its start up to a module boundary, as a
//! regex (`re.match(rf"(?:{key})(?:(?<=\.)|(?=\.|$))", name)`), or is a suffix of the name
//! (`name.endswith(key)`). compressed-tensors (`utils/match.py`, `match_name`) reads an `ignore`
//! entry `re:<regex>` with `re.match` and any other entry as the exact module name.
//!
//! The importer keeps a checkpoint's list in the spec ([`SkipList`], `ModelSpec::unquantised`)
//! and `formats::apply` counts the linears it keeps in the model dtype, by module name
//! ([`super::modules`]). [`unmodelled`] says what a list would keep in a model whose layers have
//! no names (the CLI's note).

use super::WeightFormat;
use crate::error::{Error, Result};
use regex_lite::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a skip list's entries match module names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipRule {
    /// transformers' `should_convert_module` (`modules_to_not_convert`, `llm_int8_skip_modules`).
    #[default]
    Transformers,
    /// compressed-tensors' `ignore`: `re:<regex>` by `re.match`, else the exact module name.
    CompressedTensors,
    /// The entries name the only linears quantised, by suffix: GPTQ's
    /// `modules_in_block_to_quantize` (optimum `GPTQQuantizer.convert_model`: a block's layer
    /// stays `nn.Linear` unless `name.endswith(entry)` for one of them); the rest are kept.
    QuantiseOnly,
}

/// The modules a quantised checkpoint keeps in the model dtype (the spec's `unquantised`): the
/// importer writes its `quantization_config`'s skip list here, and `formats::apply` counts the
/// linears these entries match in the compute dtype, by the layers' module names
/// (`crate::layer_names`, [`super::modules`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkipList {
    pub modules: Vec<String>,
    #[serde(default)]
    pub rule: SkipRule,
    /// The loader quantises the (untied) output head too unless an entry keeps it: a
    /// bitsandbytes or fp8 list replaces transformers' default skips
    /// (`HfQuantizer.get_modules_to_not_convert` adds `get_keys_to_not_convert`, `lm_head`,
    /// only without one), and compressed-tensors quantises every `Linear` its `ignore` leaves.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub head: bool,
}

/// One compiled entry of a [`SkipList`].
#[derive(Debug, Clone)]
enum Entry {
    /// transformers: the key (for `endswith`), `^(?:key)$` for the whole name and the same with
    /// the key's `$` never matching, for a prefix of it (Python's `$` is the name's end).
    Prefix(String, Regex, Regex),
    /// compressed-tensors `re:`: `^(?:regex)` (`re.match` anchors at the start only).
    Start(Regex),
    /// compressed-tensors: the exact name, or `Linear` (`_match_class`: the module's class).
    Exact(String),
}

/// A [`SkipList`] ready to match module names.
#[derive(Debug, Clone)]
pub struct Matcher {
    entries: Entries,
    /// [`SkipList::head`].
    pub head: bool,
}

#[derive(Debug, Clone)]
enum Entries {
    /// Keeps what an entry matches.
    Skip(Vec<Entry>),
    /// Keeps what no suffix matches ([`SkipRule::QuantiseOnly`]).
    Only(Vec<String>),
}

/// The longest pattern read (transformers and compressed-tensors set none; a bound keeps a
/// hostile config from compiling megabytes of regex).
const MAX_PATTERN: usize = 4096;

impl SkipList {
    /// The skip list of a `quantization_config` (`None` without one), each entry checked: a
    /// pattern the loader could not compile is an error naming the field and the entry.
    pub fn of_quantization_config(q: &Value) -> Result<Option<SkipList>> {
        let (field, rule) = match q.get("quant_method").and_then(Value::as_str) {
            Some("compressed-tensors") => ("ignore", SkipRule::CompressedTensors),
            Some("bitsandbytes") => ("llm_int8_skip_modules", SkipRule::Transformers),
            // `GPTQConfig` has no `modules_to_not_convert`; optimum reads this list of lists
            Some("gptq") => ("modules_in_block_to_quantize", SkipRule::QuantiseOnly),
            _ => ("modules_to_not_convert", SkipRule::Transformers),
        };
        let err = |m: String| Error::Import(format!("field `quantization_config.{field}`: {m}"));
        let none = Vec::new();
        let list = match q.get(field) {
            // compressed-tensors without `ignore` still quantises the head
            None | Some(Value::Null) if rule == SkipRule::CompressedTensors => &none,
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(a)) => a,
            Some(other) => return Err(err(format!("expected a list of module names, got {other}"))),
        };
        // GPTQ's is a list of lists (`sum(modules_in_block_to_quantize, [])`); vLLM also reads it flat
        let flat: Vec<&Value> = match rule {
            SkipRule::QuantiseOnly => list.iter().flat_map(|v| v.as_array().map_or_else(|| vec![v], |a| a.iter().collect())).collect(),
            _ => list.iter().collect(),
        };
        let modules = flat
            .iter()
            .enumerate()
            .map(|(i, v)| v.as_str().map(str::to_string).ok_or_else(|| err(format!("entry {i} is {v}, not a module name"))))
            .collect::<Result<Vec<_>>>()?;
        let skip = SkipList { modules, rule, head: head_quantised(q) };
        skip.compile().map_err(err)?;
        Ok(Some(skip))
    }

    /// Compiles the entries; an invalid one is an error naming it.
    pub fn matcher(&self) -> Result<Matcher> {
        self.compile().map_err(|m| Error::Config(format!("spec field `unquantised`: {m}")))
    }

    fn compile(&self) -> std::result::Result<Matcher, String> {
        let bad = |i: usize, p: &str, why: String| format!("entry {i} `{p}`: {why}");
        let compile = |i: usize, p: &str, re: String| {
            if p.len() > MAX_PATTERN {
                let head: String = p.chars().take(64).collect();
                return Err(bad(i, &format!("{head}…"), format!("longer than {MAX_PATTERN} bytes")));
            }
            Regex::new(&re).map_err(|e| bad(i, p, format!("not a regular expression this matcher reads ({e})")))
        };
        let head = self.head;
        if self.rule == SkipRule::QuantiseOnly {
            return Ok(Matcher { entries: Entries::Only(self.modules.clone()), head });
        }
        self.modules
            .iter()
            .enumerate()
            .map(|(i, p)| match self.rule {
                SkipRule::CompressedTensors => match p.strip_prefix("re:") {
                    Some(re) => Ok(Entry::Start(compile(i, p, format!("^(?:{re})"))?)),
                    None => Ok(Entry::Exact(p.clone())),
                },
                _ => Ok(Entry::Prefix(p.clone(), compile(i, p, format!("^(?:{p})$"))?, compile(i, p, format!("^(?:{})$", no_end(p)))?)),
            })
            .collect::<std::result::Result<Vec<_>, String>>()
            .map(|e| Matcher { entries: Entries::Skip(e), head })
    }
}

impl Matcher {
    /// Whether the loader keeps linear module `name` unquantised.
    pub fn keeps(&self, name: &str) -> bool {
        let entries = match &self.entries {
            Entries::Only(only) => return !only.iter().any(|o| name.ends_with(o.as_str())),
            Entries::Skip(entries) => entries,
        };
        entries.iter().any(|e| match e {
            Entry::Prefix(key, whole, inner) => name.ends_with(key.as_str()) || at_boundary(whole, inner, name),
            Entry::Start(re) => re.is_match(name),
            Entry::Exact(n) => n == name || n == "Linear",
        })
    }

    /// Whether the loader keeps every linear inside module `parent` (whose own names are not
    /// known) unquantised: a transformers key that matches `parent` to a boundary, a
    /// compressed-tensors regex that matches its start, or `Linear`.
    pub fn keeps_within(&self, parent: &str) -> bool {
        // GPTQ quantises the decoder blocks' linears only, which have their names here
        let Entries::Skip(entries) = &self.entries else { return false };
        entries.iter().any(|e| match e {
            // a child's name goes on past `parent`: only the prefix form
            Entry::Prefix(_, _, inner) => at_boundary(inner, inner, parent),
            Entry::Start(re) => re.is_match(parent),
            Entry::Exact(n) => n == "Linear",
        })
    }
}

/// transformers' `re.match(rf"(?:{key})(?:(?<=\.)|(?=\.|$))", name)`: the key matches `name`
/// from its start to a module boundary (the end, before a `.`, or just after one). `whole` is
/// tried on the whole name, `inner` (the key's `$` never matching) on a shorter prefix.
fn at_boundary(whole: &Regex, inner: &Regex, name: &str) -> bool {
    (0..=name.len()).filter(|&i| name.is_char_boundary(i)).any(|i| {
        let b = name.as_bytes();
        let boundary = i == name.len() || b[i] == b'.' || (i > 0 && b[i - 1] == b'.');
        boundary && if i == name.len() { whole.is_match(name) } else { inner.is_match(&name[..i]) }
    })
}

/// `pattern` with each `$` that is an anchor (not escaped, not in a class) made a class that
/// matches nothing.
fn no_end(pattern: &str) -> String {
    let (mut out, mut escaped, mut class) = (String::with_capacity(pattern.len()), false, false);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' if !class => {
                class = true;
                out.push(c);
                // a `]` (after an optional `^`) first in a class is a literal
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().unwrap_or('^'));
                }
                if chars.peek() == Some(&']') {
                    out.push(chars.next().unwrap_or(']'));
                }
                continue;
            }
            ']' if class => class = false,
            '$' if !class => {
                out.push_str("[^\\s\\S]");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

/// The skip patterns of a `quantization_config`, and whether they are compressed-tensors'.
pub fn patterns(q: &Value) -> (Vec<String>, bool) {
    let list = |k: &str| -> Vec<String> {
        q.get(k).and_then(Value::as_array).map_or_else(Vec::new, |a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
    };
    match q.get("quant_method").and_then(Value::as_str) {
        Some("compressed-tensors") => (list("ignore"), true),
        Some("bitsandbytes") => (list("llm_int8_skip_modules"), false),
        // `GPTQConfig` reads no skip list (`modules_in_block_to_quantize` names what it quantises)
        Some("gptq") => (Vec::new(), false),
        _ => (list("modules_to_not_convert"), false),
    }
}

/// Whether `pattern` keeps module `name` unquantised (`ct`: compressed-tensors' `ignore`
/// rules, else transformers' `should_convert_module`). An invalid regex matches nothing.
pub fn matches(pattern: &str, name: &str, ct: bool) -> bool {
    let rule = if ct { SkipRule::CompressedTensors } else { SkipRule::Transformers };
    SkipList { modules: vec![pattern.to_string()], rule, head: false }.matcher().is_ok_and(|m| m.keeps(name))
}

/// Module names (transformers' naming, Llama-style decoders and the usual vision towers) that a
/// role-based format quantises, by what they are.
const QUANTISED: &[(&str, &str)] = &[
    ("attention", "model.layers.0.self_attn.q_proj"),
    ("attention", "model.layers.7.self_attn.o_proj"),
    ("attention", "model.layers.7.self_attn.q_a_proj"),
    ("attention", "model.language_model.layers.7.self_attn.k_proj"),
    ("an MLP", "model.layers.0.mlp.gate_proj"),
    ("an MLP", "model.layers.7.mlp.down_proj"),
    ("an MLP", "model.language_model.layers.7.mlp.up_proj"),
    ("shared experts", "model.layers.7.mlp.shared_experts.gate_proj"),
    ("shared experts", "model.layers.7.mlp.shared_expert.down_proj"),
    ("the vision tower", "visual.blocks.0.attn.qkv"),
    ("the vision tower", "model.visual.blocks.0.mlp.up_proj"),
    ("the vision tower", "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj"),
    ("the vision tower", "model.vision_tower.vision_model.encoder.layers.0.mlp.fc1"),
    ("the vision tower", "model.vision_tower.transformer.layers.0.attention.q_proj"),
    ("the projector", "multi_modal_projector.linear_1"),
    ("the projector", "model.multi_modal_projector.linear_1"),
    ("the projector", "visual.merger.mlp.0"),
];

/// The routed experts (`mlp.experts`), which only some formats quantise.
const EXPERTS: &str = "model.layers.7.mlp.experts";

/// The skip patterns of `q` that keep a module `format` would quantise, each with what it
/// keeps: `("model.visual", "the vision tower")`. Empty when every pattern names only modules
/// the format keeps anyway (`lm_head`, embeddings, routers such as `mlp.gate`, norms).
pub fn unmodelled(q: &Value, format: WeightFormat) -> Vec<(String, &'static str)> {
    let (list, ct) = patterns(q);
    let experts_quantised = !matches!(format, WeightFormat::Ct(_) | WeightFormat::Bnb4 { .. } | WeightFormat::BnbInt8);
    // mxfp4 quantises the experts alone (`replace_with_mxfp4_linear`: `GptOssMLP.experts`)
    let probes = if format == WeightFormat::Mxfp4 { &[][..] } else { QUANTISED };
    list.into_iter()
        .filter_map(|p| {
            let hit = probes.iter().find(|(_, n)| matches(&p, n, ct)).map(|(what, _)| *what);
            let hit = hit.or_else(|| (experts_quantised && matches(&p, EXPERTS, ct)).then_some("the routed experts"));
            hit.map(|what| (p, what))
        })
        .collect()
}

/// Whether the loader quantises the output head ([`SkipList::head`]): transformers'
/// `HfQuantizer.get_modules_to_not_convert` adds its default skips (`get_keys_to_not_convert`:
/// `lm_head`, tied and last modules) only when the config gives no list, so a bitsandbytes
/// `llm_int8_skip_modules` or an fp8 `modules_to_not_convert` that leaves `lm_head` out quantises
/// it (AWQ passes `add_default_skips=True`; GPTQ quantises the blocks only); compressed-tensors
/// quantises every `Linear` its `ignore` does not name.
pub fn head_quantised(q: &Value) -> bool {
    let (list, ct) = patterns(q);
    let given = match q.get("quant_method").and_then(Value::as_str) {
        Some("compressed-tensors") => true,
        Some("bitsandbytes") => q.get("llm_int8_skip_modules").is_some_and(Value::is_array),
        Some("fp8") => q.get("modules_to_not_convert").is_some_and(Value::is_array),
        _ => false,
    };
    given && !list.iter().any(|p| matches(p, "lm_head", ct))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn transformers_boundaries() {
        // `should_convert_module`'s own examples
        assert!(matches("layer.1", "layer.1.attn", false));
        assert!(!matches("layer.1", "layer.11.attn", false));
        assert!(matches("layer.*", "layer.11.attn", false));
        assert!(!matches("mlp.gate", "model.layers.0.mlp.gate_proj", false));
        assert!(matches("mlp.gate", "model.layers.0.mlp.gate", false));
        assert!(matches("fc1", "model.decoder.layers.23.fc1", false));
        assert!(matches("model.layers.*.self_attn", "model.layers.3.self_attn.q_proj", false));
        assert!(!matches("(", "x", false));
    }

    #[test]
    fn a_list_without_the_head_quantises_it() {
        assert!(!head_quantised(&json!({"quant_method": "bitsandbytes", "load_in_4bit": true})));
        assert!(head_quantised(&json!({"quant_method": "bitsandbytes", "load_in_4bit": true, "llm_int8_skip_modules": ["visual"]})));
        assert!(!head_quantised(&json!({"quant_method": "fp8", "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.gate"]})));
        assert!(head_quantised(&json!({"quant_method": "compressed-tensors", "ignore": ["re:.*mlp.gate$"]})));
        assert!(!head_quantised(&json!({"quant_method": "compressed-tensors", "ignore": ["re:.*lm_head"]})));
        assert!(!head_quantised(&json!({"quant_method": "awq", "modules_to_not_convert": ["visual"]})));
    }

    #[test]
    fn compressed_tensors_ignore() {
        assert!(matches("re:.*mlp.gate$", "model.layers.3.mlp.gate", true));
        assert!(!matches("re:.*mlp.gate$", "model.layers.3.mlp.gate_proj", true));
        assert!(matches("lm_head", "lm_head", true));
        assert!(!matches("lm_head", "model.lm_head", true));
        assert!(matches("re:vision_tower.*", "vision_tower.vision_model.encoder.layers.0.mlp.fc1", true));
    }

    #[test]
    fn what_the_formats_keep_anyway_is_not_reported() {
        let gpt_oss = json!({"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]});
        assert!(unmodelled(&gpt_oss, WeightFormat::Mxfp4).is_empty());
        let fp8 = WeightFormat::Fp8 { block: Some(128) };
        assert_eq!(unmodelled(&gpt_oss, fp8), vec![("model.layers.*.self_attn".to_string(), "attention")]);
        let qwen_fp8 = json!({"quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head", "model.layers.0.mlp.gate", "model.layers.7.mlp.gate"]});
        assert!(unmodelled(&qwen_fp8, WeightFormat::Fp8 { block: Some(128) }).is_empty());
        let ct_moe = json!({"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*mlp.gate$", "re:.*mlp.experts.*"]});
        let w4 = WeightFormat::Ct(super::super::ct::CtScheme::Packed { bits: 4, group_size: 128, asym: false });
        assert!(unmodelled(&ct_moe, w4).is_empty());
        let vl = json!({"quant_method": "awq", "modules_to_not_convert": ["visual"]});
        assert_eq!(unmodelled(&vl, WeightFormat::Awq { group_size: 128 }), vec![("visual".to_string(), "the vision tower")]);
    }
}
