//! Every preset's parameter count equals PyTorch's exactly (torchvision / transformers
//! `sum(p.numel() for p in model.parameters())`, tied weights counted once), every preset
//! resolves and round-trips through JSON, and VGG16's per-layer shapes match the cs231n table.

use vramcalc_core::presets::{self, inception_v3};
use vramcalc_core::{ModelSpec, Prepared, TrainConfig};

fn params(spec: &ModelSpec) -> u64 {
    let cfg = TrainConfig { batch: 1, ..TrainConfig::default() };
    Prepared::new(spec, &cfg).unwrap_or_else(|e| panic!("{:?}: {e}", spec.name)).estimate().params
}

fn preset_params(id: &str) -> u64 {
    params(&build(id))
}

/// Any preset, as the CLI and the app build it.
fn build(id: &str) -> ModelSpec {
    vramcalc_core::import::preset(id).unwrap_or_else(|e| panic!("{id}: {e}"))
}

#[test]
fn torchvision_counts() {
    for (id, n) in [
        ("resnet18", 11_689_512),
        ("resnet34", 21_797_672),
        ("resnet50", 25_557_032),
        ("resnet101", 44_549_160),
        ("resnet152", 60_192_808),
        ("vgg11", 132_863_336),
        ("vgg13", 133_047_848),
        ("vgg16", 138_357_544),
        ("vgg19", 143_667_240),
        ("vgg11_bn", 132_868_840),
        ("vgg13_bn", 133_053_736),
        ("vgg16_bn", 138_365_992),
        ("vgg19_bn", 143_678_248),
        ("inception_v3", 27_161_264),
    ] {
        assert_eq!(preset_params(id), n, "{id}");
    }
}

#[test]
fn inception_v3_without_aux_classifier() {
    // AuxLogits: conv0 768·128 + BN 2·128, conv1 128·768·5·5 + BN 2·768, fc 768·1000 + 1000
    // = 3,326,696 = 27,161,264 − 23,834,568.
    assert_eq!(params(&inception_v3(false)), 23_834_568);
    let with = presets::build("inception_v3").unwrap();
    let out = Prepared::new(&with, &TrainConfig { batch: 2, ..Default::default() }).unwrap().estimate();
    let last = out.layers.iter().rfind(|l| l.info.depth == 0).unwrap();
    assert_eq!(last.info.output_shape.0, vec![1000]);
}

#[test]
fn transformer_counts() {
    for (id, n) in [
        ("bert-base", 109_482_240),
        ("bert-large", 335_141_888),
        ("bert-base-seqcls", 109_483_778),
        ("bert-large-seqcls", 335_143_938),
        // GPT2LMHeadModel: lm_head shares wte's weight, so it adds nothing.
        ("gpt2", 124_439_808),
    ] {
        assert_eq!(preset_params(id), n, "{id}");
    }
}

#[test]
fn bert_base_without_pooler() {
    // The pooler is Linear(768, 768): 768·768 + 768 = 590,592.
    assert_eq!(109_482_240 - (768 * 768 + 768), 108_891_648);
    let mut spec = presets::build("bert-base").unwrap();
    let n = spec.layers.len();
    assert_eq!(spec.layers[n - 1].kind(), "tanh");
    spec.layers.truncate(n - 3); // select_token, linear, tanh
    assert_eq!(params(&spec), 108_891_648);
}

#[test]
fn lstm_ptb_medium_count() {
    // encoder Embedding(10000, 650):                       6,500,000
    // LSTM(650, 650, 2): per layer w_ih 4·650·650 + w_hh 4·650·650 + b_ih 4·650 + b_hh 4·650
    //                  = 1,690,000 + 1,690,000 + 2,600 + 2,600 = 3,385,200; × 2 = 6,770,400
    // decoder Linear(650, 10000): weight tied to the encoder, bias  10,000
    // total                                                    13,280,400
    assert_eq!(10_000 * 650 + 2 * (2 * 4 * 650 * 650 + 2 * 4 * 650) + 10_000, 13_280_400);
    assert_eq!(preset_params("lstm-ptb"), 13_280_400);
    let spec = presets::build("lstm-ptb").unwrap();
    assert_eq!(spec.input.shape, vec![35]);
    assert_eq!(spec.input.vocab_size, Some(10_000));
}

#[test]
fn gpt2_is_causal_prenorm_and_tied() {
    let spec = presets::build("gpt2").unwrap();
    let json = serde_json::to_value(&spec).unwrap();
    let layer = &json["layers"][3]["body"][0];
    assert_eq!(layer["kind"], "transformer_decoder_layer");
    assert_eq!(layer["norm_first"], true);
    assert_eq!(layer["fused_qkv"], true);
    assert_eq!(layer["activation"], "gelu_new");
    let head = json["layers"].as_array().unwrap().last().unwrap();
    assert_eq!(head["tied_weight"], true);
    // logits per token over the vocabulary
    let out = Prepared::new(&spec, &TrainConfig { batch: 1, seq_len: Some(16), ..Default::default() }).unwrap().estimate();
    assert_eq!(out.layers.iter().rfind(|l| l.info.depth == 0).unwrap().info.output_shape.0, vec![16, 50257]);
}

#[test]
fn every_preset_resolves_and_round_trips_through_json() {
    for p in presets::list() {
        let spec = build(p.id);
        let text = spec.to_json_pretty();
        let back = ModelSpec::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", p.id));
        assert_eq!(back, spec, "{} does not round-trip", p.id);
        let compact: ModelSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
        assert_eq!(compact, spec);
        assert!(params(&spec) > 0, "{}", p.id);
        assert_eq!(spec.name.as_deref(), Some(p.spec_name), "{}: PresetInfo::spec_name", p.id);
        let first = presets::list().iter().find(|q| build(q.id).name == spec.name).unwrap();
        assert_eq!(presets::named(p.spec_name).map(|q| q.id), Some(first.id));
    }
    assert!(presets::build("resnet9000").is_err());
    assert!(vramcalc_core::import::preset("resnet9000").is_err());
}

/// The presets of published Hugging Face configs (`presets/configs/*.json`): the counts
/// transformers 5.24 gives on the meta device (`tools/hf_param_counts.py --config-files`, kept in
/// `tests/data/hf/preset_counts.json`), which are also the published counts (Llama-3.1-8B
/// 8,030,261,248; DeepSeek-V3 671,026,404,352 without its multi-token-prediction layer).
#[test]
fn published_config_counts() {
    let measured: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hf/preset_counts.json")).unwrap())
            .unwrap();
    let mut n = 0;
    for (id, want) in [
        ("vit-b-16", 86_567_656u64),
        ("roberta-base", 124_645_632),
        ("t5-base", 222_903_552),
        ("whisper-small", 241_734_912),
        ("llama-3.1-8b", 8_030_261_248),
        ("llama-3.1-70b", 70_553_706_496),
        ("mistral-7b-v0.3", 7_248_023_552),
        ("qwen2.5-0.5b", 494_032_768),
        ("qwen2.5-7b", 7_615_616_512),
        ("qwen2.5-72b", 72_706_203_648),
        ("gemma-2-9b", 9_241_705_984),
        ("phi-3-mini", 3_821_079_552),
        ("mixtral-8x7b", 46_702_792_704),
        ("deepseek-v3", 671_026_404_352),
        ("qwen3-8b", 8_190_735_360),
        ("qwen3-32b", 32_762_123_264),
        ("qwen3-30b-a3b", 30_532_122_624),
        ("qwen3-235b-a22b", 235_093_634_560),
        ("glm-4.5-air", 106_852_245_504),
        ("gpt-oss-20b", 20_914_757_184),
        ("gpt-oss-120b", 116_829_156_672),
        ("gemma-3-27b", 27_432_406_640),
        ("qwen3-next-80b-a3b", 79_674_391_296),
        ("llama-4-scout-17b-16e", 107_769_861_120),
        ("qwen2.5-vl-7b", 8_292_166_656),
        ("kimi-k2", 1_026_408_209_408),
        ("mistral-small-3.2-24b", 23_572_403_200),
        ("falcon-h1-7b", 7_585_513_568),
    ] {
        assert_eq!(measured[id].as_u64(), Some(want), "{id}: preset_counts.json");
        assert_eq!(preset_params(id), want, "{id}");
        assert!(presets::hf_config(id).is_some() && presets::build(id).is_err(), "{id} is built by the importer");
        n += 1;
    }
    let hf = presets::list().iter().filter(|p| presets::hf_config(p.id).is_some()).count();
    assert_eq!(hf, n, "every preset of a published config has its count here");
}

#[test]
fn preset_ids_are_the_issue_list() {
    let ids: Vec<&str> = presets::list().iter().map(|p| p.id).collect();
    for id in [
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn",
        "vgg13_bn", "vgg16_bn", "vgg19_bn", "inception_v3", "bert-base", "bert-large", "bert-base-seqcls",
        "bert-large-seqcls", "lstm-ptb", "gpt2",
    ] {
        assert!(ids.contains(&id), "missing preset {id}");
    }
}

/// cs231n "CNNs in practice" VGGNet table: per-image activation counts of every row.
#[test]
fn vgg16_layer_shapes_match_cs231n() {
    let spec = presets::build("vgg16").unwrap();
    let est = Prepared::new(&spec, &TrainConfig { batch: 1, ..Default::default() }).unwrap().estimate();
    let rows: Vec<_> = est
        .layers
        .iter()
        .filter(|l| matches!(l.info.kind.as_str(), "conv2d" | "max_pool2d" | "linear"))
        .map(|l| (l.info.kind.as_str(), l.info.output_shape.0.to_vec(), l.info.activation_values))
        .collect();
    let expected: Vec<(&str, Vec<u64>)> = vec![
        ("conv2d", vec![64, 224, 224]),
        ("conv2d", vec![64, 224, 224]),
        ("max_pool2d", vec![64, 112, 112]),
        ("conv2d", vec![128, 112, 112]),
        ("conv2d", vec![128, 112, 112]),
        ("max_pool2d", vec![128, 56, 56]),
        ("conv2d", vec![256, 56, 56]),
        ("conv2d", vec![256, 56, 56]),
        ("conv2d", vec![256, 56, 56]),
        ("max_pool2d", vec![256, 28, 28]),
        ("conv2d", vec![512, 28, 28]),
        ("conv2d", vec![512, 28, 28]),
        ("conv2d", vec![512, 28, 28]),
        ("max_pool2d", vec![512, 14, 14]),
        ("conv2d", vec![512, 14, 14]),
        ("conv2d", vec![512, 14, 14]),
        ("conv2d", vec![512, 14, 14]),
        ("max_pool2d", vec![512, 7, 7]),
        ("linear", vec![4096]),
        ("linear", vec![4096]),
        ("linear", vec![1000]),
    ];
    assert_eq!(rows.len(), expected.len());
    for (i, ((kind, shape, values), (ek, es))) in rows.iter().zip(&expected).enumerate() {
        assert_eq!((*kind, shape), (*ek, es), "row {i}");
        assert_eq!(*values, es.iter().product::<u64>(), "row {i}");
    }
    let input: u64 = 3 * 224 * 224; // the INPUT row: 150,528
    let total = input + rows.iter().map(|r| r.2).sum::<u64>();
    assert_eq!(total, 15_237_608);
}

/// Every JSON example in `docs/spec-format.md` parses (as a spec, a layer or a list of layers),
/// and the whole-spec examples resolve.
#[test]
fn spec_format_doc_examples_parse() {
    let path = format!("{}/../../docs/spec-format.md", env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(&path).unwrap();
    let blocks: Vec<&str> = doc.split("```json").skip(1).map(|b| b.split("```").next().unwrap()).collect();
    assert!(blocks.len() >= 6);
    for block in blocks {
        if let Ok(spec) = ModelSpec::from_json(block) {
            Prepared::new(&spec, &TrainConfig { batch: 2, ..Default::default() }).unwrap_or_else(|e| panic!("{e}: {block}"));
        } else if serde_json::from_str::<vramcalc_core::Layer>(block).is_err() {
            let layers: Vec<vramcalc_core::Layer> = serde_json::from_str(block).unwrap_or_else(|e| panic!("{e}: {block}"));
            assert!(!layers.is_empty());
        }
    }
}

/// Presets whose checkpoints are published quantised load as stored in inference (the CLI's
/// default weights): gpt-oss's MXFP4 experts, DeepSeek-V3's and Kimi-K2's FP8 with 128 × 128
/// fp32 block scales. Kimi-K2 then holds one byte per quantised weight plus its scales, and
/// bf16 only for embeddings, head, routers and norms: 1.000–1.01 bytes a parameter.
#[test]
fn published_quantizations_count_as_stored() {
    for (id, want) in [("gpt-oss-20b", "mxfp4"), ("gpt-oss-120b", "mxfp4"), ("deepseek-v3", "fp8-block128"), ("kimi-k2", "fp8-block128")] {
        assert_eq!(presets::published_weights(id).map(|w| w.name()), Some(want.to_string()), "{id}");
        assert!(presets::info(id).is_some(), "{id} is a preset");
    }
    assert_eq!(presets::published_weights("qwen3-8b"), None);
    let spec = build("kimi-k2");
    let c = vramcalc_core::TrainConfig {
        batch: 1,
        seq_len: Some(16),
        mode: vramcalc_core::Mode::Infer,
        precision: vramcalc_core::Precision::Bf16,
        weights: presets::published_weights("kimi-k2"),
        ..vramcalc_core::TrainConfig::default()
    };
    let e = vramcalc_core::estimate(&spec, &c).unwrap();
    let per_param = e.param_bytes as f64 / e.params as f64;
    assert!((1.0..1.01).contains(&per_param), "{per_param} bytes a parameter");
}
