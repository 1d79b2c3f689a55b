//! `--mode generate`: the memory of greedy `model.generate()` (transformers 5.24,
//! `generation/utils.py`, `GenerationMixin.generate` → `_sample`), simulated forward by forward.
//!
//! * **Prefill**: `_prefill` runs the model on the whole prompt with an empty cache; each
//!   attention layer fills its cache as it runs (`layer/kv_cache.rs`), and the LM head computes
//!   `logits_to_keep` positions (1, as `generate()` asks, or 0: all). Then `_sample` copies the
//!   last position's logits to fp32 (`outputs.logits[:, -1].to(copy=True, dtype=torch.float32)`).
//! * **Decode**: `new_tokens − 1` forwards of one token per sequence against the cache.
//! * Around the forwards `generate()` keeps the prompt's `input_ids` and `attention_mask` (the
//!   caller's), `position_ids = attention_mask.cumsum(-1) − 1` (`[b, L]`, grown by one per step
//!   in `_update_model_kwargs_for_generation`; the prompt's first one stays in `generate()`'s
//!   own `model_kwargs`, which it passes to `_sample` as `**model_kwargs`, a new dict), the
//!   growing `input_ids` (`torch.cat` per step), the clones `prepare_inputs_for_generation`
//!   makes of the forward's `input_ids` and `position_ids`, and the previous step's fp32
//!   `next_token_logits` until it is replaced. A prompt given with `token_type_ids` (PaliGemma,
//!   Gemma 3) adds the caller's and, in decode, the grown one (`torch.cat` per step).
//!
//! Every decode step runs the same ops; their sizes grow with the cache length `L` and never
//! shrink, so the decode peak is the last step's — or the first's, where a dynamic cache's
//! sliding window is shorter than the prompt: that step replaces the prefill's whole-prompt
//! `cat`s, later ones `W`-token tensors (`layer/kv_cache.rs`) — and between events (a sliding
//! window filling, a page boundary) every sample of a step is linear in `L`. The memory over the decode steps is
//! therefore the upper envelope of those lines, from two simulated steps per piece
//! (`memory/envelope.rs` does the same over the batch) — a 4,096-token decode of an 80-layer
//! model costs a few simulated steps, not 4,096.

use {
    super::device::DeviceTotal,
    super::simulate::{OptimizerCost, Plan, StepResult},
    crate::error::{Error, Result},
    crate::generation::{GenStep, KvCacheKind, PAGE_TOKENS},
    crate::graph::{GradRule, Graph, Lin, Op, Storage, StorageClass, Value},
    crate::config::TrainConfig,
    crate::lower::LowerOptions,
    crate::resolve::{resolve, Resolved},
    crate::spec::{Layer, ModelSpec},
    crate::units::{DType, Shape},
};
use serde::{Deserialize, Serialize};

/// Tensors the model's forward makes once and keeps until it returns.
const PER_FORWARD: &[&str] = &["embedding", "rope_cos", "rope_sin", "rope_cos_local", "rope_sin_local", "eager_mask", "eager_mask_sliding", "sdpa_mask", "block_mask", "block_mask_sliding"];

/// Points the decode series keeps (enough for a chart).
const SERIES_POINTS: usize = 600;

/// Prompt length, new tokens and the cache size `generate()` would use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lengths {
    pub prompt: u64,
    pub new_tokens: u64,
    /// `max_length − 1`: the static cache's `max_cache_len`, and the tokens the cache holds at the end.
    pub max_cache_len: u64,
    /// An encoder–decoder's source tokens (the encoder's input; `prompt` is then the decoder's one
    /// start token: `resolve/seq2seq.rs`).
    pub source: Option<u64>,
}

/// What a generation estimate adds to [`super::Estimate`] (flattened into its JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationReport {
    /// The decoder's prompt (an encoder–decoder's: its one start token; `--prompt-len` is then the source's).
    pub prompt_len: u64,
    pub new_tokens: u64,
    /// Peak allocated bytes of the prefill forward (and the first token's selection).
    pub prefill_peak_bytes: u64,
    /// Peak allocated bytes over the decode forwards (0 with one new token).
    pub decode_peak_bytes: u64,
    /// Bytes the KV cache holds when generation ends.
    pub kv_cache_bytes: u64,
    /// Bytes the KV cache holds after the prefill.
    pub kv_cache_bytes_after_prefill: u64,
    /// `(decode step, peak allocated bytes of that step)`, steps `1..new_tokens` (≤ 600 points).
    pub decode_series: Vec<(u64, u64)>,
}

/// The lengths of a generation setup, checked.
pub fn lengths(spec: &ModelSpec, c: &TrainConfig) -> Result<Lengths> {
    let g = &c.generate;
    if !spec.can_generate() {
        return Err(Error::Config("generate mode needs a token model (an int64 `input` of token ids) or an encoder–decoder".into()));
    }
    let causal = |l: &Layer| match l {
        Layer::TransformerDecoderLayer(_) | Layer::MultiHeadLatentAttention(_) => true,
        // recurrent mixers cache a fixed state per sequence (`layer/state_cache.rs`)
        Layer::MambaMixer(_) | Layer::Mamba2Mixer(_) | Layer::GatedDeltaNet(_) | Layer::LightningAttention(_) => true,
        Layer::MultiheadAttention(a) => a.causal,
        _ => false,
    };
    if !spec.layers.iter().any(|l| l.any(&causal)) {
        return Err(Error::Config("generate mode needs a decoder: causal attention layers to cache (an encoder such as BERT has none)".into()));
    }
    // an image-text model's prompt: `--seq-len`, else its `token_input`'s length
    let image_prompt = || match spec.layers.first() {
        Some(Layer::TokenInput(t)) if spec.image_prompt() => c.seq_len.or(Some(t.seq_len)),
        // Llama 3.2 Vision's: the tower, then the prompt's `token_input` (`import/hf/mllama.rs`)
        _ => spec.layers.iter().find_map(|l| match l {
            Layer::TokenInput(t) if t.prompt => c.seq_len.or(Some(t.seq_len)),
            _ => None,
        }),
    };
    let prompt = g.prompt_len.or(spec.seq_len(c.seq_len)).or_else(image_prompt).unwrap_or(1);
    if prompt == 0 {
        return Err(Error::Config("--prompt-len must be at least 1".into()));
    }
    // an encoder–decoder: the prompt is the encoder's source; the decoder starts from one token
    let (prompt, source) = if spec.encoder_decoder() { (1, Some(prompt)) } else { (prompt, None) };
    // `generate()` raises "This model does not support the quantized cache" for an encoder–decoder
    if source.is_some() && g.kv_dtype.is_some_and(|k| k.quantized()) {
        return Err(Error::Config("an 8-bit KV cache: transformers' generate() refuses a quantized cache for an encoder–decoder".into()));
    }
    if g.new_tokens == 0 {
        return Err(Error::Config("--new-tokens must be at least 1".into()));
    }
    if g.logits_to_keep > 1 {
        return Err(Error::Config(format!("--logits-to-keep is 1 or 0, got {}", g.logits_to_keep)));
    }
    if c.framework != crate::config::Framework::PytorchEager {
        return Err(Error::Config("generate mode simulates transformers' generate() in PyTorch: use --framework pytorch-eager".into()));
    }
    let max_cache_len = prompt.checked_add(g.new_tokens - 1).filter(|&n| n < 1 << 40);
    let max_cache_len = max_cache_len.ok_or_else(|| Error::TooLarge(format!("{prompt} prompt + {} new tokens", g.new_tokens)))?;
    // learned positions (GPT-2's `wpe`) end the sequence: transformers' index would be out of range
    if let Some(n) = positions(spec).filter(|&n| n < max_cache_len) {
        return Err(Error::Config(format!(
            "the model has {n} learned positions; a {prompt}-token prompt and {} new tokens need {max_cache_len}",
            g.new_tokens
        )));
    }
    Ok(Lengths { prompt, new_tokens: g.new_tokens, max_cache_len, source })
}


/// One simulated forward: its graph and liveness plan.
pub struct Stage {
    pub resolved: Resolved,
    pub plan: Plan,
}

impl Stage {
    fn simulate(&self, batch: u64, timeline: bool) -> StepResult {
        self.plan.simulate(&self.resolved.graph, batch, OptimizerCost::default(), timeline, None)
    }
}

/// The lowering options of one forward: `past` cached tokens, `tokens` new ones.
fn step_options(base: LowerOptions, c: &TrainConfig, len: &Lengths, past: u64) -> LowerOptions {
    let kv = c.generate.kv_dtype;
    LowerOptions {
        training: false,
        generation: Some(GenStep {
            past,
            prompt: len.prompt,
            cache: c.generate.cache,
            max_cache_len: len.max_cache_len,
            kv_dtype: kv.map(|k| k.dtype()),
            kv_quantized: kv.is_some_and(|k| k.quantized()),
            logits_to_keep: c.generate.logits_to_keep,
        }),
        ..base
    }
}

/// Builds the prefill forward (`past == 0`, the prompt) or decode step `step` (1-based).
pub fn stage(spec: &ModelSpec, c: &TrainConfig, base: LowerOptions, len: &Lengths, step: u64) -> Result<Stage> {
    let past = if step == 0 { 0 } else { len.prompt + step - 1 };
    let tokens = if step == 0 { len.prompt } else { 1 };
    let mut resolved = resolve(spec, Some(len.source.unwrap_or(tokens)), step_options(base, c, len, past))?;
    // `--weights`: every forward runs the stored format, the decode steps as much as the prefill
    // (a kernel's dequantised temporary depends on the forward's tokens: `formats/apply.rs`)
    if let Some(w) = c.weights {
        super::weights::weights_in(spec, &mut resolved, w)?;
    }
    let i64s = |n: u64| Lin { fixed: 0, per_sample: n.saturating_mul(8) };
    let total = past + tokens;
    let mut held = match len.source {
        None => {
            hold_text_model_locals(&mut resolved);
            // the caller's prompt and all-ones attention mask (the forward's own input is the clone)
            let mut held = vec![i64s(len.prompt), i64s(len.prompt)];
            // position_ids (`[b, L]`), and in decode the grown `input_ids` and the forward's clones,
            // and the prompt's `position_ids` in `generate()`'s `model_kwargs`
            held.push(i64s(total));
            if step > 0 {
                held.extend([i64s(total), i64s(1), i64s(len.prompt)]);
            }
            if spec.token_type_ids() {
                held.push(i64s(len.prompt));
                if step > 0 {
                    held.push(i64s(total));
                }
            }
            held
        }
        Some(source) => {
            // the decoder's locals (`BartDecoder.forward`'s, not the encoder's, which returned)
            let row = resolved.layers.iter().position(|l| l.depth == 0 && l.kind == "token_input").unwrap_or(0) as u32;
            let first = resolved.graph.ops.iter().position(|o| o.layer > row).unwrap_or(0);
            hold_model_locals_from(&mut resolved, first);
            // the caller's source `input_ids` is the encoder's input; its attention mask (kept:
            // the cross-attention's), and the `decoder_input_ids` (`[b, L]`, grown by one per
            // step; no position_ids for an encoder–decoder), whose clone is the decoder's input
            vec![i64s(source), i64s(total)]
        }
    };
    let g = &mut resolved.graph;
    let vocab = g.value(resolved.model_output).shape.last();
    let logits32 = Lin { fixed: 0, per_sample: vocab.saturating_mul(4) };
    if step > 0 {
        // the previous step's `next_token_logits`, replaced after this forward
        held.push(logits32);
    }
    for bytes in held {
        g.storages.push(Storage { bytes, class: StorageClass::Input });
    }
    // `outputs.logits[:, -1].to(copy=True, dtype=torch.float32)`
    let s = g.storages.len() as u32;
    g.storages.push(Storage { bytes: logits32, class: StorageClass::Activation });
    g.values.push(Value { storage: s, shape: Shape::new([vocab]), batched: true, dtype: DType::F32, requires_grad: false });
    let v = (g.values.len() - 1) as u32;
    let layer = g.ops.last().map_or(0, |o| o.layer);
    g.ops.push(Op {
        name: "next_token_logits",
        layer,
        inputs: smallvec::smallvec![g.output],
        outputs: smallvec::smallvec![v],
        allocs: smallvec::smallvec![s],
        saved: crate::graph::Ids::new(),
        grad: GradRule::Alloc,
        recorded: false,
        fwd_scratch: Lin::ZERO,
        bwd_scratch: Lin::ZERO,
        unit: None,
    });
    let plan = Plan::new(g, false);
    Ok(Stage { resolved, plan })
}

/// The base model's forward (`LlamaModel.forward`, `GPT2Model.forward`, `Qwen2_5_VLTextModel.forward`)
/// keeps `inputs_embeds`, `position_embeds`, `position_embeddings` and the mask in locals until it
/// returns: up to the LM head, which its caller runs. Its `inputs_embeds` is the embedding's
/// output, or a vision-language model's image rows written into it (`masked_scatter`, after the
/// vision tower: the tower's own tables are not the text model's). Inference forwards, with or
/// without a cache (`--mode infer` and each forward of `generate()`).
pub(crate) fn hold_text_model_locals(resolved: &mut Resolved) {
    hold_model_locals_from(resolved, 0);
}

/// [`hold_text_model_locals`] of the model whose forward starts at op `first` (an
/// encoder–decoder's decoder: the encoder before it returned).
fn hold_model_locals_from(resolved: &mut Resolved, first: usize) {
    let g = &mut resolved.graph;
    let head_row = resolved.layers.iter().rposition(|l| l.depth == 0).unwrap_or(0) as u32;
    let head_first = g.ops.iter().position(|o| o.layer == head_row && head_row > 0).unwrap_or(g.ops.len());
    // the text model's `embed_tokens(input_ids)`: the lookup of the int64 token ids (a tower's
    // table lookups by `aspect_ratio_ids`, Llama 3.2 Vision's, run before it and take no ids)
    let tokens = |o: &Op| o.name == "embedding" && o.inputs.iter().any(|&v| g.value(v).dtype == DType::I64);
    let after = |p: &dyn Fn(&Op) -> bool| g.ops.iter().skip(first).position(p).map(|i| i + first);
    let start = after(&|o: &Op| o.name == "masked_scatter").or_else(|| after(&tokens));
    let kept_op = |name: &str| PER_FORWARD.contains(&name) || name == "masked_scatter";
    if let Some(end) = head_first.checked_sub(1) {
        // the locals are the text model's: from its embedding (or the image rows written into it)
        let from = start.filter(|&s| s <= end).unwrap_or(first);
        // Granite's `inputs_embeds = inputs_embeds * embedding_multiplier`: the scaled copy is the
        // local kept, the embedding's output is freed (`layer::activation::Scale::rebinds_embeds`)
        let rebound = |i: usize| g.ops[i].name == "embedding" && g.ops.get(i + 1).is_some_and(|o| o.name == "mul_scalar_embeds");
        let kept: Vec<u32> = (from..=end)
            .filter(|&i| (kept_op(g.ops[i].name) && !rebound(i)) || g.ops[i].name == "mul_scalar_embeds")
            .flat_map(|i| g.ops[i].allocs.clone())
            .collect();
        g.holds.extend(kept.into_iter().map(|s| (s, end as u32)));
    }
    // ... and makes them before its first layer (`create_causal_mask`, `self.rotary_emb(...)`
    // after `embed_tokens`): a hybrid whose first attention layer comes late (Qwen3-Next's
    // fourth) holds its mask and rotary tables through the recurrent layers before it
    if let Some(first) = start.map(|e| e + 1).filter(|&f| f < head_first) {
        for i in first + 1..head_first {
            if PER_FORWARD.contains(&g.ops[i].name) && g.ops[i].name != "embedding" {
                let allocs = std::mem::take(&mut g.ops[i].allocs);
                g.ops[first].allocs.extend(allocs);
            }
        }
    }
}

/// Bytes the cache holds after a forward: its storages that outlive it.
fn cache_bytes(g: &Graph, batch: u64) -> u64 {
    g.storages
        .iter()
        .filter(|s| matches!(s.class, StorageClass::KvNew | StorageClass::KvResident))
        .map(|s| s.bytes.at(batch))
        .fold(0, u64::saturating_add)
}

/// The decode side of a generation setup: the last step (the decode peak) and what the series needs.
pub struct GenPlan {
    spec: ModelSpec,
    config: TrainConfig,
    base: LowerOptions,
    pub lengths: Lengths,
    /// The last decode step (`None` with one new token).
    pub last: Option<Stage>,
    /// The first decode step where it can hold more than the last (a dynamic cache's window
    /// shorter than the prompt, see the module docs); it runs the last's ops (every window is
    /// full from it on), so the last's graph labels its peak.
    first: Option<Stage>,
    /// The last `device_at`: `(batch, peak, device total)`.
    device: std::sync::Mutex<Option<(u64, u64, DeviceTotal)>>,
}

impl GenPlan {
    pub fn new(spec: &ModelSpec, c: &TrainConfig, base: LowerOptions) -> Result<GenPlan> {
        let lengths = lengths(spec, c)?;
        let last = match lengths.new_tokens {
            1 => None,
            g => Some(stage(spec, c, base, &lengths, g - 1)?),
        };
        let first = match first_step_differs(spec, c, &lengths) {
            true => Some(stage(spec, c, base, &lengths, 1)?),
            false => None,
        };
        Ok(GenPlan { spec: spec.clone(), config: *c, base, lengths, last, first, device: std::sync::Mutex::new(None) })
    }

    /// The decode step holding the decode peak at `batch` (the last, or the first where it is
    /// higher), simulated; with `timeline` also the last's simulation, for the series.
    fn decode(&self, batch: u64, timeline: bool) -> Option<(StepResult, Option<StepResult>)> {
        let last = self.last.as_ref()?.simulate(batch, timeline);
        let first = self.first.as_ref().map(|s| s.simulate(batch, timeline)).filter(|f| f.peak > last.peak);
        Some(match first {
            Some(f) => (f, timeline.then_some(last)),
            None => (last, None),
        })
    }

    /// Peak allocated bytes of the whole generation at `batch` and the device total at that
    /// peak, from the prefill (`prefill`, `plan`) and the last decode step: two simulations each
    /// (the second lists the tensors live at the peak), remembered for the last batch asked.
    pub fn device_at(&self, prefill: &Graph, plan: &Plan, batch: u64) -> (u64, DeviceTotal) {
        let cached = self.device.lock().ok().and_then(|d| *d);
        if let Some((b, peak, device)) = cached.filter(|c| c.0 == batch) {
            let _ = b;
            return (peak, device);
        }
        let (r, last) = self.simulate(prefill, plan, batch);
        self.device_of(&r, last.as_ref(), batch)
    }

    /// The prefill's and the peak decode step's simulations at `batch` (no timeline).
    pub fn simulate(&self, prefill: &Graph, plan: &Plan, batch: u64) -> (StepResult, Option<StepResult>) {
        let one = |g: &Graph, plan: &Plan| plan.simulate(g, batch, OptimizerCost::default(), false, None);
        (one(prefill, plan), self.decode(batch, false).map(|(r, _)| r))
    }

    /// The generation's peak and device total from its two simulations ([`GenPlan::simulate`]),
    /// remembered for `batch` as [`GenPlan::device_at`] remembers them.
    pub fn device_of(&self, prefill: &StepResult, last: Option<&StepResult>, batch: u64) -> (u64, DeviceTotal) {
        // The rounded totals are the largest over the forward's samples, not those at its
        // allocated peak: the allocator keeps the segments it reserved, and a sample just before
        // the peak can hold more rounding than the peak does (Qwen3-Next: from prompt 305 to 306
        // the peak moved to a sample holding 655,360 B less rounding). The largest is also
        // monotone in the lengths (each sample's sizes are), which the solver relies on.
        let one = |r: &StepResult| (r.peak, DeviceTotal::new(r.max_rounded.0, r.max_rounded.1));
        let mut best = one(prefill);
        if let Some(r) = last {
            // The caching allocator keeps the segments it reserved (`generate()` never calls
            // `torch.cuda.empty_cache()`), so after the decode the device holds at least the
            // larger reserve of the two phases, whichever has the higher allocated peak: the
            // prefill's many large activations can reserve more than a decode step whose
            // allocated peak is higher (GLM-4.5-Air at short prompts).
            let (p, d) = one(r);
            let rounded = best.1.allocated_rounded.max(d.allocated_rounded);
            best = (best.0.max(p), DeviceTotal::new(rounded, best.1.reserved.max(d.reserved)));
        }
        if let Ok(mut d) = self.device.lock() {
            *d = Some((batch, best.0, best.1));
        }
        best
    }

    /// The report at `batch`, given the prefill's simulation.
    pub fn report(&self, prefill: &Graph, prefill_result: &StepResult, batch: u64) -> (GenerationReport, Option<StepResult>) {
        let len = self.lengths;
        let after_prefill = cache_bytes(prefill, batch);
        let kv_end = self.last.as_ref().map_or(after_prefill, |s| cache_bytes(&s.resolved.graph, batch));
        let decode = self.decode(batch, true);
        let series = match &decode {
            Some((peak, last)) => self.series(batch, last.as_ref().unwrap_or(peak)),
            None => Vec::new(),
        };
        let report = GenerationReport {
            prompt_len: len.prompt,
            new_tokens: len.new_tokens,
            prefill_peak_bytes: prefill_result.peak,
            decode_peak_bytes: decode.as_ref().map_or(0, |(r, _)| r.peak),
            kv_cache_bytes: kv_end,
            kv_cache_bytes_after_prefill: after_prefill,
            decode_series: series,
        };
        (report, decode.map(|(r, _)| r))
    }

    /// Peak of every decode step: lines through two simulated steps per piece, their upper
    /// envelope evaluated per step. Pieces end where a sliding window fills (the steps around
    /// it run different ops or stop growing). A paged cache is resident
    /// through a whole step and grows by blocks: its bytes are taken out of every sample, the
    /// rest is linear in the length, and each step adds back its blocks.
    fn series(&self, batch: u64, last: &StepResult) -> Vec<(u64, u64)> {
        let steps = self.lengths.new_tokens - 1;
        let prompt = self.lengths.prompt;
        let mut knots = vec![1, steps];
        if self.first.is_some() && steps > 2 {
            // the first step replaces whole-prompt tensors, the others window-sized ones
            knots.push(2);
        }
        for w in windows(&self.spec) {
            // the step whose cache reaches the window (the mask appears), the one before, and
            // the one after (the old tensor a dynamic cache replaces reaches it too)
            let t = w.saturating_sub(prompt);
            knots.extend([t.saturating_sub(1), t, t + 1].into_iter().filter(|&k| k > 1 && k < steps));
        }
        knots.sort_unstable();
        knots.dedup();
        let paged = self.config.generate.cache == KvCacheKind::Paged;
        let resident = |g: &Graph| -> Vec<u64> {
            let kv = g.storages.iter().filter(|s| paged && s.class == StorageClass::KvResident);
            kv.map(|s| s.bytes.at(batch)).collect()
        };
        let sample = |t: u64| -> Option<Knot> {
            let built = if t == steps { None } else { Some(stage(&self.spec, &self.config, self.base, &self.lengths, t).ok()?) };
            let r = built.as_ref().map(|s| s.simulate(batch, true));
            let kv = resident(built.as_ref().map_or(&self.last.as_ref()?.resolved.graph, |s| &s.resolved.graph));
            let total: u64 = kv.iter().sum();
            let timeline = r.as_ref().unwrap_or(last).timeline.iter().map(|p| p.bytes.saturating_sub(total)).collect();
            Some(Knot { t, timeline, kv })
        };
        let blocks = |t: u64| (prompt + t).div_ceil(PAGE_TOKENS) as i128;
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(steps as usize);
        let mut prev: Option<Knot> = None;
        for &k in &knots {
            let Some(knot) = sample(k) else { continue };
            if let Some(k0) = prev.take() {
                let after = out.last().map_or(0, |&(lt, _)| lt);
                // each resident cache tensor: constant, or growing by whole blocks
                let span = (blocks(knot.t) - blocks(k0.t)).max(1);
                // (a whole number of blocks each, so the totals interpolate exactly)
                let (from, to): (i128, i128) = (k0.kv.iter().sum::<u64>().into(), knot.kv.iter().sum::<u64>().into());
                let kv = |t: u64| -> u64 { (from + (to - from) * (blocks(t) - blocks(k0.t)) / span).max(0) as u64 };
                let rows = piece(k0.t, &k0.timeline, knot.t, &knot.timeline, |t| prompt + t);
                out.extend(rows.into_iter().filter(|&(t, _)| t > after).map(|(t, b)| (t, b.saturating_add(kv(t)))));
            } else {
                let kv: u64 = knot.kv.iter().sum();
                out.push((k, knot.timeline.iter().copied().max().unwrap_or(0).saturating_add(kv)));
            }
            prev = Some(knot);
        }
        downsample(out, SERIES_POINTS)
    }
}

/// One simulated decode step of the series: its samples without the resident paged cache, and
/// the resident cache tensors' bytes.
struct Knot {
    t: u64,
    timeline: Vec<u64>,
    kv: Vec<u64>,
}

/// Steps `t0..=t1` of one piece: per-sample lines in `x(t)` through the two timelines, their
/// upper envelope walked once over the steps (the peaks interpolated if the two steps ran
/// different ops).
fn piece(t0: u64, a: &[u64], t1: u64, b: &[u64], x: impl Fn(u64) -> u64) -> Vec<(u64, u64)> {
    let x0 = x(t0) as i128;
    let span = (x(t1) as i128 - x0).max(1);
    // (value at t0, rise over the piece): the value at x is `a + d·(x − x0)/span`
    let mut lines: Vec<(i128, i128)> = if a.len() == b.len() {
        a.iter().zip(b).map(|(&p, &q)| (p as i128, q as i128 - p as i128)).collect()
    } else {
        let max = |v: &[u64]| v.iter().copied().max().unwrap_or(0) as i128;
        vec![(max(a), max(b) - max(a))]
    };
    // slopes ascending, the highest of equal slopes only
    lines.sort_unstable_by(|p, q| p.1.cmp(&q.1).then(q.0.cmp(&p.0)));
    lines.dedup_by_key(|l| l.1);
    let mut hull: Vec<(i128, i128)> = Vec::with_capacity(lines.len());
    for l in lines {
        while hull.len() >= 2 {
            let (l1, l2) = (hull[hull.len() - 2], hull[hull.len() - 1]);
            // l2 is never above both neighbours if l1 and l meet no later than l1 and l2
            if (l1.0 - l.0).saturating_mul(l2.1 - l1.1) <= (l1.0 - l2.0).saturating_mul(l.1 - l1.1) {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(l);
    }
    let value = |l: (i128, i128), dx: i128| l.0 + l.1 * dx / span;
    let mut at = 0;
    (t0..=t1)
        .map(|t| {
            let dx = x(t) as i128 - x0;
            while at + 1 < hull.len() && value(hull[at + 1], dx) >= value(hull[at], dx) {
                at += 1;
            }
            (t, hull.get(at).map_or(0, |&l| value(l, dx)).max(0) as u64)
        })
        .collect()
}

/// Keeps at most `max` points, the largest of each bucket.
fn downsample(points: Vec<(u64, u64)>, max: usize) -> Vec<(u64, u64)> {
    if points.len() <= max {
        return points;
    }
    let chunk = points.len().div_ceil(max);
    points.chunks(chunk).filter_map(|c| c.iter().copied().max_by_key(|p| p.1)).collect()
}

/// Can the first decode step hold more than the last? With a dynamic cache and a sliding window
/// shorter than the prompt (and steps after the first).
fn first_step_differs(spec: &ModelSpec, c: &TrainConfig, len: &Lengths) -> bool {
    c.generate.cache == KvCacheKind::Dynamic && len.new_tokens > 2 && windows(spec).iter().any(|&w| w < len.prompt)
}

/// The fewest learned positions of the model's position embeddings (`None`: rotary or none).
fn positions(spec: &ModelSpec) -> Option<u64> {
    let found = std::cell::Cell::new(None::<u64>);
    let pick = |l: &Layer| {
        if let Layer::PositionalEmbedding(p) = l {
            if !p.per_sample {
                found.set(Some(found.get().map_or(p.num_embeddings, |n| n.min(p.num_embeddings))));
            }
        }
        false
    };
    // an image-text model's tower (`image_input` to `image_tokens`) sees the image's patches, not
    // the generated tokens: its learned positions (CLIP's, SigLIP's) bound nothing here
    let mut tower = false;
    for l in &spec.layers {
        match l {
            Layer::ImageInput(_) => tower = true,
            Layer::ImageTokens(_) => tower = false,
            _ if !tower => {
                l.any(&pick);
            }
            _ => {}
        }
    }
    found.get()
}

/// The distinct sliding windows of the model's attention layers.
fn windows(spec: &ModelSpec) -> Vec<u64> {
    let found = std::cell::RefCell::new(Vec::new());
    let pick = |l: &Layer| {
        let w = match l {
            Layer::TransformerDecoderLayer(t) | Layer::TransformerEncoderLayer(t) => t.sliding_window,
            Layer::MultiheadAttention(a) => a.sliding_window,
            _ => None,
        };
        found.borrow_mut().extend(w);
        false
    };
    for l in &spec.layers {
        l.any(&pick);
    }
    let mut w = found.into_inner();
    w.sort_unstable();
    w.dedup();
    w
}
