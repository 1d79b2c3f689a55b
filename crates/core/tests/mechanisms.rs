//! The tricks users ask about move memory the way PyTorch does (directions and exact relations).

use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{estimate, presets, AttentionImpl, Mode, OptimizerImpl, OptimizerKind, Precision, TrainConfig};

fn peak(spec: &ModelSpec, cfg: TrainConfig) -> u64 {
    estimate(spec, &cfg).unwrap().peak_bytes
}

fn bert() -> ModelSpec {
    presets::build("bert-base-seqcls").unwrap()
}

#[test]
fn gradient_accumulation_keeps_gradients_across_micro_batches() {
    let spec = presets::build("resnet50").unwrap();
    let plain = estimate(&spec, &TrainConfig { batch: 16, ..TrainConfig::default() }).unwrap();
    let accum = estimate(&spec, &TrainConfig { batch: 64, grad_accum: 4, ..TrainConfig::default() }).unwrap();
    // same micro-batch; the accumulating step additionally holds every gradient through backward
    assert!(accum.peak_bytes > plain.peak_bytes);
    assert_eq!(accum.breakdown.gradients, accum.param_bytes);
    let full = peak(&spec, TrainConfig { batch: 64, ..TrainConfig::default() });
    assert!(accum.peak_bytes < full);
}

#[test]
fn checkpointing_bert_layers_cuts_activations() {
    let cfg = TrainConfig { batch: 32, seq_len: Some(512), attention: AttentionImpl::Eager, ..TrainConfig::default() };
    let plain = peak(&bert(), cfg);
    let ckpt = peak(&bert(), TrainConfig { checkpointing: true, ..cfg });
    assert!(ckpt * 4 < plain, "{ckpt} vs {plain}");
}

#[test]
fn sdpa_saves_no_seq_by_seq_matrices() {
    let cfg = TrainConfig { batch: 8, seq_len: Some(512), ..TrainConfig::default() };
    let eager = peak(&bert(), TrainConfig { attention: AttentionImpl::Eager, ..cfg });
    let sdpa = peak(&bert(), TrainConfig { attention: AttentionImpl::Sdpa, ..cfg });
    // eager keeps at least scores' softmax (fp32) and dropout mask per layer: 12 × 8 × 12 × 512² × 5 B
    assert!(eager - sdpa > 12 * 8 * 12 * 512 * 512 * 5, "{eager} {sdpa}");
}

#[test]
fn precision_modes_order_as_expected() {
    let spec = presets::build("resnet50").unwrap();
    let cfg = TrainConfig { batch: 64, ..TrainConfig::default() };
    let fp32 = peak(&spec, cfg);
    let amp = peak(&spec, TrainConfig { precision: Precision::AmpFp16, ..cfg });
    let half = peak(&spec, TrainConfig { precision: Precision::Fp16, ..cfg });
    assert!(half < amp && amp < fp32, "{half} {amp} {fp32}");
    // pure fp16 halves every tensor, so it is within a few bytes of half the fp32 peak
    assert!((half as f64 / fp32 as f64 - 0.5).abs() < 0.01);
}

#[test]
fn inplace_relu_changes_no_saved_tensor() {
    let cnn = |bn: bool, inplace: bool| -> ModelSpec {
        let mut layers = vec![serde_json::json!({"kind": "conv2d", "in_channels": 3, "out_channels": 64, "kernel_size": 3, "padding": 1})];
        if bn {
            layers.push(serde_json::json!({"kind": "batch_norm2d", "num_features": 64}));
        }
        layers.push(serde_json::json!({"kind": "relu", "inplace": inplace}));
        layers.push(serde_json::json!({"kind": "conv2d", "in_channels": 64, "out_channels": 64, "kernel_size": 3, "padding": 1}));
        layers.push(serde_json::json!({"kind": "flatten"}));
        layers.push(serde_json::json!({"kind": "linear", "in_features": 64 * 32 * 32, "out_features": 10}));
        serde_json::from_value(serde_json::json!({"input": {"shape": [3, 32, 32]}, "layers": layers})).unwrap()
    };
    let cfg = TrainConfig { batch: 64, optimizer: OptimizerKind::Sgd, mode: Mode::Infer, ..TrainConfig::default() };
    let relu_out = 64 * 64 * 32 * 32 * 4;
    // What is *saved* is the same either way: the next conv saves the ReLU output, and BatchNorm
    // saves its input, not its output. In place only removes the moment when the conv (or BN)
    // output and the ReLU output are both alive — which is not the peak here in inference, because
    // nn.Sequential still holds the ReLU's input while it runs.
    let inference = |s: &ModelSpec| estimate(s, &cfg).unwrap().peak_bytes;
    assert_eq!(inference(&cnn(false, false)), inference(&cnn(false, true)));
    let wide = estimate(&cnn(false, false), &cfg).unwrap();
    assert!(wide.peak_bytes >= 2 * relu_out);
    let train = TrainConfig { mode: Mode::Train, ..cfg };
    let saved = |s: &ModelSpec| estimate(s, &train).unwrap().layers.iter().map(|l| l.saved_bytes).sum::<u64>();
    assert_eq!(saved(&cnn(true, false)), saved(&cnn(true, true)));
    assert!(peak(&cnn(true, true), train) <= peak(&cnn(true, false), train));
}

#[test]
fn optimizer_state_and_step_temporaries() {
    let spec = presets::build("vgg16").unwrap();
    let base = TrainConfig { batch: 1, ..TrainConfig::default() };
    let sgd = estimate(&spec, &TrainConfig { optimizer: OptimizerKind::Sgd, ..base }).unwrap();
    let adam_loop = estimate(&spec, &TrainConfig { optimizer: OptimizerKind::Adam, optimizer_impl: OptimizerImpl::Forloop, ..base }).unwrap();
    let adam_fused = estimate(&spec, &TrainConfig { optimizer: OptimizerKind::Adam, optimizer_impl: OptimizerImpl::Fused, ..base }).unwrap();
    let adam8 = estimate(&spec, &TrainConfig { optimizer: OptimizerKind::Adam8bit, ..base }).unwrap();
    assert_eq!(sgd.optimizer_state_bytes, 0);
    assert!(adam_loop.optimizer_state_bytes >= 2 * adam_loop.param_bytes);
    // per-parameter loop: sqrt and division temporaries of the largest parameter (VGG16 fc6, 392 MiB each)
    assert_eq!(adam_loop.peak_phase.name(), "optimizer");
    assert!(adam_loop.breakdown.temporaries >= 2 * 102_760_448 * 4);
    assert!(adam_fused.peak_bytes < adam_loop.peak_bytes);
    assert!(adam8.optimizer_state_bytes < adam_loop.optimizer_state_bytes / 3);
}

#[test]
fn inference_keeps_only_live_activations() {
    let spec = presets::build("resnet50").unwrap();
    let train = estimate(&spec, &TrainConfig { batch: 32, ..TrainConfig::default() }).unwrap();
    let infer = estimate(&spec, &TrainConfig { batch: 32, mode: Mode::Infer, ..TrainConfig::default() }).unwrap();
    assert_eq!(infer.breakdown.gradients + infer.breakdown.optimizer_state, 0);
    assert!(infer.peak_bytes * 5 < train.peak_bytes);
}

#[test]
fn shorter_sequences_and_smaller_batches_use_less() {
    let cfg = TrainConfig { batch: 16, seq_len: Some(256), ..TrainConfig::default() };
    let long = peak(&bert(), TrainConfig { seq_len: Some(512), ..cfg });
    assert!(peak(&bert(), cfg) < long);
    assert!(peak(&bert(), TrainConfig { batch: 8, ..cfg }) < peak(&bert(), cfg));
}

#[test]
fn estimate_at_another_batch_equals_a_fresh_estimate() {
    let spec = presets::build("resnet50").unwrap();
    let cfg = TrainConfig { batch: 8, grad_accum: 2, ..TrainConfig::default() };
    let prepared = vramcalc_core::Prepared::new(&spec, &cfg).unwrap();
    for batch in [2, 5, 64, 300] {
        let fresh = estimate(&spec, &TrainConfig { batch, ..cfg }).unwrap();
        assert_eq!(prepared.estimate_at(batch).unwrap(), fresh, "batch {batch}");
    }
    assert!(prepared.estimate_at(1).is_err(), "accumulation steps beyond the batch");
    assert!(prepared.estimate_at(0).is_err());
}

/// A `discarded` block runs its layers but nothing reads their output (LLaVA's vision layers
/// after `vision_feature_layer`): the backward never reaches them, so their parameters get no
/// gradient and no AdamW state, and what they saved is gone before the backward — which sees
/// the model without them plus their resident weights.
#[test]
fn discarded_layers_get_no_gradient_and_free_their_activations_after_the_forward() {
    let spec = |side: &[serde_json::Value]| -> ModelSpec {
        let mut layers = vec![serde_json::json!({"kind": "linear", "in_features": 64, "out_features": 64})];
        layers.extend(side.iter().cloned());
        layers.push(serde_json::json!({"kind": "linear", "in_features": 64, "out_features": 10}));
        ModelSpec::from_json(&serde_json::json!({"input": {"shape": [64]}, "layers": layers}).to_string()).unwrap()
    };
    let body = vec![
        serde_json::json!({"kind": "linear", "in_features": 64, "out_features": 256}),
        serde_json::json!({"kind": "gelu"}),
        serde_json::json!({"kind": "linear", "in_features": 256, "out_features": 64}),
    ];
    let side_params = (64 * 256 + 256 + 256 * 64 + 64) * 4;
    let cfg = TrainConfig { batch: 32, optimizer: OptimizerKind::Adamw, ..TrainConfig::default() };
    let plain = estimate(&spec(&[]), &cfg).unwrap();
    let discarded = estimate(&spec(&[serde_json::json!({"kind": "discarded", "layers": body.clone()})]), &cfg).unwrap();
    assert_eq!(discarded.param_bytes, plain.param_bytes + side_params);
    assert_eq!(discarded.optimizer_state_bytes, plain.optimizer_state_bytes);
    assert_eq!(discarded.phase_peaks[1], plain.phase_peaks[1] + side_params);
    // kept to the forward's end (`keep` inside), the same tensors are gone by the backward too
    let mut kept = body.clone();
    kept.push(serde_json::json!({"kind": "keep"}));
    let kept = estimate(&spec(&[serde_json::json!({"kind": "discarded", "layers": kept})]), &cfg).unwrap();
    assert_eq!(kept.phase_peaks[1], discarded.phase_peaks[1]);
    assert!(kept.phase_peaks[0] > discarded.phase_peaks[0]);
    // on the path instead, its state exists: `exp_avg`, `exp_avg_sq` and a 4-byte `step` per tensor
    let on_path = estimate(&spec(&body), &cfg).unwrap();
    assert_eq!(on_path.optimizer_state_bytes, plain.optimizer_state_bytes + 2 * side_params + 4 * 4);
}
