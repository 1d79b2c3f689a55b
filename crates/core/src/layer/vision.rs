//! What vision-language models add to a decoder: the image tokens a vision tower and its
//! projector computed, written into the token embeddings at the image placeholders.
//!
//! A spec lists the vision tower and the projector on the image input, then `token_input` (the
//! prompt's token ids; the projected image tokens become the memory), the token embedding, then
//! `image_tokens`, then the decoder. transformers 5.24 (`modeling_gemma3.py`,
//! `Gemma3Model.forward`): `special_image_mask = input_ids == image_token_id` (a bool `[S]`,
//! unsqueezed and expanded: views), `inputs_embeds.masked_scatter(special_image_mask,
//! image_features)`: a new `[S, D]` tensor; autograd keeps the mask (`masked_scatter`'s
//! backward: `grad.masked_fill(mask, 0)` and `grad.masked_select(mask)`).

use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// Writes the memory's `[N, D]` rows into `N` of the `[S, D]` token embeddings (`N ≤ S`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageTokens {
    pub embed_dim: u64,
}

impl ImageTokens {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.embed_dim, "embed_dim")?;
        let mem = b.memory.ok_or("image_tokens needs a `token_input` after the vision tower (its output is the image tokens)")?;
        let (xs, ms) = (b.shape(x).0.clone(), b.shape(mem).0.clone());
        if xs.len() != 2 || xs[1] != self.embed_dim || ms.len() != 2 || ms[1] != self.embed_dim {
            return Err(format!("expected [N, {d}] image tokens and [S, {d}] token embeddings, got {} and {}", b.shape(mem), b.shape(x), d = self.embed_dim));
        }
        if ms[0] > xs[0] {
            return Err(format!("{} image tokens do not fit a sequence of {} tokens", ms[0], xs[0]));
        }
        // `image_features.to(inputs_embeds.dtype)`
        let dt = b.dtype(x);
        let mem = b.cast(mem, dt);
        let mask = (Shape::new([xs[0]]), true, DType::Bool);
        let out = b.op("masked_scatter", &[x, mem], &[(Shape::new(xs), dt)], &[], false, &[mask], GradRule::Alloc)[0];
        b.memory = None;
        Ok(out)
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
