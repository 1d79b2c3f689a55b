//! One rank of a multi-GPU job (`vramcalc_core::distributed`).
//!
//! Accuracy: `tests/data/fsdp.jsonl` is `shared/reference/llm/fsdp.jsonl` as it is (FSDP2 per-rank
//! records of `LlamaForCausalLM` h1024/l4, AdamW, batch 2, seq 512, measured with PyTorch's
//! `FSDPMemTracker` on a fake process group, torch 2.15; method in that folder's README, section C).

mod common;
use common::reference::{cases_from, rel_err};
use serde_json::Value;
use vramcalc_core::distributed::{self, DistConfig, MpDtype, Offload, Strategy};
use vramcalc_core::{ModelSpec, Phase, Precision, TrainConfig};

const FSDP: &str = include_str!("data/fsdp.jsonl");

fn dist_of(r: &Value) -> DistConfig {
    let d = &r["distributed"];
    let strategy = match d["strategy"].as_str().unwrap() {
        "fsdp2" => Strategy::Fsdp,
        "ddp" => Strategy::Ddp,
        "none" => Strategy::Ddp,
        s => panic!("unknown strategy {s}"),
    };
    let dt = |k: &str| d[k].as_str().map(|s| MpDtype::parse(s).unwrap());
    DistConfig {
        gpus: d["world_size"].as_u64().unwrap(),
        strategy,
        reshard_after_forward: d["reshard_after_forward"].as_bool().unwrap_or(true),
        gradient_as_bucket_view: d["gradient_as_bucket_view"].as_bool().unwrap_or(false),
        fsdp_param_dtype: dt("mp_param_dtype"),
        fsdp_reduce_dtype: dt("mp_reduce_dtype"),
        ..DistConfig::default()
    }
}

/// Every record within 3 %, the median within 1 %; the peak's phase right.
#[test]
fn fsdp2_ddp_and_baseline_records_per_rank() {
    let cases = cases_from(FSDP);
    let records: Vec<Value> = FSDP.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(records.len() >= 9);
    let mut errs = Vec::new();
    let mut failures = Vec::new();
    for (c, r) in cases.iter().zip(&records) {
        let d = dist_of(r);
        let e = distributed::estimate(&c.spec, &c.config, &d).unwrap();
        let err = rel_err(e.estimate.peak_bytes, c.measured);
        let line = format!(
            "{} W={} raf={} mp={:?}: est {} measured {} ({:+.2} %), {} vs {}",
            d.strategy.name(), d.gpus, d.reshard_after_forward, d.fsdp_param_dtype, e.estimate.peak_bytes, c.measured, err * 100.0,
            e.estimate.peak_phase.name(), c.measured_phase
        );
        eprintln!("{line}");
        if err.abs() > 0.03 || e.estimate.peak_phase.name() != c.measured_phase {
            failures.push(line);
        }
        errs.push(err.abs());
    }
    errs.sort_by(f64::total_cmp);
    let median = errs[errs.len() / 2];
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(median <= 0.01, "median error {:.3} %", median * 100.0);
}

fn llama(json: &str, layers: Option<u64>) -> ModelSpec {
    let mut v: serde_json::Map<String, Value> = serde_json::from_str(json).unwrap();
    if let Some(n) = layers {
        v.insert("num_hidden_layers".into(), n.into());
    }
    vramcalc_core::import::hf::from_config(&v).unwrap()
}

const LLAMA_8B: &str = include_str!("../../../examples/hf/llama-3.1-8b.config.json");

fn bf16(batch: u64, seq: u64) -> TrainConfig {
    TrainConfig { batch, seq_len: Some(seq), precision: Precision::Bf16, ..TrainConfig::default() }
}

/// DDP (world size 2, the records' model): the reducer's buckets add one gradient's worth at the
/// peak (the start of backward, where `set_to_none` gradients do not exist yet), with and without
/// `gradient_as_bucket_view` — the finding of `shared/reference/llm/README.md` section C, whose
/// DDP records are held out of the shared file.
#[test]
fn ddp_buckets_add_one_gradient_and_bucket_views_do_not_move_the_peak() {
    let cases = cases_from(FSDP);
    let base = cases.iter().find(|c| c.measured_phase == "backward").unwrap();
    let single = vramcalc_core::estimate(&base.spec, &base.config).unwrap();
    for view in [false, true] {
        let d = DistConfig { gpus: 2, gradient_as_bucket_view: view, ..DistConfig::default() };
        let e = distributed::estimate(&base.spec, &base.config, &d).unwrap();
        let rep = e.distributed.unwrap();
        assert_eq!(rep.breakdown.gradient_buckets, single.param_bytes, "view {view}");
        assert_eq!(e.estimate.peak_bytes, single.peak_bytes + single.param_bytes, "view {view}");
        assert_eq!(e.estimate.peak_phase.name(), "backward");
    }
    // the optimizer step: separate `.grad`s and buckets, or the buckets alone
    let ms = |view| distributed::model_states(&base.spec, &base.config, &DistConfig { gpus: 2, gradient_as_bucket_view: view, ..DistConfig::default() }).unwrap().unwrap();
    assert_eq!(ms(false).gradients - ms(true).gradients, single.param_bytes);
}

/// DeepSpeed's own estimators (`deepspeed/runtime/zero/stage_1_and_2.py`:
/// `estimate_zero2_model_states_mem_needs`; `deepspeed/runtime/zero/stage3.py`:
/// `estimate_zero3_model_states_mem_needs`), transcribed as the oracle; `additional_buffer_factor`
/// only scales their CPU figure. Returns the GPU bytes.
fn ds_zero2_gpu(total: u64, gpus: u64, cpu_offload: bool) -> u64 {
    if cpu_offload {
        2 * total
    } else {
        4 * total + (16 * total as u128 / gpus as u128) as u64
    }
}

fn ds_zero3_gpu(total: u64, largest_layer: u64, gpus: u64, cpu_offload: bool, cpu_offload_params: bool) -> u64 {
    let largest = 4 * largest_layer;
    match (cpu_offload, cpu_offload_params) {
        (true, true) => largest,
        (true, false) => largest + (2 * total as u128 / gpus as u128) as u64,
        _ => largest + (18 * total as u128 / gpus as u128) as u64,
    }
}

/// Our model states against DeepSpeed's for a Llama-3.1-8B-shaped model in bf16 with AdamW, where
/// the mechanisms agree; each difference is named (README, "More than one GPU"):
/// - ZeRO-1: equal (whole bf16 parameters and gradients, 16 bytes per partition element: fp32
///   master, Adam's two moments, the step's fp32 gradient).
/// - ZeRO-2: their `4Ψ` keeps whole bf16 gradients; DeepSpeed reduces them in 5e8-element
///   buckets during backward and keeps this rank's partition, `2Ψ/N`, which we count instead.
/// - ZeRO-3: their `18Ψ/N` is our bf16 parameter partition plus the 16 bytes; we add the bf16
///   gradient partition buffer (`2Ψ/N`, allocated at start by stage3.py) and whole parameters under
///   `stage3_param_persistence_threshold`; their `4 × largest layer` (gathered parameters and
///   gradients) is, in ours, part of the step's peak rather than of the model states.
///
/// The 4-byte Adam `step` tensor and the rounding of `Ψ/N` up make ours a few bytes larger.
#[test]
fn zero_model_states_agree_with_deepspeeds_estimators() {
    let spec = llama(LLAMA_8B, None);
    let c = bf16(1, 512);
    let single = vramcalc_core::estimate(&spec, &TrainConfig { batch: 1, ..c }).unwrap();
    let psi = single.params;
    assert_eq!(psi, 8_030_261_248);
    let largest_layer = 128_256 * 4096; // embed_tokens / lm_head: the largest module
    let near = |ours: u64, theirs: u64, what: &str| {
        assert!(ours >= theirs && ours - theirs <= 64, "{what}: ours {ours}, DeepSpeed {theirs}");
    };
    for n in [2u64, 4, 8, 16, 64] {
        let ms = |strategy, offload| {
            distributed::model_states(&spec, &c, &DistConfig { gpus: n, strategy, offload, ..DistConfig::default() }).unwrap().unwrap()
        };
        let z1 = ms(Strategy::Zero1, Offload::None);
        near(z1.gpu(), ds_zero2_gpu(psi, n, false), &format!("zero1 N={n}"));
        let z2 = ms(Strategy::Zero2, Offload::None);
        assert_eq!(z2.parameters, 2 * psi);
        assert_eq!(z2.gradients, 2 * psi.div_ceil(n));
        near(z2.gpu() + 2 * psi - z2.gradients, ds_zero2_gpu(psi, n, false), &format!("zero2 N={n}"));
        let z2o = ms(Strategy::Zero2, Offload::Optimizer);
        assert_eq!(z2o.gpu(), ds_zero2_gpu(psi, n, true), "zero2 offload N={n}");
        let z3 = ms(Strategy::Zero3, Offload::None);
        // whole on every rank (`ds_persist`), and not in the partition of the rest
        let persistent = ms(Strategy::Zero3, Offload::Params).gpu();
        assert!(persistent < 2 * psi / 1000, "persistent parameters {persistent}");
        assert_eq!(z3.parameters, persistent + (2 * psi - persistent).div_ceil(n));
        // DeepSpeed's estimator partitions every parameter: ours plus the persistent ones' share
        near(z3.parameters - persistent + persistent.div_ceil(n) + z3.optimizer, ds_zero3_gpu(psi, largest_layer, n, false, false) - 4 * largest_layer, &format!("zero3 N={n}"));
        assert_eq!(z3.gradients, 2 * psi.div_ceil(n));
        let z3o = ms(Strategy::Zero3, Offload::Optimizer);
        near(z3o.gpu() - persistent + persistent.div_ceil(n), ds_zero3_gpu(psi, largest_layer, n, true, false) - 4 * largest_layer, &format!("zero3 offload optimizer N={n}"));
        let z3p = ms(Strategy::Zero3, Offload::Params);
        assert_eq!(z3p.gpu(), persistent, "zero3 offload params N={n}: only the persistent parameters stay");
        assert!(z3p.host > z3o.host);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Model states per rank never grow with N for ZeRO-3 and FSDP (shards are `ceil(dim0 / N)`).
    #[test]
    fn sharded_model_states_never_rise_with_gpus(hidden in 1u64..6, layers in 1u64..4, n1 in 2u64..40, extra in 0u64..40, fsdp in proptest::bool::ANY) {
        let spec = tiny(hidden * 64, layers);
        let strategy = if fsdp { Strategy::Fsdp } else { Strategy::Zero3 };
        let c = TrainConfig { batch: 1, seq_len: Some(16), ..TrainConfig::default() };
        let ms = |n| distributed::model_states(&spec, &c, &DistConfig { gpus: n, strategy, ..DistConfig::default() }).unwrap().unwrap().gpu();
        let (a, b) = (ms(n1), ms(n1 + extra));
        proptest::prop_assert!(b <= a, "{} at N={}, {} at N={}", a, n1, b, n1 + extra);
    }

    /// One GPU is today's estimate whatever the strategy.
    #[test]
    fn one_gpu_is_the_single_gpu_estimate(hidden in 1u64..6, layers in 1u64..4, batch in 1u64..5, s in 0usize..6) {
        let spec = tiny(hidden * 64, layers);
        let strategy = Strategy::ALL[s];
        let c = TrainConfig { batch, seq_len: Some(32), ..TrainConfig::default() };
        let e = distributed::estimate(&spec, &c, &DistConfig { gpus: 1, strategy, ..DistConfig::default() }).unwrap();
        proptest::prop_assert_eq!(e.estimate, vramcalc_core::estimate(&spec, &c).unwrap());
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Every setting that goes together (offload with ZeRO, mixed precision with FSDP on fp32
    /// parameters, TP dividing the GPUs and the heads, sequence parallelism with TP) is an estimate keeping the invariants: the
    /// breakdown sums to the peak, gathered parameters and shards never exceed the model (but for
    /// FSDP's padding), the peak holds at least the parameters on the GPU; and it never panics.
    #[test]
    fn every_valid_setting_is_an_estimate_with_its_invariants(s in 0usize..6, dp in 1u64..9, tp_log in 0u32..3, off in 0usize..3,
        mp in 0usize..3, raf in proptest::bool::ANY, view in proptest::bool::ANY, prec in 0usize..3, accum in 1u64..3, ckpt in proptest::bool::ANY,
        sp in proptest::bool::ANY) {
        let spec = tiny(256, 2);
        let strategy = Strategy::ALL[s];
        let precision = [Precision::Fp32, Precision::Bf16, Precision::AmpBf16][prec];
        let fsdp_mp = strategy == Strategy::Fsdp && precision == Precision::Fp32;
        let zero = matches!(strategy, Strategy::Zero1 | Strategy::Zero2 | Strategy::Zero3);
        // `--strategy tp` with `--tp 1` means every GPU is a TP rank
        let tp = if strategy == Strategy::Tp { 2u64 << tp_log.min(1) } else { 1u64 << tp_log };
        let c = TrainConfig { batch: 4, grad_accum: accum, checkpointing: ckpt, seq_len: Some(32), precision, ..TrainConfig::default() };
        let d = DistConfig {
            gpus: dp * tp, strategy, tp, gradient_as_bucket_view: view, reshard_after_forward: raf,
            fsdp_param_dtype: if fsdp_mp { [None, Some(MpDtype::Bf16), Some(MpDtype::Fp16)][mp] } else { None },
            fsdp_reduce_dtype: if fsdp_mp { [None, Some(MpDtype::Fp32), Some(MpDtype::Bf16)][mp] } else { None },
            offload: match (zero, Offload::ALL[off]) {
                (true, Offload::Params) if strategy != Strategy::Zero3 => Offload::Optimizer,
                (true, o) => o,
                _ => Offload::None,
            },
            sequence_parallel: sp && (strategy == Strategy::Tp || tp > 1),
        };
        let e = distributed::estimate(&spec, &c, &d).unwrap_or_else(|e| panic!("{d:?} {c:?}: {e}"));
        let est = &e.estimate;
        proptest::prop_assert_eq!(est.breakdown.total(), est.peak_bytes);
        if let Some(r) = &e.distributed {
            let b = r.breakdown;
            // FSDP gathers dim 0 padded to N equal chunks (here < 5 % of the model)
            let model = est.param_bytes.max(est.params * 4);
            let model = model + model / 20;
            proptest::prop_assert!(b.unsharded_parameters <= model, "{:?} {}", b, model);
            proptest::prop_assert!(b.sharded_parameters <= model);
        }
        if let Some(ms) = distributed::model_states(&spec, &c, &d).unwrap() {
            proptest::prop_assert!(ms.parameters <= est.peak_bytes);
        }
    }
}

fn tiny(hidden: u64, layers: u64) -> ModelSpec {
    let v = serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
        "num_attention_heads": hidden / 64, "num_key_value_heads": 1, "intermediate_size": hidden * 3 + 8, "vocab_size": 1001, "tie_word_embeddings": false});
    vramcalc_core::import::hf::from_config(v.as_object().unwrap()).unwrap()
}

/// A GPT-style layer as Korthikanti et al. (2022), "Reducing Activation Recomputation in Large
/// Transformer Models", section 4 count it: pre-LayerNorm, GELU MLP of 4h, dropout after the
/// attention probabilities and after both projections, 16-bit activations, eager attention.
fn gpt(h: u64, a: u64, layers: u64, s: u64, vocab: u64) -> ModelSpec {
    let v = serde_json::json!({"version": 1, "name": "gpt", "input": {"shape": [s], "dtype": "int64", "vocab_size": vocab},
        "layers": [
            {"kind": "embedding", "num_embeddings": vocab, "embedding_dim": h},
            {"kind": "repeat", "times": layers, "body": [{"kind": "transformer_decoder_layer", "d_model": h, "nhead": a, "dim_feedforward": 4 * h,
                "dropout": 0.1, "activation": "gelu", "layer_norm_eps": 1e-5, "norm_first": true, "bias": true}]},
            {"kind": "layer_norm", "normalized_shape": h},
            {"kind": "linear", "in_features": h, "out_features": vocab, "bias": false}],
        "loss": "causal_lm"});
    ModelSpec::from_json(&v.to_string()).unwrap()
}

/// Per-layer activations of tensor parallelism t come from simulating each rank's split layer;
/// they are checked against Korthikanti et al.'s per-layer formula (their eq. 2, without sequence
/// parallelism): `s·b·h·(10 + 24/t + 5·a·s/(h·t))` bytes. The one difference: each LayerNorm
/// also saves its per-row mean and rstd (fp32, `s·b·4` bytes each), which they leave out. The
/// rest agrees term by term: Q and K copies for `QKᵀ` (the `transpose().contiguous()` copies),
/// V, softmax output, a 1-byte dropout mask and the dropped probabilities, the inputs of the
/// three projections and of GELU; the attention scale and residual adds save nothing. The split
/// part (`24/t` and the attention term) divides; the replicated `10·s·b·h` (LayerNorm inputs,
/// the QKV and FC1 inputs, two dropout masks) does not.
#[test]
fn tensor_parallel_activations_follow_korthikanti() {
    let (h, a, s, b) = (1024u64, 16u64, 1024u64, 2u64);
    let c = TrainConfig { batch: b, seq_len: Some(s), precision: Precision::Fp16, attention: vramcalc_core::AttentionImpl::Eager, ..TrainConfig::default() };
    // one more layer: what the forward's peak (the end of forward) gains, less its parameters
    // and optimizer state, is what one layer keeps for backward
    let per_layer = |t: u64| -> f64 {
        let at = |layers| {
            let d = DistConfig { gpus: t, strategy: Strategy::Tp, ..DistConfig::default() };
            let e = distributed::estimate(&gpt(h, a, layers, s, 32000), &c, &d).unwrap().estimate;
            e.phase_peaks[0] as f64 - e.param_bytes as f64 - e.optimizer_state_bytes as f64
        };
        at(2) - at(1)
    };
    let sbh = (s * b * h) as f64;
    let theirs = |t: u64| sbh * (10.0 + 24.0 / t as f64 + 5.0 * (a * s) as f64 / (h * t) as f64);
    let stats = 2.0 * 2.0 * (s * b * 4) as f64; // two LayerNorms' mean and rstd
    for t in [1u64, 2, 4, 8] {
        let ours = per_layer(t);
        let err = (ours - stats - theirs(t)) / theirs(t);
        eprintln!("t={t}: ours {ours} (less LayerNorm stats {}), Korthikanti {} ({:+.2} %)", ours - stats, theirs(t), err * 100.0);
        assert!(err.abs() < 0.001, "t={t}: {:+.2} %", err * 100.0);
    }
    // what the split saves from t=1 to t=2 is their `12·s·b·h + 2.5·a·s²·b`
    let saved = per_layer(1) - per_layer(2);
    let expected = theirs(1) - theirs(2);
    assert!((saved - expected).abs() / expected < 0.01, "saved {saved}, expected {expected}");
}

/// Megatron's sequence parallelism (`--sequence-parallel`, `layer/seq_parallel.rs`) on the same
/// layer: the per-layer activations come from simulating the rank's ops and are checked against
/// Korthikanti et al.'s formula with sequence parallelism (their section 4.2.2):
/// `s·b·h·(34/t + 5·a·s/(h·t))` bytes. Now every term divides: the LayerNorm inputs, the saved
/// (un-gathered) inputs of the column-parallel QKV and FC1 and the two dropout masks are `s/t`
/// tokens. The one difference is again the LayerNorms' fp32 mean and rstd, now of `s/t` rows:
/// `2 · 2 · (s/t)·b·4` bytes. The all-gather buffer the column-parallel linears share
/// (`get_global_memory_buffer()`, `s·b·h` 16-bit elements) is per model, not per layer, so the
/// two-layer minus one-layer difference leaves it out; it is checked once, in the one-layer peak.
#[test]
fn sequence_parallel_activations_follow_korthikanti() {
    let (h, a, s, b) = (1024u64, 16u64, 1024u64, 2u64);
    let c = TrainConfig { batch: b, seq_len: Some(s), precision: Precision::Fp16, attention: vramcalc_core::AttentionImpl::Eager, ..TrainConfig::default() };
    let est = |t: u64, layers: u64| {
        let d = DistConfig { gpus: t, strategy: Strategy::Tp, sequence_parallel: true, ..DistConfig::default() };
        distributed::estimate(&gpt(h, a, layers, s, 32000), &c, &d).unwrap()
    };
    let kept = |e: &distributed::DistEstimate| {
        let e = &e.estimate;
        e.phase_peaks[0] as f64 - e.param_bytes as f64 - e.optimizer_state_bytes as f64
    };
    let sbh = (s * b * h) as f64;
    for t in [2u64, 4, 8] {
        let one = est(t, 1);
        let ours = kept(&est(t, 2)) - kept(&one);
        let theirs = sbh * (34.0 / t as f64 + 5.0 * (a * s) as f64 / (h * t) as f64);
        let stats = 2.0 * 2.0 * (s / t * b * 4) as f64;
        let err = (ours - stats - theirs) / theirs;
        eprintln!("t={t}: ours {ours} (less LayerNorm stats {}), Korthikanti {theirs} ({:+.3} %)", ours - stats, err * 100.0);
        assert!(err.abs() < 0.001, "t={t}: {:+.3} %", err * 100.0);
        // the gather buffer: once per model, in every sample of the step, so in the peak
        let buffer = s * b * h * 2;
        assert_eq!(one.estimate.breakdown.buffers, buffer, "t={t}");
        let rep = one.distributed.unwrap();
        assert!(rep.sequence_parallel);
        assert_eq!(rep.breakdown.all_gather_buffers, buffer, "t={t}");
    }
}

/// Sequence parallelism against plain tensor parallelism of the same degree (Llama-style models):
/// where the peak holds activations (forward or backward) it is lower; where it is the optimizer
/// step, after the activations are gone, it is higher by exactly the gather buffer, which Megatron
/// never frees (`GlobalMemoryBuffer` in `megatron/core/utils.py`). So it never costs more than
/// that buffer. Without tensor parallelism it is refused, not silently ignored.
#[test]
fn sequence_parallel_lowers_activation_peaks_and_costs_at_most_its_buffer() {
    for (hidden, layers) in [(256u64, 1u64), (256, 3), (512, 2)] {
        let spec = tiny(hidden, layers);
        for t in [2u64, 4] {
            for (batch, seq, precision, ckpt) in [(1u64, 64u64, Precision::Bf16, false), (4, 256, Precision::Fp32, false), (2, 128, Precision::AmpBf16, true)] {
                let c = TrainConfig { batch, seq_len: Some(seq), precision, checkpointing: ckpt, ..TrainConfig::default() };
                let tp = DistConfig { gpus: t, strategy: Strategy::Tp, ..DistConfig::default() };
                let plain = distributed::estimate(&spec, &c, &tp).unwrap().estimate;
                let split = distributed::estimate(&spec, &c, &DistConfig { sequence_parallel: true, ..tp }).unwrap().estimate;
                let what = format!("h{hidden} l{layers} t{t} b{batch} s{seq} {precision:?} ckpt {ckpt}");
                let buffer = split.buffer_bytes;
                assert_eq!(buffer, batch * seq * hidden * if precision == Precision::Bf16 { 2 } else { 4 }, "{what}");
                assert!(split.peak_bytes <= plain.peak_bytes + buffer, "{what}: {} > {} + {buffer}", split.peak_bytes, plain.peak_bytes);
                match (plain.peak_phase, split.peak_phase) {
                    (Phase::Optimizer, Phase::Optimizer) => assert_eq!(split.peak_bytes, plain.peak_bytes + buffer, "{what}"),
                    (Phase::Optimizer, _) => panic!("{what}: plain TP peaks in the optimizer step, SP in {:?}", split.peak_phase),
                    _ => assert!(split.peak_bytes < plain.peak_bytes, "{what}: {} ≥ {}", split.peak_bytes, plain.peak_bytes),
                }
            }
        }
    }
    let spec = tiny(256, 1);
    let c = TrainConfig { batch: 1, seq_len: Some(64), ..TrainConfig::default() };
    for d in [
        DistConfig { gpus: 1, sequence_parallel: true, ..DistConfig::default() },
        DistConfig { gpus: 4, strategy: Strategy::Fsdp, sequence_parallel: true, ..DistConfig::default() },
    ] {
        let e = distributed::estimate(&spec, &c, &d).unwrap_err().to_string();
        assert!(e.contains("--sequence-parallel needs tensor parallelism"), "{e}");
    }
    // settings it is not modelled with name themselves
    let lora = TrainConfig { finetune: vramcalc_core::finetune::FineTune { method: vramcalc_core::finetune::Method::Lora, ..Default::default() }, ..c };
    let d = DistConfig { gpus: 2, strategy: Strategy::Tp, sequence_parallel: true, ..DistConfig::default() };
    let e = distributed::estimate(&spec, &lora, &d).unwrap_err().to_string();
    assert!(e.contains("LoRA"), "{e}");
    // a sequence that does not split over the ranks: Megatron's reduce-scatter asserts it divides
    let odd = TrainConfig { seq_len: Some(63), ..c };
    let e = distributed::estimate(&spec, &odd, &d).unwrap_err().to_string();
    assert!(e.contains("does not split over --tp 2"), "{e}");
}

/// Inside the split region only what Megatron's sequence parallelism is modelled for runs; any
/// other layer is an error that names it (its path and kind), never a silent approximation.
#[test]
fn sequence_parallel_names_the_layer_it_does_not_model() {
    let c = TrainConfig { batch: 1, seq_len: Some(64), ..TrainConfig::default() };
    let d = DistConfig { gpus: 2, strategy: Strategy::Tp, sequence_parallel: true, ..DistConfig::default() };
    // a mixture-of-experts decoder (transformers' Mixtral, scaled down)
    let mut v: serde_json::Map<String, Value> = serde_json::from_str(include_str!("data/hf/mixtral.config.json")).unwrap();
    for (k, n) in [("num_hidden_layers", 1u64), ("hidden_size", 256), ("intermediate_size", 512), ("num_attention_heads", 4), ("num_key_value_heads", 2), ("vocab_size", 1024)] {
        v.insert(k.into(), n.into());
    }
    let moe = vramcalc_core::import::hf::from_config(&v).unwrap();
    let e = distributed::estimate(&moe, &c, &d).unwrap_err().to_string();
    // its decoder layer is a residual block around `multihead_attention`, then one around `sparse_moe`
    assert!(e.contains("layers[1].body#0[0] (residual): sequence parallelism") && e.contains("not `residual`"), "{e}");
    // a layer the region does not model, by path and kind
    let mut spec = serde_json::to_value(tiny(256, 1)).unwrap();
    let layers = spec["layers"].as_array_mut().unwrap();
    layers.insert(2, serde_json::json!({"kind": "gelu"}));
    let spec = ModelSpec::from_json(&spec.to_string()).unwrap();
    let e = distributed::estimate(&spec, &c, &d).unwrap_err().to_string();
    assert!(e.contains("layers[2] (gelu)") && e.contains("not `gelu`"), "{e}");
    // plain tensor parallelism still estimates it
    assert!(distributed::estimate(&spec, &c, &DistConfig { sequence_parallel: false, ..d }).is_ok());
    // learned positions are added on the whole sequence before the split (GPT-2), as in
    // Megatron's `LanguageModelEmbedding`; inside the region they are not modelled
    let gpt2 = vramcalc_core::presets::build("gpt2").unwrap();
    let (plain, split) = (distributed::estimate(&gpt2, &c, &DistConfig { sequence_parallel: false, ..d }).unwrap(), distributed::estimate(&gpt2, &c, &d).unwrap());
    let saved = |e: &distributed::DistEstimate| e.estimate.layers.iter().filter(|l| l.info.depth == 0).map(|l| l.saved_bytes).sum::<u64>();
    assert!(saved(&split) < saved(&plain), "{} ≥ {}", saved(&split), saved(&plain));
    let mut spec = serde_json::to_value(&gpt2).unwrap();
    let pos = spec["layers"][1].clone();
    assert_eq!(pos["kind"], "positional_embedding");
    spec["layers"].as_array_mut().unwrap().insert(4, pos);
    let e = distributed::estimate(&ModelSpec::from_json(&spec.to_string()).unwrap(), &c, &d).unwrap_err().to_string();
    assert!(e.contains("layers[4] (positional_embedding)"), "{e}");
}

/// The combinations people run: FSDP × TP (2-D), ZeRO-3 with offload, DDP with gradient
/// accumulation and checkpointing.
#[test]
fn combinations() {
    let spec = tiny(512, 4);
    let c = TrainConfig { batch: 4, seq_len: Some(256), ..TrainConfig::default() };
    let est = |c: &TrainConfig, d: DistConfig| distributed::estimate(&spec, c, &d).unwrap();
    // FSDP × TP: TP splits the layers' activations; both shard the model states over 8 ranks
    let fsdp = DistConfig { gpus: 8, strategy: Strategy::Fsdp, ..DistConfig::default() };
    let two_d = DistConfig { tp: 2, ..fsdp };
    let (a, b) = (est(&c, fsdp), est(&c, two_d));
    assert!(b.estimate.breakdown.activations < a.estimate.breakdown.activations);
    let rep = b.distributed.unwrap();
    assert_eq!((rep.data_parallel, rep.tensor_parallel), (4, 2));
    let ms = |d| distributed::model_states(&spec, &c, &d).unwrap().unwrap();
    let (ma, mb) = (ms(fsdp), ms(two_d));
    assert!(mb.gpu() <= ma.gpu() * 11 / 10, "{mb:?} vs {ma:?}");
    // ZeRO-3 + offload: less on the GPU, the rest in host memory
    let z3 = DistConfig { gpus: 8, strategy: Strategy::Zero3, ..DistConfig::default() };
    let half = TrainConfig { precision: Precision::Bf16, ..c };
    for off in [Offload::Optimizer, Offload::Params] {
        let (on, off_) = (est(&half, z3), est(&half, DistConfig { offload: off, ..z3 }));
        assert!(off_.estimate.peak_bytes < on.estimate.peak_bytes, "{off:?}");
        assert!(off_.distributed.unwrap().host_bytes > 0);
        assert_eq!(on.distributed.unwrap().host_bytes, 0);
    }
    // DDP with accumulation and checkpointing: the buckets are one more gradient's worth, all along
    let acc = TrainConfig { grad_accum: 4, checkpointing: true, ..c };
    let single = vramcalc_core::estimate(&spec, &acc).unwrap();
    let ddp = est(&acc, DistConfig { gpus: 4, ..DistConfig::default() });
    assert_eq!(ddp.estimate.peak_bytes, single.peak_bytes + single.param_bytes);
    // with bucket views the accumulated `.grad`s are the buckets
    let view = est(&acc, DistConfig { gpus: 4, gradient_as_bucket_view: true, ..DistConfig::default() });
    assert_eq!(view.estimate.peak_bytes, single.peak_bytes);
}

/// Settings that do not go together are refused with the flag's name.
#[test]
fn bad_settings_name_the_flag() {
    let spec = tiny(128, 1);
    let c = TrainConfig { batch: 2, seq_len: Some(16), ..TrainConfig::default() };
    let err = |d: DistConfig| distributed::estimate(&spec, &c, &d).unwrap_err().to_string();
    assert!(err(DistConfig { gpus: 8, offload: Offload::Params, strategy: Strategy::Zero2, ..DistConfig::default() }).contains("--offload params"));
    assert!(err(DistConfig { gpus: 6, tp: 4, ..DistConfig::default() }).contains("--tp 4"));
    assert!(err(DistConfig { gpus: 4, tp: 4, strategy: Strategy::Tp, ..DistConfig::default() }).contains("does not split"));
    assert!(err(DistConfig { gpus: 0, ..DistConfig::default() }).contains("--gpus"));
    assert!(err(DistConfig { gpus: 2, fsdp_param_dtype: Some(MpDtype::Bf16), ..DistConfig::default() }).contains("--strategy fsdp"));
}

/// The per-GPU curve the app draws: FSDP's peak falls from 2 to 64 GPUs; TP sizes that do not
/// divide the heads are left out.
#[test]
fn per_gpu_peak_against_gpus() {
    let spec = tiny(512, 2);
    let c = TrainConfig { batch: 2, seq_len: Some(128), ..TrainConfig::default() };
    let fsdp = DistConfig { strategy: Strategy::Fsdp, ..DistConfig::default() };
    let curve = distributed::sweep_gpus(&spec, &c, &fsdp, &[2, 4, 8, 16, 64]);
    assert_eq!(curve.len(), 5);
    assert!(curve.windows(2).all(|w| w[1].1 <= w[0].1), "{curve:?}");
    let tp = DistConfig { strategy: Strategy::Tp, ..DistConfig::default() };
    let curve = distributed::sweep_gpus(&spec, &c, &tp, &[1, 2, 3, 8, 16]);
    assert_eq!(curve.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1, 2, 8]);
}

/// A sweep over the number of GPUs keeps the resolved model (`DistPrepared::on_gpus`) and gets
/// exactly what preparing each size afresh gives, for every strategy, with and without offload,
/// accumulation and a TP degree that stays; the fewest GPUs that fit agrees with a search that
/// prepares every size afresh.
#[test]
fn a_resized_job_is_the_job_prepared_afresh() {
    use distributed::DistPrepared;
    let spec = tiny(512, 2);
    let c = TrainConfig { batch: 2, seq_len: Some(128), grad_accum: 2, ..TrainConfig::default() };
    let gpus = [1, 2, 4, 8, 16, 64];
    for (strategy, tp, offload) in [
        (Strategy::Ddp, 1, Offload::None),
        (Strategy::Zero1, 1, Offload::None),
        (Strategy::Zero2, 1, Offload::Optimizer),
        (Strategy::Zero3, 1, Offload::Params),
        (Strategy::Fsdp, 1, Offload::None),
        (Strategy::Fsdp, 2, Offload::None),
        (Strategy::Tp, 1, Offload::None),
        // FSDP computing in its param_dtype: one GPU's model is not the ranks'
        (Strategy::Fsdp, 0, Offload::None),
    ] {
        let mixed = (strategy == Strategy::Fsdp && tp == 0).then_some(distributed::MpDtype::Bf16);
        let d = DistConfig { strategy, tp: tp.max(1), offload, fsdp_param_dtype: mixed, ..DistConfig::default() };
        let afresh: Vec<_> = gpus
            .iter()
            .filter_map(|&n| {
                let p = DistPrepared::new(&spec, &c, &DistConfig { gpus: n, ..d }).ok()?;
                let (peak, total) = p.peak_at(c.batch);
                Some((n, peak, total))
            })
            .collect();
        assert_eq!(distributed::sweep_gpus(&spec, &c, &d, &gpus), afresh, "{strategy:?} tp {tp}");
        let est = |n: u64| distributed::estimate(&spec, &c, &DistConfig { gpus: n, ..d }).ok().map(|e| e.estimate.device_total_bytes);
        for cap in afresh.iter().map(|p| p.2) {
            let want = [1u64, 2, 4, 8, 16, 32, 64]
                .into_iter()
                .filter(|&n| n >= d.tp.max(1))
                .find(|&n| est(n).is_some_and(|t| t <= cap));
            let got = distributed::fewest_gpus(&spec, &c, &d, cap, 64).unwrap().map(|f| f.0);
            assert_eq!(got, want, "{strategy:?} tp {tp} capacity {cap}");
        }
    }
}
