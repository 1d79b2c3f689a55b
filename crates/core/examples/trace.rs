//! Prints the simulated memory after every op of a preset's step, for comparing with a PyTorch trace:
//! `cargo run -p vramcalc-core --example trace -- bert-base-seqcls 1 512 eager | less`.

use vramcalc_core::memory::Prepared;
use vramcalc_core::{presets, AttentionImpl, TrainConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let id = args.first().map(String::as_str).unwrap_or("resnet18");
    let batch = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let seq_len = args.get(2).and_then(|a| a.parse().ok());
    let attention = if args.get(3).map(String::as_str) == Some("eager") { AttentionImpl::Eager } else { AttentionImpl::Sdpa };
    let spec = presets::build(id).expect("preset");
    let cfg = TrainConfig { batch, seq_len, attention, optimizer: vramcalc_core::OptimizerKind::Sgd, ..TrainConfig::default() };
    let p = Prepared::new(&spec, &cfg).expect("model");
    let e = p.estimate();
    let g = &p.resolved.graph;
    for t in &e.timeline {
        let (name, layer) = match g.ops.get(t.op as usize) {
            Some(op) => (op.name, p.resolved.layers[op.layer as usize].path.as_str()),
            None => ("optimizer", ""),
        };
        println!("{} {:?} {name} {layer}", t.bytes, t.phase);
    }
    eprintln!("peak {} at {}", e.peak_bytes, e.peak_at);
}
