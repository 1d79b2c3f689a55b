//! Share links: compact, round-tripping, stable (saved links keep decoding to the same state),
//! and safe (tampered, truncated, oversized or bomb links are errors, never panics).

#[path = "../examples/fuzz_share.rs"]
#[allow(dead_code)]
mod fuzz_share;

use vramcalc_core::presets;
use vramcalc_core::share::{
    carries_spec, decode, decode_preset, names_hub_model, encode, encode_preset, ModelSource, ShareError, ShareState, MAX_LINK_LEN,
};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{ByteUnit, OptimizerKind, Precision, TrainConfig};

fn preset_with_settings() -> ShareState {
    ShareState {
        model: ModelSource::Preset { id: "gpt2".into() },
        config: TrainConfig {
            batch: 8,
            seq_len: Some(512),
            precision: Precision::AmpBf16,
            optimizer: OptimizerKind::Adam8bit,
            checkpointing: true,
            grad_accum: 4,
            ..TrainConfig::default()
        },
        gpu: Some("a100-80gb".into()),
        capacity_bytes: None,
        unit: ByteUnit::Mib,
        lang: "de".into(),
        dist: Default::default(),
        ..ShareState::default()
    }
}

/// A hand-written 50-layer CNN: 15 conv/BN/ReLU blocks in 5 stages, pools, classifier.
fn custom_cnn() -> ModelSpec {
    let mut layers = Vec::new();
    let mut c = 3;
    for (stage, width) in [32u64, 64, 128, 256, 512].into_iter().enumerate() {
        for _ in 0..3 {
            layers.push(serde_json::json!({"kind": "conv2d", "in_channels": c, "out_channels": width, "kernel_size": 3, "padding": 1, "bias": false}));
            layers.push(serde_json::json!({"kind": "batch_norm2d", "num_features": width}));
            layers.push(serde_json::json!({"kind": "relu", "inplace": true}));
            c = width;
        }
        if stage < 2 {
            layers.push(serde_json::json!({"kind": "max_pool2d", "kernel_size": 2}));
        }
    }
    layers.push(serde_json::json!({"kind": "adaptive_avg_pool2d", "output_size": 1}));
    layers.push(serde_json::json!({"kind": "flatten"}));
    layers.push(serde_json::json!({"kind": "linear", "in_features": 512, "out_features": 100}));
    assert_eq!(layers.len(), 50);
    let spec = serde_json::json!({"version": 1, "name": "my-cnn", "input": {"shape": [3, 64, 64]}, "layers": layers});
    ModelSpec::from_json(&spec.to_string()).unwrap()
}

fn round_trip(state: &ShareState) -> String {
    let link = encode(state).unwrap();
    assert_eq!(&decode(&link).unwrap(), state, "{link}");
    assert_eq!(&decode(&format!("#{link}")).unwrap(), state);
    assert_eq!(&decode(&format!("https://example.org/vramcalc/?embed#{link}")).unwrap(), state);
    link
}

#[test]
fn links_are_compact() {
    let preset = round_trip(&preset_with_settings());
    println!("preset with changed settings: {} characters: {preset}", preset.len());
    assert!(preset.len() <= 120, "{preset}");
    assert!(preset.starts_with("v1.p=gpt2,"), "{preset}");

    let cnn = ShareState { model: ModelSource::Spec(custom_cnn()), config: TrainConfig { batch: 64, ..Default::default() }, gpu: Some("rtx-4090".into()), ..Default::default() };
    let cnn_link = round_trip(&cnn);
    println!("custom 50-layer CNN: {} characters", cnn_link.len());
    assert!(cnn_link.len() <= 1500, "{}", cnn_link.len());

    // edited presets travel as specs, also within the budget
    for id in ["resnet50", "vgg16_bn", "inception_v3", "bert-base", "gpt2"] {
        let state = ShareState { model: ModelSource::Spec(presets::build(id).unwrap()), ..Default::default() };
        let link = round_trip(&state);
        println!("{id} as an edited spec: {} characters", link.len());
        assert!(link.len() <= 3000, "{id}: {}", link.len());
    }
    assert_eq!(encode(&ShareState::default()).unwrap(), "v1.p=resnet50");
}

#[test]
fn every_setting_round_trips() {
    let mut state = preset_with_settings();
    state.capacity_bytes = Some(12_345_678_901);
    state.config.inplace_relu = Some(false);
    state.config.mode = vramcalc_core::Mode::Infer;
    state.config.attention = vramcalc_core::AttentionImpl::Eager;
    state.config.device = vramcalc_core::Device::Cpu;
    state.config.autocast_device = vramcalc_core::AutocastDevice::Cpu;
    state.config.optimizer_impl = vramcalc_core::OptimizerImpl::Fused;
    state.config.framework = vramcalc_core::Framework::Candle;
    state.lang = "pt-BR, ünïcode=ok".into();
    state.gpu = Some("my,gpu=1".into());
    round_trip(&state);
    state.dist = gpt2_fsdp().dist;
    state.dist.offload = vramcalc_core::distributed::Offload::Optimizer;
    state.dist.gradient_as_bucket_view = true;
    round_trip(&state);
    for id in presets::list().iter().map(|p| p.id) {
        round_trip(&ShareState { model: ModelSource::Preset { id: id.into() }, ..Default::default() });
        round_trip(&ShareState { model: ModelSource::Spec(vramcalc_core::import::preset(id).unwrap()), ..Default::default() });
    }
}

/// The states behind `tests/data/share_links.txt`.
fn saved(name: &str) -> ShareState {
    match name {
        "default" => ShareState::default(),
        "gpt2-settings" => preset_with_settings(),
        "custom-cnn" => ShareState {
            model: ModelSource::Spec(custom_cnn()),
            config: TrainConfig { batch: 64, ..Default::default() },
            gpu: Some("rtx-4090".into()),
            ..Default::default()
        },
        "resnet18-edited" => {
            let mut spec = presets::build("resnet18").unwrap();
            spec.input.shape = vec![3, 128, 128];
            // made before specs carried their layers' own names
            spec.names.clear();
            ShareState {
                model: ModelSource::Spec(spec),
                config: TrainConfig { batch: 256, optimizer: OptimizerKind::SgdMomentum, precision: Precision::AmpFp16, ..Default::default() },
                capacity_bytes: Some(24_000_000_000),
                ..Default::default()
            }
        }
        "gpt2-generate" => ShareState {
            model: ModelSource::Preset { id: "gpt2".into() },
            config: TrainConfig {
                batch: 4,
                precision: Precision::Fp16,
                mode: vramcalc_core::Mode::Generate,
                generate: vramcalc_core::GenerateConfig {
                    prompt_len: Some(512),
                    new_tokens: 128,
                    cache: vramcalc_core::KvCacheKind::Paged,
                    logits_to_keep: 0,
                    kv_dtype: Some(vramcalc_core::KvDType::Fp8),
                },
                ..Default::default()
            },
            gpu: Some("h100-80gb".into()),
            ..Default::default()
        },
        "gpt2-fsdp" => gpt2_fsdp(),
        "qwen-hub" => ShareState {
            model: ModelSource::Hub("Qwen/Qwen2.5-7B-Instruct@main".into()),
            config: TrainConfig { batch: 1, seq_len: Some(4096), precision: Precision::AmpBf16, ..Default::default() },
            gpu: Some("rtx-4090".into()),
            ..Default::default()
        },
        "llama-serve-measured" => ShareState {
            model: ModelSource::Preset { id: "llama-3.1-8b".into() },
            config: TrainConfig { batch: 16, seq_len: Some(4096), precision: Precision::Bf16, mode: vramcalc_core::Mode::Infer, ..Default::default() },
            gpu: Some("h100-80gb".into()),
            engine: Some("vllm".into()),
            measured_peak_bytes: Some(71_000_000_000),
            ..Default::default()
        },
        other => panic!("no expected state for saved link `{other}`"),
    }
}

/// GPT-2 on 8 GPUs, FSDP2 × TP 2 with bf16 parameters and fp32 reduction.
fn gpt2_fsdp() -> ShareState {
    use vramcalc_core::distributed::{DistConfig, MpDtype, Strategy};
    ShareState {
        model: ModelSource::Preset { id: "gpt2".into() },
        dist: DistConfig {
            gpus: 8,
            strategy: Strategy::Fsdp,
            tp: 2,
            reshard_after_forward: false,
            fsdp_param_dtype: Some(MpDtype::Bf16),
            fsdp_reduce_dtype: Some(MpDtype::Fp32),
            ..DistConfig::default()
        },
        ..Default::default()
    }
}

const SAVED: &[&str] = &["default", "gpt2-settings", "custom-cnn", "resnet18-edited", "gpt2-generate", "gpt2-fsdp", "qwen-hub", "llama-serve-measured"];

/// Links made on the day v1 was written; they must decode to these states forever.
#[test]
fn saved_links_still_decode() {
    let path = format!("{}/tests/data/share_links.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let links: Vec<(&str, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_once(' ').unwrap())
        .collect();
    assert_eq!(links.len(), SAVED.len());
    for (name, link) in links {
        let want = saved(name);
        assert_eq!(decode(link).unwrap_or_else(|e| panic!("{name}: {e}")), want, "{name}");
    }
}

/// The preset-only codec (the web app's main bundle) writes and reads exactly what the full codec
/// does for presets, and refuses custom models instead of mangling them.
#[test]
fn preset_codec_agrees_with_the_full_codec() {
    let path = format!("{}/tests/data/share_links.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let mut checked = (0, 0);
    for (name, link) in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()).filter_map(|l| l.split_once(' ')) {
        let state = saved(name);
        let custom = matches!(state.model, ModelSource::Spec(_));
        assert_eq!(carries_spec(link), custom, "{name}");
        assert_eq!(carries_spec(&format!("https://x.org/#{link}")), custom, "{name} in a URL");
        if custom {
            assert_eq!(decode_preset(link), Err(ShareError::NeedsSpecCodec), "{name}");
            assert_eq!(encode_preset(&state), Err(ShareError::NeedsSpecCodec), "{name}");
            checked.1 += 1;
        } else {
            assert_eq!(decode_preset(link).unwrap(), state, "{name}");
            assert_eq!(encode_preset(&state).unwrap(), encode(&state).unwrap(), "{name}");
            checked.0 += 1;
        }
    }
    assert_eq!(checked, (6, 2));
    // a preset link's other errors are the full decoder's
    for bad in ["v1.p=vgg16,b=abc", "v2.p=vgg16", "v1.p=vgg16,p=vgg11", ""] {
        assert_eq!(decode_preset(bad), decode(bad), "{bad:?}");
    }
    assert!(!carries_spec("v1.p=vgg16,sl=128"), "`sl=` is not `s=`");
    assert!(names_hub_model("https://x.org/#v1.h=gpt2,b=2") && !names_hub_model("v1.p=gpt2,ch=1"));
}

/// Prints the saved links for today's encoder (to extend `share_links.txt`):
/// `cargo test -p vramcalc-core --test share -- --ignored --nocapture print_links`.
#[test]
#[ignore]
fn print_links() {
    for name in SAVED {
        println!("{name} {}", encode(&saved(name)).unwrap());
    }
}

#[test]
fn bad_links_say_what_is_wrong() {
    let err = |link: &str| decode(link).unwrap_err();
    assert_eq!(err(""), ShareError::Empty);
    assert_eq!(err("#"), ShareError::Empty);
    assert!(matches!(err("v9.p=x"), ShareError::UnknownVersion(v) if v == "v9"));
    assert!(matches!(err("hello"), ShareError::UnknownVersion(_)));
    assert!(matches!(err("v1."), ShareError::Malformed(_)));
    assert!(matches!(err("v1.b=8"), ShareError::Malformed(m) if m.contains("no model")));
    assert!(matches!(err("v1.p=gpt2,p=bert-base"), ShareError::Field { key, .. } if key == "p"));
    // a hub model's id: one model per link, never empty
    assert!(matches!(err("v1.p=gpt2,h=Qwen%2FQwen2.5-7B"), ShareError::Field { key, .. } if key == "h"));
    assert!(matches!(err("v1.h="), ShareError::Field { key, message } if key == "h" && message.contains("empty")));
    assert!(matches!(err("v1.p=gpt2,b=0"), ShareError::Field { key, .. } if key == "b"));
    assert!(matches!(err("v1.p=gpt2,b=99999999999999999999"), ShareError::Field { key, .. } if key == "b"));
    assert!(matches!(err("v1.p=gpt2,ck=yes"), ShareError::Field { key, .. } if key == "ck"));
    assert!(matches!(err("v1.p=gpt2,pr=fp64"), ShareError::Field { key, .. } if key == "config"));
    assert!(matches!(err("v1.p=gpt2,u=GB"), ShareError::Field { key, .. } if key == "u"));
    assert!(matches!(err("v1.p=gpt2,s=AAAA"), ShareError::Field { .. }));
    assert!(matches!(err("v1.s=!!"), ShareError::Field { key, .. } if key == "s"));
    assert!(matches!(err(&format!("v1.p={}", "x".repeat(MAX_LINK_LEN))), ShareError::TooLong { .. }));
    // a truncated link
    let link = encode(&ShareState { model: ModelSource::Spec(custom_cnn()), ..Default::default() }).unwrap();
    for cut in [link.len() - 1, link.len() - 7, link.len() / 2, 5] {
        assert!(decode(&link[..cut]).is_err(), "cut at {cut}");
    }
    // unknown config keys (fields added after v1) are ignored
    assert_eq!(decode("v1.p=resnet50,some_future_field=3").unwrap(), ShareState::default());
}

#[test]
fn sizes_are_bounded() {
    use vramcalc_core::share::base64url_encode;
    let deflated = |json: &[u8]| {
        let mut payload = vec![1u8];
        payload.extend(miniz_oxide::deflate::compress_to_vec(json, 6));
        format!("v1.s={}", base64url_encode(&payload))
    };
    // a decompression bomb: 64 MiB of spaces is a ~64 kB link... this one is 16 MiB → ~16 kB
    let bomb = deflated(&vec![b' '; 16 << 20]);
    assert!(bomb.len() < MAX_LINK_LEN, "{}", bomb.len());
    assert!(matches!(decode(&bomb), Err(ShareError::TooLarge(m)) if m.contains("inflates")));
    // 10^9 layers by repeat
    let huge = deflated(br#"{"input":{"shape":[3,8,8]},"layers":[{"kind":"repeat","times":1000000000,"body":[{"kind":"relu"}]}]}"#);
    assert!(matches!(decode(&huge), Err(ShareError::TooLarge(_))), "{:?}", decode(&huge));
    // nested repeats multiply
    let nested = deflated(br#"{"input":{"shape":[4]},"layers":[{"kind":"repeat","times":1000,"body":[{"kind":"repeat","times":1000,"body":[{"kind":"relu"}]}]}]}"#);
    assert!(matches!(decode(&nested), Err(ShareError::TooLarge(_))));
    // deep nesting
    let mut deep = String::from(r#"{"input":{"shape":[4]},"layers":"#);
    for _ in 0..40 {
        deep.push_str(r#"[{"kind":"sequential","layers":"#);
    }
    deep.push_str("[]");
    for _ in 0..40 {
        deep.push_str("}]");
    }
    deep.push('}');
    assert!(decode(&deflated(deep.as_bytes())).is_err());
    // and encode refuses what decode would refuse
    let spec: ModelSpec = serde_json::from_str(r#"{"input":{"shape":[4]},"layers":[{"kind":"repeat","times":1000000000,"body":[{"kind":"relu"}]}]}"#).unwrap();
    assert!(encode(&ShareState { model: ModelSource::Spec(spec), ..Default::default() }).is_err());
}

#[test]
fn fuzz_smoke() {
    let stats = fuzz_share::fuzz(5_000, 7);
    assert_eq!(stats.runs, 5_000);
    assert!(stats.ok > 50 && stats.errors > 1000, "{stats:?}");
}

/// The engine (`e`) and a measured peak (`mp`) travel in a link and are left out when unset.
#[test]
fn engine_and_measured_peak_round_trip() {
    let state = ShareState { engine: Some("vllm".into()), measured_peak_bytes: Some(17_179_869_184), ..preset_with_settings() };
    let link = encode(&state).unwrap();
    assert!(link.ends_with(",e=vllm,mp=17179869184"), "{link}");
    assert_eq!(decode(&link).unwrap(), state);
    assert!(!encode(&preset_with_settings()).unwrap().contains("e="));
    assert!(decode("v1.p=gpt2,mp=lots").is_err() && decode("v1.p=gpt2,e=").is_err());
}
