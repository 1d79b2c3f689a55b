//! Serving capacity under vLLM: how much KV cache a GPU (or a tensor-parallel group) holds after
//! vLLM's own start-up accounting, and what that means in tokens, concurrent sequences and context.
//!
//! vLLM v1 (`vllm/v1/worker/gpu_worker.py`, `Worker.determine_available_memory`):
//!
//! ```text
//! requested   = ceil(total_memory × gpu_memory_utilization)          (vllm/utils/mem_utils.py)
//! non_kv      = weights_memory + torch_peak_increase + non_torch_increase
//!               (memory_profiling around GPUModelRunner.profile_run)
//! available   = requested − non_kv [− cudagraph_memory_estimate]      (per rank; the graphs only
//!               with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, off by default: otherwise they
//!               are captured after the KV cache, in the memory outside `requested`)
//! num_blocks  = available // (page_size × layers)                     (v1/core/kv_cache_utils.py)
//! page_size   = block_size × num_kv_heads × head_size × 2 × dtype     (FullAttentionSpec; MLA: × 1)
//! ```
//!
//! `profile_run` (`gpu_model_runner.py`) runs a dummy forward of `max_num_batched_tokens` tokens
//! spread over `min(max_num_seqs, tokens)` requests, then a dummy sampler run over those requests'
//! last positions. Which figures are modelled rather than computed exactly is listed in
//! [`Capacity::modelled`]: the weights, the KV page and the block arithmetic are exact; the
//! activation peak, the non-torch increase and the CUDA-graph pool are modelled.

pub mod kv;

use crate::config::{Mode, Precision, TrainConfig};
use crate::error::{Error, Result};
use crate::formats::{KvDtype, WeightFormat};
use crate::spec::ModelSpec;
use kv::{BlockWidths, ModelShape};
use serde::Serialize;

/// vLLM's KV block (`CacheConfig.block_size` default 16 on CUDA).
pub const BLOCK_SIZE: u64 = 16;
/// vLLM's `gpu_memory_utilization` default (`CacheConfig`).
pub const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;
/// `max_num_batched_tokens` of `vllm serve` on an 80 GB-class GPU (`EngineArgs._set_default_args`:
/// 8192 for the OpenAI server).
pub const DEFAULT_MAX_NUM_BATCHED_TOKENS: u64 = 8192;
/// `max_num_seqs` default (`SchedulerConfig`: 256; `_set_default_args` raises it on large GPUs).
pub const DEFAULT_MAX_NUM_SEQS: u64 = 256;
/// Largest CUDA-graph batch (`CompilationConfig.max_cudagraph_capture_size`: `min(2 × max_num_seqs, 512)`).
pub const MAX_CUDAGRAPH_CAPTURE: u64 = 512;
/// Driver memory per captured graph: the floor `profile_cudagraph_memory` extrapolates with
/// (`_MIN_PER_GRAPH_BYTES = 1 << 20`, `vllm/v1/worker/gpu_model_runner.py`). Modelled.
pub const CUDA_GRAPH_BYTES_PER_GRAPH: u64 = 1 << 20;
/// Bytes per logit the dummy sampler run adds to the model-dtype logits. `_dummy_sampler_run`
/// (`gpu_model_runner.py`) sets `temperature=0.5, top_p=0.9, top_k=vocab-1` for every request, so
/// `Sampler.forward` runs the native top-k/top-p path (FlashInfer's sampler is off by default):
/// `logits.to(float32)` 4, `apply_top_k_top_p`'s `logits.sort` values 4 and int64 indices 8, the
/// top-k and top-p boolean masks 1, `softmax` of the sorted logits 4 (the `cumsum` writes in
/// place), and the `scatter` back 4. Modelled (the live set depends on the release).
pub const SAMPLER_BYTES_PER_LOGIT: u64 = 4 + 4 + 8 + 1 + 4 + 4;
/// vLLM pads the vocabulary of `VocabParallelEmbedding` and `ParallelLMHead` to a multiple of 64
/// (`DEFAULT_VOCAB_PADDING_SIZE`, `model_executor/layers/vocab_parallel_embedding.py`).
pub const VOCAB_PADDING: u64 = 64;
/// Non-torch memory the profile run adds on one GPU: cuBLAS/cuBLASLt workspaces and kernels loaded
/// lazily (vLLM logs it as "non-torch memory"; ≈ 0.13 GiB observed on H100 for dense models).
/// Modelled.
pub const NON_TORCH_BYTES: u64 = 136 * 1024 * 1024;
/// With tensor parallelism NCCL's and the custom all-reduce's buffers add to it (≈ 0.55 GiB
/// observed at TP 2). Modelled.
pub const NON_TORCH_BYTES_TP: u64 = 563 * 1024 * 1024;

/// What to serve on what.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServeConfig {
    /// Memory of one GPU (`total_memory`).
    pub gpu_bytes: u64,
    pub tensor_parallel: u64,
    pub gpu_memory_utilization: f64,
    pub max_num_batched_tokens: u64,
    pub max_num_seqs: u64,
    /// The context (prompt + output) a sequence is sized for (`max_model_len`).
    pub context: u64,
    /// Concurrent sequences to find the longest context for.
    pub concurrency: Option<u64>,
    pub kv_dtype: KvDtype,
    /// Model dtype (`--dtype`): fp16 or bf16.
    pub precision: Precision,
    pub weights: Option<WeightFormat>,
    /// `--enforce-eager`: no CUDA graphs, so no graph pool.
    pub enforce_eager: bool,
    /// `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`: the graph pool is taken out of the KV budget.
    /// vLLM's default (`0`, `vllm/envs.py`) captures the graphs after the KV cache is allocated, in
    /// the memory `gpu_memory_utilization` leaves.
    pub estimate_cudagraphs: bool,
}

impl ServeConfig {
    pub fn new(gpu_bytes: u64, context: u64) -> ServeConfig {
        ServeConfig {
            gpu_bytes,
            tensor_parallel: 1,
            gpu_memory_utilization: DEFAULT_GPU_MEMORY_UTILIZATION,
            max_num_batched_tokens: DEFAULT_MAX_NUM_BATCHED_TOKENS,
            max_num_seqs: DEFAULT_MAX_NUM_SEQS,
            context,
            concurrency: None,
            kv_dtype: KvDtype::Bf16,
            precision: Precision::Bf16,
            weights: None,
            enforce_eager: false,
            estimate_cudagraphs: false,
        }
    }
}

/// The engine every serving figure is of (views print it beside them).
pub const ENGINE: &str = "vLLM";

impl ServeConfig {
    /// vLLM serving the page's own setup: its weight format, model dtype (vLLM's `--dtype`:
    /// fp16 for fp16 and AMP fp16 setups, bf16 otherwise, as `--dtype auto` runs an fp32
    /// checkpoint), KV-cache dtype (generate mode's) and tensor-parallel degree, so a serving
    /// figure answers for the same job as the estimate beside it.
    pub fn for_setup(config: &TrainConfig, dist: &crate::distributed::DistConfig, gpu_bytes: u64, context: u64) -> ServeConfig {
        let mut precision = match config.precision {
            Precision::Fp16 | Precision::AmpFp16 => Precision::Fp16,
            _ => Precision::Bf16,
        };
        match config.weights {
            Some(WeightFormat::Float(crate::units::DType::F16)) => precision = Precision::Fp16,
            Some(WeightFormat::Float(crate::units::DType::Bf16)) => precision = Precision::Bf16,
            _ => {}
        }
        let kv_dtype = match config.generate.kv_dtype {
            Some(crate::generation::KvDType::Fp8) => KvDtype::Fp8,
            Some(crate::generation::KvDType::Int8) => KvDtype::Int8,
            Some(crate::generation::KvDType::Fp16) => KvDtype::Fp16,
            Some(crate::generation::KvDType::Bf16) => KvDtype::Bf16,
            None if precision == Precision::Fp16 => KvDtype::Fp16,
            None => KvDtype::Bf16,
        };
        let tp = if dist.strategy == crate::distributed::Strategy::Tp || dist.tp > 1 { dist.tp_degree() } else { 1 };
        ServeConfig { tensor_parallel: tp, kv_dtype, precision, weights: config.weights, ..ServeConfig::new(gpu_bytes, context) }
    }
}

/// The capacity of one rank (all ranks of a tensor-parallel group hold the same).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    /// [`ENGINE`]: whose allocation these figures are.
    pub engine: &'static str,
    pub gpu_bytes: u64,
    pub tensor_parallel: u64,
    pub gpu_memory_utilization: f64,
    /// `ceil(total × gpu_memory_utilization)`.
    pub requested_bytes: u64,
    /// Parameters on this rank in their format.
    pub weights_bytes: u64,
    pub weights_format: String,
    /// Torch peak increase of the profile run (forward at `max_num_batched_tokens` and sampler).
    pub activation_peak_bytes: u64,
    pub non_torch_bytes: u64,
    /// The CUDA-graph pool (captured sizes × their activations, plus the driver's per-graph cost).
    pub cuda_graph_bytes: u64,
    /// Whether `cuda_graph_bytes` is taken out of the KV budget (`estimate_cudagraphs`); if not,
    /// it must fit, with the CUDA context, in `gpu_bytes − requested_bytes`.
    pub cuda_graph_in_budget: bool,
    /// `gpu_bytes − requested_bytes − CUDA context − graphs outside the budget`: negative means
    /// the graphs are likely to run out of memory after the KV cache is allocated.
    pub headroom_bytes: i64,
    /// What is left for the KV cache (0 when the rest does not fit).
    pub kv_pool_bytes: u64,
    pub kv_dtype: String,
    /// Cache bytes of one token over all layers on this rank.
    pub kv_bytes_per_token: u64,
    /// One 16-token block over all layers.
    pub page_bytes: u64,
    pub num_blocks: u64,
    /// `num_blocks × 16`.
    pub kv_tokens: u64,
    pub context: u64,
    /// Sequences of `context` tokens that fit at once (vLLM's "maximum concurrency").
    pub max_concurrency: u64,
    pub concurrency: Option<u64>,
    /// The longest context `concurrency` sequences can each have.
    pub max_context_at_concurrency: Option<u64>,
    /// Figures that are modelled (not exact); the rest follow vLLM's arithmetic exactly.
    pub modelled: Vec<&'static str>,
}

/// Serving capacity of `spec` under `cfg`.
pub fn capacity(spec: &ModelSpec, cfg: &ServeConfig) -> Result<Capacity> {
    let tp = cfg.tensor_parallel;
    if tp == 0 || tp > 1024 {
        return Err(Error::Config(format!("tensor parallel size {tp} (1 to 1024)")));
    }
    if !(cfg.gpu_memory_utilization > 0.0 && cfg.gpu_memory_utilization <= 1.0) {
        return Err(Error::Config(format!("gpu_memory_utilization {} must be in (0, 1]", cfg.gpu_memory_utilization)));
    }
    if cfg.context == 0 || cfg.max_num_batched_tokens == 0 || cfg.max_num_seqs == 0 {
        return Err(Error::Config("context, max_num_batched_tokens and max_num_seqs must be at least 1".into()));
    }
    if matches!(cfg.kv_dtype, KvDtype::Int8 | KvDtype::Q4) {
        return Err(Error::Config(format!(
            "vLLM has no `{}` KV cache (--kv-cache-dtype auto, fp8): choose fp16, bf16 or fp8",
            cfg.kv_dtype.name()
        )));
    }
    let dtype_bytes = match cfg.precision {
        Precision::Fp16 => 2,
        Precision::Bf16 => 2,
        p => return Err(Error::Config(format!("vLLM serves in fp16 or bf16 (--dtype), not {p}"))),
    };
    let shape = ModelShape::of(spec);
    if shape.layers.is_empty() && shape.states.is_empty() {
        return Err(Error::Config(
            "the model has no causal attention layers: nothing to cache (vLLM keeps no KV cache for an encoder)".into(),
        ));
    }
    let weights = weights_bytes(spec, cfg)?;
    let act = activation_peak(&shape, cfg, dtype_bytes);
    let non_torch = if tp > 1 { NON_TORCH_BYTES_TP } else { NON_TORCH_BYTES };
    let graphs = if cfg.enforce_eager {
        0
    } else {
        // the graphs share one pool, sized by the largest capture
        let sizes = capture_sizes((2 * cfg.max_num_seqs).min(MAX_CUDAGRAPH_CAPTURE));
        let largest = sizes.last().copied().unwrap_or(0);
        forward_peak(&shape.blocks, largest, tp, dtype_bytes)
            .saturating_add((sizes.len() as u64).saturating_mul(CUDA_GRAPH_BYTES_PER_GRAPH))
    };
    let budget_graphs = if cfg.estimate_cudagraphs { graphs } else { 0 };
    let requested = (cfg.gpu_bytes as f64 * cfg.gpu_memory_utilization).ceil() as u64;
    let pool = requested.saturating_sub(weights).saturating_sub(act).saturating_sub(non_torch).saturating_sub(budget_graphs);
    let outside = crate::memory::device::CUDA_CONTEXT_BYTES.saturating_add(graphs - budget_graphs);
    let headroom = cfg.gpu_bytes.saturating_sub(requested) as i64 - outside as i64;
    let per_token: u64 = shape.layers.iter().map(|l| l.token_bytes(tp, cfg.kv_dtype)).sum();
    let page = per_token.saturating_mul(BLOCK_SIZE);
    let num_blocks = pool / page.max(1);
    let request_bytes = |len: u64| request_bytes_of(&shape, cfg, len);
    // a model of recurrent layers only has no KV blocks: its pool holds fixed states
    let usable = if page == 0 { pool } else { num_blocks.saturating_mul(page) };
    let max_concurrency = usable / request_bytes(cfg.context).max(1);
    let max_context_at_concurrency = cfg.concurrency.map(|c| {
        // the longest whole-block context whose `c` requests fit in the pool
        let (mut lo, mut hi) = (0u64, MAX_CONTEXT + 1);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if request_bytes(mid).saturating_mul(c.max(1)) <= usable { lo = mid } else { hi = mid }
        }
        lo
    });
    Ok(Capacity {
        engine: ENGINE,
        gpu_bytes: cfg.gpu_bytes,
        tensor_parallel: tp,
        gpu_memory_utilization: cfg.gpu_memory_utilization,
        requested_bytes: requested,
        weights_bytes: weights,
        weights_format: cfg.weights.map_or_else(|| cfg.precision.name().to_string(), |w| w.name()),
        activation_peak_bytes: act,
        non_torch_bytes: non_torch,
        cuda_graph_bytes: graphs,
        cuda_graph_in_budget: cfg.estimate_cudagraphs,
        headroom_bytes: headroom,
        kv_pool_bytes: pool,
        kv_dtype: cfg.kv_dtype.name().to_string(),
        kv_bytes_per_token: per_token,
        page_bytes: page,
        num_blocks,
        kv_tokens: num_blocks.saturating_mul(BLOCK_SIZE),
        context: cfg.context,
        max_concurrency,
        concurrency: cfg.concurrency,
        max_context_at_concurrency,
        modelled: vec!["activation_peak_bytes", "non_torch_bytes", "cuda_graph_bytes", "headroom_bytes"],
    })
}

/// The longest context [`capacity`] searches (`max_context_at_concurrency`).
pub const MAX_CONTEXT: u64 = (1 << 40) - 1;

/// KV bytes one request of `len` tokens holds on one rank, in whole blocks per layer.
pub fn request_bytes(spec: &ModelSpec, cfg: &ServeConfig, len: u64) -> u64 {
    request_bytes_of(&ModelShape::of(spec), cfg, len)
}

fn request_bytes_of(shape: &ModelShape, cfg: &ServeConfig, len: u64) -> u64 {
    let tp = cfg.tensor_parallel;
    shape
        .layers
        .iter()
        .map(|l| {
            // a sliding-window layer holds the window's last `w - 1` tokens plus a step's
            // tokens, never more than the request, and one block more for the window's
            // offset (`SlidingWindowSpec.max_admission_blocks_per_request`)
            let blocks = match l.window {
                None => len.div_ceil(BLOCK_SIZE),
                Some(w) => {
                    let held = w.saturating_sub(1).saturating_add(cfg.max_num_batched_tokens).min(len);
                    held.div_ceil(BLOCK_SIZE) + 1
                }
            };
            blocks.saturating_mul(BLOCK_SIZE).saturating_mul(l.token_bytes(tp, cfg.kv_dtype))
        })
        .fold(0u64, u64::saturating_add)
        .saturating_add(shape.state_bytes(tp, STATE_DTYPE_BYTES))
}

/// Bytes of a recurrent state element: the model's dtype (vLLM's `auto` mamba cache dtypes;
/// vLLM serves in fp16 or bf16 only).
const STATE_DTYPE_BYTES: u64 = 2;

/// Parameters per rank in their format. vLLM's column- and row-parallel linears split every
/// matrix over the `tp` ranks; `VocabParallelEmbedding` and `ParallelLMHead` first pad the
/// vocabulary to [`VOCAB_PADDING`] rows; `FusedMoE` splits every expert's intermediate size;
/// 1-D parameters (norms) are replicated. (Biases of column-parallel layers are split too;
/// counting them whole is a rounding error.)
fn weights_bytes(spec: &ModelSpec, cfg: &ServeConfig) -> Result<u64> {
    use crate::formats::TensorRole;
    let tc = TrainConfig {
        batch: 1,
        seq_len: Some(2),
        mode: Mode::Infer,
        precision: cfg.precision,
        weights: cfg.weights.filter(|w| w.is_quantized()),
        ..TrainConfig::default()
    };
    let p = crate::memory::Prepared::new(spec, &tc)?;
    let r = &p.resolved;
    let rows: Vec<(&str, u32)> = r.layers.iter().map(|l| (l.kind.as_str(), l.depth)).collect();
    let tp = cfg.tensor_parallel;
    let total = crate::formats::apply::roles(&r.graph, &rows)
        .into_iter()
        .map(|(v, role)| {
            let shape = &r.graph.value(v).shape.0;
            let bytes = r.graph.storages[r.graph.storage_of(v) as usize].bytes.fixed;
            match (shape.as_slice(), role) {
                ([rows, _], TensorRole::Embedding { .. } | TensorRole::Output { .. }) if *rows > 0 => {
                    let padded = rows.div_ceil(VOCAB_PADDING).saturating_mul(VOCAB_PADDING);
                    // bytes × padded / rows, per rank (u128: no overflow)
                    ((bytes as u128 * padded as u128 / *rows as u128) as u64).div_ceil(tp)
                }
                // norms (and other vectors) are replicated; matrices and expert stacks are split
                ([] | [_], _) => bytes,
                _ => bytes.div_ceil(tp),
            }
        })
        .fold(0u64, u64::saturating_add);
    Ok(total)
}

/// vLLM's CUDA-graph batch sizes up to `max` (`CompilationConfig`'s default
/// `cudagraph_capture_sizes`: 1, 2, 4, then every 8 to 256, then every 16).
pub fn capture_sizes(max: u64) -> Vec<u64> {
    [1u64, 2, 4].into_iter().chain((8..256).step_by(8)).chain((256..=max.max(256)).step_by(16)).filter(|&s| s <= max).collect()
}

/// The live tensors of one block's forward at `tokens` tokens in vLLM's fused layers
/// (`models/llama.py`): the residual and the normed input stay referenced by the decoder layer
/// while its attention (`qkv_proj` output, attention output) and MLP (`gate_up_proj` output,
/// `SiluAndMul` output, `down_proj` output) run; the widest moment is usually the MLP's. A sparse
/// MoE MLP runs `fused_experts` (`layers/fused_moe/fused_moe.py`): `intermediate_cache1`
/// (`[M, top_k, 2I]`) and `intermediate_cache3` (`[M, top_k, H]`) share one buffer, and
/// `intermediate_cache2` holds `[M·top_k, I]`. Tensor parallelism splits the heads and `I`.
fn block_peak(b: &BlockWidths, tokens: u64, tp: u64, bytes: u64) -> u64 {
    let held = 2 * b.hidden;
    let attn = held + b.qkv / tp + b.attn_out / tp + b.hidden;
    let mlp = if b.top_k > 0 {
        held + b.top_k * ((b.up / tp).max(b.hidden) + b.act / tp) + b.hidden
    } else {
        held + (b.up / tp + b.act / tp).max(b.act / tp + b.hidden)
    };
    tokens.saturating_mul(attn.max(mlp)).saturating_mul(bytes)
}

fn forward_peak(blocks: &[BlockWidths], tokens: u64, tp: u64, bytes: u64) -> u64 {
    blocks.iter().map(|b| block_peak(b, tokens, tp, bytes)).max().unwrap_or(0)
}

/// Torch peak of `profile_run`: the forward at `max_num_batched_tokens`, then `_dummy_sampler_run`
/// over `min(max_num_seqs, tokens)` requests: logits in the model dtype (`compute_logits`), their
/// fp32 copy (`Sampler`), and top-k/top-p's sort (fp32 values, int64 indices) and softmax (fp32),
/// which the dummy sampler run exercises; the forward's last hidden states stay alive meanwhile.
fn activation_peak(m: &ModelShape, cfg: &ServeConfig, bytes: u64) -> u64 {
    let t = cfg.max_num_batched_tokens;
    let forward = forward_peak(&m.blocks, t, cfg.tensor_parallel, bytes);
    let reqs = cfg.max_num_seqs.min(t);
    let sampler = reqs.saturating_mul(m.vocab).saturating_mul(bytes + SAMPLER_BYTES_PER_LOGIT);
    forward.max(t.saturating_mul(m.hidden).saturating_mul(bytes).saturating_add(sampler))
}

#[cfg(test)]
mod tests;
