//! Reading a Hugging Face `config.json` field by field with transformers' defaults ([`Fields`]),
//! and the small helpers every family's importer builds with. Below `hf.rs`, its family files
//! (`hf/*.rs`) and `hf_moe.rs`.

use super::generic::is_inert;
use crate::error::{Error, Result};
use crate::layer::transformer::FfnActivation;
use crate::spec::Layer;
use serde_json::{json, Map, Value};

/// Picks the class to build: `arch` when it is one of `supported`, else `base` with a note.
pub(crate) fn pick(arch: Option<&str>, supported: &[&'static str], base: &'static str) -> (&'static str, String) {
    match arch {
        Some(a) => match supported.iter().find(|s| **s == a) {
            Some(s) => (s, s.to_string()),
            None => (base, format!("{base} (imported from a {a} config; its task head is not modelled)")),
        },
        None => (base, base.to_string()),
    }
}

/// Typed access to a config object with transformers' defaults; remembers which fields were read
/// so that [`Fields::refuse_unknown`] can name the ones nothing understood.
pub(crate) struct Fields<'a>(pub(crate) &'a Map<String, Value>, std::cell::RefCell<std::collections::BTreeSet<String>>);

impl<'a> Fields<'a> {
    pub(crate) fn new(obj: &'a Map<String, Value>) -> Self {
        Fields(obj, Default::default())
    }

    /// The field, or `None` when absent or `null` (transformers then uses its default).
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.1.borrow_mut().insert(key.to_string());
        self.0.get(key).filter(|v| !v.is_null())
    }

    /// An error for the first field that was neither read nor is in [`super::generic::GENERIC_FIELDS`] (inert at the value given, `generic::is_inert`) or the
    /// family's `ignored` list (known fields that change neither parameters nor memory); and for
    /// a `quantization_config` whose method [`crate::formats::hf`] does not model.
    pub(crate) fn refuse_unknown(&self, model_type: &str, ignored: &[&str]) -> Result<()> {
        if let Some(q) = self.0.get("quantization_config").filter(|v| !v.is_null()) {
            // a known format selects the estimate's weights (`formats::hf`); others are refused
            crate::formats::hf::from_quantization_config(q)?;
        }
        let seen = self.1.borrow();
        for key in self.0.keys() {
            if !seen.contains(key) && key != "quantization_config" && !ignored.contains(&key.as_str()) && !is_inert(key, &self.0[key], model_type)? {
                return Err(Error::Import(format!(
                    "field `{key}` is not understood by the `{model_type}` importer (it would change the model in a way not modelled, or is unknown); remove it if it does not matter"
                )));
            }
        }
        Ok(())
    }

    pub(crate) fn wrong(key: &str, want: &str, got: &Value) -> Error {
        let mut shown = got.to_string();
        if shown.len() > 40 {
            shown = format!("{}…", shown.chars().take(40).collect::<String>());
        }
        Error::Import(format!("field `{key}` must be {want}, got {shown}"))
    }

    pub(crate) fn int(&self, key: &str, default: u64) -> Result<u64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => as_int(v).ok_or_else(|| Self::wrong(key, "a non-negative integer", v)),
        }
    }

    pub(crate) fn opt_int(&self, key: &str) -> Result<Option<u64>> {
        self.get(key).map(|v| as_int(v).ok_or_else(|| Self::wrong(key, "a non-negative integer", v))).transpose()
    }

    /// A positive size: `0` is rejected here rather than deep inside a layer.
    pub(crate) fn size(&self, key: &str, default: u64) -> Result<u64> {
        let v = self.int(key, default)?;
        if v == 0 {
            return Err(Error::Import(format!("field `{key}` must be at least 1")));
        }
        Ok(v)
    }

    pub(crate) fn prob(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(p) if (0.0..=1.0).contains(&p) => Ok(p),
                _ => Err(Self::wrong(key, "a probability between 0 and 1", v)),
            },
        }
    }

    pub(crate) fn float(&self, key: &str, default: f64) -> Result<f64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).ok_or_else(|| Self::wrong(key, "a non-negative number", v)),
        }
    }

    pub(crate) fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| Self::wrong(key, "true or false", v)),
        }
    }

    pub(crate) fn str(&self, key: &str) -> Result<Option<&str>> {
        self.get(key).map(|v| v.as_str().ok_or_else(|| Self::wrong(key, "a string", v))).transpose()
    }

    /// An integer or a `[h, w]` pair (`image_size`, `patch_size`).
    pub(crate) fn pair(&self, key: &str, default: u64) -> Result<[u64; 2]> {
        let v = match self.get(key) {
            None => return Ok([default, default]),
            Some(v) => v,
        };
        let pair = match v {
            Value::Array(a) if a.len() == 2 => as_int(&a[0]).zip(as_int(&a[1])).map(|(h, w)| [h, w]),
            _ => as_int(v).map(|s| [s, s]),
        };
        match pair {
            Some(p) if p[0] > 0 && p[1] > 0 => Ok(p),
            _ => Err(Self::wrong(key, "a positive integer or a [height, width] pair", v)),
        }
    }

    /// The first class in `architectures`.
    pub(crate) fn architecture(&self) -> Result<Option<&str>> {
        match self.get("architectures") {
            None => Ok(None),
            Some(Value::Array(a)) if a.is_empty() => Ok(None),
            Some(Value::Array(a)) => a[0].as_str().map(Some).ok_or_else(|| Self::wrong("architectures", "a list of class names", &a[0])),
            Some(v) => Err(Self::wrong("architectures", "a list of class names", v)),
        }
    }

    /// `num_labels` if given, else the size of `id2label`, else transformers' default of 2.
    pub(crate) fn num_labels(&self) -> Result<u64> {
        if let Some(n) = self.opt_int("num_labels")? {
            return Ok(n);
        }
        match self.get("id2label") {
            None => Ok(2),
            Some(Value::Object(m)) => Ok(m.len() as u64),
            Some(v) => Err(Self::wrong("id2label", "an object", v)),
        }
    }

    /// `hidden_act` / `activation_function` as a feed-forward activation.
    pub(crate) fn activation(&self, key: &str, default: FfnActivation) -> Result<FfnActivation> {
        let Some(name) = self.str(key)? else { return Ok(default) };
        Ok(match name {
            "relu" => FfnActivation::Relu,
            "gelu" | "gelu_python" => FfnActivation::Gelu,
            "gelu_new" | "gelu_fast" => FfnActivation::GeluNew,
            "gelu_pytorch_tanh" => FfnActivation::GeluTanh,
            "silu" | "swish" => FfnActivation::Silu,
            "quick_gelu" => FfnActivation::QuickGelu,
            other => {
                return Err(Error::Import(format!(
                    "field `{key}`: activation `{other}` is not supported (relu, gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, silu, quick_gelu)"
                )))
            }
        })
    }
}

/// A JSON number that is a non-negative integer (`768` or `768.0`).
pub(crate) fn as_int(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19).map(|f| f as u64))
}

pub(crate) fn invalid(what: &str) -> Error {
    Error::Import(format!("{what}: the config's values do not make a valid model"))
}

pub(crate) fn dropout(p: f64) -> Result<Layer> {
    serde_json::from_value(json!({"kind": "dropout", "p": p})).map_err(|_| invalid("dropout"))
}
