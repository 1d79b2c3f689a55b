//! What the LLM setup answers (issues 14–15, 22 item 4): the fewest GPUs a job fits on and rank
//! 0's device total against the number of GPUs, rank 0's breakdown by what the strategy
//! allocates, and a language model's serving capacity under vLLM with the page's weight format,
//! precision, KV dtype and tensor parallelism. Pure data from the core (the CLI's `fewest-gpus`,
//! `estimate --gpus`, `serve`); `components::llm_answers` draws it.

use vramcalc_core::distributed::{first_gpus, DistBreakdown, DistConfig, GpuSteps, Strategy};
use vramcalc_core::formats::{KvDtype, WeightFormat};
use vramcalc_core::serve::ServeConfig;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{DType, Mode, Precision, TrainConfig};

/// The largest job the sizing tries (the CLI's `fewest-gpus --max-gpus` default).
pub const MAX_GPUS: u64 = 4096;
/// The world sizes of the chart.
pub const CHART_GPUS: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The parts of rank 0's peak the strategy allocates (`DistBreakdown`), those present, by id.
pub fn rank_parts(x: &DistBreakdown) -> Vec<(&'static str, u64)> {
    [
        ("sharded-parameters", x.sharded_parameters),
        ("gathered-parameters", x.unsharded_parameters),
        ("sharded-gradients", x.sharded_gradients),
        ("gradient-buckets", x.gradient_buckets),
        ("all-gather-buffers", x.all_gather_buffers),
        ("reduce-scatter-buffers", x.reduce_scatter_buffers),
    ]
    .into_iter()
    .filter(|p| p.1 > 0)
    .collect()
}

/// The context a serving figure is for: generate mode's prompt and new tokens, else the sequence.
pub fn serve_context(spec: &ModelSpec, c: &TrainConfig) -> u64 {
    let g = &c.generate;
    match c.mode {
        Mode::Generate => g.prompt_len.or(spec.seq_len(c.seq_len)).unwrap_or(1).saturating_add(g.new_tokens),
        _ => spec.seq_len(c.seq_len).unwrap_or(1),
    }
}

/// vLLM's setup for the page's: its weights, the precision (vLLM's `--dtype`: fp16, else bf16;
/// a float weight format is the model dtype, as `vramcalc serve --weights` takes it), the KV
/// dtype, tensor parallelism and the batch as the concurrency (`crates/cli/src/serve.rs`).
pub fn serve_config(spec: &ModelSpec, c: &TrainConfig, d: &DistConfig, capacity: u64) -> ServeConfig {
    let mut precision = if matches!(c.precision, Precision::Fp16 | Precision::AmpFp16) { Precision::Fp16 } else { Precision::Bf16 };
    match c.weights {
        Some(WeightFormat::Float(DType::F16)) => precision = Precision::Fp16,
        Some(WeightFormat::Float(DType::Bf16)) => precision = Precision::Bf16,
        _ => {}
    }
    let default_kv = if precision == Precision::Fp16 { KvDtype::Fp16 } else { KvDtype::Bf16 };
    ServeConfig {
        tensor_parallel: if d.strategy == Strategy::Tp { d.tp_degree() } else { 1 },
        concurrency: Some(c.batch),
        kv_dtype: c.generate.kv_dtype.and_then(|k| KvDtype::parse(k.name())).unwrap_or(default_kv),
        precision,
        weights: c.weights,
        ..ServeConfig::new(capacity, serve_context(spec, c))
    }
}

/// The job's sizing: the fewest GPUs that fit (with the largest batch per GPU there; `None`: not
/// on up to [`MAX_GPUS`]; an error: the job is rejected) and rank 0's `(gpus, peak, device total)`
/// on each of [`CHART_GPUS`].
#[derive(Debug, Clone, PartialEq)]
pub struct Sizing {
    pub fewest: Result<Option<(u64, u64)>, String>,
    pub points: Vec<(u64, u64, u64)>,
}

/// [`Sizing`], one world size per step (`distributed::GpuSteps`); `pause` runs before each step
/// (in the browser it yields to the page, so a large model's sizes never hold up typing). `None`
/// when `stop` says a newer request came. `found` gets the sizing so far once the fewest GPUs
/// are known and the chart's larger sizes are still to come: the answer a multi-GPU link waits
/// for shows without waiting for them (issue 23's load goals).
pub async fn size<F: std::future::Future<Output = ()>>(
    spec: &ModelSpec,
    c: &TrainConfig,
    d: &DistConfig,
    capacity: u64,
    pause: impl Fn() -> F,
    stop: impl Fn() -> bool,
    found: impl Fn(&Sizing),
) -> Option<Sizing> {
    let chart_end = *CHART_GPUS.last().unwrap_or(&1);
    let first = first_gpus(d);
    let mut points = Vec::new();
    let mut fewest: Option<Result<Option<(u64, u64)>, String>> = None;
    let mut steps = GpuSteps::new(spec, c, d, 1);
    loop {
        pause().await;
        if stop() {
            return None;
        }
        let Some((n, peak)) = steps.step() else { break };
        let unknown = fewest.is_none();
        if n >= first && unknown {
            match &peak {
                Ok((_, total)) if *total <= capacity => {
                    pause().await;
                    fewest = Some(Ok(Some((n, steps.max_batch(capacity).unwrap_or(c.batch)))));
                }
                Err(e) => fewest = Some(Err(e.to_string())),
                _ => {}
            }
        }
        if let (Ok((peak, total)), true) = (peak, n <= chart_end) {
            points.push((n, peak, total));
        }
        if (fewest.is_some() && n >= chart_end) || n >= MAX_GPUS {
            break;
        }
        if let (true, Some(f)) = (unknown, &fewest) {
            found(&Sizing { fewest: f.clone(), points: points.clone() });
        }
    }
    Some(Sizing { fewest: fewest.unwrap_or(Ok(None)), points })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;
    use vramcalc_core::serve;

    #[test]
    fn sizing_stops_for_a_newer_request() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 4, seq_len: Some(256), ..Default::default() };
        let d = DistConfig { gpus: 2, strategy: Strategy::Zero3, ..Default::default() };
        assert_eq!(block_on(size(&spec, &c, &d, 8 << 30, || std::future::ready(()), || true, |_| {})), None);
    }

    /// The fewest GPUs and the bars are the CLI's `fewest-gpus` and `estimate --gpus`.
    #[test]
    fn a_jobs_sizing_is_the_clis() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 4, seq_len: Some(256), ..Default::default() };
        let d = DistConfig { gpus: 2, strategy: Strategy::Zero3, ..Default::default() };
        let early = std::cell::RefCell::new(Vec::new());
        let s = block_on(size(&spec, &c, &d, 8 << 30, || std::future::ready(()), || false, |s| early.borrow_mut().push(s.clone()))).unwrap();
        assert_eq!(s.fewest, Ok(vramcalc_core::distributed::fewest_gpus(&spec, &c, &d, 8 << 30, MAX_GPUS).unwrap()));
        let want: Vec<_> = vramcalc_core::distributed::sweep_gpus(&spec, &c, &d, &CHART_GPUS);
        assert_eq!(s.points, want);
        // the fewest came first, once, with the chart's sizes up to it
        let early = early.into_inner();
        let fewest = s.fewest.clone().unwrap().unwrap().0;
        assert_eq!(early.len(), 1);
        assert_eq!(early[0].fewest, s.fewest);
        assert_eq!(early[0].points, want.iter().copied().filter(|p| p.0 <= fewest).collect::<Vec<_>>());
    }

    /// Serving takes the page's weights, KV dtype and tensor parallelism (issue 22 item 4).
    #[test]
    fn serving_uses_the_pages_formats_and_parallelism() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let mut c = TrainConfig { mode: Mode::Infer, batch: 8, seq_len: Some(1024), ..Default::default() };
        let plain = serve::capacity(&spec, &serve_config(&spec, &c, &DistConfig::default(), 24 << 30)).unwrap();
        assert_eq!(plain, serve::capacity(&spec, &ServeConfig { concurrency: Some(8), ..ServeConfig::new(24 << 30, 1024) }).unwrap());
        c.weights = Some(WeightFormat::parse("int8").unwrap());
        c.generate.kv_dtype = vramcalc_core::KvDType::parse("fp8");
        let d = DistConfig { gpus: 2, strategy: Strategy::Tp, ..Default::default() };
        let cfg = serve_config(&spec, &c, &d, 24 << 30);
        assert_eq!((cfg.tensor_parallel, cfg.kv_dtype, cfg.weights), (2, KvDtype::Fp8, c.weights));
        let quant = serve::capacity(&spec, &cfg).unwrap();
        assert!(quant.weights_bytes < plain.weights_bytes && quant.kv_bytes_per_token < plain.kv_bytes_per_token);
    }
}
