//! The lazy route: what the app's own build of the core leaves out is computed by the lazily
//! loaded module ([`crate::extras`], the full core), asynchronously; everything else stays on the
//! fast synchronous path ([`crate::analysis`]), the first chart included.
//!
//! Routed now: models with attention, transformer or recurrent layers (core feature `sequence`,
//! about 4.5 KB gzipped: the first chart is a CNN) and with mixture-of-experts or multi-head
//! latent attention layers (feature `moe`, about 6.8 KB). Such a model's non-default preset, paste
//! or link loads the module anyway. The route is decided from the model and setup alone, never
//! from an error, so it is the same in the browser and in native tests (where cargo's feature
//! unification turns the features on for the app's core too).
//!
//! Answers arrive out of order when the module is still loading (every request waits for the same
//! fetch). [`Requests`] numbers them: only the answer to the newest request is shown.

use crate::analysis::Report;
use serde_json::{Map, Value};
use vramcalc_core::memory::breakdown::Breakdown;
use vramcalc_core::memory::device::DeviceTotal;
use vramcalc_core::memory::generate::GenerationReport;
use vramcalc_core::memory::simulate::{Phase, TimelinePoint};
use vramcalc_core::memory::LayerReport;
use vramcalc_core::resolve::LayerInfo;
use vramcalc_core::spec::{Layer, ModelSpec};
use vramcalc_core::whatif::{Trick, WhatIf};
use vramcalc_core::{Error, Estimate, Shape, TrainConfig};

/// Layer kinds the app's build does not lower (`crates/core`, features `sequence`, `moe` and
/// `seq2seq`): the ones it does not even parse (feature `typed-layers`).
pub const FULL_CORE_KINDS: &[&str] = Layer::DEFERRED_KINDS;

/// Whether `spec` under `config` needs the full core (the lazily loaded module): a layer kind
/// above, generate mode (feature `generate`), or any LLM setting (`llm`: fine-tuning, weight
/// formats, several GPUs; the app's build does not even type them, see `Model::llm`). Layers a
/// spec marks `"trainable": false` (kind `frozen`) freeze in the app's build too: they stay on the
/// fast path.
pub fn needs_full_core(spec: &ModelSpec, config: &TrainConfig, llm: &Map<String, Value>) -> bool {
    if config.mode == vramcalc_core::Mode::Generate || !llm.is_empty() {
        return true;
    }
    fn any(layers: &[Layer]) -> bool {
        layers.iter().any(|l| FULL_CORE_KINDS.contains(&l.kind()) || l.children().into_iter().any(|(_, c)| any(c)))
    }
    any(&spec.layers)
}

/// Numbers the lazy route's requests so that a newer request wins: an answer is accepted only if
/// no request was issued after its own.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Requests {
    issued: u64,
}

impl Requests {
    /// The number of a new request; every earlier request's answer is stale from now on.
    pub fn issue(&mut self) -> u64 {
        self.issued += 1;
        self.issued
    }

    /// Whether the answer to request `n` is the newest request's (the one to show).
    pub fn is_current(&self, n: u64) -> bool {
        n == self.issued
    }
}

/// A request as JSON, written field by field: the spec's serialiser to text is in the bundle
/// already (saved work), a JSON value type's is not. The LLM settings join the config (by the
/// core's serde names), the multi-GPU job stands beside it (`"dist"`).
pub fn request(spec: &ModelSpec, config: &TrainConfig, llm: &Map<String, Value>, extra: &str) -> String {
    let text = |v: Result<String, serde_json::Error>| v.unwrap_or_default();
    let mut config_json = text(serde_json::to_string(config));
    let mut dist = String::new();
    for (key, value) in llm {
        if key == "dist" {
            dist = format!(r#","dist":{value}"#);
        } else if config_json.pop() == Some('}') {
            config_json.push_str(&format!(r#","{key}":{value}}}"#));
        }
    }
    format!(r#"{{"spec":{},"config":{config_json}{dist}{extra}}}"#, text(serde_json::to_string(spec)))
}

/// The module's answer: `ok` and JSON, or `err` and the error's lines; a failed call (the module
/// could not be fetched) is an error naming the module.
fn answer(call: Result<String, String>) -> Result<Value, Error> {
    let text = call.map_err(Error::Input)?;
    match text.split_once('\n') {
        Some(("ok", json)) => serde_json::from_str(json).map_err(|e| Error::Parse(e.to_string())),
        Some(("err", e)) => Err(error_from_text(e)),
        _ => Err(Error::Parse(format!("unexpected answer from the module: {text:.80}"))),
    }
}

/// Something in the module's answer is not what the core writes.
fn malformed(what: &str) -> Error {
    Error::Parse(format!("the module's answer has no valid `{what}`"))
}

/// The core's [`Estimate`] read back from its JSON (the schema `vramcalc estimate --json`
/// writes) field by field, with the JSON value type the bundle already has: a derived
/// deserialiser of the estimate would cost the first load about 7 KB gzipped. A native test
/// checks that this reads back exactly what the core wrote.
pub fn estimate_from_json(v: &Value) -> Option<Estimate> {
    let n = |v: &Value, k: &str| v[k].as_u64();
    let n3 = |v: &Value| Some([v[0].as_u64()?, v[1].as_u64()?, v[2].as_u64()?]);
    let s = |v: &Value, k: &str| v[k].as_str().map(String::from);
    let b = &v["breakdown"];
    let d = &v["device"];
    let layers = v["layers"].as_array()?.iter().map(|l| {
        let shape = l["output_shape"].as_array()?.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>()?;
        let info = LayerInfo {
            path: s(l, "path")?,
            kind: s(l, "kind")?,
            depth: u32::try_from(n(l, "depth")?).ok()?,
            output_shape: Shape(shape),
            params: n(l, "params")?,
            activation_values: n(l, "activation_values")?,
            block: l["block"].as_bool()?,
            trainable_params: n(l, "trainable_params").unwrap_or(0),
            name: s(l, "name"),
        };
        Some(LayerReport { info, saved_bytes: n(l, "saved_bytes")? })
    });
    let timeline = v["timeline"].as_array()?.iter().map(|t| {
        Some(TimelinePoint {
            phase: phase(&t["phase"])?,
            layer: u32::try_from(n(t, "layer")?).ok()?,
            op: u32::try_from(n(t, "op")?).ok()?,
            bytes: n(t, "bytes")?,
        })
    });
    Some(Estimate {
        config: TrainConfig::deserialize(v["config"].clone()).ok()?,
        params: n(v, "params")?,
        trainable_params: n(v, "trainable_params").unwrap_or(0),
        quantised_base: serde_json::from_value(v["quantised_base"].clone()).ok().flatten(),
        param_bytes: n(v, "param_bytes")?,
        buffer_bytes: n(v, "buffer_bytes")?,
        optimizer_state_bytes: n(v, "optimizer_state_bytes")?,
        peak_bytes: n(v, "peak_bytes")?,
        peak_phase: phase(&v["peak_phase"])?,
        peak_at: s(v, "peak_at")?,
        breakdown: Breakdown {
            parameters: n(b, "parameters")?,
            buffers: n(b, "buffers")?,
            gradients: n(b, "gradients")?,
            optimizer_state: n(b, "optimizer_state")?,
            activations: n(b, "activations")?,
            temporaries: n(b, "temporaries")?,
            input: n(b, "input")?,
            frozen_parameters: n(b, "frozen_parameters").unwrap_or(0),
            adapter_parameters: n(b, "adapter_parameters").unwrap_or(0),
            weight_casts: n(b, "weight_casts").unwrap_or(0),
            kv_cache: n(b, "kv_cache").unwrap_or(0),
        },
        phase_peaks: n3(&v["phase_peaks"])?,
        device: DeviceTotal {
            allocated_rounded: n(d, "allocated_rounded")?,
            reserved: n(d, "reserved")?,
            cuda_context: n(d, "cuda_context")?,
            cublas_workspace: n(d, "cublas_workspace")?,
            total: n(d, "total")?,
        },
        device_total_bytes: n(v, "device_total_bytes")?,
        rule_of_thumb_bytes: n(v, "rule_of_thumb_bytes")?,
        layers: layers.collect::<Option<_>>()?,
        timeline: timeline.collect::<Option<_>>()?,
        generation: generation_from_json(v),
    })
}

/// The generation fields (flattened into the estimate's JSON; absent outside `Mode::Generate`).
fn generation_from_json(v: &Value) -> Option<GenerationReport> {
    let n = |k: &str| v[k].as_u64();
    let series = v["decode_series"].as_array()?.iter().map(|p| Some((p[0].as_u64()?, p[1].as_u64()?)));
    Some(GenerationReport {
        prompt_len: n("prompt_len")?,
        new_tokens: n("new_tokens")?,
        prefill_peak_bytes: n("prefill_peak_bytes")?,
        decode_peak_bytes: n("decode_peak_bytes")?,
        kv_cache_bytes: n("kv_cache_bytes")?,
        kv_cache_bytes_after_prefill: n("kv_cache_bytes_after_prefill")?,
        decode_series: series.collect::<Option<_>>()?,
    })
}

fn phase(v: &Value) -> Option<Phase> {
    [Phase::Forward, Phase::Backward, Phase::Optimizer].into_iter().find(|p| v.as_str() == Some(p.name()))
}

/// A what-if read back from the core's JSON (as [`estimate_from_json`]).
fn what_if_from_json(v: &Value) -> Option<WhatIf> {
    Some(WhatIf {
        trick: Trick::ALL.into_iter().find(|t| v["trick"].as_str() == Some(t.id()))?,
        config: TrainConfig::deserialize(v["config"].clone()).ok()?,
        peak: v["peak"].as_u64()?,
        device_total: v["device_total"].as_u64()?,
    })
}

/// The module's text form of the core's error (`crates/web-extras/src/analysis.rs`,
/// `error_text`: kind, path, layer kind, message) back into the error, so a layer error marks its
/// row as the app's own would.
pub fn error_from_text(text: &str) -> Error {
    let mut lines = text.splitn(4, '\n');
    let mut next = || lines.next().unwrap_or_default().to_string();
    let (kind, path, layer_kind, message) = (next(), next(), next(), next());
    match kind.as_str() {
        "layer" => Error::Layer { path, kind: layer_kind, message },
        "input" => Error::Input(message),
        "config" => Error::Config(message),
        "unknown_preset" => Error::UnknownPreset(message),
        "import" => Error::Import(message),
        "too_large" => Error::TooLarge(message),
        _ => Error::Parse(message),
    }
}

/// [`crate::analysis::analyse`] by the full core.
pub async fn analyse(spec: &ModelSpec, config: &TrainConfig, llm: &Map<String, Value>, capacity: u64) -> Result<Report, Error> {
    let v = answer(crate::extras::analyse(&request(spec, config, llm, &format!(r#","capacity":{capacity}"#))).await)?;
    let estimate = estimate_from_json(&v["estimate"]).ok_or_else(|| malformed("estimate"))?;
    let sweep = v["sweep"].as_array().and_then(|s| {
        s.iter().map(|p| Some((p[0].as_u64()?, p[1].as_u64()?, p[2].as_u64()?))).collect::<Option<Vec<_>>>()
    });
    Ok(Report { estimate, capacity, max_batch: v["max_batch"].as_u64(), sweep: sweep.ok_or_else(|| malformed("sweep"))? })
}

/// The what-ifs by the full core; `None` where the setup itself is rejected.
pub async fn what_ifs(spec: &ModelSpec, config: &TrainConfig, llm: &Map<String, Value>) -> Option<Vec<WhatIf>> {
    let v = answer(crate::extras::what_ifs(&request(spec, config, llm, "")).await).ok()?;
    v.as_array()?.iter().map(what_if_from_json).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extras::block_on;
    use vramcalc_core::presets;

    fn moe() -> ModelSpec {
        ModelSpec::from_json(
            r#"{"input":{"shape":[16,64]},"layers":[{"kind":"repeat","times":2,"body":[{"kind":"sparse_moe","hidden_size":64,"num_experts":4,"top_k":2,"intermediate_size":128}]}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn sequence_moe_and_mla_models_take_the_lazy_route_cnns_do_not() {
        let cfg = TrainConfig::default();
        assert!(needs_full_core(&moe(), &cfg, &Map::new()), "found inside a block");
        let mut mla = moe();
        mla.layers = vec![Layer::example("multi_head_latent_attention").unwrap()];
        assert!(needs_full_core(&mla, &cfg, &Map::new()));
        for id in ["resnet50", "vgg16", "inception_v3"] {
            assert!(!needs_full_core(&presets::build(id).unwrap(), &cfg, &Map::new()), "{id}: a CNN stays on the synchronous path");
        }
        for id in ["gpt2", "bert-base", "lstm-ptb"] {
            assert!(needs_full_core(&presets::build(id).unwrap(), &cfg, &Map::new()), "{id}");
        }
    }

    /// The web app's core is built without `moe`: a MoE model is estimated by the module, with the
    /// same figures the full core gives (what the CLI prints).
    #[test]
    fn the_lazy_route_gives_the_full_cores_report() {
        let spec = moe();
        let cfg = TrainConfig { batch: 3, ..Default::default() };
        let r = block_on(analyse(&spec, &cfg, &Map::new(), 1 << 30)).unwrap();
        let full = vramcalc_web_extras_reference(&spec, &cfg);
        assert_eq!(r.estimate, full);
        assert_eq!(r.capacity, 1 << 30);
        assert!(r.max_batch.is_some() && r.sweep.iter().any(|s| s.0 == 3));
        let w = block_on(what_ifs(&spec, &cfg, &Map::new())).unwrap();
        assert!(!w.is_empty());
    }

    /// What the full core computes natively (the CLI's figure).
    use vramcalc_core::memory::Prepared;
    fn vramcalc_web_extras_reference(spec: &ModelSpec, cfg: &TrainConfig) -> Estimate {
        let full = Prepared::new(spec, cfg).unwrap();
        const { assert!(vramcalc_core::layer::MOE_LOWERING, "native tests have the full core (the module's)") };
        full.estimate_at(cfg.batch).unwrap()
    }

    /// GPUs × strategy and fine-tuning, as the app keeps them (`Model::llm`, the core's serde
    /// JSON): the module's answer is rank 0's estimate under the strategy, what
    /// `vramcalc_core::distributed::estimate` gives (the CLI's `--gpus --strategy`), with the host
    /// memory offload keeps; a LoRA setup's trainable parameters are the CLI's.
    #[test]
    fn llm_settings_reach_the_full_core() {
        use vramcalc_core::distributed::{self, DistConfig, Offload, Strategy};
        let spec = presets::build("gpt2").unwrap();
        let cfg = TrainConfig { batch: 2, seq_len: Some(64), ..Default::default() };
        let dist = DistConfig { gpus: 4, strategy: Strategy::Zero3, offload: Offload::Optimizer, ..Default::default() };
        let mut llm = Map::new();
        llm.insert("dist".into(), serde_json::to_value(dist).unwrap());
        let r = block_on(analyse(&spec, &cfg, &llm, 80 << 30)).unwrap();
        let want = distributed::estimate(&spec, &cfg, &dist).unwrap();
        assert_eq!(r.estimate, want.estimate);
        let one = block_on(analyse(&spec, &cfg, &Map::new(), 80 << 30)).unwrap();
        assert!(r.estimate.peak_bytes < one.estimate.peak_bytes, "ZeRO-3 shards the states");
        let mut lora = Map::new();
        lora.insert("finetune".into(), serde_json::json!({ "method": "lora", "lora_r": 16 }));
        let r = block_on(analyse(&spec, &cfg, &lora, 80 << 30)).unwrap();
        let mut typed = cfg;
        typed.finetune = serde_json::from_value(lora["finetune"].clone()).unwrap();
        let want = vramcalc_core::estimate(&spec, &typed).unwrap();
        assert_eq!((r.estimate.trainable_params, r.estimate.peak_bytes), (want.trainable_params, want.peak_bytes));
        assert!(want.trainable_params < want.params / 100);
        assert!(needs_full_core(&presets::build("resnet18").unwrap(), &TrainConfig::default(), &lora));
    }

    #[test]
    fn errors_of_the_lazy_route_are_the_cores_errors() {
        let mut spec = moe();
        spec.input.shape = vec![16, 63];
        let e = block_on(analyse(&spec, &TrainConfig::default(), &Map::new(), 1 << 30)).unwrap_err();
        assert!(matches!(&e, Error::Layer { path, .. } if path.starts_with("layers[0]")), "{e:?}");
        let bad = TrainConfig { batch: 2, grad_accum: 4, ..Default::default() };
        assert!(matches!(block_on(analyse(&moe(), &bad, &Map::new(), 1 << 30)), Err(Error::Config(_))));
        assert_eq!(block_on(what_ifs(&moe(), &bad, &Map::new())), None);
        let layer = Error::Layer { path: "layers[2]".into(), kind: "linear".into(), message: "two\nlines".into() };
        for e in [Error::Input("i".into()), Error::TooLarge("t".into()), Error::Config("c".into()), layer] {
            assert_eq!(error_from_text(&vramcalc_web_extras::error_text(&e)), e);
        }
        assert!(matches!(answer(Err("could not load x".into())), Err(Error::Input(m)) if m.contains("could not load")));
        assert!(matches!(answer(Ok("nonsense".into())), Err(Error::Parse(_))));
    }

    /// The hand-written reader gives back exactly the core's estimate and what-ifs, for models
    /// with blocks, every phase and every field in use.
    #[test]
    fn estimates_and_what_ifs_read_back_exactly() {
        for (spec, cfg) in [
            (presets::build("resnet18").unwrap(), TrainConfig::default()),
            (presets::build("gpt2").unwrap(), TrainConfig { batch: 2, seq_len: Some(64), ..Default::default() }),
            (moe(), TrainConfig { batch: 5, grad_accum: 5, ..Default::default() }),
        ] {
            let est = vramcalc_core::estimate(&spec, &cfg).unwrap();
            assert_eq!(estimate_from_json(&serde_json::to_value(&est).unwrap()).as_ref(), Some(&est));
            let what_ifs = vramcalc_core::whatif::what_ifs(&spec, &cfg).unwrap();
            assert!(!what_ifs.is_empty());
            for w in what_ifs {
                assert_eq!(what_if_from_json(&serde_json::to_value(&w).unwrap()), Some(w));
            }
        }
        let mut v = serde_json::to_value(vramcalc_core::estimate(&moe(), &TrainConfig::default()).unwrap()).unwrap();
        v["layers"][0]["depth"] = Value::from("deep");
        assert_eq!(estimate_from_json(&v), None, "a malformed field is refused, not defaulted");
    }

    #[test]
    fn a_newer_request_wins_over_an_older_answer() {
        let mut r = Requests::default();
        let first = r.issue();
        let second = r.issue();
        // the module finishes loading: the first answer arrives first, and is dropped
        assert!(!r.is_current(first));
        assert!(r.is_current(second));
        let third = r.issue();
        assert!(!r.is_current(second), "an answer to an older request never replaces a newer one");
        assert!(r.is_current(third));
    }

}
