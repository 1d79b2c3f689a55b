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

    let big = stack(10_000);
    let d = median_time(|| {
        black_box(vramcalc_core::estimate(&big, &TrainConfig::default()).unwrap());
    });
    report("generated 10,000-layer stack estimate", d, Some(Duration::from_millis(50)));
}
