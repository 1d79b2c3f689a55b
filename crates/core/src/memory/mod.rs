//! The memory model: simulate a PyTorch training (or inference) step storage by storage.
//! Pure functions, no I/O.

pub mod breakdown;
#[cfg(feature = "candle")]
pub mod candle;
pub mod device;
pub mod envelope;
mod estimate;
pub mod peak;
mod phase;
pub mod reach;
pub mod generate;
pub mod optimizer;
mod rule_of_thumb;
pub use rule_of_thumb::param_copies;
pub mod simulate;
mod weights;
pub(crate) mod timeline;

use crate::error::{Error, Result};
use crate::lower::LowerOptions;
use crate::resolve::{resolve, Resolved};
use crate::spec::ModelSpec;
use crate::config::{Framework, Mode, TrainConfig};
use device::DeviceTotal;
pub use estimate::{Estimate, LayerReport};
pub use simulate::{OptimizerCost, Overlay};
use simulate::{Plan, StepResult};

/// The largest batch the core simulates (beyond it, figures saturate).
pub const MAX_BATCH: u64 = 1 << 40;

/// Timeline points an estimate keeps (enough for a chart, small in JSON).
const TIMELINE_POINTS: usize = 600;

/// A model resolved for one configuration, reusable across batch sizes (sweeps, max batch).
pub struct Prepared {
    pub resolved: Resolved,
    plan: Plan,
    opt: OptimizerCost,
    config: TrainConfig,
    /// `Framework::Candle`: candle's retention is traced instead of `plan` (see `candle/`).
    #[cfg(feature = "candle")]
    candle: Option<candle::CandlePlan>,
    /// Peak against batch, built on first use.
    envelope: std::sync::OnceLock<envelope::Envelope>,
    /// `Mode::Generate`: the decode steps (`resolved` and `plan` are the prefill's).
    generation: Option<Box<generate::GenPlan>>,
    /// Where a `reshape` folds the batch into a strided dimension (`Graph::folds_batch`: a copy
    /// from batch 2, a view at batch 1), the model lowered for a micro-batch of one, which
    /// answers for it. (A rank's overlaid step keeps this graph's ops and so its copies.)
    batch_one: Option<Box<Prepared>>,
}

impl Prepared {
    pub fn new(spec: &ModelSpec, config: &TrainConfig) -> Result<Prepared> {
        Prepared::with_sequence_parallel(spec, config, 1)
    }

    /// [`Prepared::new`] for a tensor-parallel rank running Megatron's sequence parallelism over
    /// `t` ranks (`layer/seq_parallel.rs`; 1: off). `spec` is the rank's split model.
    pub fn with_sequence_parallel(spec: &ModelSpec, config: &TrainConfig, t: u64) -> Result<Prepared> {
        let prepared = Prepared::unchecked(spec, config, t)?;
        prepared.check_batch(config.batch)?;
        Ok(prepared)
    }

    /// Peak allocated bytes and device total of `config`'s step from one simulation and the
    /// tensors live at its peak, without the batch envelope [`Prepared::new`] builds: for a
    /// caller that prepares the model once per value of a setting (`solve`), where the envelope
    /// would be built and thrown away. The same figures as `Prepared::new(..)?.peak_at(batch)`.
    pub fn peak_once(spec: &ModelSpec, config: &TrainConfig) -> Result<(u64, u64)> {
        Prepared::measure(spec, config).map(|s| (s.peak_bytes, s.device_total_bytes))
    }

    fn unchecked(spec: &ModelSpec, config: &TrainConfig, t: u64) -> Result<Prepared> {
        let mut prepared = Prepared::lowered(spec, config, t, false)?;
        if prepared.folds_batch() {
            prepared.batch_one = Some(Box::new(Prepared::lowered(spec, config, t, true)?));
        }
        Ok(prepared)
    }

    /// Whether a forward's graph folds the batch (`Builder::fold_batch`): the prefill's or the
    /// step's, or a generation's last decode step's.
    fn folds_batch(&self) -> bool {
        let decode = self.generation.as_ref().and_then(|g| g.last.as_ref());
        self.resolved.graph.folds_batch || decode.is_some_and(|s| s.resolved.graph.folds_batch)
    }

    /// The batch-of-one lowering, where it answers for `batch`: the micro-batch is one and the
    /// graph folds the batch (`None`: this model answers).
    fn at_batch(&self, batch: u64) -> Option<&Prepared> {
        self.batch_one.as_deref().filter(|_| self.micro(batch) == 1)
    }

    /// The model lowered with `batch_of_one` as `LowerOptions` has it.
    fn lowered(spec: &ModelSpec, config: &TrainConfig, t: u64, batch_of_one: bool) -> Result<Prepared> {
        validate(config)?;
        let config = &with_base_precision(*config);
        let training = config.mode == Mode::Train;
        let opts = LowerOptions {
            training,
            precision: config.precision,
            autocast_device: config.autocast_device,
            device: config.device,
            attention: config.attention,
            checkpointing: config.checkpointing,
            autocast_cache: config.autocast_cache,
            inplace_relu: config.inplace_relu,
            framework: config.framework,
            finetune: config.finetune,
            generation: None,
            sequence_parallel: t.max(1),
            batch_of_one,
        };
        let (resolved, plan, generation) = match config.mode {
            Mode::Generate => {
                let gen = generate::GenPlan::new(spec, config, opts)?;
                let prefill = generate::stage(spec, config, opts, &gen.lengths, 0)?;
                (prefill.resolved, Some(prefill.plan), Some(Box::new(gen)))
            }
            _ => (resolve(spec, config.seq_len, opts)?, None, None),
        };
        let resolved = match config.weights {
            // generate mode's forwards take the format as they are built (`generate::stage`)
            Some(_) if config.mode == Mode::Generate => resolved,
            Some(w) => apply_weights(spec, resolved, w, training)?,
            None => resolved,
        };
        let mut resolved = resolved;
        if config.mode == Mode::Infer {
            generate::hold_text_model_locals(&mut resolved);
        }
        let g = &resolved.graph;
        // frozen parameters get no optimizer state (the optimizer is built over the trainable
        // ones), nor do those whose `.grad` the backward leaves `None` (`reach::grad_params`)
        let with_grad = if training { reach::grad_params(g) } else { Vec::new() };
        let shapes: Vec<&[u64]> = with_grad.iter().map(|&p| g.value(p).shape.0.as_slice()).collect();
        let state_dtype = with_grad.first().map(|&p| g.value(p).dtype).unwrap_or_default();
        let opt = if training {
            optimizer::cost(config.optimizer, config.optimizer_impl, &shapes, state_dtype)
        } else {
            OptimizerCost::default()
        };
        let plan = plan.unwrap_or_else(|| Plan::new(g, training).with_accumulation(config.grad_accum > 1));
        #[cfg(feature = "candle")]
        let (candle, opt) = {
            let candle = match config.framework {
                Framework::Candle => Some(candle::CandlePlan::new(spec, config)?),
                Framework::PytorchEager => None,
            };
            let opt = candle.as_ref().map_or(opt, |c| c.optimizer_cost(g.param_bytes()));
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
            generation,
            batch_one: None,
        };
        Ok(prepared)
    }

    /// Peak allocated and device total at `batch` samples per step.
    pub fn peak_at(&self, batch: u64) -> (u64, u64) {
        let (peak, device) = self.device_at(batch);
        (peak, device.total)
    }

    /// Peak allocated bytes and the device total at `batch`.
    pub fn device_at(&self, batch: u64) -> (u64, DeviceTotal) {
        if let Some(one) = self.at_batch(batch) {
            return one.device_at(batch);
        }
        let micro = self.micro(batch);
        #[cfg(feature = "candle")]
        if let Some(c) = &self.candle {
            let s = c.simulate(micro, false);
            return (s.peak, DeviceTotal::new(s.peak_rounded512, s.peak_reserved));
        }
        if let Some(gen) = &self.generation {
            return gen.device_at(&self.resolved.graph, &self.plan, micro);
        }
        let env = self.envelope.get_or_init(|| envelope::Envelope::build(&self.plan, &self.resolved.graph, self.opt));
        env.at(micro)
    }

    fn micro(&self, batch: u64) -> u64 {
        (batch / self.config.grad_accum.max(1)).clamp(1, MAX_BATCH)
    }

    fn step(&self, batch: u64, timeline: bool) -> StepResult {
        if let Some(one) = self.at_batch(batch) {
            return one.step(batch, timeline);
        }
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

    /// The estimate at `batch` with `opt` as the optimizer's cost and `overlay` laid over every
    /// sample of the step (`crate::distributed`: one rank of a data-parallel or sharded job).
    /// Also returns the op of the peak (`None` in the optimizer step).
    pub fn estimate_overlaid(&self, batch: u64, opt: OptimizerCost, overlay: &dyn Overlay) -> Result<(Estimate, Option<u32>)> {
        self.check_batch(batch)?;
        let r = self.plan.simulate_overlaid(&self.resolved.graph, self.micro(batch), opt, true, overlay);
        let device = self.device_like(batch, r.peak);
        let op = r.peak_op;
        let mut e = self.report(TrainConfig { batch, ..self.config }, r, device);
        e.optimizer_state_bytes = opt.state;
        Ok((e, op))
    }

    /// Peak and device total under `overlay` (no timeline): max batch, fewest GPUs.
    pub fn peak_overlaid(&self, batch: u64, opt: OptimizerCost, overlay: &dyn Overlay) -> (u64, DeviceTotal) {
        let peak = self.plan.simulate_overlaid(&self.resolved.graph, self.micro(batch), opt, false, overlay).peak;
        (peak, self.device_like(batch, peak))
    }

    /// The peaks under `overlay` at every batch ([`envelope::Envelope::overlaid`]; `None`:
    /// simulate each batch with [`Prepared::peak_overlaid`]).
    pub(crate) fn overlaid_peaks(&self, opt: OptimizerCost, overlay: &dyn Overlay) -> Option<envelope::Envelope> {
        envelope::Envelope::overlaid(&self.plan, &self.resolved.graph, opt, overlay)
    }

    /// [`Prepared::peak_overlaid`] read from the overlay's [`Prepared::overlaid_peaks`].
    pub(crate) fn peak_in(&self, peaks: &envelope::Envelope, batch: u64) -> (u64, DeviceTotal) {
        let peak = peaks.peak(self.micro(batch));
        (peak, self.device_like(batch, peak))
    }

    /// The device total of another peak at `batch`, with this step's allocator rounding and reserve.
    fn device_like(&self, batch: u64, peak: u64) -> DeviceTotal {
        let (base, d) = self.device_at(batch);
        let rounded = peak.saturating_add(d.allocated_rounded.saturating_sub(base));
        DeviceTotal::new(rounded, peak.saturating_add(d.reserved.saturating_sub(base)))
    }

    fn estimate_for(&self, cfg: TrainConfig) -> Estimate {
        if let Some(one) = self.at_batch(cfg.batch) {
            return one.estimate_for(cfg);
        }
        let r = self.step(cfg.batch, true);
        let (_, device) = self.device_at(cfg.batch);
        self.report(cfg, r, device)
    }

    fn report(&self, cfg: TrainConfig, r: StepResult, device: DeviceTotal) -> Estimate {
        let layers = estimate::layer_reports(&self.resolved, &r.saved_by_op);
        // generation: the peak may be in the last decode step, a graph of its own
        let mut decode = None;
        let generation = self.generation.as_ref().map(|gen| {
            let (report, last) = gen.report(&self.resolved.graph, &r, self.micro(cfg.batch));
            decode = last;
            report
        });
        let (r, peak_at) = self.peak_place(r, decode, &cfg);
        let g = &self.resolved.graph;
        let mut breakdown = r.breakdown;
        breakdown.frozen_parameters = g.frozen_param_bytes();
        breakdown.adapter_parameters = g.adapter_bytes();
        Estimate {
            config: cfg,
            params: g.param_numel(),
            trainable_params: if cfg.mode == Mode::Train { g.trainable_numel() } else { 0 },
            quantised_base: cfg.finetune.quant_format().filter(|f| f.is_quantised()),
            param_bytes: g.param_bytes(),
            buffer_bytes: g.buffer_bytes(self.micro(cfg.batch)),
            optimizer_state_bytes: self.opt.state,
            peak_bytes: r.peak,
            peak_phase: r.peak_phase,
            peak_at,
            breakdown,
            phase_peaks: r.phase_peaks,
            device_total_bytes: device.total,
            device,
            rule_of_thumb_bytes: rule_of_thumb::bytes(&self.resolved, &cfg),
            layers,
            timeline: timeline::downsample(r.timeline, TIMELINE_POINTS),
            generation,
        }
    }

    /// Largest batch whose device total fits in `capacity` bytes (None if not even batch 1).
    pub fn max_batch(&self, capacity: u64) -> Option<u64> {
        largest_batch(|b| self.peak_at(b).1 <= capacity)
    }

    /// `(batch, peak allocated, device total)` for each batch.
    pub fn sweep(&self, batches: &[u64]) -> Vec<(u64, u64, u64)> {
        batches.iter().map(|&b| { let (p, d) = self.peak_at(b); (b, p, d) }).collect()
    }
}

/// `--base-format bf16|fp16` on an fp32 setup loads the model in that dtype
/// (`from_pretrained(torch_dtype=…)`, the same as `model.to(dtype)`): the precision becomes it.
fn with_base_precision(mut c: TrainConfig) -> TrainConfig {
    use crate::config::Precision;
    use crate::finetune::{BaseFormat, Method};
    if c.precision == Precision::Fp32 && c.finetune.method != Method::Full {
        match c.finetune.base_format {
            Some(BaseFormat::Bf16) => c.precision = Precision::Bf16,
            Some(BaseFormat::Fp16) => c.precision = Precision::Fp16,
            _ => {}
        }
    }
    c
}

/// `--weights`: the parameters' storage in that format (`formats::apply`), for inference only.
fn apply_weights(spec: &ModelSpec, mut r: Resolved, w: crate::formats::WeightFormat, training: bool) -> Result<Resolved> {
    if training {
        return Err(Error::Config(format!("weights `{w}` apply to inference (--mode infer); training keeps --precision")));
    }
    weights::weights_in(spec, &mut r, w)?;
    Ok(r)
}


/// The largest batch in `1..=MAX_BATCH` for which `fits` holds, assuming it holds up to some
/// batch and not beyond (None if not even batch 1).
pub fn largest_batch(fits: impl Fn(u64) -> bool) -> Option<u64> {
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

/// Batch sizes the app's batch chart sweeps: powers of two up to beyond the current batch and the
/// largest that fits, plus those two.
pub fn sweep_points(batch: u64, max_batch: Option<u64>) -> Vec<u64> {
    let top = batch.saturating_mul(2).max(max_batch.unwrap_or(1).saturating_mul(2)).clamp(64, 1 << 24);
    let mut v: Vec<u64> = (0..=24).map(|k| 1u64 << k).take_while(|&b| b <= top).collect();
    // The powers of two are in order: the two other points go in their places (no sort, whose
    // instance for u64 would add 3 KB to the web app's wasm).
    for extra in std::iter::once(batch).chain(max_batch) {
        let extra = extra.clamp(1, 1 << 24);
        if let Err(at) = v.binary_search(&extra) {
            v.insert(at, extra);
        }
    }
    v
}

fn validate(c: &TrainConfig) -> Result<()> {
    c.finetune.validate().map_err(Error::Config)?;
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

/// Resolves and simulates in one call.
pub fn estimate(spec: &ModelSpec, config: &TrainConfig) -> Result<Estimate> {
    Ok(Prepared::new(spec, config)?.estimate())
}

#[cfg(test)]
mod tests {
    #[test]
    fn sweep_points_are_sorted_distinct_and_hold_the_batch_and_the_largest_that_fits() {
        let powers: Vec<u64> = (0..=9).map(|k| 1 << k).collect();
        let mut want = powers.clone();
        want.insert(6, 48);
        want.insert(10, 370);
        assert_eq!(super::sweep_points(48, Some(370)), want);
        assert_eq!(super::sweep_points(64, Some(64)), (0..=7).map(|k| 1 << k).collect::<Vec<u64>>());
        assert_eq!(super::sweep_points(0, None), (0..=6).map(|k| 1 << k).collect::<Vec<u64>>());
    }
}
