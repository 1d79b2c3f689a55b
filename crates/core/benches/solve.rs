//! Reverse answers and the "what fits" table (issue 26's speed bars): `cargo bench -p vramcalc-core --bench solve`.
//! The same small harness as `estimate.rs` (median of repeated runs), with each run's CPU time
//! beside its wall time. `cargo bench … -- NAME` runs the cases whose name contains NAME.

use std::hint::black_box;
use std::time::{Duration, Instant};
use vramcalc_core::finetune::{BaseFormat, FineTune, Method};
use vramcalc_core::serve::ServeConfig;
use vramcalc_core::solve::fits::{self, FitsOptions, Workload};
use vramcalc_core::solve::{self, Setup, Variable};
use vramcalc_core::{GenerateConfig, Mode, ModelSpec, Precision, TrainConfig};

/// The CPU time this thread has run, in nanoseconds (Linux `/proc/thread-self/schedstat`, first
/// field); `None` elsewhere.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

/// Median wall time of repeated runs, and the median CPU time of a run: on a machine other
/// builds share, the wall time includes waiting for a core, the CPU time is what a quiet
/// machine's wall time would be (the verdict reads it where it is known).
struct Timing {
    wall: Duration,
    cpu: Option<Duration>,
}

fn median_time(mut f: impl FnMut()) -> Timing {
    f();
    let start = Instant::now();
    let (mut times, mut cpu) = (Vec::new(), Vec::new());
    while times.len() < 5 || (start.elapsed() < Duration::from_secs(3) && times.len() < 200) {
        let (t, c) = (Instant::now(), cpu_ns());
        f();
        times.push(t.elapsed());
        if let (Some(a), Some(b)) = (c, cpu_ns()) {
            cpu.push(Duration::from_nanos(b.saturating_sub(a)));
        }
    }
    times.sort();
    cpu.sort();
    Timing { wall: times[times.len() / 2], cpu: (cpu.len() == times.len()).then(|| cpu[cpu.len() / 2]) }
}

fn report(name: &str, d: Timing, target: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let judged = d.cpu.unwrap_or(d.wall);
    let verdict = if judged <= target { "met" } else { "MISSED" };
    let cpu = d.cpu.map_or(String::new(), |c| format!(", cpu {:>8.2} ms", ms(c)));
    println!("{name:<58} wall {:>8.2} ms{cpu} (target ≤ {target:?}: {verdict})", ms(d.wall));
}

const H200: u64 = 143_771 << 20;
const H100: u64 = 81_559 << 20;

/// Only the cases whose name contains the bench's first argument (`cargo bench … -- 70b`).
fn chosen(name: &str) -> bool {
    std::env::args().skip(1).find(|a| !a.starts_with('-')).is_none_or(|f| name.contains(f.as_str()))
}

fn reverse(name: &str, spec: &ModelSpec, config: TrainConfig, of: Variable, cap: u64, target: Duration) {
    if !chosen(name) {
        return;
    }
    let setup = Setup::new(spec, config);
    // a capacity the smallest value fits (DeepSeek-V3's QLoRA base is 1.3 TB): at least 1.5 × its total
    let (klo, _) = setup.range(of).unwrap();
    let least = setup.at(of, klo).unwrap().totals().unwrap().1;
    let cap = if least > cap { least / 2 * 3 } else { cap };
    let a = solve::max_value(&setup, of, cap).unwrap();
    let d = median_time(|| {
        black_box(solve::max_value(&setup, of, cap).unwrap());
    });
    report(&format!("{name} = {} ({} evaluations)", a.value, a.evaluations), d, target);
}

fn main() {
    let ms = Duration::from_millis;
    let qlora = FineTune { method: Method::Qlora, lora_r: 16, lora_alpha: 32.0, base_format: Some(BaseFormat::Nf4), ..FineTune::default() };
    for (id, target) in [("llama-3.1-70b", ms(20)), ("deepseek-v3", ms(50))] {
        let spec = vramcalc_core::import::preset(id).unwrap();
        // a MoE model's LoRA names its targets (peft has no default for it)
        let qlora = FineTune { lora_targets: vramcalc_core::resolve::proposed_lora_targets(&spec), ..qlora };
        let train = TrainConfig { batch: 1, seq_len: Some(4096), precision: Precision::Bf16, checkpointing: true, finetune: qlora, ..TrainConfig::default() };
        let infer = TrainConfig { batch: 1, seq_len: Some(4096), mode: Mode::Infer, precision: Precision::Bf16, weights: Some(vramcalc_core::formats::WeightFormat::parse("gguf-q4_k_m").unwrap()), ..TrainConfig::default() };
        let cap = if id == "deepseek-v3" { 16 * H200 } else { H200 };
        reverse(&format!("{id} QLoRA max batch"), &spec, train, Variable::Batch, cap, target);
        reverse(&format!("{id} QLoRA max seq-len"), &spec, train, Variable::SeqLen, cap, target);
        reverse(&format!("{id} q4_k_m infer max seq-len"), &spec, infer, Variable::SeqLen, cap, target);
        let generate = TrainConfig { mode: Mode::Generate, generate: GenerateConfig { prompt_len: Some(1024), new_tokens: 256, ..Default::default() }, ..infer };
        reverse(&format!("{id} q4_k_m generate max prompt-len"), &spec, generate, Variable::PromptLen, cap, target);
        let cfg = ServeConfig { tensor_parallel: 8, concurrency: Some(16), weights: Some(vramcalc_core::formats::WeightFormat::parse("fp8").unwrap()), ..ServeConfig::new(if id == "deepseek-v3" { H200 } else { H100 }, 8192) };
        let name = format!("{id} vLLM TP 8 fp8 longest context at 16");
        if !chosen(&name) {
            continue;
        }
        let d = median_time(|| {
            black_box(solve::max_serving(&spec, &cfg, Variable::Context).unwrap());
        });
        report(&name, d, target);
    }
    let models: Vec<(&str, ModelSpec)> = vramcalc_core::presets::PRESETS.iter().map(|p| (p.id, vramcalc_core::import::preset(p.id).unwrap())).collect();
    let refs: Vec<(&str, &ModelSpec)> = models.iter().map(|(id, s)| (*id, s)).collect();
    for w in Workload::ALL {
        if !chosen(&format!("fits table {}", w.name())) {
            continue;
        }
        let rows = fits::table(&refs, w, 24_564 << 20, &FitsOptions::default());
        let d = median_time(|| {
            black_box(fits::table(&refs, w, 24_564 << 20, &FitsOptions::default()));
        });
        report(&format!("fits table rtx-4090 {} ({} presets × 6: {} rows)", w.name(), refs.len(), rows.len()), d, ms(300));
    }
}
