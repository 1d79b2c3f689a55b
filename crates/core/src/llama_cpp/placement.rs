//! Which buffer each weight goes to, and the model buffers' sizes (`llama_model_base::load_tensors`
//! in `src/llama-model.cpp`, `llama_model_loader::create_tensor` in `src/llama-model-loader.cpp`).
//!
//! - The input layer (`token_embd`, position and token-type embeddings) stays on the CPU.
//! - Layer `il` is on the CPU if `il < i_gpu_start = max(n_layer + 1 - ngl, 0)`, else on the GPU
//!   `upper_bound(splits, (il - i_gpu_start) / act_gpu_layers)`, splits the cumulative `-ts`
//!   fractions (by default each GPU's free memory); the output layer is layer `n_layer`.
//! - A tied output (no `output.weight`) is `token_embd` loaded a second time
//!   (`TENSOR_DUPLICATED`) where the output layer is, `rope_freqs` once per layer — each copy
//!   only in a buffer type that does not hold it yet.
//! - `-ot` patterns (first match) and `--n-cpu-moe` move single tensors.
//! - Buffer sizes (`ggml_backend_alloc_ctx_tensors_from_buft`): each tensor's allocation rounded
//!   up to its buffer type's alignment: CPU and `CUDA_Host` 32 (`TENSOR_ALIGNMENT`), CUDA 128 with a
//!   quantized tensor's last row padded to 512 elements (`ggml_backend_cuda_buffer_type_get_alloc_size`,
//!   `MATRIX_ROW_PADDING`) — the CUDA figures are read from source, not measured here. With mmap
//!   the CPU's weights are one `CPU_Mapped` buffer over the file range from its first tensor to the
//!   end of its last (`get_mapping_range`), gaps included; measured.

use regex_lite::Regex;

use crate::gguf::{Header, TensorInfo};

use super::hparams::Hparams;
use super::params::{GpuDevice, Params, SplitMode, Target, FFN_EXPS_REGEX};
use super::error::LlamaError;

/// A buffer type, named as llama.cpp logs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Buft {
    /// Host memory mapped from the file (`CPU_Mapped`).
    CpuMapped,
    /// Host memory (`CPU`).
    Cpu,
    /// Pinned host memory of the first GPU (`CUDA_Host`): the CPU's weights without mmap when there are GPUs.
    CudaHost,
    /// GPU memory (`CUDA<i>`).
    Cuda(usize),
}

impl Buft {
    pub fn name(self) -> String {
        match self {
            Buft::CpuMapped => "CPU_Mapped".into(),
            Buft::Cpu => "CPU".into(),
            Buft::CudaHost => "CUDA_Host".into(),
            Buft::Cuda(i) => format!("CUDA{i}"),
        }
    }

    /// The GPU it lives on (`None`: host memory).
    pub fn gpu(self) -> Option<usize> {
        match self {
            Buft::Cuda(i) => Some(i),
            _ => None,
        }
    }

    fn alignment(self) -> u64 {
        match self {
            Buft::Cuda(_) => 128,
            _ => 32,
        }
    }

    /// `ggml_backend_buft_get_alloc_size` rounded to the alignment.
    pub(crate) fn alloc(self, ne0: u64, t: crate::gguf::GgmlType, nbytes: u64) -> u64 {
        let mut size = nbytes;
        if matches!(self, Buft::Cuda(_)) && t.is_quantized() && !ne0.is_multiple_of(512) {
            size += t.row_bytes(512 - ne0 % 512);
        }
        size.div_ceil(self.alignment()) * self.alignment()
    }
}

/// The device of each layer, `n_layer + 1` entries (the last is the output layer); `None` is the CPU.
pub fn layer_devices(hp: &Hparams, p: &Params, gpus: &[GpuDevice]) -> Result<Vec<Option<usize>>, LlamaError> {
    let n_layer = u64::from(hp.n_layer);
    let n_dev = if p.split_mode == SplitMode::None { gpus.len().min(1) } else { gpus.len() };
    let ngl = p.n_gpu_layers.unwrap_or(n_layer + 1);
    let i_gpu_start = (n_layer + 1).saturating_sub(ngl);
    let act = if n_dev == 0 { 0 } else { ngl.min(n_layer + 1) };
    let splits = splits(p, &gpus[..n_dev])?;
    Ok((0..=n_layer)
        .map(|il| {
            if il < i_gpu_start || il - i_gpu_start >= act {
                return None;
            }
            // f32 as llama.cpp computes it (`std::upper_bound` over `std::vector<float>`).
            let x = (il - i_gpu_start) as f32 / act as f32;
            let gpu = splits.iter().position(|&s| s > x).unwrap_or(n_dev - 1);
            Some(gpu.min(n_dev - 1))
        })
        .collect())
}

/// The cumulative split points (`load_tensors`: sum, then divide by the total), in f32.
fn splits(p: &Params, gpus: &[GpuDevice]) -> Result<Vec<f32>, LlamaError> {
    let n_dev = gpus.len();
    if n_dev == 0 {
        return Ok(Vec::new());
    }
    // `load_tensors` copies the first `n_devices()` values (`std::copy(tensor_split, tensor_split
    // + n_devices(), …)`): values past the GPUs in use, such as a two-value `-ts` under `-sm none`,
    // are ignored, not refused.
    let mut raw: Vec<f32> = (0..n_dev).map(|i| p.tensor_split.get(i).copied().unwrap_or(0.0) as f32).collect();
    if raw.iter().all(|&x| x == 0.0) {
        // By free memory (`ggml_backend_dev_memory`): each GPU's capacity stands for it.
        raw = gpus.iter().map(|g| g.capacity as f32).collect();
    }
    if raw.iter().any(|x| !x.is_finite() || *x < 0.0) {
        return Err(LlamaError::Params("-ts values must be non-negative numbers".into()));
    }
    let mut sum = 0.0f32;
    for x in raw.iter_mut() {
        sum += *x;
        *x = sum;
    }
    if sum <= 0.0 {
        return Err(LlamaError::Params("-ts values sum to 0".into()));
    }
    Ok(raw.into_iter().map(|x| x / sum).collect())
}

/// A tensor's layer: the input layer, a repeating layer, or the output layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Input,
    Layer(usize),
    Output,
}

fn role(name: &str, n_layer: usize) -> Role {
    if let Some(rest) = name.strip_prefix("blk.") {
        if let Some(il) = rest.split('.').next().and_then(|s| s.parse::<usize>().ok()) {
            return Role::Layer(il.min(n_layer.saturating_sub(1)));
        }
    }
    // `llm_tensor_info_for` (src/llama-arch.cpp): LLM_TENSOR_LAYER_OUTPUT tensors.
    let base = name.split('.').next().unwrap_or(name);
    match base {
        "output" | "output_norm" | "cls" | "cls_out" | "cls_norm" | "dense_2" | "dense_3" | "output_res_score" => Role::Output,
        // `token_embd_norm` and the rope factors are repeating-layer tensors of layer 0.
        "token_embd_norm" | "rope_freqs" | "rope_factors_long" | "rope_factors_short" => Role::Layer(0),
        _ => Role::Input,
    }
}

/// One weight as llama.cpp allocates it: the file tensor and the buffer it lands in.
#[derive(Debug, Clone)]
pub struct Placed<'a> {
    pub tensor: &'a TensorInfo,
    pub buft: Buft,
}

/// The compiled overrides: `-ot` in order, then `--n-cpu-moe`'s.
pub fn overrides(p: &Params) -> Result<Vec<(Regex, Target)>, LlamaError> {
    let mut out = Vec::new();
    for o in &p.overrides {
        let re = Regex::new(&o.pattern).map_err(|e| LlamaError::Params(format!("-ot pattern {:?}: {e}", o.pattern)))?;
        out.push((re, o.target));
    }
    for il in 0..p.n_cpu_moe {
        // The pattern is ours; it always compiles.
        out.push((Regex::new(&format!(r"blk\.{il}{FFN_EXPS_REGEX}")).expect("valid pattern"), Target::Cpu));
    }
    Ok(out)
}

/// Every weight llama.cpp creates, with its buffer type.
pub fn place<'a>(h: &'a Header, hp: &Hparams, p: &Params, gpus: &[GpuDevice]) -> Result<Vec<Placed<'a>>, LlamaError> {
    let devs = layer_devices(hp, p, gpus)?;
    let n_gpus = gpus.len();
    let n_layer = hp.n_layer as usize;
    let ovr = overrides(p)?;
    for (_, t) in &ovr {
        if let Target::Gpu(i) = t {
            if *i >= n_gpus {
                return Err(LlamaError::Params(format!("-ot names CUDA{i}, but {n_gpus} GPU(s) are given")));
            }
        }
    }
    let host = if p.mmap {
        Buft::CpuMapped
    } else if n_gpus > 0 {
        Buft::CudaHost
    } else {
        Buft::Cpu
    };
    let buft_of = |name: &str, role: Role| -> Buft {
        for (re, target) in &ovr {
            if re.is_match(name) {
                return match target {
                    Target::Cpu => host,
                    Target::Gpu(i) => Buft::Cuda(*i),
                };
            }
        }
        let dev = match role {
            Role::Input => None,
            Role::Layer(il) => devs[il],
            Role::Output => devs[n_layer],
        };
        dev.map_or(host, Buft::Cuda)
    };
    let mut out = Vec::with_capacity(h.tensors.len() + 1);
    for t in &h.tensors {
        let r = role(&t.name, n_layer);
        if matches!(r, Role::Layer(il) if hp.skipped_mtp(il)) {
            continue; // an MTP block's tensor, not loaded (`TENSOR_SKIP`)
        }
        let base = t.name.split('.').next().unwrap_or("");
        if matches!(base, "rope_freqs" | "rope_factors_long" | "rope_factors_short") {
            // Created for every layer, duplicated after the first (`TENSOR_DUPLICATED`).
            for il in 0..n_layer {
                push_dedup(&mut out, Placed { tensor: t, buft: buft_of(&t.name, Role::Layer(il)) });
            }
            continue;
        }
        out.push(Placed { tensor: t, buft: buft_of(&t.name, r) });
    }
    if h.tensor("output.weight").is_none() {
        if let Some(t) = h.tensor("token_embd.weight") {
            // Tied embeddings: loaded again as the output (the name stays `token_embd.weight`,
            // so `-ot` patterns see that name).
            push_dedup(&mut out, Placed { tensor: t, buft: buft_of(&t.name, Role::Output) });
        }
    }
    Ok(out)
}

/// A duplicated tensor reuses the original when it lands in the same buffer type
/// (`create_tensor`: `ggml_get_tensor(ctx, name)` before `ggml_dup_tensor`).
fn push_dedup<'a>(out: &mut Vec<Placed<'a>>, p: Placed<'a>) {
    if !out.iter().any(|q| q.buft == p.buft && q.tensor.name == p.tensor.name) {
        out.push(p);
    }
}

/// The model buffers, by buffer type, in bytes.
pub fn model_buffers(h: &Header, placed: &[Placed]) -> Vec<(Buft, u64)> {
    let mut bufts: Vec<Buft> = placed.iter().map(|p| p.buft).collect();
    bufts.sort();
    bufts.dedup();
    bufts
        .into_iter()
        .map(|b| {
            let mine = placed.iter().filter(|p| p.buft == b);
            let bytes = if b == Buft::CpuMapped {
                let (mut first, mut last) = (u64::MAX, 0);
                for p in mine {
                    let off = h.data_offset + p.tensor.offset;
                    first = first.min(off);
                    last = last.max(off + p.tensor.n_bytes());
                }
                last.saturating_sub(first)
            } else {
                mine.map(|p| b.alloc(p.tensor.ne(0), p.tensor.ggml_type, p.tensor.n_bytes())).sum()
            };
            (b, bytes)
        })
        .collect()
}
