use super::*;

/// `largest` equals a scan for every threshold, start and range, and stays within
/// `2·log2(range) + 2` evaluations.
#[test]
fn largest_equals_a_scan_in_logarithmic_evaluations() {
    for lo in [0u64, 1, 5] {
        for hi in [lo, lo + 1, lo + 7, lo + 100, lo + 1000] {
            for threshold in (lo.saturating_sub(1)..=hi + 1).step_by(((hi - lo) / 37).max(1) as usize) {
                for start in [lo, (lo + hi) / 2, hi, threshold.clamp(lo, hi)] {
                    let mut calls = 0u32;
                    let got = largest(lo, hi, start, |v| {
                        assert!((lo..=hi).contains(&v), "{v} outside {lo}..={hi}");
                        calls += 1;
                        Ok(v <= threshold && threshold >= lo)
                    })
                    .unwrap();
                    let want = (lo..=hi).rev().find(|&v| v <= threshold && threshold >= lo);
                    assert_eq!(got, want, "lo {lo} hi {hi} threshold {threshold} start {start}");
                    let bound = 2 * (64 - (hi - lo + 1).leading_zeros()) + 2;
                    assert!(calls <= bound, "{calls} calls > {bound}: lo {lo} hi {hi} threshold {threshold} start {start}");
                }
            }
        }
    }
    // the whole u64 range: no overflow
    assert_eq!(largest(1, u64::MAX, 1, |v| Ok(v <= 1 << 50)).unwrap(), Some(1 << 50));
    assert_eq!(largest(1, u64::MAX, 7, |_| Ok(true)).unwrap(), Some(u64::MAX));
    assert_eq!(largest(3, 2, 2, |_| Ok(true)).unwrap(), None);
}

#[test]
fn an_error_ends_the_search() {
    let r = largest(1, 100, 1, |v| if v > 10 { Err(Error::Config("boom".into())) } else { Ok(true) });
    assert!(r.is_err());
}

#[test]
fn variable_names_read_back() {
    for v in Variable::ALL {
        assert_eq!(Variable::parse(v.name()), Some(v));
        assert_eq!(serde_json::to_value(v).unwrap(), v.name());
    }
}

/// `largest_by` equals a scan on convex, concave, stepped and flat totals, with refused values
/// above a bound, from any start.
#[test]
fn largest_by_equals_a_scan_on_many_shapes() {
    let shapes: [fn(u64) -> u64; 5] = [
        |v| 1000 + 7 * v,
        |v| 500 + v * v / 3,
        |v| 100 + ((v as f64).sqrt() * 1000.0) as u64,
        |v| 4096 * (1 + (300 + 13 * v) / 4096),
        |v| if v < 50 { 10 } else { 10 + (v - 50) * 1000 },
    ];
    for (si, f) in shapes.iter().enumerate() {
        for refused_above in [u64::MAX, 400, 60] {
            for cap in [5, 10, 1200, 3000, 9000, 50_000, 2_000_000] {
                for start in [1, 2, 37, 500, 1000] {
                    let (lo, hi) = (1u64, 1000u64);
                    let m = |v: u64| (v <= refused_above).then(|| (f(v), f(v)));
                    let want = (lo..=hi).filter(|&v| m(v).is_some_and(|x| x.1 <= cap)).max();
                    let (got, seen) = largest_by(lo, hi, start, cap, |v| Ok(m(v))).unwrap();
                    assert_eq!(got, want, "shape {si} refused>{refused_above} cap {cap} start {start}");
                    assert!(seen.len() <= 40, "shape {si} cap {cap} start {start}: {} evaluations", seen.len());
                    assert!(seen.iter().all(|s| (lo..=hi).contains(&s.0)));
                }
            }
        }
    }
}

/// A staircase total over a smooth peak (the allocator's 2 MiB granules over allocated bytes):
/// the peaks predict, the totals decide; equal to a scan, in few evaluations.
#[test]
fn largest_by_equals_a_scan_on_a_staircase_over_a_smooth_peak() {
    let peak = |v: u64| 50_000 + 300 * v + v * v / 50;
    let total = |v: u64| 64 * 4096 * (peak(v) / 4096).div_ceil(64).max(1);
    let mut most = 0;
    for cap in (300_000..3_000_000).step_by(77_777) {
        for start in [1, 64, 999] {
            let want = (1..=1000u64).filter(|&v| total(v) <= cap).max();
            let (got, seen) = largest_by(1, 1000, start, cap, |v| Ok(Some((peak(v), total(v))))).unwrap();
            assert_eq!(got, want, "cap {cap} start {start}");
            most = most.max(seen.len());
        }
    }
    assert!(most <= 24, "{most} evaluations");
}
