//! Qwen2.5-VL's vision tower against traced PyTorch (`data/hf/qwen_vl_traces.jsonl`, written by
//! `tools/trace_qwen_vl.sh`: transformers 5.24 / torch 2.15 on CPU, real tensors, one thread,
//! fp32, eager; SDPA on the larger image, `--device cpu`): a 4-block tower (windows of
//! `window_size` 112 pixels, block 3 full) on a 252 × 196 and a 448 × 336 image, a 2-layer
//! decoder, a 256-token prompt: a training step (`--optimizer sgd`, no optimizer step) and an
//! inference forward (`use_cache=False`).
//!
//! At the time of writing: training −2.30 % and −2.19 % eager, +0.02 % SDPA (the same spec over
//! the whole image: +8.52 % and +47.03 % eager); inference −0.03 % and −0.41 % eager, −0.15 %
//! SDPA. The inference forward is modelled as `Qwen2_5_VLModel.forward` runs it: the prompt
//! embedded before the tower (alive through it: `image_input`), the tower's `last_hidden_state`
//! and `pooler_output` and the `torch.cat` of the features kept until the forward returns
//! (`keep`, `image_tokens`' `concat`), the text model's `inputs_embeds` and rotary tables held
//! until it returns, and `eager_attention_forward`'s `repeat_kv` copies until it returns (before:
//! −3.99 %, −0.88 % and −1.55 %).

#[path = "common/qwen_vl.rs"]
mod qwen_vl;
use qwen_vl::{compare, compare_generate, records};
use serde_json::Value;
use vramcalc_core::{GenerateConfig, Mode, Precision, TrainConfig};

#[test]
fn qwen2_5_vl_against_traced_pytorch() {
    let rows = compare();
    assert_eq!(rows.len(), 8);
    for (label, est, measured, err) in &rows {
        println!("{label:<24} estimated {est:>10} measured {measured:>10} {:+.2} %", err * 100.0);
    }
    for (label, _, _, err) in &rows {
        let tolerance = if label.starts_with("train") { 0.03 } else { 0.01 };
        assert!(err.abs() <= tolerance, "{label}: {:+.2} %", err * 100.0);
    }
}

/// The two `generate()` records' phases (`tools/trace_qwen_vl.py --mode generate`: the prefill up
/// to the second forward, the tower included; the decode after it) within 1 % and the cache (two
/// layers' keys and values) exact after the prefill and at the end. At the time of writing:
/// prefill −0.11 % (eager, 252 × 196) and −0.22 % (SDPA, 448 × 336), decode −0.35 % and −0.24 %.
#[test]
fn qwen2_5_vl_generate_phases_and_cache_against_traced_pytorch() {
    let rows = compare_generate();
    assert_eq!(rows.len(), 2);
    for (label, errs) in &rows {
        for (what, err) in errs {
            println!("{label:<24} {what:<20} {:+.2} %", err * 100.0);
            let tolerance = if what.starts_with("cache") { 0.001 } else { 0.01 };
            assert!(err.abs() <= tolerance, "{label} {what}: {:+.2} %", err * 100.0);
        }
    }
}

fn tiny() -> serde_json::Map<String, Value> {
    records()[0]["config"].as_object().unwrap().clone()
}

/// `get_vision_window_index` on 196 × 252 pixels: 14 × 18 patches, 7 × 9 merged tokens, windows
/// of 112 / 2 / 14 = 4 merged tokens a side: rows 4 + 3, columns 4 + 4 + 1, each ×4 patches;
/// block 3 (`fullatt_block_indexes`) one span of all 252 patches.
#[test]
fn windows_follow_get_vision_window_index() {
    let spec = vramcalc_core::import::hf::from_config_with_image(&tiny(), (252, 196)).unwrap();
    let v: Value = serde_json::from_str(&spec.to_json_pretty()).unwrap();
    let mut found = Vec::new();
    fn walk(v: &Value, out: &mut Vec<(u64, Vec<u64>)>) {
        match v {
            Value::Object(m) => {
                if let (Some(Value::Array(body)), Some(times)) = (m.get("body"), m.get("times").and_then(Value::as_u64)) {
                    if let Some(w) = body.first().and_then(|l| l.get("windows")).and_then(Value::as_array) {
                        out.push((times, w.iter().map(|x| x.as_u64().unwrap()).collect()));
                    }
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&v, &mut found);
    assert_eq!(found, vec![(3, vec![64, 64, 16, 48, 48, 12]), (1, vec![252])]);
    // a window narrower than a merged patch is refused, as transformers divides by it
    let mut bad = tiny();
    bad["vision_config"]["window_size"] = serde_json::json!(20);
    let e = vramcalc_core::import::hf::from_config_with_image(&bad, (252, 196)).unwrap_err().to_string();
    assert!(e.contains("window_size"), "{e}");
    // another image in the input shape no longer fits the windows: an error naming them
    let mut other = spec.clone();
    other.input.shape = vec![6, 224, 224];
    let c = TrainConfig { batch: 1, seq_len: Some(256), ..TrainConfig::default() };
    let e = vramcalc_core::estimate(&other, &c).unwrap_err().to_string();
    assert!(e.contains("windows"), "{e}");
}

/// `generate()` encodes the image before the prefill and drops it after (`generation/utils.py`,
/// `_prepare_multimodal_encoder_kwargs_for_generation`, `MULTIMODAL_INPUTS_TO_DROP_OUTSIDE_PREFILL`):
/// the prefill runs the tower before the prompt's embedding; a decode step runs no tower op and
/// writes no image rows, but holds the tower's weights and the outputs `mm_encoder_outputs` keeps
/// (`last_hidden_state` `[252, 64]`, `pooler_output` `[63, 128]`, fp32).
#[test]
fn generate_encodes_the_image_once() {
    use vramcalc_core::lower::LowerOptions;
    use vramcalc_core::memory::generate::{lengths, stage};
    let spec = vramcalc_core::import::hf::from_config_with_image(&tiny(), (252, 196)).unwrap();
    let c = TrainConfig {
        batch: 1,
        seq_len: Some(200),
        device: vramcalc_core::Device::Cpu,
        precision: Precision::Fp32,
        mode: Mode::Generate,
        generate: GenerateConfig { new_tokens: 4, ..GenerateConfig::default() },
        ..TrainConfig::default()
    };
    let len = lengths(&spec, &c).unwrap();
    assert_eq!(len.prompt, 200, "the prompt is --seq-len");
    let opts = LowerOptions { training: false, device: vramcalc_core::Device::Cpu, ..LowerOptions::default() };
    let (prefill, decode) = (stage(&spec, &c, opts, &len, 0).unwrap(), stage(&spec, &c, opts, &len, 2).unwrap());
    let (p, d) = (&prefill.resolved.graph, &decode.resolved.graph);
    assert_eq!(p.param_bytes(), d.param_bytes());
    let at = |g: &vramcalc_core::graph::Graph, name: &str| g.ops.iter().position(|o| o.name == name);
    let (conv, embed, scatter) = (at(p, "convolution").unwrap(), at(p, "embedding").unwrap(), at(p, "masked_scatter").unwrap());
    assert!(conv < embed && embed < scatter, "prefill: tower, then the prompt");
    assert_eq!((at(d, "convolution"), at(d, "masked_scatter")), (None, None));
    let held = |g: &vramcalc_core::graph::Graph| {
        g.storages.iter().filter(|s| s.class == vramcalc_core::graph::StorageClass::Input).map(|s| s.bytes.at(1)).collect::<Vec<_>>()
    };
    let (hp, hd) = (held(p), held(d));
    for kept in [252 * 64 * 4, 63 * 128 * 4] {
        assert!(hd.contains(&kept) && !hp.contains(&kept), "{kept}: {hd:?}");
    }
    // an estimate of the whole generation: the prefill and the decode peaks
    let e = vramcalc_core::estimate(&spec, &c).unwrap();
    let g = e.generation.unwrap();
    assert!(g.decode_peak_bytes > 0 && g.prefill_peak_bytes > g.decode_peak_bytes);
}
