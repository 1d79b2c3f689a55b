//! Serde helpers shared by the spec, the layer configs and the training config. They keep the
//! wasm bundle small: every type is read from one buffered `serde_json::Value` (one
//! `Deserialize` instance per type), and duplicate keys stay an error as in the derived impls.

use serde::de::Visitor;

/// Buffers any deserializer's input into a `serde_json::Value` and reads `T` from it with `read`,
/// so `read` and the `Deserialize` code it reaches exist once, for `Value`, whatever the input
/// format (`from_str`, `from_value`, …): one instance per type keeps the wasm bundle small.
/// Error positions then point at the end of the buffered value.
pub(crate) fn via_value<'de, D: serde::Deserializer<'de>, T>(
    d: D,
    read: fn(serde_json::Value) -> serde_json::Result<T>,
) -> std::result::Result<T, D::Error> {
    let value = d.deserialize_any(StrictValue)?;
    read(value).map_err(serde::de::Error::custom)
}

/// Builds a `serde_json::Value` like `Value`'s own `Deserialize`, except that a key repeated in
/// an object is an error ("duplicate field `…`"), as it is for the derived impls reading the
/// buffer (a `Value` would keep the last one).
#[derive(Clone, Copy)]
pub(crate) struct StrictValue;

impl<'de> serde::de::DeserializeSeed<'de> for StrictValue {
    type Value = serde_json::Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any valid JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Self::Value, E> {
        Ok(v.into())
    }
    fn visit_unit<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_none<E>(self) -> std::result::Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self)? {
            items.push(v);
        }
        Ok(serde_json::Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!("duplicate field `{key}`")));
            }
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(serde_json::Value::Object(object))
    }
}

/// Reads a struct from the fields of a JSON object. Through serde's `MapDeserializer` rather
/// than a `Value`: it only ever calls `visit_map`, so the derived `visit_seq` (a struct written
/// as a list of its field values, which nothing writes) is dropped from the wasm bundle.
pub(crate) fn from_fields<T: serde::de::DeserializeOwned>(
    fields: serde_json::Map<String, serde_json::Value>,
) -> serde_json::Result<T> {
    T::deserialize(serde::de::value::MapDeserializer::new(fields.into_iter()))
}

/// serde's "invalid type: {value}, expected {expected}" error.
pub(crate) fn invalid_type(value: serde_json::Value, expected: &'static str) -> serde_json::Error {
    /// A visitor that accepts nothing, so every `visit_*` fails with that error.
    struct Expecting(&'static str);
    impl Visitor<'_> for Expecting {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    use serde::Deserializer as _;
    match value.deserialize_any(Expecting(expected)) {
        Err(e) => e,
        Ok(()) => serde::de::Error::custom(format_args!("expected {expected}")),
    }
}

/// `skip_serializing_if` for flags that default to `true`.
pub(crate) fn is_true(b: &bool) -> bool {
    *b
}

/// `skip_serializing_if` for flags that default to `false`.
pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// `#[serde(default = "t")]` for flags that default to `true` (PyTorch's `bias=True`, …).
pub(crate) fn t() -> bool {
    true
}
