//! A checkpoint's size as stored: the header of a `.safetensors` file and a sharded
//! checkpoint's `model.safetensors.index.json`. No I/O: the caller passes the bytes it has (a
//! file's first bytes, an HTTP `Range` answer).
//!
//! The layout and the checks follow the safetensors crate (`safetensors/src/tensor.rs`,
//! `SafeTensors::read_metadata` and `Metadata::validate`): an 8-byte little-endian header length
//! `n` (at most `MAX_HEADER_SIZE` = 100,000,000), then `n` bytes of UTF-8 JSON, an object whose
//! `__metadata__` entry is a string → string map and whose other entries are tensors
//! `{"dtype", "shape", "data_offsets": [begin, end]}`. Sorted by offsets, each tensor must begin
//! where the one before ended (the first at 0), and `end - begin` must be its elements × the
//! dtype's bits / 8 (sub-byte dtypes a whole number of bytes). The data section follows the
//! header; its size is the last tensor's end.
//!
//! `model.safetensors.index.json` (transformers `modeling_utils.save_pretrained`, huggingface_hub
//! `split_torch_state_dict_into_shards`): `{"metadata": {"total_size": …}, "weight_map": {tensor:
//! file}}`, `total_size` the bytes of every tensor's data (headers not counted) — the same sum
//! as [`Header::data_bytes`] over the shards.
//!
//! Hostile input allocates no more than a small multiple of the bytes given (serde_json builds
//! the header's values from its text; nothing is reserved from a count in the input), and never
//! panics: `tests/safetensors_fuzz.rs` runs a million random and mutated headers under a counting
//! allocator.

use serde_json::Value;

/// `MAX_HEADER_SIZE` of the safetensors crate.
pub const MAX_HEADER_SIZE: u64 = 100_000_000;

/// Why a header or an index could not be read. Offsets are bytes from the start of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SafetensorsError {
    /// The bytes end inside the header: the first `at_least` bytes of the file are needed.
    #[error("safetensors header incomplete: need the first {at_least} bytes for {field}, got {got}")]
    NeedMore { at_least: u64, got: u64, field: String },
    /// The header (or index) is wrong whatever follows.
    #[error("safetensors {what} invalid at byte {offset} ({field}): {reason}")]
    Invalid { what: &'static str, offset: u64, field: String, reason: String },
}

/// A safetensors element type (`Dtype` of the safetensors crate, 0.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dtype {
    pub name: &'static str,
    pub bits: u64,
}

const DTYPES: &[(&str, u64)] = &[
    ("BOOL", 8),
    ("F4", 4),
    ("F6_E2M3", 6),
    ("F6_E3M2", 6),
    ("U8", 8),
    ("I8", 8),
    ("F8_E5M2", 8),
    ("F8_E4M3", 8),
    ("F8_E8M0", 8),
    ("I16", 16),
    ("U16", 16),
    ("F16", 16),
    ("BF16", 16),
    ("I32", 32),
    ("U32", 32),
    ("F32", 32),
    ("C64", 64),
    ("F64", 64),
    ("I64", 64),
    ("U64", 64),
];

impl Dtype {
    pub fn parse(s: &str) -> Option<Dtype> {
        DTYPES.iter().find(|(n, _)| *n == s).map(|&(name, bits)| Dtype { name, bits })
    }
}

/// One tensor of a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorEntry {
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
    /// `data_offsets`, from the start of the data section.
    pub begin: u64,
    pub end: u64,
}

impl TensorEntry {
    pub fn bytes(&self) -> u64 {
        self.end - self.begin
    }
}

/// A read header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// `n`: the JSON's length (the data section starts at `8 + n`).
    pub header_len: u64,
    /// By offset.
    pub tensors: Vec<TensorEntry>,
    /// `__metadata__` (transformers writes `{"format": "pt"}`).
    pub metadata: Vec<(String, String)>,
}

impl Header {
    /// The bytes of every tensor's data: the data section's size.
    pub fn data_bytes(&self) -> u64 {
        self.tensors.last().map_or(0, |t| t.end)
    }

    /// The file's size: length field, header and data.
    pub fn file_bytes(&self) -> u64 {
        8u64.saturating_add(self.header_len).saturating_add(self.data_bytes())
    }

    /// Data bytes per dtype, in the order the dtypes first appear.
    pub fn bytes_by_dtype(&self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(&'static str, u64)> = Vec::new();
        for t in &self.tensors {
            match out.iter_mut().find(|(n, _)| *n == t.dtype.name) {
                Some((_, b)) => *b = b.saturating_add(t.bytes()),
                None => out.push((t.dtype.name, t.bytes())),
            }
        }
        out
    }
}

/// How many bytes of the file [`read_header`] needs, from its first 8: `Ok(8 + n)`.
pub fn header_extent(first: &[u8]) -> Result<u64, SafetensorsError> {
    let Some(len) = first.get(..8) else {
        return Err(SafetensorsError::NeedMore { at_least: 8, got: first.len() as u64, field: "the header length".into() });
    };
    let mut le = [0u8; 8];
    le.copy_from_slice(len);
    let n = u64::from_le_bytes(le);
    if n > MAX_HEADER_SIZE {
        return Err(invalid(0, "header length", format!("{n} bytes is over the {MAX_HEADER_SIZE}-byte limit (HeaderTooLarge)")));
    }
    Ok(8 + n)
}

fn invalid(offset: u64, field: impl Into<String>, reason: String) -> SafetensorsError {
    SafetensorsError::Invalid { what: "header", offset, field: field.into(), reason }
}

/// Reads the header from a file's first bytes (all of them, or at least [`header_extent`]).
pub fn read_header(bytes: &[u8]) -> Result<Header, SafetensorsError> {
    let stop = header_extent(bytes)?;
    let got = bytes.len() as u64;
    if got < stop {
        return Err(SafetensorsError::NeedMore { at_least: stop, got, field: "the JSON header".into() });
    }
    // `stop` ≤ `bytes.len()`, a usize
    let json = &bytes[8..stop as usize];
    let text = std::str::from_utf8(json)
        .map_err(|e| invalid(8 + e.valid_up_to() as u64, "JSON header", "not UTF-8 (InvalidHeader)".into()))?;
    if !text.starts_with('{') {
        return Err(invalid(8, "JSON header", "does not start with `{` (InvalidHeaderStart)".into()));
    }
    let v: Value = serde_json::from_str(text).map_err(|e| invalid(8 + json_offset(text, &e), "JSON header", format!("{e}")))?;
    let Value::Object(map) = v else {
        return Err(invalid(8, "JSON header", "not an object".into()));
    };
    let mut tensors = Vec::with_capacity(map.len().min(json.len() / 16 + 1));
    let mut metadata = Vec::new();
    for (name, entry) in &map {
        let at = 8 + key_offset(text, name);
        if name == "__metadata__" {
            let Value::Object(m) = entry else {
                return Err(invalid(at, "__metadata__", "not a string → string map".into()));
            };
            for (k, v) in m {
                let Value::String(s) = v else {
                    return Err(invalid(at, format!("__metadata__.{k}"), format!("{v} is not a string")));
                };
                metadata.push((k.clone(), s.clone()));
            }
            continue;
        }
        tensors.push(tensor(name, entry, at)?);
    }
    tensors.sort_by_key(|t: &TensorEntry| (t.begin, t.end));
    let mut start = 0u64;
    for t in &tensors {
        let at = 8 + key_offset(text, &t.name);
        if t.begin != start {
            return Err(invalid(
                at,
                format!("{}.data_offsets", t.name),
                format!("begins at {} where the tensors before end at {start} (InvalidOffset)", t.begin),
            ));
        }
        start = t.end;
    }
    Ok(Header { header_len: stop - 8, tensors, metadata })
}

/// One tensor's entry, checked (`Metadata::validate`).
fn tensor(name: &str, entry: &Value, at: u64) -> Result<TensorEntry, SafetensorsError> {
    let field = |f: &str| format!("{name}.{f}");
    let Value::Object(o) = entry else {
        return Err(invalid(at, name, "not an object with dtype, shape, data_offsets".into()));
    };
    if let Some(k) = o.keys().find(|k| !matches!(k.as_str(), "dtype" | "shape" | "data_offsets")) {
        return Err(invalid(at, field(k), "unknown field".into()));
    }
    let dtype = match o.get("dtype") {
        Some(Value::String(s)) => Dtype::parse(s).ok_or_else(|| invalid(at, field("dtype"), format!("`{s}` is not a safetensors dtype")))?,
        _ => return Err(invalid(at, field("dtype"), "missing or not a string".into())),
    };
    let Some(Value::Array(dims)) = o.get("shape") else {
        return Err(invalid(at, field("shape"), "missing or not a list".into()));
    };
    let mut shape = Vec::with_capacity(dims.len());
    for d in dims {
        shape.push(d.as_u64().ok_or_else(|| invalid(at, field("shape"), format!("{d} is not a dimension")))?);
    }
    let offsets = match o.get("data_offsets") {
        Some(Value::Array(a)) if a.len() == 2 => (a[0].as_u64(), a[1].as_u64()),
        _ => (None, None),
    };
    let (Some(begin), Some(end)) = offsets else {
        return Err(invalid(at, field("data_offsets"), "missing or not two byte offsets".into()));
    };
    if end < begin {
        return Err(invalid(at, field("data_offsets"), format!("ends at {end} before it begins at {begin} (InvalidOffset)")));
    }
    let elements = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
    let bits = elements.and_then(|n| n.checked_mul(dtype.bits));
    let Some(bits) = bits else {
        return Err(invalid(at, field("shape"), "elements × bits overflow (ValidationOverflow)".into()));
    };
    if bits % 8 != 0 {
        return Err(invalid(at, field("shape"), format!("{bits} bits of {} are not whole bytes (MisalignedSlice)", dtype.name)));
    }
    if end - begin != bits / 8 {
        return Err(invalid(
            at,
            field("data_offsets"),
            format!("{} bytes for {shape:?} of {}, which takes {} (TensorInvalidInfo)", end - begin, dtype.name, bits / 8),
        ));
    }
    Ok(TensorEntry { name: name.to_string(), dtype, shape, begin, end })
}

/// The byte offset in `text` of a serde_json error's line and column.
fn json_offset(text: &str, e: &serde_json::Error) -> u64 {
    let line_start: usize = text.split_inclusive('\n').take(e.line().saturating_sub(1)).map(str::len).sum();
    (line_start + e.column().saturating_sub(1)).min(text.len()) as u64
}

/// Where `"name"` first appears in `text` (0 when it is written with escapes).
fn key_offset(text: &str, name: &str) -> u64 {
    let quoted = serde_json::to_string(name).unwrap_or_default();
    text.find(&quoted).unwrap_or(0) as u64
}

/// A sharded checkpoint's `model.safetensors.index.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    /// `metadata.total_size`: every tensor's data bytes.
    pub total_size: u64,
    /// `metadata.total_parameters` (huggingface_hub ≥ 0.33 writes it), where present.
    pub total_parameters: Option<u64>,
    /// Tensors in `weight_map`.
    pub tensors: usize,
    /// The shard files, each once, in first-seen order.
    pub files: Vec<String>,
}

/// Reads `model.safetensors.index.json`.
pub fn read_index(text: &str) -> Result<Index, SafetensorsError> {
    let bad = |offset: u64, field: &str, reason: String| SafetensorsError::Invalid { what: "index", offset, field: field.into(), reason };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(json_offset(text, &e), "JSON", format!("{e}")))?;
    let meta = v.get("metadata").ok_or_else(|| bad(0, "metadata", "missing".into()))?;
    let at = key_offset(text, "total_size");
    // a number, or (some converters) its decimal text
    let size = |k: &str| match meta.get(k) {
        Some(Value::Number(n)) => n.as_u64().ok_or_else(|| format!("{n} is not a byte count")).map(Some),
        Some(Value::String(s)) => s.trim().parse::<u64>().map(Some).map_err(|_| format!("`{s}` is not a byte count")),
        None | Some(Value::Null) => Ok(None),
        Some(other) => Err(format!("{other} is not a number")),
    };
    let total_size = size("total_size").map_err(|r| bad(at, "metadata.total_size", r))?;
    let total_size = total_size.ok_or_else(|| bad(0, "metadata.total_size", "missing".into()))?;
    let total_parameters = size("total_parameters").map_err(|r| bad(key_offset(text, "total_parameters"), "metadata.total_parameters", r))?;
    let (mut tensors, mut files) = (0usize, Vec::<String>::new());
    if let Some(map) = v.get("weight_map") {
        let Value::Object(m) = map else {
            return Err(bad(key_offset(text, "weight_map"), "weight_map", "not a tensor → file map".into()));
        };
        for (name, file) in m {
            let Value::String(f) = file else {
                return Err(bad(key_offset(text, name), "weight_map", format!("`{name}`: {file} is not a file name")));
            };
            tensors += 1;
            if !files.contains(f) {
                files.push(f.clone());
            }
        }
    }
    Ok(Index { total_size, total_parameters, tensors, files })
}

/// Where a checkpoint's stored bytes and the modelled weights disagree by more than
/// [`DISAGREE_ABOVE`]: `(stored − modelled) / modelled` (None within it, or with nothing modelled).
pub fn disagreement(stored: u64, modelled: u64) -> Option<f64> {
    if modelled == 0 {
        return None;
    }
    let rel = (stored as f64 - modelled as f64) / modelled as f64;
    (rel.abs() > DISAGREE_ABOVE).then_some(rel)
}

/// The relative difference past which a view shows both figures as disagreeing: 1 %.
pub const DISAGREE_ABOVE: f64 = 0.01;

#[cfg(test)]
mod tests {
    use super::*;

    fn file(json: &str) -> Vec<u8> {
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json.as_bytes());
        b
    }

    #[test]
    fn reads_a_header() {
        let h = read_header(&file(
            r#"{"__metadata__":{"format":"pt"},"b":{"dtype":"F8_E4M3","shape":[4,4],"data_offsets":[8,24]},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}"#,
        ))
        .unwrap();
        assert_eq!(h.tensors.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(h.data_bytes(), 24);
        assert_eq!(h.bytes_by_dtype(), vec![("BF16", 8), ("F8_E4M3", 16)]);
        assert_eq!(h.metadata, vec![("format".to_string(), "pt".to_string())]);
    }

    #[test]
    fn errors_name_the_field_and_the_byte() {
        let e = read_header(&[1, 2, 3]).unwrap_err();
        assert!(matches!(e, SafetensorsError::NeedMore { at_least: 8, .. }), "{e}");
        let mut short = file(r#"{"a":{}}"#);
        short.truncate(10);
        assert!(matches!(read_header(&short).unwrap_err(), SafetensorsError::NeedMore { at_least: 16, got: 10, .. }));
        let e = read_header(&(MAX_HEADER_SIZE + 1).to_le_bytes()).unwrap_err().to_string();
        assert!(e.contains("HeaderTooLarge"), "{e}");
        let json = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#;
        let e = read_header(&file(json)).unwrap_err().to_string();
        assert!(e.contains("a.data_offsets") && e.contains("at byte 9") && e.contains("TensorInvalidInfo"), "{e}");
        let json = r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        assert!(read_header(&file(json)).unwrap_err().to_string().contains("InvalidOffset"));
        let e = read_header(&file(r#"{"a": [1,]}"#)).unwrap_err().to_string();
        assert!(e.contains("at byte 17"), "{e}");
        let e = read_header(&file(r#"{"a":{"dtype":"Q4","shape":[],"data_offsets":[0,1]}}"#)).unwrap_err().to_string();
        assert!(e.contains("a.dtype") && e.contains("Q4"), "{e}");
        let json = r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}"#;
        assert!(read_header(&file(json)).unwrap_err().to_string().contains("MisalignedSlice"));
    }

    #[test]
    fn disagreement_past_one_percent() {
        assert_eq!(disagreement(1010, 1000), None);
        assert!(disagreement(1011, 1000).is_some_and(|r| (r - 0.011).abs() < 1e-12));
        assert!(disagreement(500, 1000).is_some_and(|r| r < 0.0));
        assert_eq!(disagreement(5, 0), None);
    }

    #[test]
    fn reads_an_index() {
        let i = read_index(r#"{"metadata":{"total_size":16060522496,"total_parameters":8030261248},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors","c":"m-1.safetensors"}}"#).unwrap();
        assert_eq!(i, Index { total_size: 16_060_522_496, total_parameters: Some(8_030_261_248), tensors: 3, files: vec!["m-1.safetensors".into(), "m-2.safetensors".into()] });
        assert_eq!(read_index(r#"{"metadata":{"total_size":"12"}}"#).unwrap().total_size, 12);
        let e = read_index(r#"{"metadata":{"total_size":-1}}"#).unwrap_err().to_string();
        assert!(e.contains("metadata.total_size") && e.contains("-1"), "{e}");
        assert!(read_index(r#"{"weight_map":{}}"#).unwrap_err().to_string().contains("metadata"));
    }
}
