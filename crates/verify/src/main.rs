//! `vramcalc-verify`: runs a real training step with candle and holds vramcalc's candle-profile
//! estimate to the measured peak; lists and probes CUDA devices.
//!
//! ```text
//! vramcalc-verify run (--preset NAME | --spec FILE) --batch N [--optimizer sgd|adam|adamw]
//!     [--precision fp32] [--device cpu|cuda[:i]] [--steps 3] [--tolerance 5] [--input-size N]
//!     [--seq-len N] [--json]
//! vramcalc-verify gpus [--json]
//! vramcalc-verify probe [--device cuda[:i]]
//! ```

mod alloc;
mod gpu;
mod model;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{Optimizer, VarBuilder, VarMap};
use serde_json::json;
use std::process::ExitCode;
use vramcalc_core::memory::candle::unsupported;
use vramcalc_core::spec::InputDType;
use vramcalc_core::{format_bytes, ByteUnit, Framework, ModelSpec, OptimizerKind, Precision, TrainConfig};

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("vramcalc-verify: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else { bail!("usage: vramcalc-verify run|gpus|probe [options] (see --help)") };
    let raw = RawArgs::parse(&args[1..])?;
    match cmd.as_str() {
        "run" => verify(&RunArgs::from_raw(raw)?),
        "gpus" => {
            let list = gpu::list()?;
            if raw.json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for g in &list {
                    let f = |b: u64| format_bytes(b, ByteUnit::Mib);
                    println!("[{}] {:<28} total {:>12}  used {:>12}  free {:>12}", g.index, g.name, f(g.total_bytes), f(g.used_bytes), f(g.free_bytes));
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        "probe" => {
            let dev = raw.device.as_deref().unwrap_or("cuda");
            let i = dev.strip_prefix("cuda:").map(str::parse).transpose().context("--device cuda:N")?.unwrap_or(0);
            println!("{}", serde_json::to_string_pretty(&gpu::probe(i)?)?);
            Ok(ExitCode::SUCCESS)
        }
        "-h" | "--help" | "help" => {
            println!("{}", include_str!("main.rs").lines().take_while(|l| l.starts_with("//!")).map(|l| l.trim_start_matches("//!").trim_start_matches(' ')).collect::<Vec<_>>().join("\n"));
            Ok(ExitCode::SUCCESS)
        }
        other => bail!("unknown command `{other}` (run, gpus, probe)"),
    }
}

/// Flags as written.
#[derive(Default)]
struct RawArgs {
    preset: Option<String>,
    spec: Option<String>,
    batch: Option<String>,
    optimizer: Option<String>,
    precision: Option<String>,
    device: Option<String>,
    steps: Option<String>,
    tolerance: Option<String>,
    input_size: Option<String>,
    seq_len: Option<String>,
    json: bool,
}

impl RawArgs {
    fn parse(args: &[String]) -> Result<RawArgs> {
        let mut r = RawArgs::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let (flag, inline) = match a.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (a.as_str(), None),
            };
            if flag == "--json" {
                r.json = true;
                continue;
            }
            let slot = match flag {
                "--preset" => &mut r.preset,
                "--spec" => &mut r.spec,
                "--batch" => &mut r.batch,
                "--optimizer" => &mut r.optimizer,
                "--precision" => &mut r.precision,
                "--device" => &mut r.device,
                "--steps" => &mut r.steps,
                "--tolerance" => &mut r.tolerance,
                "--input-size" => &mut r.input_size,
                "--seq-len" => &mut r.seq_len,
                _ => bail!("unknown option `{a}`"),
            };
            *slot = Some(match inline {
                Some(v) => v,
                None => it.next().cloned().with_context(|| format!("{flag} needs a value"))?,
            });
        }
        Ok(r)
    }
}

/// Validated `run` options.
struct RunArgs {
    spec: ModelSpec,
    name: String,
    config: TrainConfig,
    device: String,
    steps: u32,
    tolerance: f64,
    json: bool,
}

impl RunArgs {
    fn from_raw(r: RawArgs) -> Result<RunArgs> {
        let (mut spec, name) = match (&r.preset, &r.spec) {
            (Some(p), None) => (vramcalc_core::import::preset(p)?, p.clone()),
            (None, Some(f)) => {
                let text = std::fs::read_to_string(f).with_context(|| format!("reading {f}"))?;
                (ModelSpec::from_json(&text)?, f.clone())
            }
            _ => bail!("give exactly one of --preset NAME or --spec FILE"),
        };
        let num = |v: &Option<String>, what: &str, default: u64| -> Result<u64> {
            match v {
                None => Ok(default),
                Some(s) => s.parse().with_context(|| format!("{what}: expected a positive integer, got `{s}`")),
            }
        };
        let batch = num(&r.batch, "--batch", 0)?;
        if batch == 0 {
            bail!("--batch N (at least 1) is required");
        }
        if let Some(n) = &r.input_size {
            let n: u64 = n.parse().context("--input-size")?;
            if spec.input.shape.len() != 3 || spec.input.dtype != InputDType::Float32 {
                bail!("--input-size applies to [C, H, W] image inputs");
            }
            spec.input.shape[1] = n;
            spec.input.shape[2] = n;
        }
        let optimizer = match r.optimizer.as_deref().unwrap_or("adamw") {
            "sgd" => OptimizerKind::Sgd,
            "adam" => OptimizerKind::Adam,
            "adamw" => OptimizerKind::Adamw,
            o => bail!("optimizer `{o}` is not in candle-nn (sgd, adam, adamw)"),
        };
        let precision = match r.precision.as_deref().unwrap_or("fp32") {
            "fp32" => Precision::Fp32,
            p => bail!("precision `{p}`: the verifier runs fp32 only"),
        };
        let seq_len = r.seq_len.as_deref().map(str::parse).transpose().context("--seq-len")?;
        if let Some((kind, path)) = unsupported(&spec.layers, "layers") {
            bail!("not supported by the verifier: {kind} at {path}");
        }
        let device = r.device.unwrap_or_else(|| "cpu".into());
        let config = TrainConfig {
            batch,
            seq_len,
            optimizer,
            precision,
            device: if device == "cpu" { vramcalc_core::Device::Cpu } else { vramcalc_core::Device::Cuda },
            framework: Framework::Candle,
            ..TrainConfig::default()
        };
        let tolerance: f64 = r.tolerance.as_deref().unwrap_or("5").parse().context("--tolerance")?;
        Ok(RunArgs { spec, name, config, device, steps: num(&r.steps, "--steps", 3)?.max(1) as u32, tolerance, json: r.json })
    }
}

/// How a device's memory is measured around the phases of a step.
enum Meter {
    /// The counting global allocator: every candle CPU tensor is a `Vec` on this heap (exact).
    Cpu,
    /// The CUDA memory pool candle allocates from, and the driver's used memory.
    Cuda(gpu::StepMeter),
}

/// The CUDA side of a measurement: driver and pool samples around the last step's phases.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct CudaMeasured {
    /// The device supports memory pools, so candle allocated through `cuMemAllocAsync` and the
    /// pool's high-water marks are the framework-level peak (else the peak comes from driver
    /// samples at the ends of phases only: a lower bound).
    pool: bool,
    /// Right after candle created its context and its cuBLAS and cuRAND handles, before the model
    /// existed (the driver's figure includes other processes on the device).
    before_model: gpu::Sample,
    /// Before the step, after forward (loss included), after backward, after the optimizer step.
    samples: [gpu::Sample; 4],
    /// Device memory held for the step's tensors at its peak, driver-level:
    /// `max(used after each phase) - (used before the step - pool reserved before the step)`.
    /// Includes the pool's mapping granularity and fragmentation.
    driver_peak_bytes: u64,
    /// The device's highest used memory in the step (what `nvidia-smi` shows; other processes included).
    driver_used_peak_bytes: u64,
}

struct Measured {
    /// Peak of the measured step with the bytes not owned by tensors taken out (CPU: non-tensor
    /// heap; CUDA pool: the pool's rounding of the persistent tensors; CUDA without a pool:
    /// everything the driver counted before the step beyond the persistent tensors).
    peak: u64,
    raw_peak: u64,
    baseline: u64,
    persistent: u64,
    phase_peaks: [u64; 3],
    cuda: Option<CudaMeasured>,
}

fn verify(a: &RunArgs) -> Result<ExitCode> {
    let est = vramcalc_core::estimate(&a.spec, &a.config).context("the core's candle-profile estimate")?;
    let dev = model::device(&a.device)?;
    let m = measure(a, &dev)?;
    let diff = m.peak as f64 / est.peak_bytes.max(1) as f64 * 100.0 - 100.0;
    let ok = diff.abs() <= a.tolerance;
    let est_persistent = est.breakdown.parameters + est.breakdown.buffers + est.breakdown.optimizer_state + est.breakdown.input;
    let pct = |x: u64, y: u64| x as f64 / y.max(1) as f64 * 100.0 - 100.0;
    let measurement = match &m.cuda {
        None => "allocator",
        Some(c) if c.pool => "cuda-pool",
        Some(_) => "cuda-driver-samples",
    };
    if a.json {
        let mut v = json!({
            "model": a.name, "batch": a.config.batch, "optimizer": a.config.optimizer.name(), "device": a.device,
            "input_shape": a.spec.input.shape,
            "measured_peak_bytes": m.peak, "estimated_peak_bytes": est.peak_bytes, "difference_percent": diff,
            "within_tolerance": ok, "tolerance_percent": a.tolerance,
            "measured_raw_peak_bytes": m.raw_peak, "non_tensor_baseline_bytes": m.baseline,
            "measured_persistent_bytes": m.persistent, "estimated_persistent_bytes": est_persistent,
            "measured_phase_peaks_bytes": m.phase_peaks, "estimated_phase_peaks_bytes": est.phase_peaks,
            "estimated_peak_phase": est.peak_phase, "estimated_peak_at": est.peak_at, "estimated_breakdown": est.breakdown,
            "exact": measurement != "cuda-driver-samples", "measurement": measurement,
        });
        if let Some(c) = &m.cuda {
            v["cuda"] = json!({
                "measured": c,
                "estimated_device": est.device,
                "driver_peak_vs_estimated_reserved_percent": pct(c.driver_peak_bytes, est.device.reserved),
                "device_used_vs_estimated_total_percent": pct(c.driver_used_peak_bytes, est.device.total),
            });
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let f = |b: u64| format_bytes(b, ByteUnit::Mib);
        let row = |label: &str, x: u64, y: u64| println!("{label:<34} {:>14} {:>14} {:>+7.1}%", f(x), f(y), pct(x, y));
        println!("{} · batch {} · {} · {} · input {:?}", a.name, a.config.batch, a.config.optimizer, a.device, a.spec.input.shape);
        let what = match measurement {
            "allocator" => "live heap bytes (counting allocator, exact)",
            "cuda-pool" => "bytes candle allocated from the device's CUDA memory pool (its USED_MEM_HIGH)",
            _ => "driver used memory after each phase (cuMemGetInfo; no memory pools on this device: a lower bound)",
        };
        println!("measured: {what}; estimated: the core's candle-profile peak");
        println!("{:<34} {:>14} {:>14} {:>8}", "", "measured", "estimated", "diff");
        row("peak", m.peak, est.peak_bytes);
        row("persistent (params, state, batch)", m.persistent, est_persistent);
        for (i, ph) in ["forward", "backward", "optimizer"].iter().enumerate() {
            row(&format!("peak in {ph}"), m.phase_peaks[i], est.phase_peaks[i]);
        }
        println!("estimated peak at {} ({})", est.peak_at, est.peak_phase.name());
        for (k, v) in est.breakdown.entries() {
            if v > 0 {
                println!("  {:<18} {:>14}", k.key(), f(v));
            }
        }
        match &m.cuda {
            None => println!("raw allocator peak {} (non-tensor heap {} subtracted)", f(m.raw_peak), f(m.baseline)),
            Some(c) => {
                if c.pool {
                    println!("raw pool peak {} (the pool's rounding of the persistent tensors, {}, subtracted)", f(m.raw_peak), f(m.baseline));
                } else {
                    println!("raw driver peak {} (everything used before the step beyond the persistent tensors, {}, subtracted)", f(m.raw_peak), f(m.baseline));
                }
                println!("driver level (cuMemGetInfo after synchronize; the pool keeps what it maps during the step) against the estimate's device figures:");
                row("  tensors' device memory at peak", c.driver_peak_bytes, est.device.reserved);
                row("  device used at peak (nvidia-smi)", c.driver_used_peak_bytes, est.device.total);
                let s = &c.samples;
                println!(
                    "  driver used: before the model {}, before the step {}, after forward {}, after backward {}, after optimizer {}",
                    f(c.before_model.driver_used_bytes),
                    f(s[0].driver_used_bytes),
                    f(s[1].driver_used_bytes),
                    f(s[2].driver_used_bytes),
                    f(s[3].driver_used_bytes)
                );
                println!(
                    "  (the estimate's device figures round tensors as PyTorch's caching allocator does and add a {} context and a {} cuBLAS \
                     workspace; candle has no caching allocator, and the device's used memory includes other processes)",
                    f(est.device.cuda_context),
                    f(est.device.cublas_workspace)
                );
            }
        }
        println!("{} (tolerance {}%)", if ok { "OK" } else { "FAIL: beyond tolerance" }, a.tolerance);
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Binds the CUDA device's context to this thread: the driver's memory queries use the current
/// context. candle binds it on every allocation; this keeps the samples independent of that.
fn bind(dev: &Device) -> Result<()> {
    #[cfg(feature = "cuda")]
    if let Device::Cuda(d) = dev {
        d.cuda_stream().context().bind_to_thread().context("binding candle's CUDA context")?;
    }
    let _ = dev;
    Ok(())
}

impl Meter {
    fn new(a: &RunArgs, dev: &Device) -> Result<Meter> {
        Ok(match dev {
            Device::Cpu => Meter::Cpu,
            _ => {
                bind(dev)?;
                let i = model::cuda_ordinal(&a.device)?.unwrap_or(0);
                Meter::Cuda(gpu::StepMeter::new(i)?)
            }
        })
    }

    /// A sample once everything queued has run (nothing to sample on CPU).
    fn sample(&self, dev: &Device) -> Result<gpu::Sample> {
        match self {
            Meter::Cpu => Ok(gpu::Sample::default()),
            Meter::Cuda(m) => {
                dev.synchronize()?;
                bind(dev)?;
                m.sample()
            }
        }
    }

    /// Starts a step: the bytes live now, and a new peak window.
    fn begin_step(&self, dev: &Device) -> Result<(u64, gpu::Sample)> {
        match self {
            Meter::Cpu => {
                let live = alloc::live();
                alloc::reset_peak();
                Ok((live, gpu::Sample::default()))
            }
            Meter::Cuda(m) => {
                dev.synchronize()?;
                bind(dev)?;
                m.begin_step()?;
                let s = m.sample()?;
                Ok((if m.has_pool() { s.pool_used_bytes } else { s.driver_used_bytes }, s))
            }
        }
    }

    /// Ends a phase: its peak, and a new peak window.
    fn end_phase(&self, dev: &Device) -> Result<(u64, gpu::Sample)> {
        match self {
            Meter::Cpu => {
                let p = alloc::peak();
                alloc::reset_peak();
                Ok((p, gpu::Sample::default()))
            }
            Meter::Cuda(m) => {
                let s = self.sample(dev)?;
                m.reset_high()?;
                Ok((if m.has_pool() { s.pool_used_high_bytes } else { s.driver_used_bytes }, s))
            }
        }
    }

    /// Ends a step: the pool gets its release threshold back.
    fn end_step(&self, dev: &Device) -> Result<()> {
        if let Meter::Cuda(m) = self {
            dev.synchronize()?;
            bind(dev)?;
            m.end_step()?;
        }
        Ok(())
    }
}

fn measure(a: &RunArgs, dev: &Device) -> Result<Measured> {
    let meter = Meter::new(a, dev)?;
    let before_model = meter.sample(dev)?;
    let vm = VarMap::new();
    let vb = VarBuilder::from_varmap(&vm, DType::F32, dev);
    let blocks = model::build(&a.spec.layers, vb)?;
    let params = model::trainable(&vm);
    let b = a.config.batch as usize;
    let mut shape: Vec<usize> = a.spec.input.shape.iter().map(|&d| d as usize).collect();
    let tokens = a.spec.is_token_input();
    if let (Some(s), true) = (a.config.seq_len, a.spec.is_sequence_input()) {
        shape[0] = s as usize;
    }
    let mut full = vec![b];
    full.extend(&shape);
    let x = if tokens {
        let vocab = a.spec.input.vocab_size.unwrap_or(2).max(1) as u32;
        let n: usize = full.iter().product();
        Tensor::from_vec((0..n as u32).map(|i| i.wrapping_mul(2654435761) % vocab).collect::<Vec<_>>(), full.as_slice(), dev)?
    } else {
        Tensor::randn(0f32, 1f32, full.as_slice(), dev)?
    };
    // the loss' rows: the output without its last dimension
    let probe = model::forward_all(&blocks, &x, false)?;
    let dims = probe.dims().to_vec();
    drop(probe);
    let classes = *dims.last().context("model output is a scalar")?;
    let rows: usize = dims[..dims.len() - 1].iter().product();
    let target = Tensor::from_vec((0..rows as u32).map(|i| i % classes as u32).collect::<Vec<_>>(), rows, dev)?;
    let mut sgd;
    let mut adam;
    let opt: &mut dyn FnMut(&candle_core::backprop::GradStore) -> Result<()> = match a.config.optimizer {
        OptimizerKind::Sgd => {
            sgd = candle_nn::SGD::new(params.clone(), 0.01)?;
            &mut move |g| Ok(sgd.step(g)?)
        }
        kind => {
            let wd = if kind == OptimizerKind::Adam { 0.0 } else { 0.01 };
            adam = candle_nn::AdamW::new(params.clone(), candle_nn::ParamsAdamW { weight_decay: wd, ..Default::default() })?;
            &mut move |g| Ok(adam.step(g)?)
        }
    };
    let state_bytes = if a.config.optimizer == OptimizerKind::Sgd { 0 } else { 2 * params.iter().map(|v| v.elem_count() as u64 * 4).sum::<u64>() };
    let persistent = model::var_bytes(&vm) + state_bytes + (x.elem_count() * x.dtype().size_in_bytes()) as u64 + (rows * 4) as u64;
    let mut out = Measured { peak: 0, raw_peak: 0, baseline: 0, persistent, phase_peaks: [0; 3], cuda: None };
    for step in 0..a.steps {
        let last = step + 1 == a.steps;
        let (start, s0) = meter.begin_step(dev)?;
        let logits = model::forward_all(&blocks, &x, true)?;
        let l2 = if logits.rank() == 2 { logits.clone() } else { logits.reshape((rows, classes))? };
        let loss = candle_nn::loss::cross_entropy(&l2, &target)?;
        drop((logits, l2));
        let (p_fwd, s1) = meter.end_phase(dev)?;
        let grads = loss.backward()?;
        let (p_bwd, s2) = meter.end_phase(dev)?;
        opt(&grads)?;
        let (p_opt, s3) = meter.end_phase(dev)?;
        drop(grads);
        let loss_value = loss.to_scalar::<f32>()?;
        drop(loss);
        meter.end_step(dev)?;
        if !loss_value.is_finite() {
            bail!("the loss is not finite ({loss_value}) at step {step}");
        }
        if last {
            out.baseline = start.saturating_sub(persistent);
            let adj = |p: u64| p.saturating_sub(out.baseline);
            out.phase_peaks = [adj(p_fwd), adj(p_bwd), adj(p_opt)];
            out.raw_peak = p_fwd.max(p_bwd).max(p_opt);
            out.peak = adj(out.raw_peak);
            if let Meter::Cuda(m) = &meter {
                let used_peak = s1.driver_used_bytes.max(s2.driver_used_bytes).max(s3.driver_used_bytes);
                // what the device held outside candle's pool before the step: context, cuBLAS and
                // cuRAND, loaded kernels, other processes
                let outside_pool = s0.driver_used_bytes.saturating_sub(s0.pool_reserved_bytes);
                out.cuda = Some(CudaMeasured {
                    pool: m.has_pool(),
                    before_model,
                    samples: [s0, s1, s2, s3],
                    driver_peak_bytes: used_peak.saturating_sub(outside_pool),
                    driver_used_peak_bytes: used_peak,
                });
            }
        }
    }
    Ok(out)
}
