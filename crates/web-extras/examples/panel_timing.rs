//! How long the LLM panel keeps the page's thread, for large models (native, release; the browser's
//! wasm is slower): the panel's synchronous part (fields, figures, serving capacity, fine-tuning
//! what-ifs), and the longest single step of a multi-GPU job's sizing, which yields to the page
//! between world sizes. `cargo run --release -p vramcalc-web-extras --example panel_timing`
use std::time::{Duration, Instant};
use vramcalc_core::distributed::{first_gpus, DistConfig, GpuSteps, Strategy};

fn main() {
    for (id, mode, dist) in [
        ("llama-3.1-8b", "train", "null"),
        ("llama-3.1-70b", "generate", "null"),
        ("llama-3.1-70b", "train", r#"{"gpus":8,"strategy":"fsdp"}"#),
        ("deepseek-v3", "train", r#"{"gpus":64,"strategy":"zero3"}"#),
    ] {
        let spec = vramcalc_core::import::preset(id).unwrap();
        let req = format!(
            r#"{{"spec":{},"config":{{"mode":"{mode}","batch":1,"seq_len":4096,"precision":"bf16"}},"dist":{dist},"lang":"en","capacity":85899345920,"unit":"MiB"}}"#,
            serde_json::to_string(&spec).unwrap()
        );
        let t = Instant::now();
        vramcalc_web_extras::llm_form(&req).unwrap();
        let panel = t.elapsed();
        let mut longest = Duration::ZERO;
        if dist != "null" {
            let d: DistConfig = serde_json::from_str(dist).unwrap();
            let c = vramcalc_core::TrainConfig { batch: 1, seq_len: Some(4096), precision: vramcalc_core::Precision::Bf16, ..Default::default() };
            let mut steps = GpuSteps::new(&spec, &c, &d, 1);
            loop {
                let t = Instant::now();
                let Some((n, _)) = steps.step() else { break };
                longest = longest.max(t.elapsed());
                if n >= 4096 || (d.strategy == Strategy::Ddp && n >= first_gpus(&d)) {
                    break;
                }
            }
        }
        println!("{id} {mode} dist={dist}: panel {:.1} ms, longest sizing step {:.1} ms", panel.as_secs_f64() * 1e3, longest.as_secs_f64() * 1e3);
    }
}
