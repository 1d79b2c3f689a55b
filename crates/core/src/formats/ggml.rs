//! GGUF tensor types and llama.cpp's per-tensor type choice for its mixed recipes.
//!
//! Block sizes and bytes per block are ggml's `type_traits` table (`ggml/src/ggml.c`), whose
//! `type_size` is `sizeof` of the block structs in `ggml/src/ggml-common.h` (each with a
//! `static_assert` on its size). A row of `n` elements takes `n / blck_size × type_size` bytes
//! (`ggml_row_size`).
//!
//! The mixes (`Q4_K_M`, `Q5_K_M`, `Q3_K_S`, …) follow `src/llama-quant.cpp`:
//! `llama_ftype_get_default_type` gives the recipe's base type, `tensor_allows_quantization`
//! keeps 1-D tensors (norms, biases) and position embeddings as they are, and
//! `llama_tensor_get_type_impl` upgrades some tensors by category and layer index
//! (`use_more_bits`); `tensor_type_fallback` replaces a type whose block does not divide the row.

use serde::Serialize;

/// A ggml tensor type: `blck` elements stored in `bytes` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum GgmlType {
    F32,
    F16,
    Bf16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    #[serde(rename = "Q2_K")]
    Q2K,
    #[serde(rename = "Q3_K")]
    Q3K,
    #[serde(rename = "Q4_K")]
    Q4K,
    #[serde(rename = "Q5_K")]
    Q5K,
    #[serde(rename = "Q6_K")]
    Q6K,
}

/// `QK_K`, the super-block of the k-quants (`ggml-common.h`).
pub const QK_K: u64 = 256;

impl GgmlType {
    /// `(blck_size, type_size)` from ggml's `type_traits`.
    pub const fn block(self) -> (u64, u64) {
        match self {
            GgmlType::F32 => (1, 4),
            GgmlType::F16 | GgmlType::Bf16 => (1, 2),
            // block_q4_0: ggml_half d; uint8_t qs[QK4_0 / 2]            (QK4_0 = 32)
            GgmlType::Q4_0 => (32, 2 + 16),
            // block_q4_1: ggml_half d, m; uint8_t qs[QK4_1 / 2]
            GgmlType::Q4_1 => (32, 2 * 2 + 16),
            // block_q5_0: ggml_half d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]
            GgmlType::Q5_0 => (32, 2 + 4 + 16),
            // block_q5_1: ggml_half d, m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]
            GgmlType::Q5_1 => (32, 2 * 2 + 4 + 16),
            // block_q8_0: ggml_half d; int8_t qs[QK8_0]
            GgmlType::Q8_0 => (32, 2 + 32),
            // block_q2_K: uint8_t scales[QK_K/16]; uint8_t qs[QK_K/4]; ggml_half d, dmin
            GgmlType::Q2K => (QK_K, 16 + 64 + 2 * 2),
            // block_q3_K: uint8_t hmask[QK_K/8]; uint8_t qs[QK_K/4]; uint8_t scales[12]; ggml_half d
            GgmlType::Q3K => (QK_K, 32 + 64 + 12 + 2),
            // block_q4_K: ggml_half d, dmin; uint8_t scales[K_SCALE_SIZE = 12]; uint8_t qs[QK_K/2]
            GgmlType::Q4K => (QK_K, 2 * 2 + 12 + 128),
            // block_q5_K: ggml_half d, dmin; uint8_t scales[12]; uint8_t qh[QK_K/8]; uint8_t qs[QK_K/2]
            GgmlType::Q5K => (QK_K, 2 * 2 + 12 + 32 + 128),
            // block_q6_K: uint8_t ql[QK_K/2]; uint8_t qh[QK_K/4]; int8_t scales[QK_K/16]; ggml_half d
            GgmlType::Q6K => (QK_K, 128 + 64 + 16 + 2),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Bf16 => "bf16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q2K => "q2_k",
            GgmlType::Q3K => "q3_k",
            GgmlType::Q4K => "q4_k",
            GgmlType::Q5K => "q5_k",
            GgmlType::Q6K => "q6_k",
        }
    }

    /// Bytes of a `[rows, cols]` tensor (`cols` = `ne[0]`, the row length): `ggml_row_size × rows`.
    /// `None` when the block does not divide the row (ggml refuses such a tensor).
    pub fn bytes(self, rows: u64, cols: u64) -> Option<u64> {
        let (blck, size) = self.block();
        cols.is_multiple_of(blck).then(|| (cols / blck).saturating_mul(size).saturating_mul(rows))
    }

    fn is_quantized(self) -> bool {
        !matches!(self, GgmlType::F32 | GgmlType::F16 | GgmlType::Bf16)
    }
}

/// A `llama-quantize` recipe (`LLAMA_FTYPE_MOSTLY_*`): one type everywhere, or a k-quant mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GgufRecipe {
    /// `Q4_0`, `Q8_0`, `Q6_K`, … : the type for every quantisable tensor but `output.weight`
    /// (which the k-quant rules still raise to `Q6_K`, as `llama_tensor_get_type_impl` does).
    Uniform(GgmlType),
    Q2K,
    Q3KS,
    Q3KM,
    Q3KL,
    Q4KS,
    Q4KM,
    Q5KS,
    Q5KM,
}

/// What `llama_tensor_get_type_impl` looks at, by the categories of `tensor_get_category`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TensorCategory {
    TokenEmbd,
    Output,
    AttnQ,
    AttnK,
    AttnV,
    AttnQkv,
    AttnKvB,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Other,
}

/// The model-wide facts the rules read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixModel {
    /// Blocks (`n_layer`): the count `use_more_bits` divides.
    pub n_layer: u64,
    /// `n_head / n_head_kv` (`hparams.n_gqa()`).
    pub n_gqa: u64,
    /// Routed experts (`hparams.n_expert`, 1 for a dense model): Mixtral's 8 get their own rules.
    pub n_expert: u64,
    /// `model.type == LLM_TYPE_70B` (the Llama-2/3 70B: 80 layers), which raises `attn_v`.
    pub is_70b: bool,
    /// Whether the output head shares the token embedding (`has_tied_embeddings`).
    pub tied: bool,
}

fn use_more_bits(i: u64, n: u64) -> bool {
    // `i_layer < n_layers/8 || i_layer >= 7*n_layers/8 || (i_layer - n_layers/8)%3 == 2`; the
    // difference is reached only when it is not negative
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

impl GgufRecipe {
    /// `llama_ftype_get_default_type`.
    pub fn default_type(self) -> GgmlType {
        match self {
            GgufRecipe::Uniform(t) => t,
            GgufRecipe::Q2K => GgmlType::Q2K,
            GgufRecipe::Q3KS | GgufRecipe::Q3KM | GgufRecipe::Q3KL => GgmlType::Q3K,
            GgufRecipe::Q4KS | GgufRecipe::Q4KM => GgmlType::Q4K,
            GgufRecipe::Q5KS | GgufRecipe::Q5KM => GgmlType::Q5K,
        }
    }

    /// The type `llama_tensor_get_type` gives a quantisable 2-D tensor of `[rows, cols]`;
    /// `index` is the tensor's block (`i_attention_wv`, `i_ffn_down`, or the `blk.N` that
    /// `layer_info` parses for MoE models).
    pub fn tensor_type(self, m: &MixModel, cat: TensorCategory, index: u64, cols: u64) -> GgmlType {
        use GgmlType as T;
        use GgufRecipe as R;
        use TensorCategory as C;
        let base = self.default_type();
        if !base.is_quantized() {
            // `llama_tensor_get_type` applies the mix rules to quantised recipes only
            return base;
        }
        let mut t = base;
        if cat == C::Output || (m.tied && cat == C::TokenEmbd) {
            // `nx % qk_k != 0` → Q8_0; otherwise Q6_K unless the recipe is Q8_0
            t = if !cols.is_multiple_of(base.block().0) { T::Q8_0 } else if base != T::Q8_0 { T::Q6K } else { base };
        } else if matches!(cat, C::AttnV | C::AttnQkv | C::AttnKvB) {
            // `category_is_attn_v` covers fused QKV and MLA's `attn_kv_b` too (so the later
            // `ATTENTION_QKV` branch of the `else if` chain is never reached)
            t = match self {
                R::Q2K => if m.n_gqa >= 4 { T::Q4K } else { T::Q3K },
                R::Q3KM => if index < 2 { T::Q5K } else { T::Q4K },
                R::Q3KL => T::Q5K,
                R::Q4KM | R::Q5KM if use_more_bits(index, m.n_layer) => T::Q6K,
                R::Q4KS if index < 4 => T::Q5K,
                _ => t,
            };
            if m.is_70b && matches!(t, T::Q3K | T::Q4K) {
                t = T::Q5K;
            }
            if m.n_expert == 8 {
                // "for the 8-expert model, bumping this to Q8_0 trades just ~128MB"
                t = T::Q8_0;
            }
        } else if cat == C::AttnK && m.n_expert == 8 {
            t = T::Q8_0;
        } else if cat == C::FfnDown {
            let (i, n) = (index, m.n_layer);
            t = match self {
                R::Q2K => T::Q3K,
                R::Q3KM => if i < n / 16 { T::Q5K } else { T::Q4K },
                R::Q3KL => T::Q5K,
                R::Q4KM | R::Q5KM if use_more_bits(i, n) => T::Q6K,
                R::Q4KS if i < n / 8 => T::Q5K,
                _ => t,
            };
        } else if cat == C::AttnOutput && m.n_expert == 8 {
            if matches!(self, R::Q2K | R::Q3KS | R::Q3KM | R::Q4KS | R::Q4KM) {
                t = T::Q5K;
            }
        } else if cat == C::AttnOutput {
            t = match self {
                R::Q2K => T::Q3K,
                R::Q3KM => T::Q4K,
                R::Q3KL => T::Q5K,
                _ => t,
            };
        }
        fallback(t, cols)
    }
}

/// `tensor_type_fallback`: a type whose block does not divide the row length is replaced.
fn fallback(t: GgmlType, cols: u64) -> GgmlType {
    use GgmlType as T;
    if !t.is_quantized() || cols.is_multiple_of(t.block().0) {
        return t;
    }
    let f = match t {
        T::Q2K | T::Q3K => T::Q4_0,
        T::Q4K => T::Q5_0,
        T::Q5K => T::Q5_1,
        T::Q6K => T::Q8_0,
        other => other,
    };
    if cols.is_multiple_of(f.block().0) { f } else { T::F16 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_per_weight_of_each_type() {
        // bpw = 8 · type_size / blck_size, as ggml's quantize docs list them
        let bpw = |t: GgmlType| 8.0 * t.block().1 as f64 / t.block().0 as f64;
        for (t, want) in [
            (GgmlType::Q4_0, 4.5), (GgmlType::Q4_1, 5.0), (GgmlType::Q5_0, 5.5), (GgmlType::Q5_1, 6.0),
            (GgmlType::Q8_0, 8.5), (GgmlType::Q2K, 2.625), (GgmlType::Q3K, 3.4375), (GgmlType::Q4K, 4.5),
            (GgmlType::Q5K, 5.5), (GgmlType::Q6K, 6.5625), (GgmlType::F16, 16.0),
        ] {
            assert_eq!(bpw(t), want, "{t:?}");
        }
        assert_eq!(GgmlType::Q4K.bytes(4096, 4096), Some(4096 * 16 * 144));
        assert_eq!(GgmlType::Q4K.bytes(1, 100), None);
    }

    #[test]
    fn use_more_bits_matches_llama_cpp_for_32_layers() {
        let more: Vec<u64> = (0..32).filter(|&i| use_more_bits(i, 32)).collect();
        assert_eq!(more, [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]);
    }

    #[test]
    fn mixtral_rules() {
        let m = MixModel { n_layer: 32, n_gqa: 4, n_expert: 8, is_70b: false, tied: false };
        let q4km = |c, i| GgufRecipe::Q4KM.tensor_type(&m, c, i, 4096);
        assert_eq!(q4km(TensorCategory::AttnV, 10), GgmlType::Q8_0);
        assert_eq!(q4km(TensorCategory::AttnK, 10), GgmlType::Q8_0);
        assert_eq!(q4km(TensorCategory::AttnOutput, 10), GgmlType::Q5K);
        assert_eq!(q4km(TensorCategory::AttnQ, 10), GgmlType::Q4K);
        assert_eq!(q4km(TensorCategory::FfnDown, 0), GgmlType::Q6K);
        assert_eq!(q4km(TensorCategory::FfnDown, 10), GgmlType::Q4K);
        assert_eq!(GgufRecipe::Q5KM.tensor_type(&m, TensorCategory::AttnOutput, 0, 4096), GgmlType::Q5K);
    }

    #[test]
    fn rows_not_divisible_by_256_fall_back() {
        let m = MixModel { n_layer: 4, n_gqa: 1, n_expert: 1, is_70b: false, tied: false };
        // a 2880-wide row (gpt-oss) is not a multiple of 256: Q4_K → Q5_0
        assert_eq!(GgufRecipe::Q4KM.tensor_type(&m, TensorCategory::AttnQ, 0, 2880), GgmlType::Q5_0);
        assert_eq!(GgufRecipe::Q4KM.tensor_type(&m, TensorCategory::Output, 0, 2880), GgmlType::Q8_0);
    }
}
