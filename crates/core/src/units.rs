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
}

impl DType {
    pub const fn size(self) -> u64 {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::Bf16 => 2,
            DType::I64 => 8,
            DType::U8 | DType::Bool => 1,
        }
    }
}

/// A per-sample shape (the batch dimension is not part of it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Shape(pub Vec<u64>);

impl Shape {
    pub fn new(dims: impl Into<Vec<u64>>) -> Self {
        Shape(dims.into())
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
