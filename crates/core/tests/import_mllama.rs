//! `mllama` (Llama 3.2 Vision, `MllamaForConditionalGeneration`), issue 25: every class in
//! `tests/data/hf/mllama_counts.json` (`tools/hf_vlm_counts.py --types mllama`: transformers 5.24
//! on the meta device, the library defaults and 4 random valid small configs) imports with exactly
//! `sum(p.numel() for p in model.parameters())`; random valid configs import and estimate, with
//! the count `modeling_mllama.py`'s modules give in closed form.

use proptest::prelude::*;
use serde_json::{json, Value};
use vramcalc_core::import::hf::from_config_json;
use vramcalc_core::{ModelSpec, Prepared, TrainConfig};

#[path = "common/hf.rs"]
mod hf;
use hf::{import_err, params};

fn import(text: &str) -> ModelSpec {
    from_config_json(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn mllama_has_pytorch_parameter_counts() {
    let all: Value = serde_json::from_str(&hf::data("hf/mllama_counts.json")).unwrap();
    let all = all.as_object().unwrap();
    assert!(all.contains_key("mllama-default") && all.contains_key("mllama-3"));
    for (name, want) in all {
        let spec = import(&want["config"].to_string());
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}

/// The image tokens the cross-attention layers read: `max_num_tiles · ((image_size /
/// patch_size)² + 1)` rows of the text width (4 · 1025 at the defaults), and the tiles stacked
/// on the channel axis of the input.
#[test]
fn mllama_image_tokens_are_tiles_of_patches_and_a_class_token() {
    let spec = import(r#"{"model_type": "mllama"}"#);
    assert_eq!(spec.input.shape, vec![12, 448, 448]);
    let small = json!({"model_type": "mllama",
        "vision_config": {"hidden_size": 16, "attention_heads": 2, "intermediate_size": 24, "num_hidden_layers": 2, "num_global_layers": 1,
            "image_size": 28, "patch_size": 7, "max_num_tiles": 2, "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]],
            "intermediate_layers_indices": [-1], "vision_output_dim": 32},
        "text_config": {"vocab_size": 300, "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 40,
            "num_hidden_layers": 3, "cross_attention_layers": [1, 7], "pad_token_id": 0}});
    let spec = import(&small.to_string());
    let r = vramcalc_core::resolve::resolve(&spec, None, Default::default()).unwrap();
    let tower = r.layers.iter().find(|l| l.kind == "tiled_vision_encoder").unwrap();
    assert_eq!(tower.output_shape.0, vec![2 * 17, 32]);
    let kinds: Vec<&str> = spec.layers.iter().map(|l| l.kind()).collect();
    assert_eq!(&kinds[2..], ["token_input", "embedding", "repeat", "gated_cross_attention_layer", "repeat", "rms_norm", "linear"]);
}

#[test]
fn mllama_fields_it_does_not_model_are_refused_by_name() {
    for (text, field) in [
        (r#"{"model_type": "mllama", "vision_config": {"vision_output_dim": 1280}}"#, "vision_output_dim"),
        (r#"{"model_type": "mllama", "vision_config": {"max_num_tiles": 2}}"#, "max_num_tiles"),
        (r#"{"model_type": "mllama", "vision_config": {"intermediate_layers_indices": [40]}}"#, "intermediate_layers_indices"),
        (r#"{"model_type": "mllama", "vision_config": {"image_size": [448, 448]}}"#, "image_size"),
        (r#"{"model_type": "mllama", "text_config": {"sliding_window": 4096}}"#, "sliding_window"),
        (r#"{"model_type": "mllama", "text_config": {"head_dim": 64}}"#, "head_dim"),
        (r#"{"model_type": "mllama", "text_config": {"cross_attention_layers": "3,8"}}"#, "cross_attention_layers"),
        (r#"{"model_type": "mllama", "architectures": ["MllamaForCausalLM"]}"#, "MllamaForCausalLM"),
        (r#"{"model_type": "mllama", "num_hidden_layers": 2}"#, "num_hidden_layers"),
    ] {
        let m = import_err(text);
        assert!(m.contains(field), "{field}: {m}");
    }
}

/// The generic `PretrainedConfig` fields a saved config carries (`to_json_string(use_diff=False)`
/// writes them into the top level and both sub-configs) are accepted; the count stays exact.
#[test]
fn mllama_accepts_the_generic_config_fields() {
    let generic = json!({
        "return_dict": true, "output_hidden_states": false, "output_attentions": false, "torchscript": false, "dtype": null,
        "torch_dtype": "bfloat16", "use_bfloat16": false, "tf_legacy_loss": false, "pruned_heads": {}, "chunk_size_feed_forward": 0,
        "is_encoder_decoder": false, "is_decoder": false, "add_cross_attention": false, "tie_encoder_decoder": false, "finetuning_task": null,
        "tokenizer_class": null, "prefix": null, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}, "problem_type": null,
        "_name_or_path": "", "transformers_version": "5.24.0", "max_length": 20, "num_beams": 1, "use_cache": true,
    });
    let all: Value = serde_json::from_str(&hf::data("hf/mllama_counts.json")).unwrap();
    let want = &all["mllama-2"];
    let mut c = want["config"].clone();
    for part in [None, Some("vision_config"), Some("text_config")] {
        for (k, v) in generic.as_object().unwrap() {
            let obj = match part { None => &mut c, Some(p) => &mut c[p] };
            if obj.get(k).is_none() {
                obj[k] = v.clone();
            }
        }
    }
    assert_eq!(params(&import(&c.to_string())), want["params"].as_u64().unwrap());
}

/// A random valid config: `(vision: heads, head size, intermediate, local layers, global layers,
/// tiles, patch, patches per side, channels, intermediate picks)`, `(text: heads, kv divisor,
/// head size, intermediate, vocabulary, layers, cross-attention mask)`.
#[derive(Debug, Clone)]
struct Cfg {
    v: (u64, u64, u64, u64, u64, u64, u64, u64, u64, Vec<bool>),
    t: (u64, u64, u64, u64, u64, u64, Vec<bool>),
}

fn cfg() -> impl Strategy<Value = Cfg> {
    let v = (1u64..4, prop::sample::select(vec![4u64, 8]), 4u64..40, 1u64..4, 0u64..3, 1u64..5, prop::sample::select(vec![2u64, 4, 7]), 1u64..4, prop::sample::select(vec![1u64, 3]), prop::collection::vec(any::<bool>(), 3));
    let t = (prop::sample::select(vec![1u64, 2, 4]), prop::sample::select(vec![1u64, 2]), prop::sample::select(vec![4u64, 8]), 4u64..60, 20u64..400, 1u64..6, prop::collection::vec(any::<bool>(), 6));
    (v, t).prop_map(|(v, t)| Cfg { v, t })
}

impl Cfg {
    fn picks(&self) -> Vec<u64> {
        (0..self.v.3).filter(|&i| self.v.9[i as usize]).collect()
    }
    fn cross(&self) -> Vec<u64> {
        (0..self.t.5).filter(|&i| self.t.6[i as usize]).collect()
    }
    fn kv(&self) -> u64 {
        if self.t.0 % self.t.1 == 0 { self.t.0 / self.t.1 } else { self.t.0 }
    }
    fn json(&self) -> Value {
        let (vh, vhd, vi, n, g, tiles, patch, side, ch, _) = self.v.clone();
        let (th, _, thd, ti, vocab, tn, _) = self.t.clone();
        let ratios: Vec<[u64; 2]> = (1..=tiles).flat_map(|a| (1..=tiles).filter(move |b| a * b <= tiles).map(move |b| [a, b])).collect();
        json!({"model_type": "mllama",
            "vision_config": {"hidden_size": vh * vhd, "attention_heads": vh, "intermediate_size": vi, "num_hidden_layers": n,
                "num_global_layers": g, "image_size": patch * side, "patch_size": patch, "num_channels": ch, "max_num_tiles": tiles,
                "supported_aspect_ratios": ratios, "intermediate_layers_indices": self.picks(), "vision_output_dim": vh * vhd * (self.picks().len() as u64 + 1)},
            "text_config": {"vocab_size": vocab, "hidden_size": th * thd, "num_attention_heads": th, "num_key_value_heads": self.kv(),
                "intermediate_size": ti, "num_hidden_layers": tn, "cross_attention_layers": self.cross(), "pad_token_id": 0}})
    }
    /// `modeling_mllama.py`'s parameters in closed form.
    fn params(&self) -> u64 {
        let (vh, vhd, vi, n, g, tiles, patch, side, ch, _) = self.v.clone();
        let (th, _, thd, ti, vocab, tn, _) = self.t.clone();
        let (h, rows, p1) = (vh * vhd, (1..=tiles).flat_map(|a| (1..=tiles).filter(move |b| a * b <= tiles)).count() as u64 + 1, side * side + 1);
        let layer = 4 * h * h + 2 * h * vi + vi + h + 4 * h;
        let tile = rows * tiles * h + 1;
        let vision = ch * h * patch * patch + tile + h + 1 + p1 * h + rows * tiles * p1 * h + 2 * h + n * layer + 2 * h + tile + g * (layer + 2);
        let d = th * thd;
        let projector = h * (self.picks().len() as u64 + 1) * d + d;
        let attn = 2 * d * d + 2 * d * self.kv() * thd;
        let dec = attn + 3 * d * ti + 2 * d;
        let cross = self.cross().len() as u64;
        let text = (vocab + 8) * d + (tn - cross) * dec + cross * (dec + 2 * thd + 2) + d + d * vocab;
        vision + projector + text
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    /// They import with the closed-form count, and their training steps estimate (eager and SDPA).
    #[test]
    fn random_valid_mllama_configs_import(c in cfg()) {
        let text = c.json().to_string();
        let spec = import(&text);
        prop_assert_eq!(params(&spec), c.params(), "{}", text);
        for attention in [vramcalc_core::AttentionImpl::Eager, vramcalc_core::AttentionImpl::Sdpa] {
            let cfg = TrainConfig { batch: 2, seq_len: Some(8), attention, ..TrainConfig::default() };
            Prepared::new(&spec, &cfg).unwrap_or_else(|e| panic!("{e}\n{text}")).estimate();
        }
    }
}

/// `mllama_cache.jsonl` (`tools/measure_mllama_cache.py`: transformers 5.24 on CPU, one image per
/// sequence, greedy `generate()`): the cache's bytes after the prefill and when `generate()`
/// returns — the self-attention layers' text tokens plus the cross-attention layers' image
/// tokens, cached once — are the estimate's, exactly (fp32 and bf16, dynamic and static caches).
#[test]
fn mllama_generate_caches_the_image_keys_once() {
    let text = hf::data("hf/mllama_cache.jsonl");
    let rows: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(rows.len() >= 5 && rows.iter().any(|r| r["cache"] == "static"));
    for r in rows {
        let (after_prefill, end) = hf::generate_cache_bytes(&r);
        assert_eq!(after_prefill, r["kv_cache_bytes_after_prefill"].as_u64().unwrap(), "{r}");
        assert_eq!(end, r["kv_cache_bytes_end"].as_u64().unwrap(), "{r}");
    }
}

/// `mllama_traces.jsonl`: one training step (forward, loss on the prompt's ids, backward; no
/// optimizer) of the real transformers 5.24 class on a small config (a 128-wide tower, 2 local
/// layers and 1 global, 4 tiles of 112 pixels in 14-pixel patches: 4 · 65 image tokens, the
/// intermediate layers 0 and 1; a 4-layer 256-wide decoder with cross-attention at 1 and 3,
/// vocabulary 1000), fp32 at batch 2 and a prompt of 128 tokens, bf16 at batch 1 and 256 tokens,
/// eager and SDPA attention, traced by `tools/trace_hf.py` (torch 2.15, CUDA dropout/SDPA
/// emulation). Within 3 % (at the time of writing: fp32 −0.83 % eager, +0.01 % SDPA; bf16
/// −0.01 % eager, +0.05 % SDPA).
#[test]
fn mllama_training_steps_match_traced_pytorch() {
    hf::assert_traces("hf/mllama_traces.jsonl", 4, |_| 3.0);
}

/// Llama-3.2-11B-Vision's defaults in generate mode (bf16, a 64-token prompt, 4 new tokens): the
/// 32 self-attention layers cache `2 · 8 · 128` values per text token, the 8 cross-attention
/// layers the same per image token, `4 · (32² + 1) = 4100` of them, once.
#[test]
fn mllama_default_cache_in_closed_form() {
    use vramcalc_core::{GenerateConfig, Mode, Precision};
    let spec = import(r#"{"model_type": "mllama"}"#);
    let generate = GenerateConfig { prompt_len: Some(64), new_tokens: 4, ..GenerateConfig::default() };
    let cfg = TrainConfig { batch: 1, precision: Precision::Bf16, mode: Mode::Generate, generate, ..TrainConfig::default() };
    let g = Prepared::new(&spec, &cfg).unwrap().estimate().generation.unwrap();
    let per_token = 2 * 8 * 128 * 2;
    assert_eq!(g.kv_cache_bytes, 32 * per_token * (64 + 3) + 8 * per_token * 4100);
    assert_eq!(g.kv_cache_bytes_after_prefill, 32 * per_token * 64 + 8 * per_token * 4100);
}
