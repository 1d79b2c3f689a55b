//! The tensors live at the peak of a `generate()` estimate's forward, to read against a PyTorch
//! trace of the same record (`tools/trace_vlm_live.py`): each live storage with its bytes at the
//! record's batch, its class, the shape of its first value and the op and layer that made it;
//! parameters summed. `STEP`: 0 the prefill, `n` decode step `n` (default: the prefill and the
//! last step); `OP=i` lists the live set after op `i` instead of at the peak.
//!
//! `cargo run -p vramcalc-core --example generate_live -- crates/core/tests/data/generate_vlm2.jsonl LINE [STEP…]`
//! (a record of `tools/trace_vlm_generate.py`: `config`, `batch`, `seq_len`, `new_tokens`, `attention`).

use vramcalc_core::graph::StorageClass;
use vramcalc_core::lower::LowerOptions;
use vramcalc_core::memory::generate::{lengths, stage};
use vramcalc_core::memory::OptimizerCost;
use vramcalc_core::{AttentionImpl, Device, GenerateConfig, Mode, Precision, TrainConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, line, steps @ ..] = args.as_slice() else {
        return Err("usage: generate_live RECORDS.jsonl LINE [STEP…]".into());
    };
    let text = std::fs::read_to_string(file)?;
    let line = text.lines().nth(line.parse()?).ok_or("no such line")?;
    let r: serde_json::Value = serde_json::from_str(line)?;
    let spec = vramcalc_core::import::hf::from_config(r["config"].as_object().ok_or("no `config`")?)?;
    let u = |k: &str| r[k].as_u64().ok_or(format!("no `{k}`"));
    let c = TrainConfig {
        batch: u("batch")?,
        seq_len: Some(u("seq_len")?),
        attention: if r["attention"] == "sdpa" { AttentionImpl::Sdpa } else { AttentionImpl::Eager },
        device: Device::Cpu,
        precision: Precision::Fp32,
        mode: Mode::Generate,
        generate: GenerateConfig { new_tokens: u("new_tokens")?, ..GenerateConfig::default() },
        ..TrainConfig::default()
    };
    let base = LowerOptions { training: false, precision: c.precision, device: c.device, attention: c.attention, ..LowerOptions::default() };
    let len = lengths(&spec, &c)?;
    let steps: Vec<u64> = match steps {
        [] => vec![0, len.new_tokens - 1],
        s => s.iter().map(|a| a.parse()).collect::<Result<_, _>>()?,
    };
    let at_op: Option<u32> = std::env::var("OP").ok().map(|o| o.parse()).transpose()?;
    for step in steps {
        let s = stage(&spec, &c, base, &len, step)?;
        let g = &s.resolved.graph;
        let run = s.plan.simulate(g, c.batch, OptimizerCost::default(), true, None);
        let sample = match at_op {
            Some(op) => run.timeline.iter().rposition(|p| p.op == op),
            None => run.timeline.iter().position(|p| p.bytes == run.peak),
        }
        .ok_or("no such sample")?;
        let live = s.plan.simulate(g, c.batch, OptimizerCost::default(), true, Some(sample));
        let op = &g.ops[run.timeline[sample].op as usize];
        println!("== step {step}: {} B after op {} {} ({})", run.timeline[sample].bytes, run.timeline[sample].op, op.name, s.resolved.layers[op.layer as usize].path);
        let mut rows = Vec::new();
        let mut params = 0;
        for &id in &live.snapshot_storages {
            let st = &g.storages[id as usize];
            let bytes = st.bytes.at(c.batch);
            if st.class == StorageClass::Param {
                params += bytes;
                continue;
            }
            let shape = g.values.iter().find(|v| v.storage == id).map(|v| v.shape.to_string()).unwrap_or_default();
            let made = g.ops.iter().find(|o| o.allocs.contains(&id)).map(|o| format!("{} ({})", o.name, s.resolved.layers[o.layer as usize].path));
            rows.push((bytes, format!("{:?} {shape} {}", st.class, made.unwrap_or_default())));
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        for (bytes, what) in rows {
            println!("{bytes:>12} {what}");
        }
        println!("{params:>12} parameters");
    }
    Ok(())
}
