//! The encoder, vision and audio importers of issue 25 (`xlm-roberta`, `electra`, `bart`, `modernbert`, `dinov2`, `convnext`;
//! `deberta-v2`, `swin`, `wav2vec2` in `encoder_more_counts.json`): every class in
//! `tests/data/hf/encoder_counts.json` (`tools/hf_encoder_counts.py`: transformers 5.24 on the
//! meta device, the library defaults and random small configs) imports as that class with
//! exactly `sum(p.numel() for p in model.parameters())`.

use vramcalc_core::import::hf::from_config_json;

#[path = "common/hf.rs"]
mod hf;
use hf::params;

/// Every class of `file` imports as that class with its count; each of `types` is there at its
/// defaults (head class and bare model).
fn assert_counts(file: &str, types: &[&str]) {
    let all: serde_json::Value = serde_json::from_str(&hf::data(file)).unwrap();
    let all = all.as_object().unwrap();
    for t in types {
        assert!(all.contains_key(&format!("{t}-default")) && all.contains_key(&format!("{t}-base")), "{t}");
    }
    for (name, want) in all {
        let text = want["config"].to_string();
        let spec = from_config_json(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(spec.name.as_deref(), want["architecture"].as_str(), "{name}");
        assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{name}");
    }
}

#[test]
fn encoder_classes_have_pytorch_parameter_counts() {
    assert_counts("hf/encoder_counts.json", &["xlm-roberta", "electra", "bart", "dinov2", "convnext", "modernbert"]);
}

/// `traces_25.jsonl`: one training step (forward, cross-entropy, backward from `set_to_none`
/// grads; no optimizer) of the real transformers 5.24 class on a small config (2 layers,
/// vocabulary 1000, hidden 256, 4 heads; BART 2 + 2 layers at 128 source and 128 target tokens,
/// ELECTRA with 128-wide embeddings and `embeddings_project`), batch 2, sequence 128; DINOv2's
/// classifier on 112-pixel images in 14-pixel patches (10 labels), ConvNeXt's on 64-pixel images
/// (stages 32/64/128/256 wide, depths 1/1/2/1), ModernBERT's classifier (3 layers: local, local,
/// global; intermediate 384); eager and SDPA attention,
/// traced by `tools/trace_hf.py` (torch 2.15, CUDA dropout/SDPA emulation). The estimate with
/// `--optimizer sgd` is within 1 % of each (at the time of writing −0.37 % (ModernBERT, SDPA) to
/// −0.01 %; DINOv2 and ConvNeXt within 12 bytes).
#[test]
fn encoder_training_steps_match_traced_pytorch() {
    hf::assert_traces("hf/traces_25.jsonl", 11, |_| 1.0);
}

/// `encoder_more_counts.json` (`tools/hf_encoder_counts.py --seed 29 --per-type 4 --types
/// deberta-v2 swin wav2vec2`): each head class and bare model at the defaults and 4 random small
/// configs (DeBERTa-v2: relative attention on or off, `pos_att_type`, `share_att_key`,
/// `position_buckets`, `norm_rel_ebd`, `position_biased_input`, `embedding_size`; Swin: stages,
/// windows, heads, absolute positions; wav2vec 2.0: conv stacks, group/layer norms, positional
/// conv groups, stable layer norm, SpecAugment's embedding) import with PyTorch's exact count.
#[test]
fn deberta_v2_swin_wav2vec2_classes_have_pytorch_parameter_counts() {
    assert_counts("hf/encoder_more_counts.json", &["deberta-v2", "swin", "wav2vec2"]);
}

/// `encoder_more_traces.jsonl`: one training step of two small DeBERTa-v2 classifiers (2 layers,
/// hidden 256, 4 heads, vocabulary 1000, 3 labels; DeBERTa-v3's layout: relative attention with
/// `p2c|c2p`, shared keys, 256 position buckets, LayerNormed relative embeddings, no absolute
/// positions — and a `c2p`-only one with its own `pos_key_proj`, 64 relative positions, absolute
/// positions and 2 token types), batch 2, sequence 128, DeBERTa's own eager attention, traced by
/// `tools/trace_hf.py` (the cross-entropy on the logits). Within 3 % (at the time of writing
/// +1.5 % and −0.02 %). Its Swin records: two small Swin classifiers (64-pixel images in
/// 4-pixel patches: a 16×16 then 8×8 token map, stages of 64 and 128 channels with 2 and 4
/// heads, 2 blocks each, window 4, shifted odd blocks, 10 labels, the default stochastic depth
/// 0.1 — and 56-pixel images, whose 14×14 and 7×7 maps pad to whole windows, no stochastic
/// depth, hidden dropout 0.1), eager and SDPA, batch 2 (at the time of writing +2.0 % with
/// stochastic depth, within 60 bytes without). Its wav2vec 2.0 records: `Wav2Vec2ForCTC` on
/// 10 s clips (160,000 samples: the default conv stack at 128 channels, 499 frames), hidden
/// 256, 4 heads, 2 layers, positional conv of 32 in 4 groups; group-normed post-norm with the
/// default dropouts, and layer-normed pre-norm (`do_stable_layer_norm`) without hidden dropouts;
/// layerdrop and SpecAugment off (both branch on values), the cross-entropy on the frames'
/// logits, eager and SDPA (within 8 kB of 200–275 MB at the time of writing).
#[test]
fn deberta_v2_and_swin_training_steps_match_traced_pytorch() {
    hf::assert_traces("hf/encoder_more_traces.jsonl", 10, |_| 3.0);
}


mod props {
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use vramcalc_core::import::hf::from_config_json;
    use vramcalc_core::{Prepared, TrainConfig};

    /// Random valid wav2vec 2.0 configs (conv stacks that fit the clip).
    fn wav2vec2() -> impl Strategy<Value = Value> {
        (prop::collection::vec((1u64..64, 1u64..6, 1u64..11), 1..4), (1u64..4, any::<bool>(), any::<bool>(), 2u64..64, prop::sample::select(vec![1u64, 2, 4])))
            .prop_map(|(convs, (layers, f1, f2, k, groups))| {
                json!({"model_type": "wav2vec2", "architectures": [if f1 { "Wav2Vec2ForCTC" } else { "Wav2Vec2Model" }], "hidden_size": 32,
                    "num_attention_heads": groups, "num_hidden_layers": layers, "intermediate_size": k + 8,
                    "conv_dim": convs.iter().map(|c| c.0).collect::<Vec<_>>(), "conv_stride": convs.iter().map(|c| c.1).collect::<Vec<_>>(),
                    "conv_kernel": convs.iter().map(|c| c.2).collect::<Vec<_>>(), "feat_extract_norm": if f2 { "layer" } else { "group" },
                    "num_conv_pos_embeddings": k, "num_conv_pos_embedding_groups": groups, "do_stable_layer_norm": f1 != f2,
                    "mask_time_prob": if f2 { 0.05 } else { 0.0 }})
            })
    }

    /// Random valid DeBERTa-v2 and Swin configs (every Swin stage at least one window wide).
    fn config() -> impl Strategy<Value = Value> {
        (
            (prop::sample::select(vec![1u64, 2, 4]), prop::sample::select(vec![4u64, 8, 16]), 1u64..4, 8u64..300),
            (any::<bool>(), any::<bool>(), any::<bool>(), 0u64..3, 1u64..4, prop::sample::select(vec![2u64, 3, 4])),
        )
            .prop_map(|((heads, hd, layers, n), (f1, f2, f3, pick, stages, window))| {
                if f3 {
                    let side = window << (stages - 1);
                    json!({"model_type": "swin", "architectures": [if f1 { "SwinForImageClassification" } else { "SwinModel" }],
                        "image_size": side * 2 * (pick + 1), "patch_size": 2, "embed_dim": heads * hd, "depths": vec![layers; stages as usize],
                        "num_heads": vec![heads; stages as usize], "window_size": window, "qkv_bias": f2, "use_absolute_embeddings": f1 != f2,
                        "drop_path_rate": if f2 { 0.1 } else { 0.0 }, "num_labels": pick})
                } else {
                    let pos_att = ["p2c|c2p", "c2p", "p2c"][pick as usize];
                    json!({"model_type": "deberta-v2", "architectures": [if f1 { "DebertaV2ForSequenceClassification" } else { "DebertaV2Model" }],
                        "vocab_size": n + 10, "hidden_size": heads * hd, "num_attention_heads": heads, "num_hidden_layers": layers,
                        "intermediate_size": n, "max_position_embeddings": n + 8, "relative_attention": f2, "share_att_key": f1 != f2,
                        "pos_att_type": pos_att, "position_buckets": if f1 { 16 } else { -1 },
                        "norm_rel_ebd": if f2 { "layer_norm" } else { "none" }, "type_vocab_size": pick, "num_labels": pick + 1})
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

        /// They import, and their training steps estimate (eager and SDPA).
        #[test]
        fn random_valid_configs_import(c in prop_oneof![config(), wav2vec2()]) {
            let text = c.to_string();
            let spec = from_config_json(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            for attention in [vramcalc_core::AttentionImpl::Eager, vramcalc_core::AttentionImpl::Sdpa] {
                let cfg = TrainConfig { batch: 2, seq_len: spec.is_sequence_input().then_some(8), attention, ..TrainConfig::default() };
                Prepared::new(&spec, &cfg).unwrap_or_else(|e| panic!("{e}\n{text}")).estimate();
            }
        }
    }
}

#[test]
fn deberta_swin_wav2vec2_fields_they_do_not_model_are_refused_by_name() {
    for (text, field) in [
        (r#"{"model_type": "deberta-v2", "conv_kernel_size": 3}"#, "conv_kernel_size"),
        (r#"{"model_type": "deberta-v2", "hidden_size": 64, "num_attention_heads": 4, "attention_head_size": 8}"#, "attention_head_size"),
        (r#"{"model_type": "deberta-v2", "pos_att_type": "c2p|p2p"}"#, "pos_att_type"),
        (r#"{"model_type": "deberta-v2", "architectures": ["DebertaV2ForSequenceClassification"], "pooler_hidden_size": 8}"#, "pooler_hidden_size"),
        (r#"{"model_type": "swin", "image_size": 30}"#, "image_size"),
        (r#"{"model_type": "wav2vec2", "add_adapter": true}"#, "add_adapter"),
        (r#"{"model_type": "wav2vec2", "feat_extract_norm": "batch"}"#, "feat_extract_norm"),
        (r#"{"model_type": "wav2vec2", "conv_dim": [8, 8], "conv_stride": [2], "conv_kernel": [2]}"#, "conv_dim"),
        (r#"{"model_type": "swin", "image_size": 64, "window_size": 7}"#, "window_size"),
        (r#"{"model_type": "swin", "depths": [2, 2], "num_heads": [2]}"#, "num_heads"),
    ] {
        let m = hf::import_err(text);
        assert!(m.contains(field), "{text}: {m}");
    }
}

/// ModernBERT's local layers carry their window (`local_attention // 2 + 1`), its global ones
/// none; `layer_types` overrides `global_attn_every_n_layers` (every third layer global).
#[test]
fn modernbert_local_layers_have_their_window() {
    use vramcalc_core::spec::Layer;
    let windows = |text: &str| {
        let spec = from_config_json(text).unwrap();
        let mut w = Vec::new();
        fn walk(l: &Layer, times: u64, w: &mut Vec<Option<u64>>) {
            match l {
                Layer::MultiheadAttention(a) => w.extend(std::iter::repeat_n(a.sliding_window, times as usize)),
                Layer::Repeat { times: t, body } => body.iter().for_each(|l| walk(l, times * t, w)),
                Layer::Residual { body, .. } => body.iter().for_each(|l| walk(l, times, w)),
                _ => {}
            }
        }
        spec.layers.iter().for_each(|l| walk(l, 1, &mut w));
        w
    };
    let base = r#"{"model_type": "modernbert", "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 32, "num_hidden_layers": 4"#;
    assert_eq!(windows(&format!("{base}}}")), [None, Some(65), Some(65), None]);
    assert_eq!(windows(&format!(r#"{base}, "local_attention": 32, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]}}"#)), [Some(17), None, Some(17), Some(17)]);
    let m = hf::import_err(&format!(r#"{base}, "layer_types": ["chunked_attention", "full_attention", "full_attention", "full_attention"]}}"#));
    assert!(m.contains("layer_types"), "{m}");
}

/// The generic `PretrainedConfig` fields a saved config carries (`to_dict()` of transformers
/// 4.x and 5.24: `chunk_size_feed_forward`, `problem_type`, `torchscript`, the token ids, …) are
/// accepted by the new importers at their defaults, as by every importer.
#[test]
fn generic_config_fields_are_accepted_by_the_new_importers() {
    let generic = serde_json::json!({
        "return_dict": true, "output_hidden_states": false, "output_attentions": false, "torchscript": false, "dtype": null,
        "torch_dtype": "float32", "use_bfloat16": false, "tf_legacy_loss": false, "pruned_heads": {}, "tie_word_embeddings": true,
        "chunk_size_feed_forward": 0, "is_encoder_decoder": false, "is_decoder": false, "cross_attention_hidden_size": null,
        "add_cross_attention": false, "tie_encoder_decoder": false, "architectures": null, "finetuning_task": null,
        "tokenizer_class": null, "prefix": null, "bos_token_id": null, "pad_token_id": 0, "eos_token_id": null, "sep_token_id": null,
        "decoder_start_token_id": null, "task_specific_params": null, "problem_type": null, "_name_or_path": "",
        "transformers_version": "4.57.0", "max_length": 20, "num_beams": 1, "use_cache": true, "initializer_range": 0.02,
    });
    for (file, types) in [("hf/encoder_more_counts.json", &["deberta-v2", "swin", "wav2vec2"][..]), ("hf/more_counts.json", &["ernie4_5_moe", "bloom", "mpt", "minimax"][..])] {
        let all: serde_json::Value = serde_json::from_str(&hf::data(file)).unwrap();
        for t in types {
            let want = &all[format!("{t}-0")];
            let mut c = want["config"].clone();
            for (k, v) in generic.as_object().unwrap() {
                if c.get(k).is_none() || k == "architectures" {
                    c[k] = v.clone();
                }
            }
            c["architectures"] = want["config"]["architectures"].clone();
            let spec = from_config_json(&c.to_string()).unwrap_or_else(|e| panic!("{t}: {e}"));
            assert_eq!(params(&spec), want["params"].as_u64().unwrap(), "{t}");
        }
    }
}
