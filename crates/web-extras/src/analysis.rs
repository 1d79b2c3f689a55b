//! The full core behind the app's lazy route: models and settings the app's own build leaves out
//! (core feature `moe`: mixture-of-experts and multi-head latent attention; later fine-tuning,
//! generation and multi-GPU) are estimated here, with the same batch analysis the app computes
//! for the others (`src/analysis.rs`: estimate, largest batch that fits, batch sweep), and the
//! what-ifs.
//!
//! Requests are JSON (`{"spec", "config", "capacity"}`). An answer is `ok` and a JSON line, or
//! `err` and the core's [`Error`] as lines (kind, path, layer kind, message: [`error_text`]), so
//! the app shows it as it shows its own errors (a layer error marks its row, a setting error its
//! field) without a JSON value type in its bundle.

use serde_json::{json, Value};
use std::cell::RefCell;
use vramcalc_core::memory::{sweep_points, Prepared};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::distributed::{DistConfig, DistPrepared};
use vramcalc_core::{Error, TrainConfig};

/// The request's model, training setup and GPU capacity.
struct Request {
    spec: ModelSpec,
    config: TrainConfig,
    capacity: u64,
    /// The multi-GPU setup (absent: one GPU).
    dist: DistConfig,
}

fn request(json: &str) -> Result<Request, String> {
    let mut v: Value = serde_json::from_str(json).map_err(|e| format!("request: {e}"))?;
    let spec = serde_json::from_value(v["spec"].take()).map_err(|e| format!("request `spec`: {e}"))?;
    let config = serde_json::from_value(v["config"].take()).map_err(|e| format!("request `config`: {e}"))?;
    let capacity = v["capacity"].as_u64().unwrap_or(0);
    let dist = match v["dist"].take() {
        Value::Null => DistConfig::default(),
        d => serde_json::from_value(d).map_err(|e| format!("request `dist`: {e}"))?,
    };
    Ok(Request { spec, config, capacity, dist })
}

/// Setups kept per model, as the app's `PreparedCache` keeps them.
const KEPT: usize = 16;

/// The last model and its prepared setups.
type Cache = (Option<ModelSpec>, Vec<(TrainConfig, Prepared)>);

thread_local! {
    /// The last model and its resolved setups (batch left out), most recently used last: dragging
    /// the batch slider over a large MoE model resolves it once, and the what-ifs reuse it.
    static CACHE: RefCell<Cache> = const { RefCell::new((None, Vec::new())) };
}

/// `f` with the prepared model of `spec` under `config` (any batch), resolving it only when new.
fn with_prepared<T>(spec: &ModelSpec, config: &TrainConfig, f: impl FnOnce(&Prepared) -> Result<T, Error>) -> Result<T, Error> {
    let key = TrainConfig { batch: 0, ..*config };
    CACHE.with(|cache| {
        let (model, kept) = &mut *cache.borrow_mut();
        if model.as_ref() != Some(spec) {
            *model = Some(spec.clone());
            kept.clear();
        }
        match kept.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let entry = kept.remove(i);
                kept.push(entry);
            }
            None => {
                let p = Prepared::new(spec, config)?;
                if kept.len() >= KEPT {
                    kept.remove(0);
                }
                kept.push((key, p));
            }
        }
        match kept.last() {
            Some((_, p)) => f(p),
            None => Err(Error::Config("no prepared model".into())),
        }
    })
}

/// The estimate with its batch analysis: `{"estimate", "max_batch", "sweep": [[batch, peak,
/// device total], …]}`.
pub fn analyse(request_json: &str) -> Result<String, String> {
    let r = request(request_json)?;
    if !r.dist.is_single() {
        return Ok(answer_text(analyse_dist(&r)));
    }
    let answer = with_prepared(&r.spec, &r.config, |p| {
        let estimate = p.estimate_at(r.config.batch)?;
        let max_batch = p.max_batch(r.capacity);
        let sweep = p.sweep(&sweep_points(r.config.batch, max_batch));
        Ok(json!({ "estimate": estimate, "max_batch": max_batch, "sweep": sweep }))
    });
    Ok(answer_text(answer))
}

/// [`analyse`] for one rank of a multi-GPU job (`vramcalc_core::distributed`): the estimate is
/// rank 0's, with its `distributed` report (host memory for offload among it) flattened in.
fn analyse_dist(r: &Request) -> Result<Value, Error> {
    let p = DistPrepared::new(&r.spec, &r.config, &r.dist)?;
    let estimate = p.estimate_at(r.config.batch)?;
    let max_batch = p.max_batch(r.capacity);
    let sweep: Vec<_> = sweep_points(r.config.batch, max_batch).into_iter().map(|b| { let (x, d) = p.peak_at(b); (b, x, d) }).collect();
    Ok(json!({ "estimate": estimate, "max_batch": max_batch, "sweep": sweep }))
}

/// The what-ifs of the setup: `[{"trick", "config", "peak", "device_total"}, …]`.
pub fn what_ifs(request_json: &str) -> Result<String, String> {
    let r = request(request_json)?;
    let answer = with_prepared(&r.spec, &r.config, |p| p.check_batch(r.config.batch)).map(|()| {
        let list = vramcalc_core::whatif::what_ifs_with(&r.spec, &r.config, |cfg| {
            with_prepared(&r.spec, cfg, |p| {
                p.check_batch(cfg.batch)?;
                Ok(p.peak_at(cfg.batch))
            })
            .ok()
        });
        json!(list)
    });
    Ok(answer_text(answer))
}

/// `ok\n<json>` or `err\n<error_text>`.
fn answer_text(answer: Result<Value, Error>) -> String {
    match answer {
        Ok(v) => format!("ok\n{v}"),
        Err(e) => format!("err\n{}", error_text(&e)),
    }
}

/// The core's error as the app reads it back (`src/lazy.rs`, `error_from_text`): its kind, path
/// and layer kind (empty but for a layer error), and its message (the rest, newlines and all).
pub fn error_text(e: &Error) -> String {
    let (kind, message) = match e {
        Error::Layer { path, kind, message } => return format!("layer\n{path}\n{kind}\n{message}"),
        Error::Parse(m) => ("parse", m),
        Error::Input(m) => ("input", m),
        Error::Config(m) => ("config", m),
        Error::UnknownPreset(m) => ("unknown_preset", m),
        Error::Import(m) => ("import", m),
        Error::TooLarge(m) => ("too_large", m),
    };
    format!("{kind}\n\n\n{message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(spec: &ModelSpec, config: &TrainConfig, capacity: u64) -> String {
        json!({ "spec": spec, "config": config, "capacity": capacity }).to_string()
    }

    #[test]
    fn the_answer_is_the_cores_estimate_and_batch_analysis() {
        let spec = vramcalc_core::presets::build("resnet18").unwrap();
        for batch in [32, 7, 32] {
            let cfg = TrainConfig { batch, ..Default::default() };
            let v = ok(&analyse(&req(&spec, &cfg, 24 << 30)).unwrap());
            let p = Prepared::new(&spec, &cfg).unwrap();
            let est = p.estimate_at(batch).unwrap();
            assert_eq!(v["estimate"], serde_json::to_value(&est).unwrap());
            let mb = p.max_batch(24 << 30);
            assert_eq!(v["max_batch"], json!(mb));
            assert_eq!(v["sweep"], json!(p.sweep(&sweep_points(batch, mb))));
        }
    }

    /// With `dist`, the answer is rank 0's estimate with its distributed report, as
    /// `vramcalc_core::distributed::estimate` (the CLI's `--gpus --strategy`) gives it.
    #[test]
    fn a_multi_gpu_request_is_answered_for_rank_zero() {
        use vramcalc_core::distributed::{estimate, Strategy};
        let spec = vramcalc_core::presets::build("resnet18").unwrap();
        let cfg = TrainConfig { batch: 8, ..Default::default() };
        let dist = DistConfig { gpus: 8, strategy: Strategy::Zero2, ..Default::default() };
        let mut r: Value = serde_json::from_str(&req(&spec, &cfg, 24 << 30)).unwrap();
        r["dist"] = json!(dist);
        let v = ok(&analyse(&r.to_string()).unwrap());
        assert_eq!(v["estimate"], serde_json::to_value(estimate(&spec, &cfg, &dist).unwrap()).unwrap());
        assert_eq!(v["estimate"]["distributed"]["gpus"], 8);
        assert!(v["max_batch"].as_u64().is_some() && !v["sweep"].as_array().unwrap().is_empty());
        r["dist"] = json!({ "gpus": "eight" });
        assert!(analyse(&r.to_string()).unwrap_err().contains("request `dist`"));
    }

    #[test]
    fn errors_come_back_as_objects_naming_what_is_wrong() {
        let spec = vramcalc_core::presets::build("resnet18").unwrap();
        let bad = TrainConfig { batch: 2, grad_accum: 4, ..Default::default() };
        let a = analyse(&req(&spec, &bad, 1 << 30)).unwrap();
        assert!(a.starts_with("err\nconfig\n\n\ngradient accumulation"), "{a}");
        let mut broken = spec.clone();
        broken.input.shape = vec![5, 8, 8];
        let a = analyse(&req(&broken, &Default::default(), 1 << 30)).unwrap();
        assert!(a.starts_with("err\nlayer\nlayers["), "{a}");
        assert!(analyse("{").unwrap_err().contains("request"));
    }

    #[test]
    fn what_ifs_match_the_cores() {
        let spec = vramcalc_core::presets::build("bert-base").unwrap();
        let cfg = TrainConfig { batch: 8, ..Default::default() };
        let v = ok(&what_ifs(&req(&spec, &cfg, 0)).unwrap());
        let core = vramcalc_core::whatif::what_ifs(&spec, &cfg).unwrap();
        assert_eq!(v, serde_json::to_value(&core).unwrap());
    }

    fn ok(answer: &str) -> Value {
        let json = answer.strip_prefix("ok\n").unwrap_or_else(|| panic!("{answer}"));
        serde_json::from_str(json).unwrap()
    }
}
