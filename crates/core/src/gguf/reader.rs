//! Reading a GGUF header (v2 and v3, little-endian) from the first bytes of a file.
//!
//! The layout and the checks follow `gguf_init_from_file_impl` in `ggml/src/gguf.cpp`: magic
//! `GGUF`, a `u32` version (1 refused, at most 3), `i64` tensor and KV counts, the KV pairs (a
//! `u64`-length string key, a `u32` type, the value; arrays carry an element type and a `u64`
//! count and never nest), then per tensor its name (shorter than `GGML_MAX_NAME` = 64), `u32`
//! dimension count (at most 4), `i64` dimensions, `u32` ggml type (the row a multiple of its block)
//! and `u64` offset, which must be where the previous tensor's padded bytes end. The data section
//! starts at the next multiple of `general.alignment` (a power of two, default 32).
//!
//! Hostile input never allocates more than the bytes it came in: every count and length is
//! checked against the bytes left before anything is reserved. A header cut short is
//! [`GgufError::NeedMore`] with the least total length that could complete the failed read, so a
//! caller can grow an HTTP `Range` and try again; a header that cannot be right whatever follows
//! is [`GgufError::Invalid`].

use std::collections::HashSet;

use super::types::{GgmlType, GGML_TYPE_COUNT};
use super::value::{Array, Value, ValueType};

/// `GGML_MAX_NAME`: a tensor name must be shorter.
pub const MAX_NAME: u64 = 64;
/// `GGML_MAX_DIMS`.
pub const MAX_DIMS: u32 = 4;
/// `GGUF_DEFAULT_ALIGNMENT`.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Why a header could not be read. Offsets are bytes from the start of the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    /// The bytes end inside the header: at least `at_least` bytes are needed (the field being
    /// read when they ran out starts at `offset`).
    #[error("GGUF header incomplete: need more bytes (at least {at_least}) for {field} at byte {offset}")]
    NeedMore { at_least: u64, offset: u64, field: String },
    /// The header is wrong whatever follows.
    #[error("GGUF header invalid at byte {offset} ({field}): {reason}")]
    Invalid { offset: u64, field: String, reason: String },
}

/// One tensor's entry in the header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TensorInfo {
    pub name: String,
    /// `ne`: the dimensions, innermost first (ggml's order), `n_dims` of them.
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
    /// Offset of its data from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    pub fn n_elements(&self) -> u64 {
        // Checked while reading: the product fits in i64.
        self.dims.iter().product()
    }

    /// `ggml_nbytes` of the contiguous tensor: elements / block × bytes per block.
    pub fn n_bytes(&self) -> u64 {
        self.n_elements() / self.ggml_type.blck * self.ggml_type.bytes
    }

    /// `ne[i]`, 1 past the dimensions it has (ggml pads to 4).
    pub fn ne(&self, i: usize) -> u64 {
        self.dims.get(i).copied().unwrap_or(1)
    }
}

/// A GGUF file's header: everything before the tensor data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Header {
    pub version: u32,
    /// The KV pairs in file order (keys are unique).
    pub metadata: Vec<(String, Value)>,
    pub tensors: Vec<TensorInfo>,
    /// `general.alignment` or 32.
    pub alignment: u64,
    /// Where the tensor infos end (a file cut here reads the same).
    pub header_end: u64,
    /// Where the data section starts: `header_end` rounded up to `alignment` (when there are tensors).
    pub data_offset: u64,
    /// Bytes of the data section: every tensor's bytes padded to `alignment`.
    pub data_size: u64,
}

pub(crate) fn pad(x: u64, align: u64) -> Option<u64> {
    // `align` is a power of two (checked while reading).
    Some(x.checked_add(align - 1)? & !(align - 1))
}

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    file_size: Option<u64>,
}

type R<T> = Result<T, GgufError>;

impl<'a> Cursor<'a> {
    fn invalid(&self, field: impl FnOnce() -> String, reason: String) -> GgufError {
        GgufError::Invalid { offset: self.pos as u64, field: field(), reason }
    }

    /// Checks that `n` more bytes are there, without reading them.
    fn need(&self, n: Option<u64>, field: impl FnOnce() -> String) -> R<()> {
        let end = n.and_then(|n| (self.pos as u64).checked_add(n));
        let Some(end) = end else {
            return Err(self.invalid(field, "length overflows 64 bits".into()));
        };
        if end <= self.data.len() as u64 {
            return Ok(());
        }
        match self.file_size {
            Some(size) if end > size => {
                Err(self.invalid(field, format!("needs bytes up to {end}, past the end of the file ({size} bytes)")))
            }
            _ => Err(GgufError::NeedMore { at_least: end, offset: self.pos as u64, field: field() }),
        }
    }

    fn take(&mut self, n: u64, field: impl FnOnce() -> String) -> R<&'a [u8]> {
        self.need(Some(n), field)?;
        // `need` checked pos + n <= data.len(), so both fit in usize.
        let n = n as usize;
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, field: impl FnOnce() -> String) -> R<[u8; N]> {
        let s = self.take(N as u64, field)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, field: impl FnOnce() -> String) -> R<u32> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    fn u64(&mut self, field: impl FnOnce() -> String) -> R<u64> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    fn i64(&mut self, field: impl FnOnce() -> String) -> R<i64> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }

    /// A GGUF string: `u64` length, then the bytes (not checked as UTF-8 by llama.cpp; read
    /// lossily here).
    fn string(&mut self, field: impl Fn() -> String) -> R<String> {
        let len = self.u64(&field)?;
        let bytes = self.take(len, &field)?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    fn scalar(&mut self, t: ValueType, field: impl Fn() -> String) -> R<Value> {
        Ok(match t {
            ValueType::U8 => Value::U8(self.array::<1>(field)?[0]),
            ValueType::I8 => Value::I8(self.array::<1>(field)?[0] as i8),
            ValueType::Bool => Value::Bool(self.array::<1>(field)?[0] != 0),
            ValueType::U16 => Value::U16(u16::from_le_bytes(self.array(field)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(self.array(field)?)),
            ValueType::U32 => Value::U32(self.u32(field)?),
            ValueType::I32 => Value::I32(i32::from_le_bytes(self.array(field)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(self.array(field)?)),
            ValueType::U64 => Value::U64(self.u64(field)?),
            ValueType::I64 => Value::I64(self.i64(field)?),
            ValueType::F64 => Value::F64(f64::from_le_bytes(self.array(field)?)),
            ValueType::Str => Value::Str(self.string(field)?),
            ValueType::Array => return Err(self.invalid(field, "an array of arrays (gguf.cpp refuses nested arrays)".into())),
        })
    }

    fn value_type(&mut self, field: impl Fn() -> String) -> R<ValueType> {
        let at = self.pos;
        let id = self.u32(&field)?;
        ValueType::from_id(id).ok_or_else(|| GgufError::Invalid {
            offset: at as u64,
            field: field(),
            reason: format!("unknown GGUF value type {id} (0..=12)"),
        })
    }

    fn value(&mut self, field: impl Fn() -> String) -> R<Value> {
        let t = self.value_type(&field)?;
        if t != ValueType::Array {
            return self.scalar(t, field);
        }
        let elem = self.value_type(|| format!("{}: array element type", field()))?;
        if elem == ValueType::Array {
            return Err(self.invalid(&field, "an array of arrays (gguf.cpp refuses nested arrays)".into()));
        }
        let n = self.u64(|| format!("{}: array length", field()))?;
        // Each element takes at least its fixed size (a string at least its 8-byte length):
        // refuse or ask for more before reserving anything.
        let min = elem.fixed_size().unwrap_or(8);
        self.need(n.checked_mul(min), || format!("{}: {n} array elements of type {}", field(), elem.name()))?;
        let mut items = Vec::with_capacity(n as usize);
        for i in 0..n {
            items.push(self.scalar(elem, || format!("{}[{i}]", field()))?);
        }
        Ok(Value::Array(Array { elem, items }))
    }
}

impl Header {
    /// Reads the header from the first bytes of a file whose length is not known.
    pub fn parse(bytes: &[u8]) -> Result<Header, GgufError> {
        Header::parse_with_size(bytes, None)
    }

    /// Reads the header from the first bytes of a file of `file_size` bytes (when known): a read
    /// past the end of the file is then [`GgufError::Invalid`], not [`GgufError::NeedMore`].
    pub fn parse_with_size(bytes: &[u8], file_size: Option<u64>) -> Result<Header, GgufError> {
        let mut c = Cursor { data: bytes, pos: 0, file_size };
        let magic = c.array::<4>(|| "magic".into())?;
        if &magic != b"GGUF" {
            return Err(GgufError::Invalid {
                offset: 0,
                field: "magic".into(),
                reason: format!("expected \"GGUF\", found {magic:02x?} (not a GGUF file)"),
            });
        }
        let version = c.u32(|| "version".into())?;
        match version {
            2 | 3 => {}
            1 => return Err(invalid_at(4, "version", "GGUF v1 is no longer supported by llama.cpp".into())),
            v if v & 0xffff == 0 => {
                return Err(invalid_at(4, "version", format!("version {v:#x}: a big-endian file? (only little-endian is read)")))
            }
            v => return Err(invalid_at(4, "version", format!("unsupported GGUF version {v} (2 or 3)"))),
        }
        let n_tensors = count(&mut c, "tensor count")?;
        let n_kv = count(&mut c, "metadata KV count")?;

        // A KV pair takes at least 8 (key length) + 1 (a key is not empty) + 4 (type) + 1 bytes.
        c.need(n_kv.checked_mul(14), || format!("{n_kv} metadata KV pairs"))?;
        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut keys = HashSet::new();
        for i in 0..n_kv {
            let at = c.pos as u64;
            let key = c.string(|| format!("metadata[{i}] key"))?;
            if key.is_empty() {
                return Err(invalid_at(at, &format!("metadata[{i}] key"), "empty key".into()));
            }
            if !keys.insert(key.clone()) {
                return Err(invalid_at(at, &format!("metadata[{i}] key"), format!("duplicate key {key:?}")));
            }
            let value = c.value(|| format!("metadata[{i}] {key:?}"))?;
            metadata.push((key, value));
        }
        let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some((_, Value::U32(a))) if a.is_power_of_two() => u64::from(*a),
            Some((_, Value::U32(a))) => {
                return Err(invalid_at(c.pos as u64, "general.alignment", format!("{a} is not a power of 2")))
            }
            Some((_, v)) => {
                return Err(invalid_at(
                    c.pos as u64,
                    "general.alignment",
                    format!("must be of type u32, is {}", v.value_type().name()),
                ))
            }
        };

        // A tensor info takes at least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) bytes.
        c.need(n_tensors.checked_mul(24), || format!("{n_tensors} tensor infos"))?;
        let mut tensors = Vec::with_capacity(n_tensors as usize);
        let mut names = HashSet::new();
        for i in 0..n_tensors {
            tensors.push(tensor_info(&mut c, i, &mut names)?);
        }
        let header_end = c.pos as u64;
        let data_offset = if n_tensors > 0 {
            pad(header_end, alignment).ok_or_else(|| invalid_at(header_end, "data section", "offset overflows".into()))?
        } else {
            header_end
        };
        let mut data_size = 0u64;
        for (i, t) in tensors.iter().enumerate() {
            let field = || format!("tensor[{i}] {:?} offset", t.name);
            if t.offset != data_size {
                return Err(invalid_at(header_end, &field(), format!("offset {} where {data_size} was expected", t.offset)));
            }
            data_size = pad(t.n_bytes(), alignment)
                .and_then(|b| data_size.checked_add(b))
                .ok_or_else(|| invalid_at(header_end, &field(), "data size overflows 64 bits".into()))?;
        }
        Ok(Header { version, metadata, tensors, alignment, header_end, data_offset, data_size })
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(Value::as_str)
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// Bytes of all tensors' data, unpadded.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(TensorInfo::n_bytes).sum()
    }
}

fn invalid_at(offset: u64, field: &str, reason: String) -> GgufError {
    GgufError::Invalid { offset, field: field.into(), reason }
}

fn count(c: &mut Cursor, what: &str) -> R<u64> {
    let at = c.pos as u64;
    let n = c.i64(|| what.into())?;
    u64::try_from(n).map_err(|_| invalid_at(at, what, format!("negative count {n}")))
}

fn tensor_info(c: &mut Cursor, i: u64, names: &mut HashSet<String>) -> R<TensorInfo> {
    let at = c.pos as u64;
    let name_len = c.u64(|| format!("tensor[{i}] name"))?;
    if name_len >= MAX_NAME {
        return Err(invalid_at(at, &format!("tensor[{i}] name"), format!("name of {name_len} bytes (at most {})", MAX_NAME - 1)));
    }
    let name = String::from_utf8_lossy(c.take(name_len, || format!("tensor[{i}] name"))?).into_owned();
    if !names.insert(name.clone()) {
        return Err(invalid_at(at, &format!("tensor[{i}] name"), format!("duplicate tensor name {name:?}")));
    }
    let field = |what: &str| format!("tensor[{i}] {name:?} {what}");
    let at = c.pos as u64;
    let n_dims = c.u32(|| field("n_dims"))?;
    if n_dims > MAX_DIMS {
        return Err(invalid_at(at, &field("n_dims"), format!("{n_dims} dimensions (at most {MAX_DIMS})")));
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    let mut elements: i64 = 1;
    for d in 0..n_dims {
        let at = c.pos as u64;
        let ne = c.i64(|| field(&format!("ne[{d}]")))?;
        if ne < 0 {
            return Err(invalid_at(at, &field(&format!("ne[{d}]")), format!("negative dimension {ne}")));
        }
        elements = elements
            .checked_mul(ne)
            .ok_or_else(|| invalid_at(at, &field("shape"), "element count overflows i64".into()))?;
        dims.push(ne as u64);
    }
    let at = c.pos as u64;
    let id = c.u32(|| field("type"))?;
    let ggml_type = GgmlType::from_id(id).ok_or_else(|| {
        let reason = if id < GGML_TYPE_COUNT {
            format!("ggml type {id} was removed from ggml")
        } else {
            format!("invalid ggml type {id} (below {GGML_TYPE_COUNT})")
        };
        invalid_at(at, &field("type"), reason)
    })?;
    let ne0 = dims.first().copied().unwrap_or(1);
    if ne0 % ggml_type.blck != 0 {
        return Err(invalid_at(
            at,
            &field("type"),
            format!("{ne0} elements per row, not a multiple of {}'s block of {}", ggml_type.name, ggml_type.blck),
        ));
    }
    if (elements as u64 / ggml_type.blck).checked_mul(ggml_type.bytes).is_none() {
        return Err(invalid_at(at, &field("type"), "size in bytes overflows 64 bits".into()));
    }
    let offset = c.u64(|| field("offset"))?;
    Ok(TensorInfo { name, dims, ggml_type, offset })
}
