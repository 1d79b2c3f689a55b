//! Weight and KV-cache storage formats: the exact bytes each format stores for a tensor.
//!
//! A linear weight is `[out, in]` (`nn.Linear.weight`). Each format's bytes come from the tensors
//! its runtime allocates, with the source cited at each formula:
//!
//! | format | stored per `[out, in]` weight |
//! |---|---|
//! | `fp32` / `fp16` / `bf16` | `out·in` × 4 / 2 / 2 |
//! | `fp8` | e4m3 `out·in` bytes + one fp32 `weight_scale` (vLLM `Fp8LinearMethod`, per tensor) |
//! | `fp8-block128` | e4m3 + fp32 `weight_scale_inv` per 128×128 block (transformers `FP8Linear`, DeepSeek-V3) |
//! | `int8` | bitsandbytes `Int8Params`: int8 `CB` `out·in` + fp32 `SCB` per row |
//! | `nf4` / `fp4` (`-dq`) | bitsandbytes `Params4bit`: packed `(n+1)/2` bytes + absmax per 64 (fp32; or uint8 + fp32 per 256 blocks + offset with double quantisation) + the 16-entry code |
//! | `gptq-int4` | `qweight` int32 `[in/8, out]`, `qzeros` int32 `[groups, out/8]`, `scales` fp16 `[groups, out]`, `g_idx` int32 `[in]` |
//! | `awq-int4` | `qweight` int32 `[in, out/8]`, `qzeros` int32 `[groups, out/8]`, `scales` fp16 `[groups, out]` |
//! | `gguf-*` | ggml blocks ([`ggml`]), per-tensor types from llama.cpp's recipe |
//!
//! Which tensors a format quantises ([`TensorRole`]): bitsandbytes, GPTQ and AWQ quantise the
//! `nn.Linear` layers of the blocks and keep embeddings, norms, biases and `lm_head` in the
//! compute dtype (transformers' `get_keys_to_not_convert` skips the output embedding; GPTQ and AWQ
//! quantise only `model.layers`); GGUF quantises every 2-D weight (embeddings and the output head
//! too) and keeps 1-D tensors in f32.

pub mod apply;
pub mod ct;
pub mod ggml;
pub mod hf;
pub mod modules;
pub mod skip;

use crate::error::{Error, Result};
use crate::units::DType;
use ggml::{GgmlType, GgufRecipe, MixModel, TensorCategory};

/// How the weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// Every parameter in this dtype.
    Float(DType),
    /// fp8 e4m3 linear weights with one fp32 scale per tensor (`block` None) or per
    /// `block × block` tile.
    Fp8 { block: Option<u64> },
    /// bitsandbytes LLM.int8 (`Linear8bitLt`).
    BnbInt8,
    /// bitsandbytes 4-bit (`Linear4bit`), NF4 or FP4, blocksize 64.
    Bnb4 { nf4: bool, double_quant: bool },
    /// GPTQ (`bits` 4 or 8, `group_size` 0 for one group per column: `group_size=-1`).
    Gptq { bits: u64, group_size: u64 },
    /// AWQ GEMM (4-bit).
    Awq { group_size: u64 },
    /// A llama.cpp GGUF recipe.
    Gguf(GgufRecipe),
    /// MXFP4 mixture-of-experts stacks (GPT-OSS's checkpoints: `quant_method: "mxfp4"`):
    /// transformers' `integrations/mxfp4.py` stores each expert matrix as `…_blocks` uint8
    /// `[E, out, in / 32, 16]` (two 4-bit values a byte) and `…_scales` uint8 `[E, out, in / 32]`
    /// (one E8M0 exponent per 32): 17 bytes per 32 weights. Everything else — attention, router,
    /// embeddings, `lm_head` (the checkpoints' `modules_to_not_convert`), biases, norms — stays in
    /// the compute dtype.
    Mxfp4,
    /// A compressed-tensors checkpoint's scheme ([`ct`]): W4A16, W8A8, FP8, NVFP4.
    Ct(ct::CtScheme),
}

/// Default GPTQ/AWQ group size (`QuantizeConfig.group_size`, AutoAWQ `q_group_size`).
pub const DEFAULT_GROUP_SIZE: u64 = 128;
/// bitsandbytes 4-bit `blocksize` (`Params4bit`, `quantize_4bit` default 64).
pub const BNB_4BIT_BLOCK: u64 = 64;
/// Blocks of absmax values per fp32 scale under double quantisation (`quantize_blockwise(absmax,
/// blocksize=256)` in `functional.quantize_4bit`).
pub const BNB_DQ_BLOCK: u64 = 256;

const GGUF_NAMES: &[(&str, GgufRecipe)] = &[
    ("gguf-q4_0", GgufRecipe::Uniform(GgmlType::Q4_0)),
    ("gguf-q4_1", GgufRecipe::Uniform(GgmlType::Q4_1)),
    ("gguf-q5_0", GgufRecipe::Uniform(GgmlType::Q5_0)),
    ("gguf-q5_1", GgufRecipe::Uniform(GgmlType::Q5_1)),
    ("gguf-q8_0", GgufRecipe::Uniform(GgmlType::Q8_0)),
    ("gguf-q2_k", GgufRecipe::Q2K),
    ("gguf-q3_k_s", GgufRecipe::Q3KS),
    ("gguf-q3_k_m", GgufRecipe::Q3KM),
    ("gguf-q3_k_l", GgufRecipe::Q3KL),
    ("gguf-q4_k_s", GgufRecipe::Q4KS),
    ("gguf-q4_k_m", GgufRecipe::Q4KM),
    ("gguf-q5_k_s", GgufRecipe::Q5KS),
    ("gguf-q5_k_m", GgufRecipe::Q5KM),
    ("gguf-q6_k", GgufRecipe::Uniform(GgmlType::Q6K)),
    ("gguf-f16", GgufRecipe::Uniform(GgmlType::F16)),
];

/// The `--weights` names, for help texts and errors.
pub const WEIGHT_NAMES: &[&str] = &[
    "fp32", "fp16", "bf16", "fp8", "fp8-block128", "int8", "nf4", "nf4-dq", "fp4", "fp4-dq", "gptq-int4", "gptq-int8",
    "awq-int4", "gguf-q4_0", "gguf-q4_1", "gguf-q5_0", "gguf-q5_1", "gguf-q8_0", "gguf-q2_k", "gguf-q3_k_s", "gguf-q3_k_m",
    "gguf-q3_k_l", "gguf-q4_k_s", "gguf-q4_k_m", "gguf-q5_k_s", "gguf-q5_k_m", "gguf-q6_k", "gguf-f16", "mxfp4",
    "ct-w4a16-g128", "ct-w4a16-asym-g128", "ct-w8a8-int8", "ct-fp8", "nvfp4", "nvfp4a16",
];

impl WeightFormat {
    /// Parses a `--weights` name; `gptq-int4-g64` / `awq-int4-g32` choose another group size
    /// (`-g0`: GPTQ's `group_size=-1`).
    pub fn parse(s: &str) -> Result<WeightFormat> {
        let lower = s.to_ascii_lowercase();
        let (base, group) = match lower.rsplit_once("-g") {
            Some((b, g)) if (b.starts_with("gptq") || b.starts_with("awq")) && g.parse::<u64>().is_ok() => {
                (b.to_string(), g.parse::<u64>().ok())
            }
            _ => (lower.clone(), None),
        };
        let g = group.unwrap_or(DEFAULT_GROUP_SIZE);
        Ok(match base.as_str() {
            "fp32" => WeightFormat::Float(DType::F32),
            "fp16" => WeightFormat::Float(DType::F16),
            "bf16" => WeightFormat::Float(DType::Bf16),
            "fp8" => WeightFormat::Fp8 { block: None },
            "fp8-block128" => WeightFormat::Fp8 { block: Some(128) },
            "mxfp4" => WeightFormat::Mxfp4,
            "int8" => WeightFormat::BnbInt8,
            "nf4" => WeightFormat::Bnb4 { nf4: true, double_quant: false },
            "nf4-dq" => WeightFormat::Bnb4 { nf4: true, double_quant: true },
            "fp4" => WeightFormat::Bnb4 { nf4: false, double_quant: false },
            "fp4-dq" => WeightFormat::Bnb4 { nf4: false, double_quant: true },
            "gptq-int4" => WeightFormat::Gptq { bits: 4, group_size: g },
            "gptq-int8" => WeightFormat::Gptq { bits: 8, group_size: g },
            "awq-int4" if g > 0 => WeightFormat::Awq { group_size: g },
            other => match GGUF_NAMES.iter().find(|(n, _)| *n == other) {
                Some((_, r)) => WeightFormat::Gguf(*r),
                None => match ct::CtScheme::parse(other) {
                    Some(c) => WeightFormat::Ct(c),
                    None => {
                        return Err(Error::Config(format!("weights `{s}` is not a known format (one of {})", WEIGHT_NAMES.join(", "))))
                    }
                },
            },
        })
    }

    /// The name [`WeightFormat::parse`] reads back.
    pub fn name(self) -> String {
        let group = |g: u64| if g == DEFAULT_GROUP_SIZE { String::new() } else { format!("-g{g}") };
        match self {
            WeightFormat::Float(DType::F16) => "fp16".into(),
            WeightFormat::Float(DType::Bf16) => "bf16".into(),
            WeightFormat::Float(_) => "fp32".into(),
            WeightFormat::Fp8 { block: None } => "fp8".into(),
            WeightFormat::Mxfp4 => "mxfp4".into(),
            WeightFormat::Fp8 { block: Some(b) } => format!("fp8-block{b}"),
            WeightFormat::BnbInt8 => "int8".into(),
            WeightFormat::Bnb4 { nf4, double_quant } => {
                format!("{}{}", if nf4 { "nf4" } else { "fp4" }, if double_quant { "-dq" } else { "" })
            }
            WeightFormat::Gptq { bits, group_size } => format!("gptq-int{bits}{}", group(group_size)),
            WeightFormat::Awq { group_size } => format!("awq-int4{}", group(group_size)),
            WeightFormat::Gguf(r) => GGUF_NAMES.iter().find(|(_, x)| *x == r).map_or("gguf", |(n, _)| n).to_string(),
            WeightFormat::Ct(c) => c.name(),
        }
    }

    /// Whether this is a quantised format (not plain floats).
    pub fn is_quantized(self) -> bool {
        !matches!(self, WeightFormat::Float(_))
    }

    /// Bytes this format stores for one parameter tensor of `shape` (`[out, in]` for 2-D)
    /// in `role`; `dtype` is the compute dtype the unquantised tensors keep.
    pub fn tensor_bytes(self, role: TensorRole, shape: &[u64], dtype: DType) -> u64 {
        let n = shape.iter().fold(1u64, |a, &d| a.saturating_mul(d));
        let plain = n.saturating_mul(dtype.size());
        // `[out, in]`, or a stack of `mats` such matrices (MoE experts `[E, out, in]`)
        let (mats, out, inp) = match shape {
            [o, i] => (1, *o, *i),
            [e, o, i] => (*e, *o, *i),
            _ => {
                // 1-D (norms, biases) and other shapes: the compute dtype, f32 in GGUF
                return match self {
                    WeightFormat::Float(d) => n.saturating_mul(d.size()),
                    WeightFormat::Gguf(_) => n.saturating_mul(4),
                    _ => plain,
                };
            }
        };
        if let WeightFormat::Mxfp4 = self {
            // expert stacks only: 16 bytes of packed values and one scale byte per 32 weights
            return if mats != 1 { mats.saturating_mul(out).saturating_mul(inp.div_ceil(32)).saturating_mul(17) } else { plain };
        }
        if mats != 1 {
            // transformers 5's fused expert stacks are `nn.Parameter`s, not `nn.Linear`s:
            // bitsandbytes' `replace_with_bnb_linear` (`type(module) is nn.Linear`) and the
            // compressed-tensors schemes (`targets: ["Linear"]`) leave them in the compute dtype
            // (measured: `bnb-nf4-moe`, `ct-w4a16-moe` in `tests/data/quant_layouts.json`)
            if matches!(self, WeightFormat::Ct(_) | WeightFormat::Bnb4 { .. } | WeightFormat::BnbInt8) {
                return plain;
            }
            // every other format quantises each matrix of the stack alike (GGUF rows run on: `ne[0]` = in)
            let one = self.tensor_bytes(role, &[out, inp], dtype);
            return match self {
                WeightFormat::Gguf(_) | WeightFormat::Float(_) => {
                    self.tensor_bytes(role, &[mats.saturating_mul(out), inp], dtype)
                }
                _ => one.saturating_mul(mats),
            };
        }
        match self {
            WeightFormat::Float(d) => n.saturating_mul(d.size()),
            WeightFormat::Mxfp4 => plain,
            WeightFormat::Gguf(recipe) => gguf_bytes(recipe, role, out, inp),
            _ if !matches!(role, TensorRole::BlockLinear { .. }) => plain,
            WeightFormat::Ct(c) => c.bytes(out, inp, dtype),
            WeightFormat::Fp8 { block } => {
                let scales = match block {
                    None => 1,
                    Some(b) => out.div_ceil(b).saturating_mul(inp.div_ceil(b)),
                };
                n.saturating_add(scales.saturating_mul(4))
            }
            // bitsandbytes `Int8Params._quantize` → `int8_vectorwise_quant`: CB int8 [out, in],
            // SCB fp32 [out] (one absmax per row).
            WeightFormat::BnbInt8 => n.saturating_add(out.saturating_mul(4)),
            WeightFormat::Bnb4 { double_quant, .. } => bnb4_bytes(n, double_quant),
            WeightFormat::Gptq { bits, group_size } => {
                let groups = groups(inp, group_size);
                // gptqmodel `BaseQuantLinear.__init__`: qweight int32 [in // 32 * bits, out],
                // qzeros int32 [groups, out // 32 * bits], scales fp16 [groups, out], g_idx int32 [in]
                let qweight = (inp.div_ceil(32).saturating_mul(bits)).saturating_mul(out).saturating_mul(4);
                let qzeros = groups.saturating_mul(out.div_ceil(32).saturating_mul(bits)).saturating_mul(4);
                let scales = groups.saturating_mul(out).saturating_mul(2);
                qweight.saturating_add(qzeros).saturating_add(scales).saturating_add(inp.saturating_mul(4))
            }
            WeightFormat::Awq { group_size } => {
                let groups = groups(inp, group_size);
                // AutoAWQ `WQLinear_GEMM.__init__`: qweight int32 [in, out // 8], qzeros int32
                // [in // group, out // 8], scales fp16 [in // group, out]
                let qweight = inp.saturating_mul(out.div_ceil(8)).saturating_mul(4);
                let qzeros = groups.saturating_mul(out.div_ceil(8)).saturating_mul(4);
                qweight.saturating_add(qzeros).saturating_add(groups.saturating_mul(out).saturating_mul(2))
            }
        }
    }
}

fn groups(inp: u64, group_size: u64) -> u64 {
    if group_size == 0 { 1 } else { inp.div_ceil(group_size) }
}

/// bitsandbytes `functional.quantize_4bit` (quant_storage uint8): `packed` holds
/// `(n + 1) // 2` bytes; `absmax` fp32 per block of 64; with `compress_statistics` (double
/// quantisation) the absmax is itself quantised by `quantize_blockwise(absmax - offset,
/// blocksize=256)`: uint8 per block, fp32 absmax per 256 blocks, a fp32 `offset`; the 256-entry
/// dynamic code of that call is one cached tensor per device (not per weight) and is left out. The
/// 16-entry NF4/FP4 `code` (`get_4bit_type`) is per `QuantState`: 16 fp32.
pub fn bnb4_bytes(n: u64, double_quant: bool) -> u64 {
    let packed = n.saturating_add(1) / 2;
    let blocks = n.div_ceil(BNB_4BIT_BLOCK);
    let absmax = if double_quant {
        blocks.saturating_add(blocks.div_ceil(BNB_DQ_BLOCK).saturating_mul(4)).saturating_add(4)
    } else {
        blocks.saturating_mul(4)
    };
    packed.saturating_add(absmax).saturating_add(16 * 4)
}

fn gguf_bytes(recipe: GgufRecipe, role: TensorRole, out: u64, inp: u64) -> u64 {
    let (cat, index, model) = match role {
        TensorRole::BlockLinear { category, index, model } => (category, index, model),
        TensorRole::Output { model } => (TensorCategory::Output, 0, model),
        TensorRole::Embedding { model } => (TensorCategory::TokenEmbd, 0, model),
        // position embeddings are not quantised (`tensor_allows_quantization`); the converter
        // writes 2-D tensors as f16
        TensorRole::PositionEmbedding | TensorRole::Other => return out.saturating_mul(inp).saturating_mul(2),
    };
    // the row length is `ne[0]`: `in` for a linear, the embedding width for an embedding table
    let t = recipe.tensor_type(&model, cat, index, inp);
    t.bytes(out, inp).unwrap_or_else(|| out.saturating_mul(inp).saturating_mul(2))
}

/// What a parameter is, as the quantisers see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorRole {
    /// An `nn.Linear` weight inside a block (`model.layers.N`): quantised by every format.
    BlockLinear { category: TensorCategory, index: u64, model: MixModel },
    /// The output head (`lm_head` / GGUF `output.weight`).
    Output { model: MixModel },
    /// The token embedding (GGUF `token_embd.weight`).
    Embedding { model: MixModel },
    /// A learned position embedding.
    PositionEmbedding,
    /// Anything else (norms, biases, convolutions, top-level linears of non-LLMs).
    Other,
}

/// The KV cache's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum KvDtype {
    #[default]
    Fp16,
    Bf16,
    /// fp8 (e4m3 or e5m2): vLLM `--kv-cache-dtype fp8`, with a per-layer fp32 k/v scale.
    Fp8,
    /// int8 per element (llama.cpp `q8_0` keeps an fp16 scale per 32: see [`KvDtype::bytes`]).
    Int8,
    /// 4-bit (llama.cpp `q4_0`: 18 bytes per 32 values).
    Q4,
}

impl KvDtype {
    pub const ALL: &'static [KvDtype] = &[KvDtype::Fp16, KvDtype::Bf16, KvDtype::Fp8, KvDtype::Int8, KvDtype::Q4];

    pub fn name(self) -> &'static str {
        match self {
            KvDtype::Fp16 => "fp16",
            KvDtype::Bf16 => "bf16",
            KvDtype::Fp8 => "fp8",
            KvDtype::Int8 => "int8",
            KvDtype::Q4 => "q4",
        }
    }

    pub fn parse(s: &str) -> Option<KvDtype> {
        KvDtype::ALL.iter().copied().find(|k| k.name().eq_ignore_ascii_case(s))
    }

    /// Bytes of `elements` cache values. fp16/bf16 2, fp8 1 (vLLM `STR_DTYPE_TO_TORCH_DTYPE`
    /// `fp8` → `torch.uint8`); int8 and q4 as llama.cpp's `--cache-type-k q8_0 / q4_0` store them
    /// (ggml blocks of 32 with an fp16 scale), the runtimes that offer them.
    pub fn bytes(self, elements: u64) -> u64 {
        match self {
            KvDtype::Fp16 | KvDtype::Bf16 => elements.saturating_mul(2),
            KvDtype::Fp8 => elements,
            KvDtype::Int8 => GgmlType::Q8_0.block().1.saturating_mul(elements.div_ceil(32)),
            KvDtype::Q4 => GgmlType::Q4_0.block().1.saturating_mul(elements.div_ceil(32)),
        }
    }
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl serde::Serialize for WeightFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.name())
    }
}

impl<'de> serde::Deserialize<'de> for WeightFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        WeightFormat::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
