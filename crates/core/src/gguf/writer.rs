//! A small GGUF writer for tests: the bytes `gguf-py`'s `GGUFWriter` writes for a header.

use super::value::{Value, ValueType};
use super::GgmlType;

pub struct Writer {
    pub version: u32,
    pub kv: Vec<(String, Value)>,
    pub tensors: Vec<(String, Vec<u64>, GgmlType)>,
    pub alignment: u64,
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn put_scalar(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::U16(x) => out.extend(x.to_le_bytes()),
        Value::I16(x) => out.extend(x.to_le_bytes()),
        Value::U32(x) => out.extend(x.to_le_bytes()),
        Value::I32(x) => out.extend(x.to_le_bytes()),
        Value::F32(x) => out.extend(x.to_le_bytes()),
        Value::U64(x) => out.extend(x.to_le_bytes()),
        Value::I64(x) => out.extend(x.to_le_bytes()),
        Value::F64(x) => out.extend(x.to_le_bytes()),
        Value::Str(s) => put_str(out, s),
        Value::Array(_) => unreachable!("arrays do not nest"),
    }
}

impl Writer {
    pub fn new() -> Writer {
        Writer { version: 3, kv: Vec::new(), tensors: Vec::new(), alignment: 32 }
    }

    pub fn kv(mut self, k: &str, v: Value) -> Writer {
        if k == "general.alignment" {
            if let Value::U32(a) = v {
                self.alignment = a.into();
            }
        }
        self.kv.push((k.into(), v));
        self
    }

    pub fn tensor(mut self, name: &str, dims: &[u64], t: GgmlType) -> Writer {
        self.tensors.push((name.into(), dims.to_vec(), t));
        self
    }

    /// The header bytes (through the tensor infos, without the padding before the data).
    pub fn header(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(self.version.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.kv.len() as u64).to_le_bytes());
        for (k, v) in &self.kv {
            put_str(&mut out, k);
            match v {
                Value::Array(a) => {
                    out.extend((ValueType::Array as u32).to_le_bytes());
                    out.extend((a.elem as u32).to_le_bytes());
                    out.extend((a.items.len() as u64).to_le_bytes());
                    for x in &a.items {
                        put_scalar(&mut out, x);
                    }
                }
                v => {
                    out.extend((v.value_type() as u32).to_le_bytes());
                    put_scalar(&mut out, v);
                }
            }
        }
        let mut offset = 0u64;
        for (name, dims, t) in &self.tensors {
            put_str(&mut out, name);
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.id.to_le_bytes());
            out.extend(offset.to_le_bytes());
            let n = (dims.iter().fold(1u64, |a, &d| a.wrapping_mul(d)) / t.blck).wrapping_mul(t.bytes);
            offset = offset.wrapping_add(n.div_ceil(self.alignment).wrapping_mul(self.alignment));
        }
        out
    }
}
