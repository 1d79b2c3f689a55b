//! Units: element types, shapes and byte counts, and their human formatting.
//!
//! Counts are `u64` and saturate instead of overflowing: batch × layers × width overflows `u32` easily,
//! and an absurd spec must give a clear error or a saturated figure, never a panic.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    #[default]
    F32,
    F16,
    Bf16,
    I64,
    I32,
    U8,
    Bool,
    /// `torch.float8_e4m3fn` (kohya's `--fp8_base` weights).
    F8E4m3,
}

impl DType {
    pub const fn size(self) -> u64 {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::I64 => 8,
            DType::U8 | DType::Bool | DType::F8E4m3 => 1,
        }
    }
}

/// A per-sample shape (the batch dimension is not part of it). Up to four dimensions are held
/// inline (no heap allocation: a 70B model's graph has ~10^4 values per forward, and their
/// shapes' allocations and frees were a third of the solver's time); serialized as a list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(from = "Vec<u64>", into = "Vec<u64>")]
pub struct Shape(pub Dims);

/// The dimensions of a [`Shape`]: a `SmallVec` (its methods through `Deref`) that compares with
/// a `Vec`, an array or a slice of dimensions.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Dims(pub smallvec::SmallVec<[u64; 4]>);

impl Dims {
    pub fn from_vec(v: Vec<u64>) -> Dims {
        Dims(smallvec::SmallVec::from_vec(v))
    }
}

impl std::ops::Deref for Dims {
    type Target = smallvec::SmallVec<[u64; 4]>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Dims {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl fmt::Debug for Dims {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl FromIterator<u64> for Dims {
    fn from_iter<I: IntoIterator<Item = u64>>(i: I) -> Dims {
        Dims(i.into_iter().collect())
    }
}

impl IntoIterator for Dims {
    type Item = u64;
    type IntoIter = smallvec::IntoIter<[u64; 4]>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Dims {
    type Item = &'a u64;
    type IntoIter = std::slice::Iter<'a, u64>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl PartialEq<Vec<u64>> for Dims {
    fn eq(&self, o: &Vec<u64>) -> bool {
        self.0[..] == o[..]
    }
}

impl PartialEq<[u64]> for Dims {
    fn eq(&self, o: &[u64]) -> bool {
        self.0[..] == *o
    }
}

impl<const N: usize> PartialEq<[u64; N]> for Dims {
    fn eq(&self, o: &[u64; N]) -> bool {
        self.0[..] == o[..]
    }
}

impl From<Vec<u64>> for Shape {
    fn from(v: Vec<u64>) -> Shape {
        Shape(Dims::from_vec(v))
    }
}

impl From<Shape> for Vec<u64> {
    fn from(s: Shape) -> Vec<u64> {
        let Dims(v) = s.0;
        v.into_vec()
    }
}

impl Shape {
    pub fn new(dims: impl IntoIterator<Item = u64>) -> Self {
        Shape(dims.into_iter().collect())
    }
    pub fn numel(&self) -> u64 {
        self.0.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }
    pub fn rank(&self) -> usize {
        self.0.len()
    }
    pub fn last(&self) -> u64 {
        self.0.last().copied().unwrap_or(1)
    }
    /// The same shape with the last dimension replaced.
    pub fn with_last(&self, d: u64) -> Shape {
        let mut v = self.0.clone();
        match v.last_mut() {
            Some(x) => *x = d,
            None => v.push(d),
        }
        Shape(v)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Which byte unit a figure is shown in. Always labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ByteUnit {
    /// 10^6 bytes, labelled "MB" (GB above 10^9 with `format_bytes`).
    #[default]
    #[serde(rename = "MB")]
    Mb,
    /// 2^20 bytes, labelled "MiB" (GiB above 2^30).
    #[serde(rename = "MiB")]
    Mib,
}

/// `1234567` → `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Human byte figure with its unit label: `format_bytes(1_500_000_000, Mb)` → `"1.50 GB"`.
pub fn format_bytes(bytes: u64, unit: ByteUnit) -> String {
    let (k, labels) = match unit {
        ByteUnit::Mb => (1000f64, ["B", "kB", "MB", "GB", "TB", "PB", "EB"]),
        ByteUnit::Mib => (1024f64, ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]),
    };
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= k && i + 1 < labels.len() {
        v /= k;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.2} {}", labels[i])
    }
}

/// Parses a capacity like `24GB`, `24 GiB`, `16000MB`, `80e9` (bytes).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num.trim().parse().ok()?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        _ => return None,
    };
    let bytes = value * mult;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(138_357_544), "138,357,544");
    }

    #[test]
    fn bytes_format_and_parse() {
        assert_eq!(format_bytes(1_500_000_000, ByteUnit::Mb), "1.50 GB");
        assert_eq!(format_bytes(3 * 1024 * 1024, ByteUnit::Mib), "3.00 MiB");
        assert_eq!(format_bytes(12, ByteUnit::Mib), "12 B");
        assert_eq!(parse_bytes("24GB"), Some(24_000_000_000));
        assert_eq!(parse_bytes("24 GiB"), Some(24 * 1024 * 1024 * 1024));
        assert_eq!(parse_bytes("80e9"), Some(80_000_000_000));
        assert_eq!(parse_bytes("twelve"), None);
        assert_eq!(parse_bytes("-5GB"), None);
    }
}
