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
use super::skip::Matcher;
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
///
/// `layers[i]` is the kind and nesting depth of row `i` of the per-layer table (`Op::layer`).
/// A block's index (llama.cpp's `blk.N`) counts the attention layers met so far. In a
/// `sparse_moe` row the expert stacks (`grouped_mm` weights `[E, 2I, H]`, `[E, H, I]`) are
/// `ffn_*_exps`; the router (`[E, H]`) and a shared-expert gate (`[1, H]`) stay unquantised, as
/// llama.cpp (`ffn_gate_inp`), vLLM (`ReplicatedLinear(..., quant_config=None)`) and the usual
/// `modules_to_not_convert` keep them.
pub fn roles(g: &Graph, layers: &[(&str, u32)]) -> Vec<(ValueId, TensorRole)> {
    // indexed by value: a lookup per op and per parameter, not a scan of every parameter
    let mut param = vec![false; g.values.len()];
    for &p in &g.params {
        if let Some(x) = param.get_mut(p as usize) {
            *x = true;
        }
    }
    let is_param = |v: ValueId| param.get(v as usize).copied().unwrap_or(false);
    let is_attention = |kind: &str| {
        kind.starts_with("transformer_") || kind == "multi_head_latent_attention" || kind == "multihead_attention"
    };
    // (op, row, weight, grouped_mm, block index) in forward order
    let mut mats: Vec<(usize, u32, ValueId, bool, u64)> = Vec::new();
    let (mut blocks, mut last_row) = (0u64, u32::MAX);
    for (i, o) in g.ops.iter().enumerate() {
        if o.layer != last_row {
            last_row = o.layer;
            if is_attention(layers[o.layer as usize].0) {
                blocks += 1;
            }
        }
        if (o.name == "linear" || o.name == "grouped_mm") && o.inputs.len() >= 2 && is_param(o.inputs[1]) {
            mats.push((i, o.layer, o.inputs[1], o.name == "grouped_mm", blocks.saturating_sub(1)));
        }
    }
    // the head: the last linear, in a top-level `linear` row
    let head = mats.iter().rev().find(|m| !m.3).copied().filter(|m| {
        let (kind, depth) = layers[m.1 as usize];
        depth == 0 && kind == "linear"
    });
    let embeds: Vec<(ValueId, bool)> = g
        .ops
        .iter()
        .filter(|o| o.name == "embedding" && !o.inputs.is_empty())
        .map(|o| (o.inputs[0], layers[o.layer as usize].0 == "positional_embedding"))
        .collect();
    let tied = head.is_some_and(|h| embeds.iter().any(|(e, _)| *e == h.2));
    // group a row's matrices, in forward order
    // (row, [(weight, grouped_mm, block)])
    type Row = (u32, Vec<(ValueId, bool, u64)>);
    let mut rows: Vec<Row> = Vec::new();
    for &(i, layer, w, grouped, block) in &mats {
        if head.map(|h| h.0) == Some(i) {
            continue;
        }
        match rows.last_mut() {
            Some((l, ws)) if *l == layer => ws.push((w, grouped, block)),
            _ => rows.push((layer, vec![(w, grouped, block)])),
        }
    }
    let mut n_gqa = 1;
    let mut n_expert = 1;
    let mut named: Vec<(ValueId, C, u64)> = Vec::new();
    for (l, ws) in &rows {
        let kind = layers[*l as usize].0;
        if kind == "sparse_moe" {
            let dims = |w: ValueId| g.value(w).shape.0.clone();
            let experts = ws.iter().find(|m| m.1).map_or(0, |m| dims(m.0)[0]);
            n_expert = n_expert.max(experts);
            let stacks = [C::FfnUp, C::FfnDown];
            let shared = [C::FfnGate, C::FfnUp, C::FfnDown];
            let (mut si, mut hi) = (0, 0);
            for &(w, grouped, block) in ws {
                let out = dims(w)[0];
                if grouped {
                    named.push((w, stacks[si.min(1)], block));
                    si += 1;
                } else if out != 1 && out != experts {
                    named.push((w, shared[hi.min(2)], block));
                    hi += 1;
                }
            }
            continue;
        }
        let cats = categories(kind, ws.len());
        if let (Some(q), Some(v)) = (
            cats.iter().position(|c| *c == C::AttnQ).map(|i| ws[i].0),
            cats.iter().position(|c| *c == C::AttnV).map(|i| ws[i].0),
        ) {
            let rows_of = |w: ValueId| g.value(w).shape.0.first().copied().unwrap_or(1).max(1);
            n_gqa = (rows_of(q) / rows_of(v)).max(1);
        }
        named.extend(ws.iter().zip(cats).map(|(m, c)| (m.0, c, m.2)));
    }
    let model = MixModel { n_layer: blocks.max(1), n_gqa, n_expert, is_70b: blocks == 80, tied };
    // a weight's first (category, block) in `named`
    let mut named_of = vec![None; g.values.len()];
    for &(w, category, index) in &named {
        if let Some(slot @ None) = named_of.get_mut(w as usize) {
            *slot = Some((category, index));
        }
    }
    g.params
        .iter()
        .map(|&p| {
            let role = if head.is_some_and(|h| h.2 == p) || (tied && embeds.iter().any(|(e, pos)| *e == p && !pos)) {
                if tied { TensorRole::Embedding { model } } else { TensorRole::Output { model } }
            } else if let Some((_, pos)) = embeds.iter().find(|(e, _)| *e == p) {
                if *pos { TensorRole::PositionEmbedding } else { TensorRole::Embedding { model } }
            } else if let Some(&Some((category, index))) = named_of.get(p as usize) {
                TensorRole::BlockLinear { category, index, model }
            } else {
                TensorRole::Other
            };
            (p, role)
        })
        .collect()
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

/// The modules a checkpoint keeps unquantised: the skip list and each row's module name
/// (`LayerInfo::name`, by row).
pub type Kept<'a> = (&'a Matcher, &'a [Option<&'a str>]);

/// Rewrites the parameter storages of an inference graph to `format`'s bytes and adds the
/// dequantisation workspaces. `dtype` is the compute dtype (the parameters' dtype before).
/// `keep`: the matrix weights whose module the checkpoint's skip list names stay in `dtype`
/// (transformers' quantizers leave such a module as it is, `should_convert_module`;
/// compressed-tensors gives it no scheme) — for the Hugging Face formats, not GGUF's recipes.
pub fn apply(g: &mut Graph, layers: &[(&str, u32)], format: WeightFormat, dtype: DType, keep: Option<Kept>) -> Result<()> {
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
    let mut kept = vec![false; g.values.len()];
    if let (Some((matcher, names)), false) = (keep, matches!(format, WeightFormat::Gguf(_))) {
        for (w, module) in super::modules::of_weights(g, layers, names) {
            if module.kept_by(matcher) {
                kept[w as usize] = true;
            }
        }
    }
    // a skip list that replaces the loader's default skips quantises an untied head it does not
    // keep (`SkipList::head`; a tied head is the embedding, which no format here quantises)
    let head_quantised = keep.is_some_and(|(m, _)| m.head) && matches!(format, WeightFormat::Bnb4 { .. } | WeightFormat::BnbInt8 | WeightFormat::Fp8 { .. } | WeightFormat::Ct(_));
    let roles: Vec<(ValueId, TensorRole)> = roles
        .into_iter()
        .map(|(p, role)| match role {
            TensorRole::Output { model } if head_quantised && !kept[p as usize] => (p, TensorRole::BlockLinear { category: C::Output, index: 0, model }),
            _ => (p, role),
        })
        .collect();
    let mut block_linear = vec![false; g.values.len()];
    for &(p, role) in &roles {
        if matches!(role, TensorRole::BlockLinear { .. }) && !kept[p as usize] {
            block_linear[p as usize] = true;
        }
    }
    for &(p, role) in &roles {
        let shape = g.value(p).shape.0.clone();
        let s = g.storage_of(p) as usize;
        let bytes = if kept[p as usize] {
            shape.iter().product::<u64>().saturating_mul(dtype.size())
        } else {
            format.tensor_bytes(role, &shape, dtype)
        };
        g.storages[s].bytes = Lin { fixed: bytes, per_sample: 0 };
    }
    if format == WeightFormat::Mxfp4 {
        // `Mxfp4GptOssExperts` declares `gate_up_proj_bias` / `down_proj_bias` float32
        // (`integrations/mxfp4.py`), and the loader keeps a parameter's own dtype for a float
        // checkpoint tensor (`core_model_loading.py`: `_dtype = empty_param.dtype`;
        // `HfQuantizer.get_new_dtype`): the `[E, out]` expert biases, gathered per routed row
        // (`index`) in a `sparse_moe` row, are fp32
        // (the experts a skip list keeps are `GptOssExperts`, biases in the model dtype)
        let kept_rows: Vec<u32> = g.ops.iter().filter(|o| o.name == "grouped_mm" && o.inputs.get(1).is_some_and(|&w| kept[w as usize])).map(|o| o.layer).collect();
        let biases: Vec<ValueId> = g
            .ops
            .iter()
            .filter(|o| o.name == "index" && layers.get(o.layer as usize).is_some_and(|l| l.0 == "sparse_moe") && !kept_rows.contains(&o.layer))
            .filter_map(|o| o.inputs.first().copied())
            .filter(|&v| g.params.contains(&v) && g.value(v).shape.0.len() == 2)
            .collect();
        for p in biases {
            let n: u64 = g.value(p).shape.0.iter().product();
            let s = g.storage_of(p) as usize;
            g.storages[s].bytes = Lin { fixed: n.saturating_mul(4), per_sample: 0 };
        }
    }
    for op in g.ops.iter_mut().filter(|o| o.name == "linear" && o.inputs.len() >= 2) {
        let quantised = block_linear.get(op.inputs[1] as usize).copied().unwrap_or(false);
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
