//! llama.cpp's settings as its flags name them (`common/arg.cpp`), and the devices.

use crate::gguf::GgmlType;

/// `-fa on|off|auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FlashAttn {
    On,
    Off,
    /// llama.cpp resolves `auto` by checking that every layer's device runs flash attention
    /// (`llama_context` constructor); the CPU and CUDA backends do, so `auto` is on here.
    Auto,
}

/// `-sm none|layer|row`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SplitMode {
    /// One GPU (the first) holds every offloaded layer.
    None,
    /// Whole layers per GPU by the split fractions.
    Layer,
    /// Each offloaded weight matrix split by rows across the GPUs (`CUDA_Split` buffers) in
    /// older builds. The llama.cpp followed here has none: upstream removed CUDA's split buffer
    /// type ("CUDA: remove -sm row, refactor cuBLAS", #24216), so `make_gpu_buft_list`
    /// (`src/llama-model.cpp`) throws "device CUDA0 does not support split buffers" at load;
    /// [`estimate`](super::estimate) refuses it with GPUs the same way.
    Row,
}

/// Where `-ot` sends a tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Target {
    Cpu,
    Gpu(usize),
}

/// One `-ot PATTERN=BUFFER` entry (patterns are searched in the tensor name, first match wins:
/// `llama_model_loader::create_tensor`, `std::regex_search`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Override {
    pub pattern: String,
    pub target: Target,
}

/// A GPU: its name as the CLI shows it and the memory it has.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuDevice {
    pub name: String,
    pub capacity: u64,
}

/// The settings of one llama.cpp run. Defaults are llama.cpp's (`common/common.h`), except the
/// context: `n_ctx` 0 there means the model's training context, and `--fit` then shrinks it to
/// the memory; here 0 means the training context as well, and the CLI's default is 4096.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// `-c`: 0 takes the model's `context_length`.
    pub n_ctx: u64,
    /// `-b` (default 2048).
    pub n_batch: u64,
    /// `-ub` (default 512).
    pub n_ubatch: u64,
    /// `-ctk`, `-ctv` (default f16).
    pub type_k: GgmlType,
    pub type_v: GgmlType,
    pub flash_attn: FlashAttn,
    /// `-np` (default 1).
    pub n_parallel: u64,
    /// `--kv-unified`.
    pub kv_unified: bool,
    /// `-ngl`: `None` is all layers (llama.cpp's `all`, or `auto` without `--fit`).
    pub n_gpu_layers: Option<u64>,
    /// `--n-cpu-moe N`: the experts of the first N layers stay on the CPU.
    pub n_cpu_moe: u64,
    /// `-ot`.
    pub overrides: Vec<Override>,
    /// `-ts`: proportions per GPU; empty splits by the GPUs' memory, as llama.cpp does by free memory.
    pub tensor_split: Vec<f64>,
    pub split_mode: SplitMode,
    /// `--swa-full`.
    pub swa_full: bool,
    /// `--no-mmap` sets it false.
    pub mmap: bool,
    /// `--op-offload` (default) / `--no-op-offload`: batches of 32 tokens or more run the ops of
    /// weights in host memory on the first GPU (`ggml_backend_sched`, `sched_assign`).
    pub op_offload: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            n_ctx: 4096,
            n_batch: 2048,
            n_ubatch: 512,
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
            flash_attn: FlashAttn::Auto,
            n_parallel: 1,
            kv_unified: false,
            n_gpu_layers: None,
            n_cpu_moe: 0,
            overrides: Vec::new(),
            tensor_split: Vec::new(),
            split_mode: SplitMode::Layer,
            swa_full: false,
            mmap: true,
            op_offload: true,
        }
    }
}

/// `LLM_FFN_EXPS_REGEX` (`common/common.h`), which `--n-cpu-moe N` puts after `blk\.<i>` for
/// each of the first N layers (`llm_add_n_cpu_ffn_overrides`).
pub const FFN_EXPS_REGEX: &str = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps";

/// The KV-cache types `-ctk`/`-ctv` accept (`kv_cache_types` in `common/arg.cpp`).
pub const KV_CACHE_TYPES: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::IQ4_NL,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
];

impl Params {
    pub fn flash_attn_on(&self) -> bool {
        self.flash_attn != FlashAttn::Off
    }
}
