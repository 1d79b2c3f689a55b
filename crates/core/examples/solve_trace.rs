use vramcalc_core::finetune::{BaseFormat, FineTune, Method};
use vramcalc_core::solve::{largest_by, Setup, Variable};
use vramcalc_core::{GenerateConfig, Mode, Precision, TrainConfig};
fn main() {
    let spec = vramcalc_core::import::preset("llama-3.1-70b").unwrap();
    let qlora = FineTune { method: Method::Qlora, lora_r: 16, lora_alpha: 32.0, base_format: Some(BaseFormat::Nf4), ..FineTune::default() };
    let train = TrainConfig { batch: 1, seq_len: Some(4096), precision: Precision::Bf16, checkpointing: true, finetune: qlora, ..TrainConfig::default() };
    let infer = TrainConfig { batch: 1, seq_len: Some(4096), mode: Mode::Infer, precision: Precision::Bf16, weights: Some(vramcalc_core::formats::WeightFormat::parse("gguf-q4_k_m").unwrap()), ..TrainConfig::default() };
    let generate = TrainConfig { mode: Mode::Generate, generate: GenerateConfig { prompt_len: Some(1024), new_tokens: 256, ..Default::default() }, ..infer };
    let cap = 143_771u64 << 20;
    for (c, of) in [(train, Variable::SeqLen), (generate, Variable::PromptLen)] {
        let s = Setup::new(&spec, c);
        let t = std::time::Instant::now();
        let (v, seen) = largest_by(1, 1 << 24, s.current(of).unwrap(), cap, |k| Ok(s.at(of, k)?.totals().ok())).unwrap();
        println!("{of}: {v:?} in {:?}", t.elapsed());
        for (x, m) in seen { println!("  {x:>9} {:?}", m.map(|m| m.1 as i64 - cap as i64)); }
    }
    let s = Setup::new(&spec, TrainConfig { seq_len: Some(36736), ..train });
    let t = std::time::Instant::now();
    let p = s.prepared().unwrap();
    let t1 = t.elapsed();
    let _ = p.peak_at(1);
    println!("prepare {:?}, peak_at {:?}", t1, t.elapsed() - t1);
    let c = TrainConfig { seq_len: Some(36736), ..train };
    let t = std::time::Instant::now();
    for _ in 0..10 { let _ = vramcalc_core::estimate(&spec, &c).unwrap(); }
    println!("estimate {:?}", t.elapsed() / 10);
    let t = std::time::Instant::now();
    let opts = vramcalc_core::lower::LowerOptions { training: true, precision: c.precision, autocast_device: c.autocast_device, device: c.device, attention: c.attention,
        checkpointing: true, inplace_relu: None, framework: c.framework, finetune: c.finetune, generation: None, sequence_parallel: 1 };
    for _ in 0..10 { let _ = vramcalc_core::resolve::resolve(&spec, c.seq_len, opts).unwrap(); }
    println!("resolve {:?}", t.elapsed() / 10);
}
#[allow(dead_code)]
fn unused() {}
