//! Megatron-LM sequence parallelism (`--sequence-parallel`, Korthikanti et al. 2022, "Reducing
//! Activation Recomputation in Large Transformer Models", §4.2.2) on a tensor-parallel rank whose
//! layers `distributed/tp.rs` has split. Between the token embedding and the output head the
//! residual stream is split along the sequence: per sample `[S/t, D]`, so the norms, dropouts and
//! residual adds there keep `1/t` of what they keep under plain tensor parallelism. Attention and
//! the MLP's inner activations see the whole sequence with `heads/t` and `ffn/t`, as before.
//!
//! What each piece allocates, read in Megatron-LM (`megatron/core/`):
//! - Entering: `VocabParallelEmbedding.forward` (`tensor_parallel/layers.py`) reduce-scatters its
//!   partial output with `reduce_scatter_to_sequence_parallel_region` (`reduce_scatter_embeddings`,
//!   without learned positions); with learned positions `LanguageModelEmbedding.forward`
//!   (`models/common/embeddings/language_model_embedding.py`) adds them on the whole sequence and
//!   then takes its slice (`scatter_to_sequence_parallel_region`, cloned). Either way a new
//!   `[S/t, D]` tensor replaces the whole one, and backward gathers a whole-sized gradient
//!   (`mappings.py`, `_gather_along_first_dim`): [`reduce_scatter`]. The `[b, s, h] → [s, b, h]`
//!   transposed copy before it is left out, as for plain tensor parallelism.
//! - Column-parallel linears (Q, K, V, fused QKV, gate, up, FC1, the head):
//!   `LinearWithGradAccumulationAndAsyncCommunication.forward` saves the *un-gathered* input
//!   (`ctx.save_for_backward(input, weight)`) and all-gathers it into
//!   `get_global_memory_buffer().get_tensor(dim_size, input.dtype, "mpu")`, one persistent buffer
//!   for every layer ([`Builder::shared_buffer`]); backward gathers into the same buffer again,
//!   computes the whole `grad_input` and reduce-scatters it into a new `[S/t, D]` `sub_grad_input`:
//!   [`column`]. A frozen weight goes through `linear_with_frozen_weight` instead, whose
//!   `gather_from_sequence_parallel_region` makes a new whole-sized input, saved by nobody.
//! - Row-parallel linears (attention output, down, FC2): `RowParallelLinear.forward` computes the
//!   whole `[S, D]` partial output and `reduce_scatter_to_sequence_parallel_region` makes it
//!   `[S/t, D]`; backward all-gathers the gradient to `[S, D]`: the linear, then [`reduce_scatter`].

use super::linear_op::linear;
use crate::finetune::LinearRole;
use crate::graph::{GradRule, Value, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::units::Shape;

/// Layer kinds modelled inside the split region (blocks are checked layer by layer).
pub const SPLIT_KINDS: &[&str] =
    &["transformer_encoder_layer", "transformer_decoder_layer", "layer_norm", "rms_norm", "dropout", "repeat", "sequential", "frozen"];

/// Kinds between the token embedding and the split that run on the whole sequence, as Megatron
/// adds learned positions and token types before it scatters.
const EMBEDDING_KINDS: &[&str] = &["positional_embedding", "scale"];

/// Where the lowering is along the model, seen from the split region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// Nothing lowered yet: the model must start with the token embedding.
    Before,
    /// After the token embedding, before the split.
    Embedded,
    /// The residual stream is `[S/t, D]`.
    Split,
    /// After the output head: whole again.
    Done,
}

impl Region {
    /// Called before a layer of `kind` (`first`: the model's first top-level layer, `head`: its
    /// output head) is lowered on `x`: checks that it is modelled where it stands, splits the
    /// stream when the region begins, and returns the layer's input.
    pub fn enter(&mut self, b: &mut Builder, kind: &str, first: bool, head: bool, x: ValueId) -> Result<ValueId, String> {
        let mut x = x;
        if *self == Region::Before {
            if !(first && kind == "embedding") {
                return Err(not_modelled("it needs a model that starts with its token `embedding` (Megatron's VocabParallelEmbedding)"));
            }
            *self = Region::Embedded;
            return Ok(x);
        }
        if *self == Region::Embedded && !EMBEDDING_KINDS.contains(&kind) {
            x = reduce_scatter(b, x)?;
            *self = Region::Split;
        }
        if *self == Region::Split {
            if head {
                *self = Region::Done;
            } else if !SPLIT_KINDS.contains(&kind) {
                return Err(not_modelled(&format!(
                    "between the embedding and the output head it is modelled for {} and the head, not `{kind}`",
                    SPLIT_KINDS.join(", ")
                )));
            }
        }
        Ok(x)
    }

    /// After the whole model: the stream must have been gathered by an output head.
    pub fn finish(self) -> Result<(), String> {
        match self {
            Region::Done => Ok(()),
            _ => Err(not_modelled("it needs a model that ends in its output head (the last top-level `linear`)")),
        }
    }
}

fn not_modelled(why: &str) -> String {
    format!("sequence parallelism (--sequence-parallel): {why}")
}

/// `[S, D]` → this rank's `[S/t, D]` (t: `LowerOptions::sequence_parallel`); backward gathers a
/// whole-sized gradient. Megatron asserts that the sequence divides (`_reduce_scatter_along_first_dim`).
pub fn reduce_scatter(b: &mut Builder, x: ValueId) -> Result<ValueId, String> {
    let t = b.opts.sequence_parallel.max(1);
    let s = b.shape(x).0.clone();
    if s.len() != 2 {
        return Err(not_modelled(&format!("expected a [S, D] residual stream, got {}", b.shape(x))));
    }
    if !s[0].is_multiple_of(t) {
        return Err(not_modelled(&format!("the sequence length {} does not split over --tp {t}", s[0])));
    }
    let dt = b.dtype(x);
    let out = b.op("reduce_scatter", &[x], &[(Shape::new([s[0] / t, s[1]]), dt)], &[], false, &[], GradRule::Alloc)[0];
    b.seq_shards = t;
    Ok(out)
}

/// A linear inside the split region, by its tensor-parallel role: column-parallel ones gather
/// their input, row-parallel ones reduce-scatter their output; the head ends the region.
pub fn split_linear(b: &mut Builder, x: ValueId, w: ValueId, bias: Option<ValueId>, role: Option<LinearRole>) -> Result<ValueId, String> {
    use LinearRole::*;
    match role {
        Some(Q | K | V | Qkv | Gate | Up | FfnIn | Head) => {
            let out = column(b, x, w, bias);
            if role == Some(Head) {
                b.seq_shards = 1;
            }
            Ok(out)
        }
        Some(O | Down | FfnOut) => {
            let out = linear(b, x, w, bias);
            reduce_scatter(b, out)
        }
        Some(Other | QDown | QUp | KvDown | KvUp) | None => Err(not_modelled("a linear that is neither column- nor row-parallel")),
    }
}

/// A column-parallel linear on the `[S/t, in]` stream: output `[S, out]`.
fn column(b: &mut Builder, x: ValueId, w: ValueId, bias: Option<ValueId>) -> ValueId {
    let rows = b.shape(x).0[0].saturating_mul(b.seq_shards);
    let whole = Value { shape: Shape::new([rows, b.shape(x).last()]), ..b.value(x).clone() };
    if !b.value(w).requires_grad {
        // `linear_with_frozen_weight`: a new gathered input, saved by nobody (the linear keeps
        // only the weight), reduce-scattered back in backward
        let g = b.op("all_gather", &[x], &[(whole.shape.clone(), whole.dtype)], &[], false, &[], GradRule::Alloc)[0];
        return linear(b, g, w, bias);
    }
    let mut params = vec![w];
    params.extend(bias);
    let (params, dt) = b.autocast(CastPolicy::Lower, &params);
    b.shared_buffer("mpu", whole.dtype, whole.bytes());
    let out_shape = Shape::new([rows, b.shape(w).0[0]]);
    let mut ins = vec![x];
    ins.extend(&params);
    // `ctx.save_for_backward(input, weight)`: the shard and the parameter (autocast's copy is not kept)
    let out = b.op("linear", &ins, &[(out_shape, dt)], &[x, w], false, &[], GradRule::Alloc)[0];
    if whole.dtype != dt {
        // autocast casts the gathered input inside `_linear_forward`, a transient copy
        b.last_fwd_scratch(Value { dtype: dt, ..whole.clone() }.bytes());
    }
    // backward: the whole `grad_input` before it is reduce-scattered into the input's gradient
    b.last_bwd_scratch(whole.bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::Region;
    use crate::finetune::LinearRole;
    use crate::graph::{Lin, StorageClass};
    use crate::lower::{Builder, LowerOptions};
    use crate::units::{DType, Shape};

    /// What each linear allocates and keeps on a `[S/t, D]` stream (S = 64, t = 4, D = 32, fp32).
    #[test]
    fn linears_gather_and_reduce_scatter_as_megatron_does() {
        let mut b = Builder::new(LowerOptions { sequence_parallel: 4, ..LowerOptions::default() });
        b.seq_shards = 4;
        let x = b.input(Shape::new([16, 32]), DType::F32);
        b.g.values[x as usize].requires_grad = true;
        let whole = Lin { fixed: 0, per_sample: 64 * 32 * 4 };
        // column-parallel, trainable: one op to `[S, out]`, saving the shard; the gather buffer
        // persists, the whole input gradient is backward workspace
        let w = b.param(Shape::new([8, 32]));
        let q = super::split_linear(&mut b, x, w, None, Some(LinearRole::Q)).unwrap();
        assert_eq!(b.shape(q).0, [64, 8]);
        let op = b.g.ops.last().unwrap().clone();
        assert_eq!((op.name, op.saved.contains(&b.g.storage_of(x)), op.bwd_scratch), ("linear", true, whole));
        let buffers = |b: &Builder| b.g.storages.iter().filter(|s| s.class == StorageClass::Buffer).map(|s| s.bytes).collect::<Vec<_>>();
        // K reuses the same buffer
        let k = b.param(Shape::new([8, 32]));
        super::split_linear(&mut b, x, k, None, Some(LinearRole::K)).unwrap();
        assert_eq!(buffers(&b), [whole]);
        // row-parallel: the whole partial output, then its reduce-scatter to `[S/t, D]`
        let o_w = b.param(Shape::new([32, 8]));
        let o = super::split_linear(&mut b, q, o_w, None, Some(LinearRole::O)).unwrap();
        let names: Vec<&str> = b.g.ops.iter().rev().take(2).map(|o| o.name).collect();
        assert_eq!((b.shape(o).0.as_slice(), names.as_slice()), ([16, 32].as_slice(), ["reduce_scatter", "linear"].as_slice()));
        // a frozen weight: a gathered copy of its own, no buffer; the head ends the region
        b.frozen = true;
        let head = b.param(Shape::new([100, 32]));
        let logits = super::split_linear(&mut b, o, head, None, Some(LinearRole::Head)).unwrap();
        let names: Vec<&str> = b.g.ops.iter().rev().take(2).map(|o| o.name).collect();
        assert_eq!(names, ["linear", "all_gather"]);
        assert_eq!((b.shape(logits).0.as_slice(), b.seq_shards, buffers(&b).len()), ([64, 100].as_slice(), 1, 1));
    }

    #[test]
    fn the_region_admits_what_is_modelled_and_names_the_rest() {
        let mut b = Builder::new(LowerOptions { sequence_parallel: 4, ..LowerOptions::default() });
        let x = b.input(Shape::new([64, 32]), DType::F32);
        let mut r = Region::Before;
        assert!(r.enter(&mut b, "linear", true, false, x).unwrap_err().contains("token `embedding`"));
        assert_eq!(r.enter(&mut b, "embedding", true, false, x), Ok(x));
        assert_eq!(r.enter(&mut b, "positional_embedding", false, false, x), Ok(x));
        assert_eq!(r, Region::Embedded);
        // the first layer past the embeddings splits the stream
        let y = r.enter(&mut b, "repeat", false, false, x).unwrap();
        assert_eq!((b.shape(y).0.as_slice(), b.seq_shards, r), ([16, 32].as_slice(), 4, Region::Split));
        let e = r.enter(&mut b, "sparse_moe", false, false, y).unwrap_err();
        assert!(e.contains("not `sparse_moe`"), "{e}");
        assert!(r.finish().is_err());
        r.enter(&mut b, "linear", false, true, y).unwrap();
        assert_eq!(r.finish(), Ok(()));
        // a sequence that does not divide
        let mut b = Builder::new(LowerOptions { sequence_parallel: 3, ..LowerOptions::default() });
        let x = b.input(Shape::new([64, 32]), DType::F32);
        let e = super::reduce_scatter(&mut b, x).unwrap_err();
        assert!(e.contains("does not split over --tp 3"), "{e}");
    }
}
