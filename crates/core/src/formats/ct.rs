//! compressed-tensors checkpoints (`quant_method: "compressed-tensors"`, llm-compressor's W4A16,
//! W8A8, FP8 and NVFP4 schemes): the tensors each quantised `nn.Linear` holds once transformers
//! has loaded it.
//!
//! transformers 5.24 `CompressedTensorsHfQuantizer._process_model_before_weight_loading` runs
//! compressed-tensors' `apply_quantization_config(model, cfg, run_compressed=False)` and then
//! `ModelCompressor.compress_model`, so the checkpoint's compressed tensors load as they are
//! (compressed-tensors 0.20 `compressors/pack_quantized/base.py` `PackedQuantizationCompressor`,
//! `compressors/naive_quantized/base.py`, `compressors/nvfp4/base.py`). Measured on CPU by
//! `tools/measure_quant_layouts.py` (`tests/data/quant_layouts.json`), per `[out, in]` weight:
//!
//! | `format` | tensors |
//! |---|---|
//! | `pack-quantized` (int, `bits` ≤ 8) | `weight_packed` int32 `[out, ⌈in·bits/32⌉]`, `weight_scale` (model dtype) `[out, groups]`, `weight_shape` int64 `[2]`; asymmetric: `weight_zero_point` int32 `[⌈out·bits/32⌉, groups]` |
//! | `int-quantized` / `float-quantized` (8-bit) | `weight` int8 / fp8 `[out, in]`, `weight_scale` (model dtype) `[out, 1]` (channel) or `[1]` (tensor) |
//! | `nvfp4-pack-quantized` | `weight_packed` uint8 `[out, ⌈in/2⌉]`, `weight_scale` fp8 `[out, ⌈in/16⌉]`, `weight_global_scale` fp32 `[1]`, with FP4 activations `input_global_scale` fp32 `[1]` |
//!
//! `groups` is `⌈in / group_size⌉` for the `group` strategy and 1 for `channel`. The schemes
//! target `Linear` modules: a transformers 5 MoE's fused expert stacks (`experts.gate_up_proj`
//! `[E, 2I, H]`, an `nn.Parameter`) are not `Linear` and stay in the model dtype (measured:
//! `ct-w4a16-moe`), as do embeddings, norms, and the `ignore`d `lm_head` and routers.
//!
//! Not modelled here: without `use_optimized_inference`, compressed-tensors decompresses every
//! weight on the first forward (its "Decompressing model" hook), so a transformers process holds
//! the dense weights (plus the scales) from then on: measured 1,736,672 → 3,801,056 bytes on the
//! W4A16 Llama of the data file. These formats count the weights as loaded (and as vLLM keeps them).

use crate::units::DType;

/// One compressed-tensors weight scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CtScheme {
    /// `pack-quantized` integer weights (W4A16, W8A16): `group_size` 0 is the `channel` strategy.
    Packed { bits: u64, group_size: u64, asym: bool },
    /// One byte a weight: `int-quantized` (W8A8 int8, `float: false`) or `float-quantized` (FP8),
    /// one scale per output channel or (`channel: false`) per tensor.
    Byte { float: bool, channel: bool },
    /// `nvfp4-pack-quantized`, `w4a4` with FP4 activations (their global scale).
    Nvfp4 { w4a4: bool },
}

impl CtScheme {
    /// Bytes of one `[out, in]` linear weight; `dtype` is the model dtype the scales keep.
    pub fn bytes(self, out: u64, inp: u64, dtype: DType) -> u64 {
        let n = out.saturating_mul(inp);
        match self {
            CtScheme::Packed { bits, group_size, asym } => {
                let groups = if group_size == 0 { 1 } else { inp.div_ceil(group_size) };
                let packed = out.saturating_mul(inp.saturating_mul(bits).div_ceil(32)).saturating_mul(4);
                let scale = out.saturating_mul(groups).saturating_mul(dtype.size());
                let zero = if asym { out.saturating_mul(bits).div_ceil(32).saturating_mul(groups).saturating_mul(4) } else { 0 };
                // `weight_shape`: torch.tensor(weight.shape), int64 [2]
                packed.saturating_add(scale).saturating_add(zero).saturating_add(16)
            }
            CtScheme::Byte { channel, .. } => n.saturating_add(if channel { out } else { 1 }.saturating_mul(dtype.size())),
            CtScheme::Nvfp4 { w4a4 } => {
                let packed = out.saturating_mul(inp.div_ceil(2));
                let scales = out.saturating_mul(inp.div_ceil(16));
                packed.saturating_add(scales).saturating_add(if w4a4 { 8 } else { 4 })
            }
        }
    }

    /// The `--weights` name [`CtScheme::parse`] reads back.
    pub fn name(self) -> String {
        match self {
            CtScheme::Packed { bits, group_size, asym } => {
                let g = if group_size == 0 { "ch".to_string() } else { format!("g{group_size}") };
                format!("ct-w{bits}a16{}-{g}", if asym { "-asym" } else { "" })
            }
            CtScheme::Byte { float, channel } => {
                format!("ct-{}{}", if float { "fp8" } else { "w8a8-int8" }, if channel { "" } else { "-tensor" })
            }
            CtScheme::Nvfp4 { w4a4 } => if w4a4 { "nvfp4" } else { "nvfp4a16" }.into(),
        }
    }

    /// Parses a name [`CtScheme::name`] writes (`ct-w4a16-g128`, `ct-w4a16-asym-g32`,
    /// `ct-w8a16-ch`, `ct-w8a8-int8`, `ct-fp8-tensor`, `nvfp4`, `nvfp4a16`).
    pub fn parse(s: &str) -> Option<CtScheme> {
        match s {
            "nvfp4" => return Some(CtScheme::Nvfp4 { w4a4: true }),
            "nvfp4a16" => return Some(CtScheme::Nvfp4 { w4a4: false }),
            "ct-fp8" => return Some(CtScheme::Byte { float: true, channel: true }),
            "ct-fp8-tensor" => return Some(CtScheme::Byte { float: true, channel: false }),
            "ct-w8a8-int8" => return Some(CtScheme::Byte { float: false, channel: true }),
            "ct-w8a8-int8-tensor" => return Some(CtScheme::Byte { float: false, channel: false }),
            _ => {}
        }
        let rest = s.strip_prefix("ct-w")?;
        let (bits, rest) = rest.split_once("a16")?;
        let bits: u64 = bits.parse().ok().filter(|b| (1..=8).contains(b))?;
        let (asym, group) = match rest.strip_prefix("-asym") {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let group_size = match group.strip_prefix('-')? {
            "ch" => 0,
            g => g.strip_prefix('g')?.parse().ok().filter(|g| *g > 0)?,
        };
        Some(CtScheme::Packed { bits, group_size, asym })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back() {
        for s in [
            CtScheme::Packed { bits: 4, group_size: 128, asym: false },
            CtScheme::Packed { bits: 4, group_size: 32, asym: true },
            CtScheme::Packed { bits: 8, group_size: 0, asym: false },
            CtScheme::Byte { float: true, channel: true },
            CtScheme::Byte { float: false, channel: false },
            CtScheme::Nvfp4 { w4a4: true },
            CtScheme::Nvfp4 { w4a4: false },
        ] {
            assert_eq!(CtScheme::parse(&s.name()), Some(s), "{}", s.name());
        }
        assert_eq!(CtScheme::parse("ct-w4a16-g0"), None);
        assert_eq!(CtScheme::parse("ct-w9a16-g128"), None);
    }

    /// `down_proj` `[256, 640]` of the measured W4A16 Llama (`quant_layouts.json`): packed int32
    /// [256, 80], scale bf16 [256, 5], zero point int32 [32, 5], shape int64 [2].
    #[test]
    fn one_packed_weight_as_measured() {
        let sym = CtScheme::Packed { bits: 4, group_size: 128, asym: false };
        assert_eq!(sym.bytes(256, 640, DType::Bf16), 81920 + 2560 + 16);
        let asym = CtScheme::Packed { bits: 4, group_size: 128, asym: true };
        assert_eq!(asym.bytes(256, 640, DType::Bf16), 81920 + 2560 + 640 + 16);
        assert_eq!(CtScheme::Nvfp4 { w4a4: true }.bytes(256, 640, DType::Bf16), 81920 + 10240 + 8);
        assert_eq!(CtScheme::Byte { float: false, channel: true }.bytes(256, 640, DType::Bf16), 163840 + 512);
    }
}
