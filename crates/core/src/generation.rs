//! The settings of a generation estimate (`--mode generate`): prompt, new tokens, the KV cache's
//! kind and element type, and what one forward of `model.generate()` is asked to compute.
//!
//! The simulation is in `memory/generate.rs`, the cache's allocations in `layer/kv_cache.rs`.

use serde::{Deserialize, Serialize};

/// How the KV cache holds its keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum KvCacheKind {
    /// transformers' `DynamicCache` (the default of `generate()`): each layer's K and V grow by
    /// `torch.cat` (`cache_utils.py`, `DynamicLayer.update`), so for a moment the old and the new
    /// tensor of that layer both exist.
    #[default]
    Dynamic,
    /// `StaticCache`: every slot allocated at a layer's first update (`StaticLayer.lazy_initialization`,
    /// `torch.zeros(batch, kv_heads, max_cache_len, head_dim)`), written in place (`index_copy_`).
    /// `generate()` sizes it `max_length - 1` = prompt + new tokens − 1 (`_prepare_cache_for_generation`).
    Static,
    /// vLLM-style paged blocks of [`PAGE_TOKENS`] tokens: a sequence holds whole blocks, the new
    /// token is written into its slot (no copy), attention reads the blocks where they are.
    Paged,
}

/// Tokens per block of the paged cache (vLLM's default `block_size`, `vllm/config/cache.py`).
pub const PAGE_TOKENS: u64 = 16;

/// The element type the cache stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvDType {
    Fp16,
    Bf16,
    /// float8 e4m3: 1 byte per element (`Fp8QuantizedLayer`, vLLM `kv_cache_dtype="fp8"`).
    Fp8,
    /// 1 byte per element (int8 with per-tensor scales).
    Int8,
}

impl KvDType {
    pub const fn bytes(self) -> u64 {
        match self {
            KvDType::Fp16 | KvDType::Bf16 => 2,
            KvDType::Fp8 | KvDType::Int8 => 1,
        }
    }
    /// Stored in 8 bits: HF's quantized cache layers dequantize what they return.
    pub const fn quantized(self) -> bool {
        self.bytes() == 1
    }
    /// The element type a cache tensor has (8-bit formats as one byte).
    pub const fn dtype(self) -> crate::units::DType {
        match self {
            KvDType::Fp16 => crate::units::DType::F16,
            KvDType::Bf16 => crate::units::DType::Bf16,
            KvDType::Fp8 | KvDType::Int8 => crate::units::DType::U8,
        }
    }
}

/// What `--mode generate` simulates: greedy `model.generate(input_ids, attention_mask,
/// max_new_tokens=new_tokens)` on a batch of `prompt_len`-token prompts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerateConfig {
    /// Prompt tokens per sequence (`None`: the model's sequence length, or the config's `seq_len`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_len: Option<u64>,
    /// Tokens generated per sequence: one from the prefill, `new_tokens - 1` decode forwards.
    pub new_tokens: u64,
    pub cache: KvCacheKind,
    /// `logits_to_keep` of the forward: 1 (what `generate()` passes when the model accepts it) or
    /// 0 (all positions: `b × P × vocab` prefill logits).
    pub logits_to_keep: u64,
    /// The cache's element type (`None`: the weights' dtype).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_dtype: Option<KvDType>,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        GenerateConfig { prompt_len: None, new_tokens: 256, cache: KvCacheKind::Dynamic, logits_to_keep: 1, kv_dtype: None }
    }
}

impl GenerateConfig {
    pub fn is_default(&self) -> bool {
        *self == GenerateConfig::default()
    }
}

/// One forward of the generation loop, as the lowering sees it (`LowerOptions::generation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenStep {
    /// Tokens in the cache before this forward (0: the prefill).
    pub past: u64,
    /// The prompt's tokens: what the prefill's `torch.cat` holds (the first decode step's old
    /// cache tensors).
    pub prompt: u64,
    pub cache: KvCacheKind,
    /// The static cache's `max_cache_len` (prompt + new tokens − 1).
    pub max_cache_len: u64,
    /// The cached elements' type (`None`: the keys' and values' own; 8-bit caches as `U8`).
    pub kv_dtype: Option<crate::units::DType>,
    /// Stored in 8 bits and dequantized on read (transformers' quantized layers).
    pub kv_quantized: bool,
    /// Positions whose logits the LM head computes (0: all).
    pub logits_to_keep: u64,
}

impl GenStep {
    pub fn is_prefill(&self) -> bool {
        self.past == 0
    }
}

impl KvCacheKind {
    pub const ALL: &'static [KvCacheKind] = &[KvCacheKind::Dynamic, KvCacheKind::Static, KvCacheKind::Paged];
    pub fn name(self) -> &'static str {
        match self {
            KvCacheKind::Dynamic => "dynamic",
            KvCacheKind::Static => "static",
            KvCacheKind::Paged => "paged",
        }
    }
    pub fn parse(s: &str) -> Option<KvCacheKind> {
        Self::ALL.iter().copied().find(|k| k.name() == s)
    }
}

impl KvDType {
    pub const ALL: &'static [KvDType] = &[KvDType::Fp16, KvDType::Bf16, KvDType::Fp8, KvDType::Int8];
    pub fn name(self) -> &'static str {
        match self {
            KvDType::Fp16 => "fp16",
            KvDType::Bf16 => "bf16",
            KvDType::Fp8 => "fp8",
            KvDType::Int8 => "int8",
        }
    }
    pub fn parse(s: &str) -> Option<KvDType> {
        Self::ALL.iter().copied().find(|k| k.name() == s)
    }
}

impl std::fmt::Display for KvCacheKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for KvDType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
