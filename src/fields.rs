//! Inline editing of a layer's hyper-parameters, generically through its serde JSON form, so
//! every layer kind of the core (and every field it gains later) is editable without a form per
//! kind. Values are checked by deserialising the edited layer: a wrong type or an unknown value
//! gives serde's message at the field; shape mismatches come later from the core's resolver.

use serde_json::{Map, Value};
use vramcalc_core::spec::Layer;

/// One editable field of a layer row.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub value: FieldValue,
    /// Absent from the layer's JSON (PyTorch default); an empty text removes it again.
    pub optional: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    Bool(bool),
    /// Numbers, pairs (`3` or `[3, 5]`), enums (`same`, `tanh`) as the user types them.
    Text(String),
}

/// Fields PyTorch lets you omit that the core does not serialise at their default. Each is shown
/// only where the layer accepts it (the core's layer configs deny unknown fields).
const OPTIONAL: &[(&str, OptionalDefault)] = &[
    ("inplace", OptionalDefault::False),
    ("causal", OptionalDefault::False),
    ("rotary", OptionalDefault::False),
    ("fused_qkv", OptionalDefault::False),
    ("norm_first", OptionalDefault::False),
    ("gated_mlp", OptionalDefault::False),
    ("per_sample", OptionalDefault::False),
    ("tied_weight", OptionalDefault::False),
    ("ceil_mode", OptionalDefault::False),
    ("bidirectional", OptionalDefault::False),
    ("num_kv_heads", OptionalDefault::None),
    ("attention_dropout", OptionalDefault::None),
    ("padding_idx", OptionalDefault::None),
    ("stride", OptionalDefault::None),
];

#[derive(Clone, Copy)]
enum OptionalDefault {
    False,
    None,
}

fn to_object(layer: &Layer) -> Map<String, Value> {
    // Through JSON text, not `to_value`: the app already serializes layers to text (saved state),
    // and a second `Serialize` instance (for `Value`) would add kilobytes of wasm. Same map.
    match serde_json::to_string(layer).and_then(|t| serde_json::from_str(&t)) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn from_object(m: Map<String, Value>) -> Result<Layer, String> {
    serde_json::from_value(Value::Object(m)).map_err(|e| e.to_string())
}

/// Layers whose JSON is only `kind` and that take no arguments.
fn takes_no_arguments(layer: &Layer) -> bool {
    matches!(layer, Layer::Tanh | Layer::Sigmoid)
}

/// Fields shown first, in PyTorch's constructor order; others follow alphabetically, flags last.
const ORDER: &[&str] = &[
    "in_features", "out_features", "in_channels", "out_channels", "num_features", "normalized_shape",
    "num_groups", "num_channels", "num_embeddings", "embedding_dim", "embed_dim", "num_heads", "num_kv_heads",
    "d_model", "nhead", "dim_feedforward", "hidden_size", "intermediate_size", "input_size", "num_layers",
    "kernel_size", "stride", "padding", "output_padding", "dilation", "groups", "output_size", "p", "dim",
    "start_dim", "end_dim", "dim0", "dim1", "index", "times", "join",
];

fn rank(f: &Field) -> (usize, usize) {
    let flag = matches!(f.value, FieldValue::Bool(_)) as usize;
    (flag, ORDER.iter().position(|n| *n == f.name).unwrap_or(ORDER.len()))
}

/// The editable fields of `layer`: main sizes first (see [`ORDER`]), then accepted optional ones.
pub fn fields(layer: &Layer) -> Vec<Field> {
    match layer {
        Layer::Sequential { checkpoint, .. } => {
            return vec![Field { name: "checkpoint".into(), value: FieldValue::Bool(*checkpoint), optional: false }]
        }
        Layer::Residual { inplace, .. } => {
            return vec![Field { name: "inplace".into(), value: FieldValue::Bool(*inplace), optional: false }]
        }
        Layer::Repeat { times, .. } => {
            return vec![Field { name: "times".into(), value: FieldValue::Text(times.to_string()), optional: false }]
        }
        Layer::Parallel { join, .. } => {
            let j = serde_json::to_value(join).ok().map(|v| text_of(&v)).unwrap_or_default();
            return vec![Field { name: "join".into(), value: FieldValue::Text(j), optional: false }];
        }
        // a block of `"trainable": false` layers: nothing to edit but its children
        Layer::Frozen { .. } | Layer::Discarded { .. } => return Vec::new(),
        _ if takes_no_arguments(layer) => return Vec::new(),
        _ => {}
    }
    let obj = to_object(layer);
    let mut out: Vec<Field> = obj
        .iter()
        .filter(|(k, _)| k.as_str() != "kind")
        .map(|(k, v)| Field {
            name: k.clone(),
            value: match v {
                Value::Bool(b) => FieldValue::Bool(*b),
                other => FieldValue::Text(text_of(other)),
            },
            optional: OPTIONAL.iter().any(|(n, d)| n == k && matches!(d, OptionalDefault::None)),
        })
        .collect();
    // Stable, so serde_json's alphabetical order stays among equal ranks. An insertion sort: a
    // layer has a handful of fields, and each `sort_by_key` instance adds kilobytes of wasm.
    for i in 1..out.len() {
        let mut j = i;
        while j > 0 && rank(&out[j - 1]) > rank(&out[j]) {
            out.swap(j - 1, j);
            j -= 1;
        }
    }
    for (name, default) in OPTIONAL {
        if obj.contains_key(*name) {
            continue;
        }
        if accepts(&obj, name, *default) {
            out.push(Field {
                name: (*name).into(),
                value: match default {
                    OptionalDefault::False => FieldValue::Bool(false),
                    OptionalDefault::None => FieldValue::Text(String::new()),
                },
                optional: true,
            });
        }
    }
    out
}

/// Whether `layer` (as JSON: `obj`) accepts the optional field `name`: by deserialising it with
/// the field added.
fn accepts(obj: &Map<String, Value>, name: &str, default: OptionalDefault) -> bool {
    let mut probe = obj.clone();
    let value = match default {
        OptionalDefault::False => Value::Bool(false),
        OptionalDefault::None => Value::Null,
    };
    probe.insert(name.into(), value);
    from_object(probe).is_ok()
}

/// How a JSON value is shown in a text box: strings bare, everything else as compact JSON.
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What the user typed: JSON where it parses (`3`, `[3, 5]`, `0.1`, `true`), a bare string otherwise.
fn value_of(text: &str) -> Value {
    let t = text.trim();
    serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_string()))
}

/// `layer` with `name` set to `value`, or the message to show at the field.
pub fn set_field(layer: &Layer, name: &str, value: &FieldValue) -> Result<Layer, String> {
    match (layer, value) {
        (Layer::Sequential { layers, .. }, FieldValue::Bool(b)) if name == "checkpoint" => {
            return Ok(Layer::Sequential { layers: layers.clone(), checkpoint: *b })
        }
        (Layer::Residual { body, shortcut, .. }, FieldValue::Bool(b)) if name == "inplace" => {
            return Ok(Layer::Residual { body: body.clone(), shortcut: shortcut.clone(), inplace: *b })
        }
        (Layer::Repeat { body, .. }, FieldValue::Text(t)) if name == "times" => {
            let times: u64 = t.trim().parse().map_err(|_| format!("`times` must be a whole number, got `{}`", t.trim()))?;
            return Ok(Layer::Repeat { times, body: body.clone() });
        }
        (Layer::Parallel { branches, .. }, FieldValue::Text(t)) if name == "join" => {
            let join = serde_json::from_value(Value::String(t.trim().to_string())).map_err(|e| e.to_string())?;
            return Ok(Layer::Parallel { branches: branches.clone(), join });
        }
        _ if layer.is_block() || takes_no_arguments(layer) => return Err(format!("`{name}` is not a field of {}", layer.kind())),
        _ => {}
    }
    let mut obj = to_object(layer);
    let optional = OPTIONAL.iter().any(|(n, _)| *n == name);
    match value {
        FieldValue::Bool(b) => {
            obj.insert(name.into(), Value::Bool(*b));
        }
        FieldValue::Text(t) if t.trim().is_empty() => {
            if optional {
                obj.remove(name);
            } else {
                return Err(format!("`{name}` needs a value"));
            }
        }
        FieldValue::Text(t) => {
            obj.insert(name.into(), value_of(t));
        }
    }
    from_object(obj).map_err(|e| format!("`{name}`: {e}"))
}

/// Adapts a freshly added layer's input size to the shape it will receive (per sample, no
/// batch): `in_features` to the last dimension, `in_channels`/`num_features` to the first, and so
/// on, so "add layer" gives a working model more often. Returns `layer` unchanged where it can't.
pub fn fit_to_input(layer: &Layer, shape: &[u64]) -> Layer {
    let (Some(&first), Some(&last)) = (shape.first(), shape.last()) else { return layer.clone() };
    if layer.is_block() || takes_no_arguments(layer) {
        return layer.clone();
    }
    let mut obj = to_object(layer);
    let kind = layer.kind();
    for (key, value) in obj.iter_mut() {
        let new = match key.as_str() {
            "in_features" | "normalized_shape" | "embed_dim" | "d_model" | "hidden_size" | "input_size" => last,
            "embedding_dim" if kind != "embedding" => last,
            "in_channels" | "num_features" | "num_channels" => first,
            _ => continue,
        };
        *value = Value::from(new);
    }
    // Head counts and groups must divide the new width.
    for (key, width_key) in [("num_heads", "embed_dim"), ("nhead", "d_model"), ("num_groups", "num_channels")] {
        let width = obj.get(width_key).and_then(Value::as_u64);
        let n = obj.get(key).and_then(Value::as_u64);
        if let (Some(w), Some(n)) = (width, n) {
            if n == 0 || w % n != 0 {
                obj.insert(key.into(), Value::from(1u64));
            }
        }
    }
    from_object(obj).unwrap_or_else(|_| layer.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(kind: &str) -> Layer {
        Layer::example(kind).unwrap()
    }

    #[test]
    fn every_kind_lists_fields_and_accepts_its_own_values() {
        for kind in Layer::KINDS {
            let layer = ex(kind);
            for f in fields(&layer) {
                let again = set_field(&layer, &f.name, &f.value);
                assert!(again.is_ok(), "{kind}.{}: {:?}", f.name, again);
            }
        }
    }

    #[test]
    fn relu_shows_inplace_and_conv_shows_pairs() {
        let names: Vec<String> = fields(&ex("relu")).into_iter().map(|f| f.name).collect();
        assert_eq!(names, ["inplace"]);
        let conv = ex("conv2d");
        let f = fields(&conv);
        assert!(f.iter().any(|f| f.name == "kernel_size" && f.value == FieldValue::Text("3".into())));
        let l = set_field(&conv, "kernel_size", &FieldValue::Text("[3, 5]".into())).unwrap();
        assert!(serde_json::to_string(&l).unwrap().contains("[3,5]"));
        let l = set_field(&conv, "padding", &FieldValue::Text("same".into())).unwrap();
        assert!(serde_json::to_string(&l).unwrap().contains("\"same\""));
        assert!(fields(&ex("tanh")).is_empty());
    }

    #[test]
    fn sizes_come_first_and_flags_last() {
        let names: Vec<String> = fields(&ex("conv2d")).into_iter().map(|f| f.name).collect();
        assert_eq!(&names[..4], ["in_channels", "out_channels", "kernel_size", "stride"]);
        assert_eq!(names.last().map(String::as_str), Some("bias"));
    }

    #[test]
    fn bad_values_give_messages() {
        let lin = ex("linear");
        let e = set_field(&lin, "in_features", &FieldValue::Text("abc".into())).unwrap_err();
        assert!(e.contains("in_features"), "{e}");
        assert!(set_field(&lin, "in_features", &FieldValue::Text("-3".into())).is_err());
        assert!(set_field(&lin, "in_features", &FieldValue::Text("".into())).is_err());
        assert!(set_field(&ex("repeat"), "times", &FieldValue::Text("x".into())).is_err());
        assert!(set_field(&ex("parallel"), "join", &FieldValue::Text("multiply".into())).is_err());
    }

    #[test]
    fn optional_fields_toggle() {
        let mha = ex("multihead_attention");
        let f = fields(&mha);
        assert!(f.iter().any(|f| f.name == "num_kv_heads" && f.optional));
        let l = set_field(&mha, "num_kv_heads", &FieldValue::Text("2".into())).unwrap();
        let l = set_field(&l, "num_kv_heads", &FieldValue::Text(" ".into())).unwrap();
        assert_eq!(l, mha);
    }

    #[test]
    fn fitting_adapts_input_sizes() {
        let l = fit_to_input(&ex("linear"), &[25088]);
        assert!(serde_json::to_string(&l).unwrap().contains("\"in_features\":25088"));
        let l = fit_to_input(&ex("conv2d"), &[512, 7, 7]);
        assert!(serde_json::to_string(&l).unwrap().contains("\"in_channels\":512"));
        let l = fit_to_input(&ex("multihead_attention"), &[128, 30]);
        let s = serde_json::to_string(&l).unwrap();
        assert!(s.contains("\"embed_dim\":30") && s.contains("\"num_heads\":1"), "{s}");
        assert_eq!(fit_to_input(&ex("relu"), &[]), ex("relu"));
    }
}
