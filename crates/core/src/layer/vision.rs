//! What vision-language models add to a decoder: the image tokens a vision tower and its
//! projector computed, written into the token embeddings at the image placeholders.
//!
//! A spec runs them in the order the model's forward does. transformers 5.24's
//! `Qwen2_5_VLModel.forward`, `LlavaModel.forward`, `PaliGemmaModel.forward` and
//! `Gemma3Model.forward` all embed the prompt first (`inputs_embeds =
//! self.get_input_embeddings()(input_ids)`), then run the tower (`get_image_features`), then
//! write the image rows: so the spec is `token_input` (the prompt's token ids; the image, the
//! model's input, becomes the memory), the token embedding, `image_input` (the embeddings set
//! aside, the image taken up again), the vision tower and the projector, then `image_tokens`, then
//! the decoder. The embeddings are alive through the tower. (The older order — the tower first,
//! then `token_input`, the embedding and `image_tokens` — still reads, as Llama 3.2 Vision's
//! `MllamaModel.forward` runs its tower before the text model embeds.)
//!
//! `Gemma3Model.forward`: `special_image_mask = input_ids == image_token_id` (a bool `[S]`,
//! unsqueezed and expanded: views), `inputs_embeds.masked_scatter(special_image_mask,
//! image_features)`: a new `[S, D]` tensor; autograd keeps the mask (`masked_scatter`'s
//! backward: `grad.masked_fill(mask, 0)` and `grad.masked_select(mask)`). The forward's output
//! carries the tower's (`image_outputs`: its `last_hidden_state` and `pooler_output`), so they
//! stay referenced until the forward returns: `keep` marks them.

use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::serde_util::is_false;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// Writes the `[N, D]` image tokens into `N` of the `[S, D]` token embeddings (`N ≤ S`): the
/// image tokens are the input and the embeddings the memory after `image_input`, the other way
/// round in the older order (the memory a `token_input` after the tower set aside).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageTokens {
    pub embed_dim: u64,
    /// The image tokens are `torch.cat`ed first (`Qwen2_5_VLModel.forward`: `image_embeds =
    /// torch.cat(pooler_output, dim=0)`; LLaVA's `torch.cat(image_features, dim=0)`): a new
    /// `[N, D]` copy, referenced by the forward's local until it returns.
    #[serde(default, skip_serializing_if = "is_false")]
    pub concat: bool,
    /// The image's tokens attend to each other, given `token_type_ids` (`Gemma3Model.forward`:
    /// `get_block_sequence_ids_for_mask`, a `[S]` int64 local, and `create_masks_for_vision_model`:
    /// OR(causal, blockwise) for the full layers, AND(window, OR(causal, blockwise)) for the
    /// sliding ones, `modeling_gemma3.py`): the masks depend on the sample and no layer can skip
    /// its mask for `is_causal` (`layer/kv_cache.rs`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub block_mask: bool,
}

impl ImageTokens {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.embed_dim, "embed_dim")?;
        let mem = b.memory.ok_or("image_tokens needs a `token_input` (and, after it and the embedding, `image_input` before the vision tower)")?;
        let (embeds, image) = if b.prompt_aside { (mem, x) } else { (x, mem) };
        let (xs, ms) = (b.shape(embeds).0.clone(), b.shape(image).0.clone());
        if xs.len() != 2 || xs[1] != self.embed_dim || ms.len() != 2 || ms[1] != self.embed_dim {
            return Err(format!("expected [N, {d}] image tokens and [S, {d}] token embeddings, got {} and {}", b.shape(image), b.shape(embeds), d = self.embed_dim));
        }
        if ms[0] > xs[0] {
            return Err(format!("{} image tokens do not fit a sequence of {} tokens", ms[0], xs[0]));
        }
        let image = if self.concat {
            // one tensor's `cat`: its gradient is the incoming one's slice
            let (shape, dt) = (b.shape(image).clone(), b.dtype(image));
            let cat = b.op("cat", &[image], &[(shape, dt)], &[], false, &[], GradRule::Slices)[0];
            b.forward_locals.push(cat);
            cat
        } else {
            image
        };
        // `image_features.to(inputs_embeds.dtype)`
        let dt = b.dtype(embeds);
        let image = b.cast(image, dt);
        let mask = (Shape::new([xs[0]]), true, DType::Bool);
        let s = xs[0];
        let out = b.op("masked_scatter", &[embeds, image], &[(Shape::new(xs), dt)], &[], false, &[mask], GradRule::Alloc)[0];
        if self.block_mask {
            // `block_sequence_ids = torch.where(is_image, group_ids, -1)`, the forward's local
            let ids = b.op("block_sequence_ids", &[], &[(Shape::new([s]), DType::I64)], &[], false, &[], GradRule::Alloc)[0];
            b.set_batched(ids);
            b.forward_locals.push(ids);
            b.image_blocks = true;
        }
        b.memory = None;
        b.prompt_aside = false;
        Ok(out)
    }
}

/// Sets the prompt's token embeddings (the input) aside and returns the image (the memory the
/// `token_input` before set aside): the vision tower runs after the embedding, which stays
/// alive through it, as `Qwen2_5_VLModel.forward` and `LlavaModel.forward` run them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ImageInput {}

impl ImageInput {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let image = match b.memory {
            Some(m) if !b.prompt_aside => m,
            Some(_) => return Err("a model has at most one `image_input`".into()),
            None => return Err("image_input needs a `token_input` before it (the model's input, the image, is then its memory)".into()),
        };
        b.memory = Some(x);
        b.prompt_aside = true;
        Ok(image)
    }
}

/// Passes its input through and keeps it referenced until the model's forward returns (a
/// module's output the forward returns or keeps in a local: the vision tower's
/// `last_hidden_state` and `pooler_output` in `image_outputs`). Nothing is allocated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Keep {}

impl Keep {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        b.forward_locals.push(x);
        Ok(x)
    }
}

/// `x[index, ...]` with an int64 permutation of the `N` tokens of `[N, ...]`: a new copy
/// (Qwen2.5-VL's tower: `hidden_states[window_index, :, :]` into window order, and
/// `merged_hidden_states[reverse_indices, :]` back). Autograd keeps the `[N]` index
/// (`index_backward`: a zeroed gradient of the input, `index_put_`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct IndexTokens {}

impl IndexTokens {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).clone();
        let Some(&n) = s.0.first() else { return Err("expected an [N, ...] input, got a scalar".into()) };
        let dt = b.dtype(x);
        let index = (Shape::new([n]), true, DType::I64);
        Ok(b.op("index", &[x], &[(s, dt)], &[], false, &[index], GradRule::Alloc)[0])
    }
}

/// Gemma 3's projector pooling (`Gemma3MultiModalProjector.forward`): the `[P, D]` patch tokens of
/// a `grid × grid` patch grid, `transpose(1, 2).reshape(D, grid, grid).contiguous()` (a copy),
/// `AvgPool2d(kernel, kernel)` (saves its input), `flatten(2).transpose(1, 2)` (views): `[T, D]`
/// with `T = (grid / kernel)²`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenPool {
    pub grid: u64,
    pub kernel: u64,
}

impl TokenPool {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.grid, "grid")?;
        positive(self.kernel, "kernel")?;
        let s = b.shape(x).0.clone();
        let p = self.grid.saturating_mul(self.grid);
        if s.len() != 2 || s[0] != p {
            return Err(format!("expected [{p}, D] patch tokens of a {g} × {g} grid, got {}", b.shape(x), g = self.grid));
        }
        if self.kernel > self.grid {
            return Err(format!("kernel ({}) is larger than the grid ({})", self.kernel, self.grid));
        }
        let (d, side) = (s[1], self.grid / self.kernel);
        let dt = b.dtype(x);
        let grid = b.op("clone", &[x], &[(Shape::new([d, self.grid, self.grid]), dt)], &[], false, &[], GradRule::Alias)[0];
        let pooled = b.op("avg_pool2d", &[grid], &[(Shape::new([d, side, side]), dt)], &[grid], false, &[], GradRule::Alloc)[0];
        Ok(b.view(pooled, Shape::new([side.saturating_mul(side), d])))
    }
}

/// Qwen2.5-VL's patch merger (`Qwen2_5_VLPatchMerger.forward`: `ln_q(x).view(-1, hidden_size)`):
/// `group` consecutive `[D]` tokens (a `√group × √group` patch square, consecutive in the
/// processor's patch order) become one `[group·D]` token: `[N, D]` → `[N/group, group·D]`, a view.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MergeTokens {
    pub group: u64,
}

impl MergeTokens {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.group, "group")?;
        let s = b.shape(x).0.clone();
        if s.len() != 2 || !s[0].is_multiple_of(self.group) {
            return Err(format!("expected [N, D] tokens with N a multiple of {}, got {}", self.group, b.shape(x)));
        }
        Ok(b.view(x, Shape::new([s[0] / self.group, s[1].saturating_mul(self.group)])))
    }
}

/// `x[:, count:]`: drops the first `count` tokens (LLaVA's `vision_feature_select_strategy
/// = "default"` drops CLIP's class token): a view; its backward allocates a zero gradient of the
/// whole input (`slice_backward`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropTokens {
    pub count: u64,
}

impl DropTokens {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let mut s = b.shape(x).0.clone();
        if s.len() != 2 || s[0] <= self.count {
            return Err(format!("expected [N, D] tokens with N above {}, got {}", self.count, b.shape(x)));
        }
        s[0] -= self.count;
        Ok(b.view_with_grad(x, Shape(s), GradRule::Alloc))
    }
}

/// A learned per-channel scale `x * gamma` (`gamma` `[dim]`): DINOv2's `Dinov2LayerScale`
/// (`hidden_state * self.lambda1`), ConvNeXt's `layer_scale_parameter`. `mul` saves `x` for
/// `gamma`'s gradient (and `gamma` for `x`'s, a parameter: nothing allocated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerScale {
    pub dim: u64,
}

impl LayerScale {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.dim, "dim")?;
        if b.shape(x).0.last() != Some(&self.dim) {
            return Err(format!("expected an input whose last dimension is {}, got {}", self.dim, b.shape(x)));
        }
        let gamma = b.param(Shape::new([self.dim]));
        Ok(super::activation::mul(b, x, gamma))
    }
}

/// DINOv2's classifier input (`Dinov2ForImageClassification.forward`): `[S, D]` → `[2·D]`, the
/// class token (`x[:, 0]`, a view) beside the mean of the patch tokens (`x[:, 1:].mean(dim=1)`,
/// a new `[D]`), concatenated (`torch.cat`, a new `[2·D]`); neither saves anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClsMeanPool {}

impl ClsMeanPool {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() != 2 || s[0] < 2 {
            return Err(format!("expected [S, D] tokens with a class token and at least one patch, got {}", b.shape(x)));
        }
        let dt = b.dtype(x);
        let mean = b.op("mean", &[x], &[(Shape::new([s[1]]), dt)], &[], false, &[], GradRule::Alloc)[0];
        let cls = b.view_with_grad(x, Shape::new([s[1]]), GradRule::Alloc);
        Ok(b.op("cat", &[cls, mean], &[(Shape::new([s[1].saturating_mul(2)]), dt)], &[], false, &[], GradRule::Alloc)[0])
    }
}

#[cfg(test)]
mod tests {
    use crate::lower::LowerOptions;
    use crate::resolve::resolve;
    use crate::spec::ModelSpec;

    fn spec(tokens: u64) -> String {
        format!(
            r#"{{"input": {{"shape": [4, 32]}}, "layers": [{{"kind": "linear", "in_features": 32, "out_features": 32}},
            {{"kind": "token_input", "seq_len": {tokens}}}, {{"kind": "embedding", "num_embeddings": 100, "embedding_dim": 32}},
            {{"kind": "image_tokens", "embed_dim": 32}}, {{"kind": "linear", "in_features": 32, "out_features": 100}}]}}"#
        )
    }

    #[test]
    fn image_tokens_fill_placeholders_and_keep_the_mask() {
        let r = resolve(&ModelSpec::from_json(&spec(16)).unwrap(), None, LowerOptions::default()).unwrap();
        assert_eq!(r.layers.last().unwrap().output_shape.0, vec![16, 100]);
        let g = &r.graph;
        let op = g.ops.iter().find(|o| o.name == "masked_scatter").unwrap();
        // the [16] bool mask, saved; the [16, 32] output in fp32
        let bytes: Vec<u64> = op.saved.iter().map(|&s| g.storages[s as usize].bytes.per_sample).collect();
        assert_eq!(bytes, vec![16]);
        assert_eq!(g.storages[op.allocs[0] as usize].bytes.per_sample, 16 * 32 * 4);
    }

    /// `token_input`, the embedding, `image_input`, a one-linear "tower", `image_tokens`.
    fn embedded_first(extra: &str) -> String {
        format!(
            r#"{{"input": {{"shape": [4, 32]}}, "layers": [{{"kind": "token_input", "seq_len": 16}},
            {{"kind": "embedding", "num_embeddings": 100, "embedding_dim": 32}}, {{"kind": "image_input"}},
            {{"kind": "linear", "in_features": 32, "out_features": 32}}{extra}, {{"kind": "image_tokens", "embed_dim": 32, "concat": true}},
            {{"kind": "linear", "in_features": 32, "out_features": 100}}]}}"#
        )
    }

    #[test]
    fn image_input_runs_the_tower_after_the_embedding() {
        let opts = LowerOptions { training: false, ..LowerOptions::default() };
        let r = resolve(&ModelSpec::from_json(&embedded_first("")).unwrap(), None, opts).unwrap();
        let g = &r.graph;
        let at = |name: &str| g.ops.iter().position(|o| o.name == name).unwrap();
        let (embed, tower, scatter) = (at("embedding"), at("linear"), at("masked_scatter"));
        assert!(embed < tower && tower < scatter);
        // the embeddings and the [4, 32] image tokens (their `cat` copy) are the scatter's inputs
        let shapes: Vec<Vec<u64>> = g.ops[scatter].inputs.iter().map(|&v| g.value(v).shape.0.to_vec()).collect();
        assert_eq!(shapes, vec![vec![16, 32], vec![4, 32]]);
        assert_eq!(r.layers.last().unwrap().output_shape.0, vec![16, 100]);
        // the `cat` copy is a local of the forward: held to its last op
        let cat = g.storage_of(g.ops[at("cat")].outputs[0]);
        assert!(g.holds.contains(&(cat, g.ops.len() as u32 - 1)));
        for (bad, want) in [
            (r#"{"input": {"shape": [4, 32]}, "layers": [{"kind": "image_input"}]}"#, "needs a `token_input`"),
            (&embedded_first(r#", {"kind": "image_input"}"#), "at most one `image_input`"),
        ] {
            let e = resolve(&ModelSpec::from_json(bad).unwrap(), None, LowerOptions::default()).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn keep_holds_to_the_end_and_index_tokens_copies() {
        let opts = LowerOptions { training: true, ..LowerOptions::default() };
        let spec = embedded_first(r#", {"kind": "keep"}, {"kind": "index_tokens"}"#);
        let r = resolve(&ModelSpec::from_json(&spec).unwrap(), None, opts).unwrap();
        let g = &r.graph;
        let tower = g.ops.iter().position(|o| o.name == "linear").unwrap();
        let kept = g.storage_of(g.ops[tower].outputs[0]);
        assert!(g.holds.contains(&(kept, g.ops.len() as u32 - 1)));
        // a new [4, 32] fp32 copy; autograd keeps the [4] int64 index
        let index = g.ops.iter().find(|o| o.name == "index").unwrap();
        assert_eq!(g.storages[index.allocs[0] as usize].bytes.per_sample, 4 * 32 * 4);
        let saved: Vec<u64> = index.saved.iter().map(|&s| g.storages[s as usize].bytes.per_sample).collect();
        assert_eq!(saved, vec![4 * 8]);
    }

    #[test]
    fn token_pool_averages_the_patch_grid() {
        let text = r#"{"input": {"shape": [64, 8]}, "layers": [{"kind": "linear", "in_features": 8, "out_features": 8}, {"kind": "token_pool", "grid": 8, "kernel": 4}]}"#;
        let r = resolve(&ModelSpec::from_json(text).unwrap(), None, LowerOptions::default()).unwrap();
        assert_eq!(r.layers[1].output_shape.0, vec![4, 8]);
        let bad = r#"{"input": {"shape": [60, 8]}, "layers": [{"kind": "token_pool", "grid": 8, "kernel": 4}]}"#;
        assert!(resolve(&ModelSpec::from_json(bad).unwrap(), None, LowerOptions::default()).is_err());
    }

    #[test]
    fn more_image_tokens_than_the_sequence_is_an_error() {
        let e = resolve(&ModelSpec::from_json(&spec(2)).unwrap(), None, LowerOptions::default()).unwrap_err().to_string();
        assert!(e.contains("4 image tokens") && e.contains("2 tokens"), "{e}");
    }

    #[test]
    fn merge_and_drop_tokens_are_views() {
        let text = r#"{"input": {"shape": [65, 8]}, "layers": [{"kind": "linear", "in_features": 8, "out_features": 8},
            {"kind": "drop_tokens", "count": 1}, {"kind": "merge_tokens", "group": 4}]}"#;
        let r = resolve(&ModelSpec::from_json(text).unwrap(), None, LowerOptions::default()).unwrap();
        assert_eq!(r.layers[1].output_shape.0, vec![64, 8]);
        assert_eq!(r.layers[2].output_shape.0, vec![16, 32]);
        let bad = r#"{"input": {"shape": [6, 8]}, "layers": [{"kind": "merge_tokens", "group": 4}]}"#;
        assert!(resolve(&ModelSpec::from_json(bad).unwrap(), None, LowerOptions::default()).is_err());
        let bad = r#"{"input": {"shape": [1, 8]}, "layers": [{"kind": "drop_tokens", "count": 1}]}"#;
        assert!(resolve(&ModelSpec::from_json(bad).unwrap(), None, LowerOptions::default()).is_err());
    }

    #[test]
    fn layer_scale_and_cls_mean_pool() {
        let text = r#"{"input": {"shape": [5, 8]}, "layers": [{"kind": "linear", "in_features": 8, "out_features": 8},
            {"kind": "layer_scale", "dim": 8}, {"kind": "cls_mean_pool"}]}"#;
        let r = resolve(&ModelSpec::from_json(text).unwrap(), None, LowerOptions::default()).unwrap();
        assert_eq!((r.layers[1].params, r.layers[1].output_shape.0.to_vec()), (8, vec![5, 8]));
        assert_eq!(r.layers[2].output_shape.0, vec![16]);
        let bad = r#"{"input": {"shape": [5, 8]}, "layers": [{"kind": "layer_scale", "dim": 4}]}"#;
        assert!(resolve(&ModelSpec::from_json(bad).unwrap(), None, LowerOptions::default()).is_err());
    }
}
