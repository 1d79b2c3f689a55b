//! `vramcalc serve`: vLLM serving capacity, formatted from `vramcalc_core::serve::Capacity`.

use crate::args::ModelArgs;
use anyhow::{anyhow, Result};
use clap::Args;
use std::fmt::Write;
use vramcalc_core::formats::{KvDtype, WeightFormat};
use vramcalc_core::memory::device::gpu;
use vramcalc_core::serve::{self, ServeConfig};
use vramcalc_core::{format_bytes, thousands, ByteUnit, Precision};

#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A GPU id from `vramcalc gpus` (e.g. `h100-80gb`).
    #[arg(long)]
    pub gpu: String,
    /// The total memory CUDA reports for the GPU (`torch.cuda.mem_get_info()[1]`, vLLM's
    /// `total_gpu_memory`), e.g. `79.22GiB`, instead of the board's nominal size.
    #[arg(long)]
    pub gpu_memory: Option<String>,
    /// The context each sequence is sized for (prompt + output, vLLM's max_model_len).
    #[arg(long)]
    pub context: u64,
    /// Tensor-parallel size (GPUs).
    #[arg(long, default_value_t = 1)]
    pub tp: u64,
    #[arg(long, default_value_t = serve::DEFAULT_GPU_MEMORY_UTILIZATION)]
    pub gpu_memory_utilization: f64,
    #[arg(long, default_value_t = serve::DEFAULT_MAX_NUM_BATCHED_TOKENS)]
    pub max_num_batched_tokens: u64,
    #[arg(long, default_value_t = serve::DEFAULT_MAX_NUM_SEQS)]
    pub max_num_seqs: u64,
    /// KV cache dtype: fp16 | bf16 | fp8 (default: the model dtype)
    #[arg(long)]
    pub kv_dtype: Option<String>,
    /// Model dtype: bf16 | fp16
    #[arg(long, default_value = "bf16")]
    pub precision: String,
    /// Weights' storage: bf16 | fp16 | fp8 | int8 | nf4 | gptq-int4 | awq-int4 | … (default: the
    /// --hf-config's quantization_config, else the model dtype)
    #[arg(long)]
    pub weights: Option<String>,
    /// Concurrent sequences to find the longest context for.
    #[arg(long)]
    pub concurrency: Option<u64>,
    /// No CUDA graphs (`--enforce-eager`): no graph pool.
    #[arg(long)]
    pub enforce_eager: bool,
    /// Take the CUDA-graph pool out of the KV budget, as VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 does.
    #[arg(long)]
    pub estimate_cudagraphs: bool,
    /// MB (10^6) or MiB (2^20)
    #[arg(long, default_value = "MB")]
    pub units: String,
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &ServeArgs) -> Result<String> {
    let spec = a.model.load()?;
    let g = gpu(&a.gpu).ok_or_else(|| anyhow!("unknown GPU {:?} (run `vramcalc gpus`)", a.gpu))?;
    let gpu_bytes = match &a.gpu_memory {
        None => g.bytes,
        Some(m) => vramcalc_core::units::parse_bytes(m)
            .ok_or_else(|| anyhow!("--gpu-memory {m:?} is not a size like 79.22GiB or 85GB"))?,
    };
    let mut precision = match a.precision.as_str() {
        "bf16" => Precision::Bf16,
        "fp16" => Precision::Fp16,
        p => return Err(anyhow!("--precision {p:?} is not one of bf16, fp16 (vLLM's --dtype)")),
    };
    let weights = match &a.weights {
        Some(w) => Some(WeightFormat::parse(w)?),
        None => a.model.quantization()?,
    };
    // `--weights fp16` / `bf16` is the model dtype
    match weights {
        Some(WeightFormat::Float(vramcalc_core::DType::F16)) => precision = Precision::Fp16,
        Some(WeightFormat::Float(vramcalc_core::DType::Bf16)) => precision = Precision::Bf16,
        _ => {}
    }
    let default_kv = if precision == Precision::Fp16 { KvDtype::Fp16 } else { KvDtype::Bf16 };
    let kv_dtype = match &a.kv_dtype {
        None => default_kv,
        Some(k) => KvDtype::parse(k).ok_or_else(|| anyhow!("--kv-dtype {k:?} is not one of fp16, bf16, fp8"))?,
    };
    let cfg = ServeConfig {
        tensor_parallel: a.tp,
        gpu_memory_utilization: a.gpu_memory_utilization,
        max_num_batched_tokens: a.max_num_batched_tokens,
        max_num_seqs: a.max_num_seqs,
        concurrency: a.concurrency,
        kv_dtype,
        precision,
        weights,
        enforce_eager: a.enforce_eager,
        estimate_cudagraphs: a.estimate_cudagraphs,
        ..ServeConfig::new(gpu_bytes, a.context)
    };
    let c = serve::capacity(&spec, &cfg)?;
    if a.json {
        let mut v = serde_json::to_value(&c)?;
        v["model"] = spec.display_name().into();
        v["gpu"] = g.id.into();
        return Ok(serde_json::to_string_pretty(&v)? + "\n");
    }
    let unit = if a.units.eq_ignore_ascii_case("mib") { ByteUnit::Mib } else { ByteUnit::Mb };
    let b = |x: u64| format_bytes(x, unit);
    let mut o = String::new();
    let gpus = if c.tensor_parallel > 1 { format!("{} × {}", c.tensor_parallel, g.name) } else { g.name.to_string() };
    writeln!(o, "{} on {gpus} under {} (per GPU; * modelled)", spec.display_name(), c.engine)?;
    let rows = [
        ("GPU memory".to_string(), c.gpu_bytes, String::new()),
        (format!("× utilisation {}", c.gpu_memory_utilization), c.requested_bytes, String::new()),
        (format!("− weights ({})", c.weights_format), c.weights_bytes, String::new()),
        ("− activation peak*".into(), c.activation_peak_bytes, format!("  (profile run at {} tokens)", thousands(cfg.max_num_batched_tokens))),
        ("− non-torch*".into(), c.non_torch_bytes, String::new()),
        ("− CUDA graphs*".into(), if c.cuda_graph_in_budget { c.cuda_graph_bytes } else { 0 }, String::new()),
        ("= KV cache pool".into(), c.kv_pool_bytes, String::new()),
    ];
    for (label, bytes, note) in rows.into_iter().filter(|r| r.1 > 0 || !r.0.contains("graphs")) {
        writeln!(o, "  {label:<26} {:>12}{note}", b(bytes))?;
    }
    if !c.cuda_graph_in_budget {
        let headroom = if c.headroom_bytes < 0 { format!("−{}", b(c.headroom_bytes.unsigned_abs())) } else { b(c.headroom_bytes as u64) };
        writeln!(
            o,
            "Outside the budget: CUDA graphs* {} and the CUDA context* {}; headroom* {headroom}{}",
            b(c.cuda_graph_bytes),
            b(vramcalc_core::memory::device::CUDA_CONTEXT_BYTES),
            if c.headroom_bytes < 0 { " (negative: vLLM refuses to start, or capturing the graphs runs out of memory; lower --gpu-memory-utilization)" } else { "" }
        )?;
    }
    writeln!(
        o,
        "KV cache ({}): {} per token, {} blocks of 16 = {} tokens",
        c.kv_dtype,
        b(c.kv_bytes_per_token),
        thousands(c.num_blocks),
        thousands(c.kv_tokens)
    )?;
    writeln!(o, "Concurrent sequences at {} tokens: {}", thousands(c.context), thousands(c.max_concurrency))?;
    if c.max_concurrency == 0 {
        writeln!(o, "  (vLLM refuses to start: one {}-token sequence does not fit the KV pool)", thousands(c.context))?;
    }
    if let (Some(n), Some(l)) = (c.concurrency, c.max_context_at_concurrency) {
        writeln!(o, "Longest context at {} concurrent sequences: {} tokens", thousands(n), thousands(l))?;
    }
    Ok(o)
}
