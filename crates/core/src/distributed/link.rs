//! The multi-GPU settings in share links (`crate::share`, format v1): only what differs from
//! [`DistConfig::default`] (one GPU) is written, so links without these keys open as before.
//!
//! | key | field | values |
//! |---|---|---|
//! | `n` | `gpus` | a number ≥ 1 |
//! | `st` | `strategy` | `ddp` `zero1` `zero2` `zero3` `fsdp` `tp` |
//! | `tp` | `tp` | a number ≥ 1 |
//! | `bv` | `gradient_as_bucket_view` | `1` / `0` |
//! | `raf` | `reshard_after_forward` | `1` / `0` |
//! | `fpd` | `fsdp_param_dtype` | `bf16` `fp16` |
//! | `frd` | `fsdp_reduce_dtype` | `fp32` `bf16` |
//! | `off` | `offload` | `optimizer` `params` |
//! | `sp` | `sequence_parallel` | `1` / `0` |

use super::setup::{DistConfig, MpDtype, Offload, Strategy, MAX_GPUS};

/// The keys this module owns.
pub const KEYS: [&str; 9] = ["n", "st", "tp", "bv", "raf", "fpd", "frd", "off", "sp"];

/// `(key, value)` pairs for a link.
pub fn fields(d: &DistConfig) -> Vec<(&'static str, String)> {
    let z = DistConfig::default();
    let flag = |b: bool| (if b { "1" } else { "0" }).to_string();
    let mut out = Vec::new();
    if d.gpus != z.gpus {
        out.push(("n", d.gpus.to_string()));
    }
    if d.strategy != z.strategy {
        out.push(("st", d.strategy.name().to_string()));
    }
    if d.tp != z.tp {
        out.push(("tp", d.tp.to_string()));
    }
    if d.gradient_as_bucket_view != z.gradient_as_bucket_view {
        out.push(("bv", flag(d.gradient_as_bucket_view)));
    }
    if d.reshard_after_forward != z.reshard_after_forward {
        out.push(("raf", flag(d.reshard_after_forward)));
    }
    if let Some(p) = d.fsdp_param_dtype {
        out.push(("fpd", p.name().to_string()));
    }
    if let Some(r) = d.fsdp_reduce_dtype {
        out.push(("frd", r.name().to_string()));
    }
    if d.offload != z.offload {
        out.push(("off", d.offload.name().to_string()));
    }
    if d.sequence_parallel != z.sequence_parallel {
        out.push(("sp", flag(d.sequence_parallel)));
    }
    out
}

/// Reads one field into `d`; the error says what was expected.
pub fn set(d: &mut DistConfig, key: &str, text: &str) -> Result<(), String> {
    let flag = || match text {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err("expected 1 or 0".to_string()),
    };
    let count = || match text.parse::<u64>() {
        Ok(n) if (1..=MAX_GPUS).contains(&n) => Ok(n),
        _ => Err(format!("expected a number from 1 to {MAX_GPUS}")),
    };
    let one_of = |names: &[&str]| format!("expected one of {}", names.join(", "));
    match key {
        "n" => d.gpus = count()?,
        "tp" => d.tp = count()?,
        "st" => d.strategy = Strategy::parse(text).ok_or_else(|| one_of(&Strategy::ALL.iter().map(|s| s.name()).collect::<Vec<_>>()))?,
        "bv" => d.gradient_as_bucket_view = flag()?,
        "raf" => d.reshard_after_forward = flag()?,
        "fpd" => d.fsdp_param_dtype = Some(MpDtype::parse(text).filter(|p| *p != MpDtype::Fp32).ok_or_else(|| one_of(&["bf16", "fp16"]))?),
        "frd" => d.fsdp_reduce_dtype = Some(MpDtype::parse(text).ok_or_else(|| one_of(&["fp32", "bf16", "fp16"]))?),
        "sp" => d.sequence_parallel = flag()?,
        "off" => d.offload = Offload::parse(text).ok_or_else(|| one_of(&["none", "optimizer", "params"]))?,
        _ => return Err("not a multi-GPU setting".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_round_trips_and_one_gpu_writes_nothing() {
        assert!(fields(&DistConfig::default()).is_empty());
        let d = DistConfig {
            gpus: 16,
            strategy: Strategy::Fsdp,
            tp: 2,
            gradient_as_bucket_view: true,
            reshard_after_forward: false,
            fsdp_param_dtype: Some(MpDtype::Bf16),
            fsdp_reduce_dtype: Some(MpDtype::Fp32),
            offload: Offload::Params,
            sequence_parallel: true,
        };
        let f = fields(&d);
        assert_eq!(f.len(), KEYS.len());
        let mut back = DistConfig::default();
        for (k, v) in &f {
            set(&mut back, k, v).unwrap();
        }
        assert_eq!(back, d);
        assert!(set(&mut back, "n", "0").is_err());
        assert!(set(&mut back, "st", "zero4").is_err());
        assert!(set(&mut back, "sp", "yes").is_err());
    }
}
