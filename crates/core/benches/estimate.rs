//! Estimate latency (issue 3's speed bar): `cargo bench -p vramcalc-core`.
//! A small timing harness (median of repeated runs) instead of criterion keeps CI builds short.

use std::hint::black_box;
use std::time::{Duration, Instant};
use vramcalc_core::memory::Prepared;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{presets, TrainConfig};

fn median_time(mut f: impl FnMut()) -> Duration {
    f(); // warm-up
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < 15 || (start.elapsed() < Duration::from_secs(2) && times.len() < 1000) {
        let t = Instant::now();
        f();
        times.push(t.elapsed());
    }
    times.sort();
    times[times.len() / 2]
}

fn report(name: &str, d: Duration, target: Option<Duration>) {
    let verdict = match target {
        Some(t) if d <= t => format!("(target ≤ {t:?}: met)"),
        Some(t) => format!("(target ≤ {t:?}: MISSED)"),
        None => String::new(),
    };
    println!("{name:<44} {:>10.3} ms {verdict}", d.as_secs_f64() * 1e3);
}

fn stack(n: usize) -> ModelSpec {
    let mut layers = Vec::new();
    for _ in 0..n / 2 {
        layers.push(serde_json::json!({"kind": "linear", "in_features": 256, "out_features": 256}));
        layers.push(serde_json::json!({"kind": "relu"}));
    }
    serde_json::from_value(serde_json::json!({"input": {"shape": [256]}, "layers": layers})).unwrap()
}

/// `meta-llama/Meta-Llama-3-70B`'s `config.json` (the fields the importer reads).
const LLAMA3_70B: &str = r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192,
    "intermediate_size": 28672, "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "hidden_act": "silu"}"#;

fn main() {
    let bert = presets::build("bert-large").unwrap();
    let cfg = TrainConfig { batch: 8, seq_len: Some(512), ..TrainConfig::default() };
    let batches: Vec<u64> = (1..=64).collect();

    let d = median_time(|| {
        black_box(Prepared::new(&bert, &cfg).unwrap().estimate());
    });
    report("BERT-large seq 512 training estimate", d, None);

    let d = median_time(|| {
        let p = Prepared::new(&bert, &cfg).unwrap();
        black_box(p.estimate());
        black_box(p.sweep(&batches));
    });
    report("BERT-large seq 512 + 64-point batch sweep", d, Some(Duration::from_millis(1)));

    let resnet = presets::build("resnet152").unwrap();
    let d = median_time(|| {
        black_box(vramcalc_core::estimate(&resnet, &TrainConfig::default()).unwrap());
    });
    report("ResNet-152 batch 32 estimate", d, None);

    // Issue 12's bar: DeepSeek-V3 (61 layers, 256 experts, 671 B parameters) at batch 1, seq 4096
    let deepseek = vramcalc_core::import::hf::from_config_json(include_str!("../tests/data/hf/deepseek_v3.config.json")).unwrap();
    let cfg = TrainConfig { batch: 1, seq_len: Some(4096), ..TrainConfig::default() };
    let d = median_time(|| {
        black_box(vramcalc_core::estimate(&deepseek, &cfg).unwrap());
    });
    report("DeepSeek-V3 batch 1 seq 4096 estimate", d, Some(Duration::from_millis(5)));

    // Issue 14's bar: Llama-3-70B (80 layers, GQA 64/8) generating 4,096 tokens after a
    // 1,024-token prompt, bf16, dynamic cache: prefill, decode peak and the 4,095-step series
    let llama70b = vramcalc_core::import::hf::from_config_json(LLAMA3_70B).unwrap();
    let generate = vramcalc_core::GenerateConfig { prompt_len: Some(1024), new_tokens: 4096, ..Default::default() };
    let cfg = TrainConfig { batch: 1, precision: vramcalc_core::Precision::Bf16, mode: vramcalc_core::Mode::Generate, generate, ..TrainConfig::default() };
    let d = median_time(|| {
        black_box(vramcalc_core::estimate(&llama70b, &cfg).unwrap());
    });
    report("Llama-3-70B generate 1,024 + 4,096 tokens", d, Some(Duration::from_millis(5)));

    let big = stack(10_000);
    let d = median_time(|| {
        black_box(vramcalc_core::estimate(&big, &TrainConfig::default()).unwrap());
    });
    report("generated 10,000-layer stack estimate", d, Some(Duration::from_millis(50)));
}
