//! GPU capacities as the app reads and shows them: a bare number typed as a capacity is GiB
//! (what `nvidia-smi` and PyTorch count in), and a listed card shows one capacity, the total
//! its driver reports, in MiB as `nvidia-smi` prints it (or MB when the user picked decimal units).

use vramcalc_core::units::parse_bytes;
use crate::state::GpuChoice;
use vramcalc_core::{format_bytes, thousands, ByteUnit, Gpu};

const GIB: f64 = (1u64 << 30) as f64;

/// A typed capacity in bytes: `8` is 8 GiB; `24GB`, `16000 MiB`, `80e9 B` as written.
/// `None` for text that is not a capacity, or zero.
pub fn parse_capacity(text: &str) -> Option<u64> {
    let bytes = match text.trim().parse::<f64>() {
        Ok(v) => (v.is_finite() && v > 0.0 && v * GIB < u64::MAX as f64).then_some((v * GIB) as u64),
        Err(_) => parse_bytes(text),
    };
    bytes.filter(|&b| b > 0)
}

/// A card's name without the nominal size its box gives ("GeForce RTX 4090 24 GB" → "GeForce
/// RTX 4090"), so the only size shown is the driver's total beside it.
pub fn card_name(g: &Gpu) -> &'static str {
    let b = g.name.as_bytes();
    match g.name.strip_suffix(" GB").and_then(|n| b[..n.len()].iter().rposition(|&c| c == b' ')) {
        Some(i) => &g.name[..i],
        None => g.name,
    }
}

/// A card's total as `nvidia-smi` prints it: `143,771 MiB` (binary units) or `150,755 MB`.
pub fn card_capacity(bytes: u64, unit: ByteUnit) -> String {
    match unit {
        ByteUnit::Mib => format!("{} MiB", thousands(bytes >> 20)),
        ByteUnit::Mb => format!("{} MB", thousands(bytes / 1_000_000)),
    }
}

/// The GPU's name and its capacity with where that figure comes from, for "on H200 (143,771
/// MiB, nvidia-smi)"; a custom capacity is named `custom` and shown as typed.
pub fn gpu_label(gpu: &GpuChoice, capacity: u64, unit: ByteUnit, custom: &str) -> (String, String) {
    match gpu {
        GpuChoice::Listed(id) => match vramcalc_core::memory::device::gpu(id) {
            Some(g) => (card_name(g).to_string(), format!("{}, nvidia-smi", card_capacity(capacity, unit))),
            None => (id.clone(), format_bytes(capacity, unit)),
        },
        GpuChoice::Custom(_) => (custom.trim_end_matches('…').to_string(), format_bytes(capacity, unit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::memory::device::gpu;

    #[test]
    fn a_bare_number_is_gib() {
        assert_eq!(parse_capacity("8"), Some(8 << 30));
        assert_eq!(parse_capacity(" 1.5 "), Some(3 << 29));
        assert_eq!(parse_capacity("24GB"), Some(24_000_000_000));
        assert_eq!(parse_capacity("16000 MiB"), Some(16000 << 20));
        assert_eq!(parse_capacity("0"), None);
        assert_eq!(parse_capacity("-3"), None);
        assert_eq!(parse_capacity("lots"), None);
    }

    #[test]
    fn one_capacity_per_card() {
        let h200 = gpu("h200").unwrap();
        assert_eq!(card_name(h200), "H200");
        assert_eq!(card_capacity(h200.bytes, ByteUnit::Mib), "143,771 MiB");
        assert_eq!(card_name(gpu("rtx-4090").unwrap()), "GeForce RTX 4090");
        assert_eq!(card_name(gpu("a100-80gb").unwrap()), "A100");
    }
}
