//! Reading a diffusers or transformers `config.json`: typed getters with diffusers' defaults and
//! errors that name the field and what was wrong with it.

use crate::error::{Error, Result};
use serde_json::{Map, Value};

/// One component's config object.
pub struct Cfg<'a> {
    pub obj: &'a Map<String, Value>,
    /// `_class_name` or `architectures[0]`, for messages.
    pub class: String,
}

impl<'a> Cfg<'a> {
    pub fn new(obj: &'a Map<String, Value>, class: &str) -> Cfg<'a> {
        Cfg { obj, class: class.to_string() }
    }

    fn err(&self, key: &str, what: &str, got: &Value) -> Error {
        Error::Import(format!("{}: field `{key}` must be {what}, got {got}", self.class))
    }

    /// A present, non-null field.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    /// A positive integer (`default` when absent or null).
    pub fn size(&self, key: &str, default: u64) -> Result<u64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(n) if (1..=1 << 32).contains(&n) => Ok(n),
                _ => Err(self.err(key, "a positive integer up to 2^32", v)),
            },
        }
    }

    /// A non-negative integer.
    pub fn count(&self, key: &str, default: u64) -> Result<u64> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.as_u64().filter(|&n| n <= 1 << 32).ok_or_else(|| self.err(key, "a non-negative integer", v)),
        }
    }

    pub fn opt_size(&self, key: &str) -> Result<Option<u64>> {
        self.get(key).map(|_| self.size(key, 1)).transpose()
    }

    pub fn flag(&self, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.err(key, "true or false", v)),
        }
    }

    pub fn str(&self, key: &str) -> Result<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.err(key, "a string", v)),
        }
    }

    /// A list of positive integers, or one integer repeated `n` times (diffusers' per-block
    /// settings accept both).
    pub fn sizes(&self, key: &str, n: usize, default: &[u64]) -> Result<Vec<u64>> {
        let v = match self.get(key) {
            None => return Ok(if default.len() == 1 { vec![default[0]; n] } else { default.to_vec() }),
            Some(v) => v,
        };
        let list = match v {
            Value::Number(_) => vec![v.clone(); n],
            Value::Array(a) => a.clone(),
            _ => return Err(self.err(key, "an integer or a list of integers", v)),
        };
        let out: Option<Vec<u64>> = list.iter().map(|x| x.as_u64().filter(|&n| (1..=1 << 32).contains(&n))).collect();
        let out = out.ok_or_else(|| self.err(key, "a list of positive integers", v))?;
        if n > 0 && out.len() != n {
            return Err(Error::Import(format!("{}: field `{key}` has {} entries, expected {n} (one per block)", self.class, out.len())));
        }
        Ok(out)
    }

    /// A list of strings.
    pub fn strs(&self, key: &str, default: &[&str]) -> Result<Vec<String>> {
        match self.get(key) {
            None => Ok(default.iter().map(|s| s.to_string()).collect()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string).ok_or_else(|| self.err(key, "a list of strings", &Value::Array(a.clone()))))
                .collect(),
            Some(v) => Err(self.err(key, "a list of strings", v)),
        }
    }

    /// Refuses a field set to something this model does not estimate.
    pub fn refuse(&self, key: &str, why: &str) -> Result<()> {
        match self.get(key) {
            None | Some(Value::Bool(false)) => Ok(()),
            Some(v) => Err(Error::Import(format!("{}: field `{key}` = {v} is not supported ({why})", self.class))),
        }
    }
}
