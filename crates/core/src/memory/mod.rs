//! The memory model: simulate a PyTorch training (or inference) step storage by storage.
//! Pure functions, no I/O.

#[cfg(feature = "candle")]
pub mod candle;
pub mod device;
pub mod envelope;
pub mod optimizer;
pub mod simulate;

use crate::error::{Error, Result};
use crate::lower::LowerOptions;
use crate::resolve::{resolve, LayerInfo, Resolved};
use crate::spec::ModelSpec;
use crate::config::{Framework, Mode, OptimizerKind, Precision, TrainConfig};
/// The candle profile names `super::config::Device`.
#[cfg(feature = "candle")]
use crate::config;
use device::DeviceTotal;
use serde::{Deserialize, Serialize};
use simulate::{Breakdown, OptimizerCost, Phase, Plan, StepResult, TimelinePoint};

/// The largest batch the core simulates (beyond it, figures saturate).
pub const MAX_BATCH: u64 = 1 << 40;

/// One row of the per-layer table, with the bytes it saves for backward.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerReport {
    #[serde(flatten)]
    pub info: LayerInfo,
    /// Bytes this layer's ops keep for backward at the estimate's (micro-)batch.
    pub saved_bytes: u64,
}

/// Everything the views show. Views format it; they never compute memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub config: TrainConfig,
    /// Trainable parameters.
    pub params: u64,
    pub param_bytes: u64,
    pub buffer_bytes: u64,
    pub optimizer_state_bytes: u64,
    /// Peak allocated bytes of the step (`torch.cuda.max_memory_allocated`).
    pub peak_bytes: u64,
    pub peak_phase: Phase,
    /// Human label of where the peak happens: `layers[3] (conv2d): convolution, backward`.
    pub peak_at: String,
    pub breakdown: Breakdown,
    /// Peaks of each phase `[forward, backward, optimizer]`.
    pub phase_peaks: [u64; 3],
    /// Approximate device total (`nvidia-smi`), with its parts.
    pub device: DeviceTotal,
    pub device_total_bytes: u64,
    /// `params × n + batch × outputs × 2 + input` (n = 2 SGD, 3 momentum, 4 Adam): the classic rule.
    pub rule_of_thumb_bytes: u64,
    pub layers: Vec<LayerReport>,
    /// Memory after each op, forward then backward then the optimizer step (≤ 600 points).
    pub timeline: Vec<TimelinePoint>,
}

/// A model resolved for one configuration, reusable across batch sizes (sweeps, max batch).
pub struct Prepared {
    pub resolved: Resolved,
    plan: Plan,
    opt: OptimizerCost,
    config: TrainConfig,
    /// `Framework::Candle`: candle's retention is traced instead of `plan` (see `candle.rs`).
    #[cfg(feature = "candle")]
    candle: Option<candle::CandlePlan>,
    /// Peak against batch, built on first use.
    envelope: std::sync::OnceLock<envelope::Envelope>,
}

impl Prepared {
    pub fn new(spec: &ModelSpec, config: &TrainConfig) -> Result<Prepared> {
        validate(config)?;
        let training = config.mode == Mode::Train;
        let opts = LowerOptions {
            training,
            precision: config.precision,
            autocast_device: config.autocast_device,
            device: config.device,
            attention: config.attention,
            checkpointing: config.checkpointing,
            inplace_relu: config.inplace_relu,
            framework: config.framework,
        };
        let resolved = resolve(spec, config.seq_len, opts)?;
        let g = &resolved.graph;
        let shapes: Vec<&[u64]> = g.params.iter().map(|&p| g.value(p).shape.0.as_slice()).collect();
        let state_dtype = g.params.first().map(|&p| g.value(p).dtype).unwrap_or_default();
        let opt = if training {
            optimizer::cost(config.optimizer, config.optimizer_impl, &shapes, state_dtype)
        } else {
            OptimizerCost::default()
        };
        let plan = Plan::new(g, training).with_accumulation(config.grad_accum > 1);
        #[cfg(feature = "candle")]
        let (candle, opt) = {
            let candle = match config.framework {
                Framework::Candle => Some(candle::CandlePlan::new(spec, config)?),
                Framework::PytorchEager => None,
            };
            let param_bytes = g.params.iter().map(|&p| g.value(p).bytes().fixed).fold(0, u64::saturating_add);
            let opt = candle.as_ref().map_or(opt, |c| c.optimizer_cost(param_bytes));
            (candle, opt)
        };
        #[cfg(not(feature = "candle"))]
        if config.framework == Framework::Candle {
            return Err(Error::Config(
                "the candle profile is not part of this build; the CLI has it: vramcalc estimate --framework candle".into(),
            ));
        }
        let prepared = Prepared {
            resolved,
            plan,
            opt,
            config: *config,
            #[cfg(feature = "candle")]
            candle,
            envelope: std::sync::OnceLock::new(),
        };
        prepared.check_batch(config.batch)?;
        Ok(prepared)
    }

    /// Peak allocated and device total at `batch` samples per step.
    pub fn peak_at(&self, batch: u64) -> (u64, u64) {
        let (peak, device) = self.device_at(batch);
        (peak, device.total)
    }

    /// Peak allocated bytes and the device total at `batch`.
    pub fn device_at(&self, batch: u64) -> (u64, DeviceTotal) {
        let micro = self.micro(batch);
        #[cfg(feature = "candle")]
        if let Some(c) = &self.candle {
            let s = c.simulate(micro, false);
            return (s.peak, DeviceTotal::new(s.peak_rounded512, s.peak_reserved));
        }
        let env = self.envelope.get_or_init(|| envelope::Envelope::build(&self.plan, &self.resolved.graph, self.opt));
        env.at(micro)
    }

    fn micro(&self, batch: u64) -> u64 {
        (batch / self.config.grad_accum.max(1)).clamp(1, MAX_BATCH)
    }

    fn step(&self, batch: u64, timeline: bool) -> StepResult {
        let micro = self.micro(batch);
        #[cfg(feature = "candle")]
        if let Some(c) = &self.candle {
            let s = c.simulate(micro.min(MAX_BATCH), timeline);
            let ops = &self.resolved.graph.ops;
            let op = ops.iter().position(|o| o.layer == s.peak_layer).map(|i| i as u32);
            return s.into_step_result(op, ops.len());
        }
        self.plan.simulate(&self.resolved.graph, micro, self.opt, timeline, None)
    }

    /// The estimate at the batch this model was prepared for.
    pub fn estimate(&self) -> Estimate {
        self.estimate_for(self.config)
    }

    /// The estimate at another batch size, without resolving the model again (everything but
    /// the batch is this `Prepared`'s). The batch is checked as `new` checks it.
    pub fn estimate_at(&self, batch: u64) -> Result<Estimate> {
        self.check_batch(batch)?;
        Ok(self.estimate_for(TrainConfig { batch, ..self.config }))
    }

    /// Whether `batch` is valid for this setup: limits, accumulation steps, and a step whose
    /// bytes fit in 64 bits.
    pub fn check_batch(&self, batch: u64) -> Result<()> {
        validate(&TrainConfig { batch, ..self.config })?;
        if self.device_at(batch).1.total == u64::MAX {
            return Err(Error::TooLarge(format!("at batch {batch} the step needs more than 2^64 bytes (18.4 EB)")));
        }
        Ok(())
    }

    fn estimate_for(&self, cfg: TrainConfig) -> Estimate {
        let r = self.step(cfg.batch, true);
        let g = &self.resolved.graph;
        let layers = self.layer_reports(&r);
        let peak_at = match r.peak_op {
            Some(i) => {
                let op = &g.ops[i as usize];
                let l = &self.resolved.layers[op.layer as usize];
                format!("{} ({}): {}, {}", l.path, l.kind, op.name, r.peak_phase.name())
            }
            None => format!("optimizer step ({})", cfg.optimizer),
        };
        let (_, device) = self.device_at(cfg.batch);
        Estimate {
            config: cfg,
            params: g.param_numel(),
            param_bytes: g.params.iter().map(|&p| g.value(p).bytes().fixed).fold(0, u64::saturating_add),
            buffer_bytes: g.buffer_bytes(),
            optimizer_state_bytes: self.opt.state,
            peak_bytes: r.peak,
            peak_phase: r.peak_phase,
            peak_at,
            breakdown: r.breakdown,
            phase_peaks: r.phase_peaks,
            device_total_bytes: device.total,
            device,
            rule_of_thumb_bytes: self.rule_of_thumb(&cfg),
            layers,
            timeline: downsample(r.timeline, 600),
        }
    }

    fn layer_reports(&self, r: &StepResult) -> Vec<LayerReport> {
        let g = &self.resolved.graph;
        let infos = &self.resolved.layers;
        let mut saved = vec![0u64; infos.len()];
        for (i, op) in g.ops.iter().enumerate() {
            saved[op.layer as usize] = saved[op.layer as usize].saturating_add(r.saved_by_op[i]);
        }
        // blocks report their whole body
        let mut total = saved.clone();
        for i in (0..infos.len()).rev() {
            if infos[i].block {
                let mut j = i + 1;
                while j < infos.len() && infos[j].depth > infos[i].depth {
                    if infos[j].depth == infos[i].depth + 1 {
                        total[i] = total[i].saturating_add(total[j]);
                    }
                    j += 1;
                }
            }
        }
        infos.iter().cloned().zip(total).map(|(info, saved_bytes)| LayerReport { info, saved_bytes }).collect()
    }

    fn rule_of_thumb(&self, cfg: &TrainConfig) -> u64 {
        let g = &self.resolved.graph;
        let param_bytes: u64 = g.params.iter().map(|&p| g.value(p).bytes().fixed).fold(0, u64::saturating_add);
        let copies = match cfg.mode {
            Mode::Infer => 1,
            Mode::Train => match cfg.optimizer {
                OptimizerKind::Sgd => 2,
                OptimizerKind::SgdMomentum | OptimizerKind::Adagrad | OptimizerKind::Rmsprop => 3,
                _ => 4,
            },
        };
        let act_size = match cfg.precision {
            Precision::Fp32 => 4,
            _ => 2,
        };
        let outputs: u64 = self.resolved.layers.iter().filter(|l| !l.block).map(|l| l.activation_values).fold(0, u64::saturating_add);
        let micro = cfg.micro_batch();
        let input = self.resolved.input_shape.numel().saturating_mul(micro).saturating_mul(4);
        let acts = micro.saturating_mul(outputs).saturating_mul(act_size).saturating_mul(if cfg.mode == Mode::Train { 2 } else { 1 });
        param_bytes.saturating_mul(copies).saturating_add(acts).saturating_add(input)
    }

    /// Largest batch whose device total fits in `capacity` bytes (None if not even batch 1).
    pub fn max_batch(&self, capacity: u64) -> Option<u64> {
        let fits = |b: u64| self.peak_at(b).1 <= capacity;
        if !fits(1) {
            return None;
        }
        let mut lo = 1u64;
        let mut hi = 2u64;
        while fits(hi) {
            lo = hi;
            if hi >= MAX_BATCH {
                return Some(MAX_BATCH);
            }
            hi = hi.saturating_mul(2);
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(lo)
    }

    /// `(batch, peak allocated, device total)` for each batch.
    pub fn sweep(&self, batches: &[u64]) -> Vec<(u64, u64, u64)> {
        batches.iter().map(|&b| { let (p, d) = self.peak_at(b); (b, p, d) }).collect()
    }
}

fn validate(c: &TrainConfig) -> Result<()> {
    if c.batch == 0 {
        return Err(Error::Config("batch size must be at least 1".into()));
    }
    if c.batch > MAX_BATCH {
        return Err(Error::TooLarge(format!("batch size {} (at most {MAX_BATCH})", c.batch)));
    }
    if c.grad_accum == 0 {
        return Err(Error::Config("gradient accumulation steps must be at least 1".into()));
    }
    if c.grad_accum > c.batch {
        return Err(Error::Config(format!(
            "gradient accumulation ({}) cannot exceed the batch size ({})",
            c.grad_accum, c.batch
        )));
    }
    Ok(())
}

/// Keeps at most `max` points, always including the largest of each bucket (the peak survives).
fn downsample(points: Vec<TimelinePoint>, max: usize) -> Vec<TimelinePoint> {
    if points.len() <= max {
        return points;
    }
    let chunk = points.len().div_ceil(max);
    points
        .chunks(chunk)
        .filter_map(|c| c.iter().copied().max_by_key(|p| p.bytes))
        .collect()
}

/// Resolves and simulates in one call.
pub fn estimate(spec: &ModelSpec, config: &TrainConfig) -> Result<Estimate> {
    Ok(Prepared::new(spec, config)?.estimate())
}
