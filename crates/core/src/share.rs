//! Share links: the whole app state ([`ShareState`]) in a URL fragment — versioned, compact and
//! stable. A link made today decodes to the same state in every later release: each format
//! version keeps its own decoder, and `tests/data/share_links.txt` holds links that must keep
//! decoding. [`decode`] never panics and bounds every size (link length, inflated size, layers,
//! nesting, repeats, numbers), so a tampered link is an error message, not a hang.
//!
//! ## Format v1
//! ```text
//! v1.p=gpt2,b=8,sl=512,pr=amp-bf16,ck=1,g=a100-80gb,u=MiB
//! v1.s=AXVTy….,b=64,g=rtx-4090
//! v1.h=Qwen%2FQwen2.5-7B-Instruct,b=1,sl=4096,pr=amp-bf16
//! ```
//! `v1.` then comma-separated `key=value` fields. Values use only URL-fragment-safe characters
//! (`A–Z a–z 0–9 - . _ ~`, anything else `%XX`-escaped UTF-8), so a preset link stays readable.
//! Only what differs from the v1 defaults is written:
//!
//! | key | meaning | v1 default |
//! |---|---|---|
//! | `p` | preset id ([`ModelSource::Preset`]) | — (one of `p`/`s`/`h` is required) |
//! | `h` | Hugging Face model id, `id@revision` allowed ([`ModelSource::Hub`]): the reader fetches its `config.json` again | — |
//! | `s` | custom spec ([`ModelSource::Spec`]): base64url (no padding) of one codec byte + the spec's compact JSON, codec `0` = as is, `1` = raw DEFLATE (RFC 1951) | — |
//! | `b` `sl` `o` `oi` `pr` `ad` `dv` `m` `ck` `ga` `at` `ir` `fw` | [`TrainConfig`] `batch`, `seq_len`, `optimizer`, `optimizer_impl`, `precision`, `autocast_device`, `device`, `mode`, `checkpointing` (`1`/`0`), `grad_accum`, `attention`, `inplace_relu` (`1`/`0`), `framework`; values are the serde names (`adamw`, `amp-fp16`, …) | [`V1_CONFIG_DEFAULTS`] |
//! | `gp` `gn` `gc` `gl` `gk` | `TrainConfig::generate` (`--mode generate`): `prompt_len`, `new_tokens`, `cache`, `logits_to_keep`, `kv_dtype` | [`GENERATE_DEFAULTS`] |
//! | any other key | a `TrainConfig` field by its serde name (fields added after v1; ignored when unknown) | — |
//! | `n` `st` `tp` `bv` `raf` `fpd` `frd` `off` `sp` | [`crate::distributed::DistConfig`]: GPUs, strategy, … (`distributed/link.rs`) | one GPU |
//! | `g` | GPU id (`a100-80gb`) | none |
//! | `k` | custom capacity in bytes | none |
//! | `u` | `MB` or `MiB` | `MB` |
//! | `l` | UI language | `en` |
//! | `e` | who runs the setup when it is not PyTorch's step (`vllm`: the app's serve mode) | PyTorch |
//! | `mp` | a peak allocated the user measured for this setup, in bytes (the app's "measure it yourself") | none |
//!
//! Omitted config fields take the *v1* defaults frozen in [`V1_CONFIG_DEFAULTS`], not whatever
//! `TrainConfig::default()` becomes later, so changing a default never changes old links.

use crate::config::TrainConfig;
use crate::distributed::{link, DistConfig};
use crate::memory::MAX_BATCH;
use crate::resolve::MAX_LAYERS;
use crate::spec::{Layer, ModelSpec};
use crate::units::ByteUnit;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

/// The app state a link carries (the web app also persists it as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShareState {
    pub model: ModelSource,
    pub config: TrainConfig,
    /// The multi-GPU job (default: one GPU).
    #[serde(default, skip_serializing_if = "DistConfig::is_default")]
    pub dist: DistConfig,
    /// GPU id from [`crate::GPUS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// A custom capacity in bytes (instead of, or overriding, the GPU's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(default)]
    pub unit: ByteUnit,
    #[serde(default = "default_lang")]
    pub lang: String,
    /// Who runs the setup when it is not PyTorch's step (`vllm`), key `e`; `None`: PyTorch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// A peak allocated the user measured for this setup (bytes), key `mp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_peak_bytes: Option<u64>,
}

fn default_lang() -> String {
    "en".to_string()
}

impl Default for ShareState {
    /// ResNet-50 with the default training setup.
    fn default() -> Self {
        ShareState {
            model: ModelSource::Preset { id: "resnet50".to_string() },
            config: TrainConfig::default(),
            dist: DistConfig::default(),
            gpu: None,
            capacity_bytes: None,
            unit: ByteUnit::default(),
            lang: default_lang(),
            engine: None,
            measured_peak_bytes: None,
        }
    }
}

/// Where the model comes from. A preset the user edited is a [`ModelSource::Spec`]: the link then
/// carries the edited spec, so it keeps meaning the same model if the preset is recalibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// A built-in preset by id (`resnet50`), as [`crate::presets::build`] names it.
    Preset { id: String },
    /// A custom or edited model.
    Spec(ModelSpec),
    /// A Hugging Face model by id (`Qwen/Qwen2.5-7B-Instruct`, `id@revision`), imported
    /// unedited: a short link whose reader fetches `config.json` again (`crate::hub`).
    Hub(String),
}

/// Why a link could not be read. The app shows it and opens the default model instead.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShareError {
    #[error("the link has no state in it")]
    Empty,
    #[error("the link is {len} characters long; at most {max} are accepted")]
    TooLong { len: usize, max: usize },
    #[error("unknown link format `{0}` (this version of vramcalc reads v1 links)")]
    UnknownVersion(String),
    #[error("malformed link: {0}")]
    Malformed(String),
    /// One field of the link is wrong.
    #[error("link field `{key}`: {message}")]
    Field { key: String, message: String },
    /// The model or a setting exceeds what a link may carry.
    #[error("too large for a link: {0}")]
    TooLarge(String),
    /// [`encode_preset`] or [`decode_preset`] met a custom spec: use [`encode`] / [`decode`].
    #[error("a custom model needs the full link codec")]
    NeedsSpecCodec,
}

type Res<T> = std::result::Result<T, ShareError>;

/// Longest link (after `#`) [`decode`] reads.
pub const MAX_LINK_LEN: usize = 64 * 1024;
/// Largest inflated spec JSON.
pub const MAX_SPEC_JSON_BYTES: usize = 1 << 20;
/// Most layer objects written in a shared spec (blocks included).
pub const MAX_SPEC_NODES: usize = 20_000;
/// Deepest block nesting in a shared spec.
pub const MAX_SPEC_DEPTH: usize = 32;
/// Most layers a shared spec may expand to (repeats multiplied out), as the resolver allows.
pub const MAX_SPEC_EXPANDED: u64 = MAX_LAYERS;
/// Largest sequence length a link may set.
pub const MAX_SEQ_LEN: u64 = 1 << 32;
const MAX_FIELDS: usize = 64;
/// Longest value of one field: a fine-tuning setup's JSON (`finetune`, its LoRA targets up to
/// `finetune::names::NAME_LIST_CAPACITY` bytes) needs more than a name's 128.
const MAX_TEXT: usize = 512;

/// `TrainConfig::default()` as of format v1, frozen: omitted config fields mean these values.
pub const V1_CONFIG_DEFAULTS: &str = r#"{"batch":32,"optimizer":"adamw","optimizer_impl":"foreach","precision":"fp32","autocast_device":"cuda","device":"cuda","mode":"train","checkpointing":false,"grad_accum":1,"attention":"sdpa","framework":"pytorch-eager"}"#;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Int,
    Bool,
    Text,
}

/// v1's short keys for `TrainConfig` fields, frozen.
const V1_CONFIG_KEYS: &[(&str, &str, Kind)] = &[
    ("b", "batch", Kind::Int),
    ("sl", "seq_len", Kind::Int),
    ("o", "optimizer", Kind::Text),
    ("oi", "optimizer_impl", Kind::Text),
    ("pr", "precision", Kind::Text),
    ("ad", "autocast_device", Kind::Text),
    ("dv", "device", Kind::Text),
    ("m", "mode", Kind::Text),
    ("ck", "checkpointing", Kind::Bool),
    ("ga", "grad_accum", Kind::Int),
    ("at", "attention", Kind::Text),
    ("ir", "inplace_relu", Kind::Bool),
    ("fw", "framework", Kind::Text),
];

/// `GenerateConfig::default()` when its keys were added, frozen: omitted `g*` fields mean these.
pub const GENERATE_DEFAULTS: &str = r#"{"new_tokens":256,"cache":"dynamic","logits_to_keep":1}"#;

/// Short keys of `TrainConfig::generate`'s fields, frozen.
const GENERATE_KEYS: &[(&str, &str, Kind)] = &[
    ("gp", "prompt_len", Kind::Int),
    ("gn", "new_tokens", Kind::Int),
    ("gc", "cache", Kind::Text),
    ("gl", "logits_to_keep", Kind::Int),
    ("gk", "kv_dtype", Kind::Text),
];

fn generate_defaults() -> Map<String, Value> {
    frozen(GENERATE_DEFAULTS)
}

fn v1_defaults() -> Map<String, Value> {
    frozen(V1_CONFIG_DEFAULTS)
}

/// One of the constant literals above (the link tests pin that they parse).
fn frozen(json: &str) -> Map<String, Value> {
    match serde_json::from_str::<Value>(json) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// Encodes `state` as a v1 link (without the `#`). Fails only when the state exceeds the limits
/// [`decode`] enforces, so every encoded link decodes back to `state`.
pub fn encode(state: &ShareState) -> Res<String> {
    encode_with(state, encode_spec)
}

/// [`encode`] for a preset model, without the custom-spec codec (DEFLATE, base64): the web app
/// keeps that codec in a module it loads on first use. A custom model is an error here.
pub fn encode_preset(state: &ShareState) -> Res<String> {
    encode_with(state, |_| String::new())
}

/// `spec_payload` writes a custom spec's `s=` value; generic, so [`encode_preset`]'s code does
/// not reference the codec at all.
fn encode_with(state: &ShareState, spec_payload: impl Fn(&ModelSpec) -> String) -> Res<String> {
    check_state(state)?;
    let mut fields: Vec<(String, String)> = Vec::new();
    match &state.model {
        ModelSource::Preset { id } => fields.push(("p".into(), escape(id))),
        ModelSource::Hub(id) => fields.push(("h".into(), escape(id))),
        ModelSource::Spec(spec) => {
            let payload = spec_payload(spec);
            if payload.is_empty() {
                return Err(ShareError::NeedsSpecCodec);
            }
            fields.push(("s".into(), payload))
        }
    }
    let defaults = v1_defaults();
    if let Ok(Value::Object(cfg)) = serde_json::to_value(state.config) {
        for (name, value) in &cfg {
            if value.is_null() || defaults.get(name) == Some(value) {
                continue;
            }
            if let (Value::Object(g), "generate") = (value, name.as_str()) {
                let frozen = generate_defaults();
                for &(short, sub, _) in GENERATE_KEYS {
                    match g.get(sub) {
                        Some(v) if !v.is_null() && frozen.get(sub) != Some(v) => {
                            fields.push((short.to_string(), v.as_str().map_or_else(|| v.to_string(), escape)))
                        }
                        _ => {}
                    }
                }
                continue;
            }
            let short = V1_CONFIG_KEYS.iter().find(|k| k.1 == name).map_or(name.as_str(), |k| k.0);
            let text = match value {
                Value::Bool(b) => (if *b { "1" } else { "0" }).to_string(),
                Value::String(s) => escape(s),
                other => escape(&other.to_string()),
            };
            fields.push((short.to_string(), text));
        }
    }
    fields.extend(link::fields(&state.dist).into_iter().map(|(k, v)| (k.to_string(), v)));
    if let Some(g) = &state.gpu {
        fields.push(("g".into(), escape(g)));
    }
    if let Some(k) = state.capacity_bytes {
        fields.push(("k".into(), k.to_string()));
    }
    if state.unit != ByteUnit::Mb {
        fields.push(("u".into(), "MiB".into()));
    }
    if state.lang != "en" {
        fields.push(("l".into(), escape(&state.lang)));
    }
    if let Some(e) = &state.engine {
        fields.push(("e".into(), escape(e)));
    }
    if let Some(b) = state.measured_peak_bytes {
        fields.push(("mp".into(), b.to_string()));
    }
    let body: Vec<String> = fields.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok(format!("v1.{}", body.join(",")))
}

/// Decodes a link: the fragment (`v1.…`), with or without `#`, or a whole URL containing `#`.
pub fn decode(link: &str) -> Res<ShareState> {
    decode_with(link, decode_spec)
}

/// [`decode`] for links without a custom spec (no `s=` field, see [`carries_spec`]), without
/// the custom-spec codec; a link with one is an error here.
pub fn decode_preset(link: &str) -> Res<ShareState> {
    decode_with(link, |_| Err(ShareError::NeedsSpecCodec))
}

/// Whether `link` carries a custom spec (an `s=` field), which only [`decode`] reads.
pub fn carries_spec(link: &str) -> bool {
    has_field(link, "s=")
}

/// Whether one of `link`'s fields starts with `key_eq` (`s=`).
fn has_field(link: &str, key_eq: &str) -> bool {
    let body = fragment_of(link.trim()).split_once('.').map_or("", |(_, body)| body);
    body.split(',').any(|field| field.starts_with(key_eq))
}

/// Whether `link` names a Hugging Face model (`h=`), which opens only after a fetch.
pub fn names_hub_model(link: &str) -> bool {
    has_field(link, "h=")
}

/// The part after `#` of a whole URL, or `link` itself.
fn fragment_of(link: &str) -> &str {
    match link.find('#') {
        Some(i) => &link[i + 1..],
        None => link,
    }
}

fn decode_with(link: &str, decode_spec: impl Fn(&str) -> Res<ModelSpec>) -> Res<ShareState> {
    let link = fragment_of(link.trim());
    if link.is_empty() {
        return Err(ShareError::Empty);
    }
    if link.len() > MAX_LINK_LEN {
        return Err(ShareError::TooLong { len: link.len(), max: MAX_LINK_LEN });
    }
    let (version, body) = link.split_once('.').unwrap_or((link, ""));
    match version {
        "v1" => decode_v1(body, decode_spec),
        other => Err(ShareError::UnknownVersion(other.chars().take(12).collect())),
    }
}

const ONE_MODEL: &str = "a link names one model (`p`, `s` or `h`), not several";

fn field_err(key: &str, message: impl Into<String>) -> ShareError {
    ShareError::Field { key: key.chars().take(24).collect(), message: message.into() }
}

fn decode_v1(body: &str, decode_spec: impl Fn(&str) -> Res<ModelSpec>) -> Res<ShareState> {
    let mut seen: Vec<&str> = Vec::new();
    let mut model = None;
    let mut config = v1_defaults();
    let mut state = ShareState::default();
    for (n, field) in body.split(',').enumerate() {
        if n >= MAX_FIELDS {
            return Err(ShareError::Malformed(format!("more than {MAX_FIELDS} fields")));
        }
        let (key, raw) = field
            .split_once('=')
            .ok_or_else(|| ShareError::Malformed(format!("field {} has no `=`", n + 1)))?;
        if key.is_empty() || !key.bytes().all(|c| c.is_ascii_lowercase() || c == b'_') || key.len() > 32 {
            return Err(ShareError::Malformed(format!("field {} has an invalid key", n + 1)));
        }
        if seen.contains(&key) {
            return Err(field_err(key, "appears twice"));
        }
        seen.push(key);
        if key == "s" {
            if model.is_some() {
                return Err(field_err(key, ONE_MODEL));
            }
            model = Some(ModelSource::Spec(decode_spec(raw)?));
            continue;
        }
        if raw.len() > MAX_TEXT * 3 {
            return Err(field_err(key, "value too long"));
        }
        let text = unescape(raw).ok_or_else(|| field_err(key, "invalid %-escape or UTF-8"))?;
        if text.len() > MAX_TEXT {
            return Err(field_err(key, "value too long"));
        }
        match key {
            "p" | "h" => {
                if model.is_some() {
                    return Err(field_err(key, ONE_MODEL));
                }
                if text.is_empty() {
                    return Err(field_err(key, "empty model id"));
                }
                model = Some(if key == "p" { ModelSource::Preset { id: text } } else { ModelSource::Hub(text) });
            }
            "g" => state.gpu = Some(text),
            "e" if text.is_empty() => return Err(field_err(key, "empty engine")),
            "e" => state.engine = Some(text),
            "mp" => state.measured_peak_bytes = Some(text.parse().map_err(|_| field_err(key, "expected a number of bytes"))?),
            "k" => state.capacity_bytes = Some(text.parse().map_err(|_| field_err(key, "expected a number of bytes"))?),
            "u" => {
                state.unit = match text.as_str() {
                    "MB" => ByteUnit::Mb,
                    "MiB" => ByteUnit::Mib,
                    _ => return Err(field_err(key, "expected MB or MiB")),
                }
            }
            "l" => state.lang = text,
            _ if GENERATE_KEYS.iter().any(|k| k.0 == key) => {
                let &(_, sub, kind) = GENERATE_KEYS.iter().find(|k| k.0 == key).unwrap_or(&GENERATE_KEYS[0]);
                let value = typed(key, &text, kind)?;
                let g = config.entry("generate").or_insert_with(|| Value::Object(generate_defaults()));
                if let Value::Object(g) = g {
                    g.insert(sub.to_string(), value);
                }
            }
            k if link::KEYS.contains(&k) => link::set(&mut state.dist, k, &text).map_err(|m| field_err(key, m))?,
            _ => {
                let (name, value) = match V1_CONFIG_KEYS.iter().find(|k| k.0 == key) {
                    Some(&(_, name, kind)) => (name, typed(key, &text, kind)?),
                    // a TrainConfig field added after v1, by its serde name
                    None => (key, untyped(&text)),
                };
                config.insert(name.to_string(), value);
            }
        }
    }
    state.model = model.ok_or_else(|| ShareError::Malformed("no model (`p`, `s` or `h`)".into()))?;
    state.config = serde_json::from_value(Value::Object(config))
        .map_err(|e| ShareError::Field { key: "config".into(), message: e.to_string() })?;
    check_state(&state)?;
    Ok(state)
}

fn typed(key: &str, text: &str, kind: Kind) -> Res<Value> {
    Ok(match kind {
        Kind::Int => Value::from(text.parse::<u64>().map_err(|_| field_err(key, "expected a whole number"))?),
        Kind::Bool => match text {
            "1" => Value::Bool(true),
            "0" => Value::Bool(false),
            _ => return Err(field_err(key, "expected 1 or 0")),
        },
        Kind::Text => Value::String(text.to_string()),
    })
}

fn untyped(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v) if !v.is_string() => v,
        _ => Value::String(text.to_string()),
    }
}

/// The bounds both [`encode`] and [`decode`] enforce.
fn check_state(s: &ShareState) -> Res<()> {
    let c = &s.config;
    if c.batch == 0 || c.batch > MAX_BATCH {
        return Err(field_err("b", format!("batch size must be between 1 and {MAX_BATCH}")));
    }
    if c.grad_accum == 0 || c.grad_accum > MAX_BATCH {
        return Err(field_err("ga", format!("gradient accumulation must be between 1 and {MAX_BATCH}")));
    }
    if let Some(sl) = c.seq_len {
        if sl == 0 || sl > MAX_SEQ_LEN {
            return Err(field_err("sl", format!("sequence length must be between 1 and {MAX_SEQ_LEN}")));
        }
    }
    for (key, text) in [("g", s.gpu.as_deref().unwrap_or("")), ("l", s.lang.as_str()), ("e", s.engine.as_deref().unwrap_or(""))] {
        if text.len() > MAX_TEXT {
            return Err(field_err(key, "value too long"));
        }
    }
    match &s.model {
        ModelSource::Preset { id } if id.is_empty() || id.len() > MAX_TEXT => Err(field_err("p", "invalid preset id")),
        ModelSource::Hub(id) if id.is_empty() || id.len() > MAX_TEXT => Err(field_err("h", "invalid model id")),
        ModelSource::Preset { .. } | ModelSource::Hub(_) => Ok(()),
        ModelSource::Spec(spec) => check_spec(spec),
    }
}

/// Bounds a shared spec: written layers, nesting and the layer count after repeats.
pub fn check_spec(spec: &ModelSpec) -> Res<()> {
    if spec.input.shape.len() > 8 {
        return Err(ShareError::TooLarge(format!("an input of {} dimensions", spec.input.shape.len())));
    }
    let mut nodes = 0usize;
    walk(&spec.layers, 0, &mut nodes).map(|_| ())
}

/// Layers `layers` expands to (repeats multiplied out, RNN layers counted).
fn walk(layers: &[Layer], depth: usize, nodes: &mut usize) -> Res<u64> {
    if depth > MAX_SPEC_DEPTH {
        return Err(ShareError::TooLarge(format!("blocks nested more than {MAX_SPEC_DEPTH} deep")));
    }
    let mut total = 0u64;
    for layer in layers {
        *nodes += 1;
        if *nodes > MAX_SPEC_NODES {
            return Err(ShareError::TooLarge(format!("more than {MAX_SPEC_NODES} layers written out")));
        }
        let mut inner = 0u64;
        for (_, list) in layer.children() {
            inner = inner.saturating_add(walk(list, depth + 1, nodes)?);
        }
        match layer {
            Layer::Repeat { times, .. } => inner = inner.max(1).saturating_mul(*times),
            Layer::Lstm(r) | Layer::Gru(r) | Layer::Rnn(r) => inner = r.num_layers,
            _ => {}
        }
        total = total.saturating_add(1).saturating_add(inner);
        if total > MAX_SPEC_EXPANDED {
            return Err(ShareError::TooLarge(format!("more than {MAX_SPEC_EXPANDED} layers once repeats are expanded")));
        }
    }
    Ok(total)
}

fn encode_spec(spec: &ModelSpec) -> String {
    // Serialising a plain data struct cannot fail.
    let json = serde_json::to_vec(spec).unwrap_or_default();
    let deflated = miniz_oxide::deflate::compress_to_vec(&json, 10);
    let mut payload = Vec::with_capacity(json.len().min(deflated.len()) + 1);
    if deflated.len() < json.len() {
        payload.push(1);
        payload.extend_from_slice(&deflated);
    } else {
        payload.push(0);
        payload.extend_from_slice(&json);
    }
    base64url_encode(&payload)
}

fn decode_spec(raw: &str) -> Res<ModelSpec> {
    let bytes = base64url_decode(raw).ok_or_else(|| field_err("s", "not valid base64url"))?;
    let json = match bytes.split_first() {
        Some((0, rest)) => rest.to_vec(),
        Some((1, rest)) => miniz_oxide::inflate::decompress_to_vec_with_limit(rest, MAX_SPEC_JSON_BYTES).map_err(|e| {
            if e.status == miniz_oxide::inflate::TINFLStatus::HasMoreOutput {
                ShareError::TooLarge(format!("the model's JSON inflates beyond {MAX_SPEC_JSON_BYTES} bytes"))
            } else {
                field_err("s", "corrupt compressed data")
            }
        })?,
        Some((c, _)) => return Err(field_err("s", format!("unknown codec {c}"))),
        None => return Err(field_err("s", "empty")),
    };
    if json.len() > MAX_SPEC_JSON_BYTES {
        return Err(ShareError::TooLarge(format!("the model's JSON exceeds {MAX_SPEC_JSON_BYTES} bytes")));
    }
    let text = std::str::from_utf8(&json).map_err(|_| field_err("s", "the model is not UTF-8 text"))?;
    let spec = ModelSpec::from_json(text).map_err(|e| field_err("s", e.to_string()))?;
    check_spec(&spec)?;
    Ok(spec)
}

fn is_plain(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~')
}

/// `%XX`-escapes every byte outside `A–Z a–z 0–9 - . _ ~`.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &c in s.as_bytes() {
        if is_plain(c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            c if is_plain(c) => {
                out.push(c);
                i += 1;
            }
            _ => return None,
        }
    }
    String::from_utf8(out).ok()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// base64url (RFC 4648 §5) without padding.
pub fn base64url_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Inverse of [`base64url_encode`]; `None` on a character outside the alphabet or a bad length.
pub fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    if b.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3 + 2);
    for chunk in b.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'-' => 62,
                b'_' => 63,
                _ => return None,
            };
            n |= (v as u32) << (18 - 6 * i);
        }
        for i in 0..chunk.len() - 1 {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_round_trips_every_length() {
        for len in 0..40 {
            let data: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37).wrapping_add(250)).collect();
            let text = base64url_encode(&data);
            assert!(!text.contains('='));
            assert_eq!(base64url_decode(&text).unwrap(), data, "{len}");
        }
        assert_eq!(base64url_encode(b"hello?>"), "aGVsbG8_Pg");
        assert!(base64url_decode("a").is_none());
        assert!(base64url_decode("ab+c").is_none());
    }

    #[test]
    fn escapes_round_trip() {
        for s in ["plain-id_1.2~", "a,b=c", "ünï cødé %", ""] {
            assert_eq!(unescape(&escape(s)).as_deref(), Some(s));
        }
        assert!(unescape("%zz").is_none());
        assert!(unescape("%").is_none());
        assert!(unescape("%ff").is_none()); // not UTF-8
        assert!(unescape("a,b").is_none());
    }

    #[test]
    fn frozen_v1_defaults_parse() {
        let defaults = v1_defaults();
        assert_eq!(defaults.len(), 11);
        // If TrainConfig::default() changes later, keep V1_CONFIG_DEFAULTS as it is: old links
        // still mean what they meant, and new links write the changed fields.
        let v1: TrainConfig = serde_json::from_value(Value::Object(defaults)).unwrap();
        assert_eq!(v1.batch, 32);
    }
}
