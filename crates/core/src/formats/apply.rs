//! Applies a [`WeightFormat`] to a resolved inference graph: each parameter's storage takes the
//! bytes its format stores, and matmuls whose kernel dequantises into a temporary get it as
//! workspace.
//!
//! Roles come from the graph: the weight of a `linear` op is a block linear, except the model's
//! last linear when it is a top-level layer (the output head); the weight of an `embedding` op is
//! the token embedding (or a position embedding in a `positional_embedding` layer). Inside a
//! transformer layer the linears are named by their order, as the layer lowers them: `q, k, v, o`
//! (or fused `qkv, o`), then `gate, up, down` (or `up, down`).

use super::ggml::{MixModel, TensorCategory as C};
use super::{TensorRole, WeightFormat};
use crate::error::{Error, Result};
use crate::graph::{Graph, Lin, ValueId};
use crate::units::DType;

/// Dequantised temporaries. bitsandbytes ≥ 0.50 (`bitsandbytes/autograd/_functions.py`
/// `matmul_4bit` without grad → `torch.ops.bitsandbytes.gemm_4bit`, CUDA kernel in
/// `backends/cuda/ops.py`) multiplies up to `_gemm_4bit_custom_max_m` = 256 tokens in a fused
/// kernel ([`BNB_FUSED_MAX_TOKENS`]); past that `_dequant_linear_fallback` dequantises the whole
/// weight into the compute dtype (`dequantize_4bit(...).to(A.dtype)`, then `F.linear`) for the
/// duration of the matmul (older releases did so for every input but a single token). AutoAWQ's
/// `WQLinear_GEMM` forward dequantises (`awq_ext.dequantize_weights_cuda`) when
/// `x.shape[0] * x.shape[1] >= 1024` tokens ([`AWQ_DEQUANT_TOKENS`]; vLLM's `AWQLinearMethod`
/// at 256) and otherwise runs the fused GEMM. LLM.int8 (`MatMul8bitLt.forward`, bitsandbytes ≥
/// 0.45) quantises the input row-wise (`int8_vectorwise_quant`: int8 `CA` and fp32 row stats) and
/// multiplies into an int32 accumulator (`int8_linear_matmul`) before `int8_mm_dequant`. GPTQ
/// (Marlin/exllama kernels), fp8 (`cutlass_scaled_mm`) and GGUF (llama.cpp's MMQ) multiply without
/// a dequantised weight. The token count is per sample (the sequence): the thresholds apply to
/// batch × sequence, which a batch-independent workspace cannot see, so a batch of short sequences
/// is modelled as the single sequence it is per sample.
pub const BNB_FUSED_MAX_TOKENS: u64 = 256;
/// AutoAWQ's `FP16_MATMUL_HEURISTIC_CONDITION` threshold.
pub const AWQ_DEQUANT_TOKENS: u64 = 1024;

/// Per-parameter roles of `g`, in `g.params` order.
/// `layers[i]` is the kind and nesting depth of row `i` of the per-layer table (`Op::layer`).
pub fn roles(g: &Graph, layers: &[(&str, u32)]) -> Vec<(ValueId, TensorRole)> {
    let linears: Vec<(usize, ValueId)> = g
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.name == "linear" && o.inputs.len() >= 2)
        .map(|(i, o)| (i, o.inputs[1]))
        .collect();
    let is_param = |v: ValueId| g.params.contains(&v);
    // the head: the last linear, in a top-level `linear` row
    let head = linears.last().copied().filter(|&(i, w)| {
        let (kind, depth) = layers[g.ops[i].layer as usize];
        depth == 0 && kind == "linear" && is_param(w)
    });
    let embeds: Vec<(ValueId, bool)> = g
        .ops
        .iter()
        .filter(|o| o.name == "embedding" && !o.inputs.is_empty())
        .map(|o| (o.inputs[0], layers[o.layer as usize].0 == "positional_embedding"))
        .collect();
    let tied = head.is_some_and(|(_, w)| embeds.iter().any(|(e, _)| *e == w));
    // group block linears by row, in forward order
    let mut rows: Vec<(u32, Vec<ValueId>)> = Vec::new();
    for &(i, w) in &linears {
        if head.map(|h| h.0) == Some(i) || !is_param(w) {
            continue;
        }
        let layer = g.ops[i].layer;
        match rows.last_mut() {
            Some((l, ws)) if *l == layer => ws.push(w),
            _ => rows.push((layer, vec![w])),
        }
    }
    let is_block = |kind: &str| kind.starts_with("transformer_") || kind == "multi_head_latent_attention";
    let n_layer = rows.iter().filter(|(l, _)| is_block(layers[*l as usize].0)).count() as u64;
    let mut n_gqa = 1;
    let mut named: Vec<(ValueId, C)> = Vec::new();
    for (l, ws) in &rows {
        let cats = categories(layers[*l as usize].0, ws.len());
        if let (Some(q), Some(v)) = (
            cats.iter().position(|c| *c == C::AttnQ).map(|i| ws[i]),
            cats.iter().position(|c| *c == C::AttnV).map(|i| ws[i]),
        ) {
            let rows_of = |w: ValueId| g.value(w).shape.0.first().copied().unwrap_or(1).max(1);
            n_gqa = (rows_of(q) / rows_of(v)).max(1);
        }
        named.extend(ws.iter().zip(cats).map(|(w, c)| (*w, c)));
    }
    let model = MixModel { n_layer: n_layer.max(1), n_gqa, is_70b: n_layer == 80, tied };
    let mut seen: Vec<(C, u64)> = Vec::new();
    let mut out = Vec::with_capacity(g.params.len());
    for &p in &g.params {
        let role = if head.is_some_and(|(_, w)| w == p) || (tied && embeds.iter().any(|(e, pos)| *e == p && !pos)) {
            if tied { TensorRole::Embedding { model } } else { TensorRole::Output { model } }
        } else if let Some((_, pos)) = embeds.iter().find(|(e, _)| *e == p) {
            if *pos { TensorRole::PositionEmbedding } else { TensorRole::Embedding { model } }
        } else if let Some((_, cat)) = named.iter().find(|(w, _)| *w == p) {
            let index = match seen.iter_mut().find(|(c, _)| c == cat) {
                Some((_, n)) => {
                    *n += 1;
                    *n - 1
                }
                None => {
                    seen.push((*cat, 1));
                    0
                }
            };
            TensorRole::BlockLinear { category: *cat, index, model }
        } else {
            TensorRole::Other
        };
        out.push((p, role));
    }
    out
}

/// llama.cpp's names for a block's linears, by the order the layer lowers them.
fn categories(kind: &str, n: usize) -> Vec<C> {
    let list: &[C] = match (kind, n) {
        (k, 7) if k.starts_with("transformer_") => &[C::AttnQ, C::AttnK, C::AttnV, C::AttnOutput, C::FfnGate, C::FfnUp, C::FfnDown],
        (k, 6) if k.starts_with("transformer_") => &[C::AttnQ, C::AttnK, C::AttnV, C::AttnOutput, C::FfnUp, C::FfnDown],
        (k, 5) if k.starts_with("transformer_") => &[C::AttnQkv, C::AttnOutput, C::FfnGate, C::FfnUp, C::FfnDown],
        (k, 4) if k.starts_with("transformer_") => &[C::AttnQkv, C::AttnOutput, C::FfnUp, C::FfnDown],
        ("gated_mlp", 3) => &[C::FfnGate, C::FfnUp, C::FfnDown],
        // q_a, q_b, kv_a_mqa, kv_b, o (or q, kv_a_mqa, kv_b, o)
        ("multi_head_latent_attention", 5) => &[C::Other, C::Other, C::Other, C::AttnKvB, C::AttnOutput],
        ("multi_head_latent_attention", 4) => &[C::AttnQ, C::Other, C::AttnKvB, C::AttnOutput],
        _ => &[],
    };
    if list.len() == n { list.to_vec() } else { vec![C::Other; n] }
}

/// Rewrites the parameter storages of an inference graph to `format`'s bytes and adds the
/// dequantisation workspaces. `dtype` is the compute dtype (the parameters' dtype before).
pub fn apply(g: &mut Graph, layers: &[(&str, u32)], format: WeightFormat, dtype: DType) -> Result<()> {
    if let WeightFormat::Float(d) = format {
        if d != dtype {
            return Err(Error::Config(format!(
                "weights `{}` with parameters in {dtype:?}: choose the matching --precision (the activations' dtype)",
                format.name()
            )));
        }
        return Ok(());
    }
    let roles = roles(g, layers);
    for &(p, role) in &roles {
        let shape = g.value(p).shape.0.clone();
        let s = g.storage_of(p) as usize;
        g.storages[s].bytes = Lin { fixed: format.tensor_bytes(role, &shape, dtype), per_sample: 0 };
    }
    for op in g.ops.iter_mut().filter(|o| o.name == "linear" && o.inputs.len() >= 2) {
        let quantised = roles.iter().any(|(p, r)| *p == op.inputs[1] && matches!(r, TensorRole::BlockLinear { .. }));
        if !quantised {
            continue;
        }
        let (w, x) = (&g.values[op.inputs[1] as usize].shape.0, &g.values[op.inputs[0] as usize].shape.0);
        let (out, inp) = (w[0], w.get(1).copied().unwrap_or(1));
        // tokens per sample: every dim of the input but the features
        let tokens = x[..x.len().saturating_sub(1)].iter().product::<u64>().max(1);
        let dequant = Lin { fixed: out.saturating_mul(inp).saturating_mul(dtype.size()), per_sample: 0 };
        let extra = match format {
            WeightFormat::Bnb4 { .. } if tokens > BNB_FUSED_MAX_TOKENS => dequant,
            WeightFormat::Awq { .. } if tokens >= AWQ_DEQUANT_TOKENS => dequant,
            WeightFormat::BnbInt8 => Lin {
                fixed: 0,
                per_sample: tokens.saturating_mul(inp.saturating_add(4).saturating_add(out.saturating_mul(4))),
            },
            _ => Lin::ZERO,
        };
        op.fwd_scratch = op.fwd_scratch.plus(extra);
    }
    Ok(())
}
