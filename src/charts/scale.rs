//! Scales and "nice" byte ticks (at round MB or MiB figures, matching the unit the user chose).

use vramcalc_core::ByteUnit;

/// A linear map from a domain to a range (a degenerate domain maps everything to `r0`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear {
    pub d0: f64,
    pub d1: f64,
    pub r0: f64,
    pub r1: f64,
}

impl Linear {
    pub fn new((d0, d1): (f64, f64), (r0, r1): (f64, f64)) -> Linear {
        Linear { d0, d1, r0, r1 }
    }
    pub fn map(&self, v: f64) -> f64 {
        let span = self.d1 - self.d0;
        if span.abs() < f64::EPSILON || !span.is_finite() {
            return self.r0;
        }
        self.r0 + (v - self.d0) / span * (self.r1 - self.r0)
    }
}

/// A step of 1, 2 or 5 × 10^k that splits `max` into at most about `n` parts.
pub fn nice_step(max: f64, n: usize) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let raw = max / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let m = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// Byte ticks from 0 covering `max`: round numbers in the unit's powers (10^3k or 2^10k), at most
/// about `n` + 1 ticks. The last tick is ≥ `max` (the axis end).
pub fn byte_ticks(max: u64, n: usize, unit: ByteUnit) -> Vec<u64> {
    let base: f64 = match unit {
        ByteUnit::Mb => 1000.0,
        ByteUnit::Mib => 1024.0,
    };
    let max = max.max(1) as f64;
    let mut u = 1.0;
    while max / u >= base && u < base.powi(6) {
        u *= base;
    }
    let step = nice_step(max / u, n) * u;
    let count = (max / step).ceil().max(1.0) as usize;
    (0..=count.min(50)).map(|i| (i as f64 * step).round() as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_maps_and_survives_degenerate_domains() {
        let s = Linear::new((0.0, 10.0), (0.0, 100.0));
        assert_eq!(s.map(5.0), 50.0);
        let s = Linear::new((3.0, 3.0), (7.0, 100.0));
        assert_eq!(s.map(3.0), 7.0);
    }

    #[test]
    fn nice_byte_ticks() {
        let t = byte_ticks(24_000_000_000, 4, ByteUnit::Mb);
        assert_eq!(t, vec![0, 10_000_000_000, 20_000_000_000, 30_000_000_000]);
        let t = byte_ticks(3 << 30, 3, ByteUnit::Mib);
        assert_eq!(t, vec![0, 1 << 30, 2 << 30, 3 << 30]);
        assert!(byte_ticks(u64::MAX, 4, ByteUnit::Mb).len() <= 51);
        assert_eq!(byte_ticks(0, 4, ByteUnit::Mb)[0], 0);
        assert!(*byte_ticks(0, 4, ByteUnit::Mb).last().unwrap() >= 1);
    }
}
