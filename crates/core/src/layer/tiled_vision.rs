//! Llama 3.2 Vision's tiled vision tower, as transformers 5.24's `modeling_mllama.py` builds
//! `MllamaVisionModel`. An image is split into `max_num_tiles` tiles of `image_size²` pixels
//! (the spec's input `[T·C, S, S]`: the tiles stacked on the channel axis); every tile becomes
//! `P + 1` tokens (`P = (S / patch)²` patches and a class token), padded to a multiple of 8 (`L`).
//!
//! * `tiled_patch_embed` (`MllamaVisionModel.forward` up to `F.pad`): the patch conv without bias
//!   on each tile (`[T, D, s, s]`, flattened and transposed: a view), the pre-tile positional
//!   embedding (`MllamaPrecomputedAspectRatioEmbedding`: `nn.Embedding(R + 1, T·D)` looked up by
//!   the aspect-ratio id, times `gate.tanh()`, added), the class token (`torch.cat`), the gated
//!   positional embedding (`MllamaPrecomputedPositionEmbedding`: `(1 − gate.tanh()) · embedding`
//!   `[P+1, D]` added, then `nn.Embedding(R + 1, T·(P+1)·D)` times `gate.tanh()` added),
//!   `layernorm_pre` (`nn.LayerNorm(D)`, eps 1e-5) and the zero padding: `[T·L, D]`.
//! * `tiled_vision_encoder` (the rest of `forward`): the aspect-ratio attention mask (`[T·L, T·L]`
//!   in the parameters' dtype, one per image), `num_layers` encoder layers (`MllamaVisionEncoder`:
//!   LayerNorm, bias-free Q/K/V/O, `fc1`/`fc2` with biases and `hidden_act`) over all `T·L` tokens,
//!   every layer's output kept until the tower returns (`encoder_states`), `layernorm_post`, the
//!   post-tile embedding, `num_global_layers` gated layers (`gate_attn.tanh()`, `gate_ffn.tanh()` on
//!   each branch before its residual add), the padding sliced off, the outputs of
//!   `intermediate_layers` stacked (`torch.stack(dim=-1)`, then sliced: a copy) and concatenated to
//!   the last hidden state: `[T·(P+1), D·(1 + k)]`.
//!
//! In a decode step of `generate()` the tower does not run (`prepare_inputs_for_generation` drops
//! `pixel_values` after the first forward; the cross-attention layers read their cache): both
//! kinds then hold their weights (one resident parameter of their count) and emit no op.
//!
//! The mask is allocated once (the `[S, 1] @ [1, S]` product and its scaling are transient) and
//! added to every layer's scores (eager) or given to SDPA as its explicit mask.

use super::activation::{add, mul, softmax, unary, Saves};
use super::attention::{bmm, copy};
use super::linear::Linear;
use super::sdpa::{sdpa_backend, SdpaBackend};
use crate::config::{AttentionImpl, Device};
use super::conv::conv_op;
use super::norm::LayerNorm;
use super::transformer::TransformerLayer;
use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy, LowerOptions};
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// The tiles' tokens: conv, pre-tile embedding, class token, gated positions, `layernorm_pre`, padding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TiledPatchEmbed {
    pub hidden_size: u64,
    pub num_channels: u64,
    pub patch_size: u64,
    /// `max_num_tiles`.
    pub num_tiles: u64,
    /// `len(supported_aspect_ratios)`: the tile embeddings have one more row (id 0, padding).
    pub num_aspect_ratios: u64,
}

/// `MllamaVisionAttention` (bias-free Q/K/V/O, no GQA, no positions) with the aspect-ratio mask
/// `mask` (`[S, S]` per image) — `eager_attention_forward`: `[H, S, S]` scores, scaled, the mask
/// added (a new tensor), `softmax(dtype=float32).to(query.dtype)` (the fp32 probabilities saved,
/// their copy saved by the matmul), `@ V`, a contiguous copy back; SDPA: one kernel given the
/// explicit mask (CUDA's memory-efficient kernel: its log-sum-exp padded to 32 rows). Returns the
/// output and the eager probabilities (the layer keeps them until it returns).
fn attention(b: &mut Builder, d: u64, h: u64, x: ValueId, mask: ValueId) -> LayerResult<(ValueId, Option<ValueId>)> {
    positive(h, "nhead")?;
    if !d.is_multiple_of(h) {
        return Err(format!("d_model ({d}) must be divisible by nhead ({h})"));
    }
    let (s, hd) = (b.shape(x).0[0], d / h);
    let proj = || Linear { in_features: d, out_features: d, bias: false, tied_weight: false };
    let (q, k, v) = (proj().lower(b, x)?, proj().lower(b, x)?, proj().lower(b, x)?);
    let heads = Shape::new([h, s, hd]);
    let (q, k, v) = (b.view(q, heads.clone()), b.view(k, heads.clone()), b.view(v, heads.clone()));
    let (out, weights) = if b.opts.attention == AttentionImpl::Eager {
        let scores = bmm(b, q, k, Shape::new([h, s, s]), true);
        let scores = unary(b, "mul_scalar", scores, Saves::Nothing);
        let scores = add(b, scores, mask);
        let dt = b.dtype(scores);
        let fused = b.opts.device == Device::Cuda && dt == DType::F16;
        let input = if fused { scores } else { b.cast(scores, DType::F32) };
        let probs = softmax(b, input, Some(DType::F32));
        let probs = b.cast(probs, dt);
        let o = bmm(b, probs, v, heads, false);
        (copy(b, o, Shape::new([s, d])), Some(probs))
    } else {
        let (mut ins, dt) = b.autocast(CastPolicy::Lower, &[q, k, v]);
        ins.push(mask);
        let backend = sdpa_backend(b.opts.device, dt, hd, true, 0.0);
        let lse_len = if backend == SdpaBackend::MemEfficient { s.div_ceil(32).saturating_mul(32) } else { s };
        let lse = (Shape::new([h, lse_len]), true, DType::F32);
        let o = b.op("sdpa", &ins, &[(heads, dt)], &ins, true, &[lse], GradRule::Alloc)[0];
        (b.view(o, Shape::new([s, d])), None)
    };
    let out = proj().lower(b, out)?;
    // `query`, `key`, `value` are `MllamaVisionAttention.forward`'s locals until it returns
    for l in [q, k, v] {
        b.hold(l);
    }
    Ok((out, weights))
}

/// A decode step of `generate()` (not the prefill).
fn decode_step(b: &Builder) -> bool {
    b.opts.generation.is_some_and(|s| !s.is_prefill())
}

/// The layer in a decode step: its weights (counted by lowering it aside), no op; `out` is the
/// shape it would return (a view of the input, which `generate()` keeps).
fn weights_only(b: &mut Builder, x: ValueId, out: Shape, lower: impl FnOnce(&mut Builder, ValueId) -> LayerResult<ValueId>) -> LayerResult<ValueId> {
    let mut aside = Builder::new(LowerOptions { generation: None, ..b.opts });
    let input = aside.input(b.shape(x).clone(), b.dtype(x));
    lower(&mut aside, input)?;
    b.param(Shape::new([aside.param_numel]));
    Ok(b.view(x, out))
}

/// `P + 1` tokens per tile padded to a multiple of 8 (`(8 - (P+1) % 8) % 8` zero rows).
pub fn padded(tokens: u64) -> u64 {
    tokens.div_ceil(8).saturating_mul(8)
}

/// `embedding * gate.tanh()`: a learned `[1]` gate, its tanh (saved), the product.
pub fn tanh_gate(b: &mut Builder, x: ValueId) -> ValueId {
    let g = b.param(Shape::new([1]));
    let t = unary(b, "tanh", g, Saves::Output);
    mul(b, x, t)
}

/// `hidden + gate.tanh() · table[aspect_ratio_id]` for `[T, N, D]` hidden states, the table's row
/// `[T·N·D]` (`rows` rows), looked up with the per-image id (`aspect_ratio_ids`, int64).
fn tile_embedding(b: &mut Builder, x: ValueId, rows: u64, row: Shape) -> ValueId {
    let w = b.param(Shape::new([rows, row.numel()]));
    let dt = b.dtype(w);
    let ids = (Shape::new([1]), false, DType::I64);
    let e = b.op("embedding", &[w], &[(row, dt)], &[], false, &[ids], GradRule::Alloc)[0];
    b.set_batched(e);
    let e = tanh_gate(b, e);
    add(b, x, e)
}

impl TiledPatchEmbed {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        for (v, name) in [(self.hidden_size, "hidden_size"), (self.num_channels, "num_channels"), (self.patch_size, "patch_size"), (self.num_tiles, "num_tiles")] {
            positive(v, name)?;
        }
        let s = b.shape(x).0.clone();
        let (t, c, d, p) = (self.num_tiles, self.num_channels, self.hidden_size, self.patch_size);
        if s.len() != 3 || s[0] != t.saturating_mul(c) || s[1] != s[2] || s[1] < p {
            return Err(format!("expected [{}, S, S] tiles ({t} tiles of {c} channels, S ≥ {p}), got {}", t.saturating_mul(c), b.shape(x)));
        }
        let side = s[1] / p;
        let patches = side.saturating_mul(side);
        if decode_step(b) {
            let out = Shape::new([t.saturating_mul(padded(patches.saturating_add(1))), d]);
            return weights_only(b, x, out, |b, x| self.lower(b, x));
        }
        let rows = self.num_aspect_ratios.saturating_add(1);
        let w = b.param(Shape::new([d, c, p, p]));
        let conv = conv_op(b, x, w, None, Shape::new([t, d, side, side]));
        // flatten(2).transpose(1, 2), reshape to [1, T, P, D]: views
        let h = b.view(conv, Shape::new([t, patches, d]));
        let h = tile_embedding(b, h, rows, Shape::new([t, 1, d]));
        // the class token: `torch.cat([class_embedding.expand(...), hidden], dim=1)`
        let cls = b.param(Shape::new([d]));
        let dt = b.dtype(h);
        let n = patches.saturating_add(1);
        let h = b.op("cat", &[cls, h], &[(Shape::new([t, n, d]), dt)], &[], false, &[], GradRule::Alloc)[0];
        // gated positions: `(1 - gate.tanh()) * embedding` (parameter-sized), added
        let gate = b.param(Shape::new([1]));
        let tg = unary(b, "tanh", gate, Saves::Output);
        let one_minus = unary(b, "rsub", tg, Saves::Nothing);
        let pos = b.param(Shape::new([n, d]));
        let gated = mul(b, one_minus, pos);
        let h = add(b, h, gated);
        // the tile position embedding, times the same gate's tanh
        let h = {
            let w = b.param(Shape::new([rows, t.saturating_mul(n).saturating_mul(d)]));
            let dtw = b.dtype(w);
            let ids = (Shape::new([1]), false, DType::I64);
            let e = b.op("embedding", &[w], &[(Shape::new([t, n, d]), dtw)], &[], false, &[ids], GradRule::Alloc)[0];
            b.set_batched(e);
            let e = mul(b, tg, e);
            add(b, h, e)
        };
        let h = LayerNorm { normalized_shape: d, eps: 1e-5, elementwise_affine: true, bias: true }.lower(b, h)?;
        let l = padded(n);
        let dt = b.dtype(h);
        let h = b.op("constant_pad_nd", &[h], &[(Shape::new([t, l, d]), dt)], &[], false, &[], GradRule::Alloc)[0];
        Ok(b.view(h, Shape::new([t.saturating_mul(l), d])))
    }
}

/// The local and global encoders, the intermediate layers' outputs concatenated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TiledVisionEncoder {
    /// One encoder layer (`MllamaVisionEncoderLayer`: pre-norm LayerNorm, bias-free attention,
    /// MLP with biases); the global layers add their two gates.
    pub layer: TransformerLayer,
    pub num_layers: u64,
    pub num_global_layers: u64,
    /// Indices of the local layers whose outputs are concatenated (`intermediate_layers_indices`).
    pub intermediate_layers: Vec<u64>,
    pub num_tiles: u64,
    /// Tokens per tile before padding (`P + 1`).
    pub tile_tokens: u64,
    pub num_aspect_ratios: u64,
    /// `MllamaModel.multi_modal_projector`: `Linear(D·(1+k), projection_dim)` with bias on the
    /// output (the image tokens the text model reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection_dim: Option<u64>,
}

impl TiledVisionEncoder {
    /// `MllamaVisionEncoderLayer` (`is_gated`: `gate_attn.tanh()`, `gate_ffn.tanh()` on the branches).
    fn block(&self, b: &mut Builder, x: ValueId, mask: ValueId, gated: bool) -> LayerResult<ValueId> {
        let l = &self.layer;
        let n = l.norm(b, x)?;
        let (a, weights) = attention(b, l.d_model, l.nhead, n, mask)?;
        // `hidden_states = self.input_layernorm(hidden_states)` is the local passed to
        // `self.self_attn`: the norm's output lives until the attention returns
        b.hold(n);
        let a = if gated { tanh_gate(b, a) } else { a };
        let h = add(b, x, a);
        let n2 = l.norm(b, h)?;
        let (m, _) = l.mlp(b, n2)?;
        let m = if gated { tanh_gate(b, m) } else { m };
        let out = add(b, h, m);
        if let Some(w) = weights {
            b.hold(w);
        }
        Ok(out)
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        for (v, name) in [(self.num_tiles, "num_tiles"), (self.tile_tokens, "tile_tokens")] {
            positive(v, name)?;
        }
        let (t, n, d) = (self.num_tiles, self.tile_tokens, self.layer.d_model);
        let l = padded(n);
        let tokens = t.saturating_mul(l);
        if b.shape(x).0 != [tokens, d] {
            return Err(format!("expected [{tokens}, {d}] tile tokens ({t} tiles of {l} padded tokens), got {}", b.shape(x)));
        }
        if let Some(&i) = self.intermediate_layers.iter().find(|&&i| i >= self.num_layers) {
            return Err(format!("intermediate layer {i} is not one of the {} layers", self.num_layers));
        }
        let k = self.intermediate_layers.len() as u64;
        let wide = d.saturating_mul(k.saturating_add(1));
        if decode_step(b) {
            let out = Shape::new([t.saturating_mul(n), self.projection_dim.unwrap_or(wide)]);
            return weights_only(b, x, out, |b, x| self.lower(b, x));
        }
        // the tower's attention caches nothing: its layers run as outside generation
        let generation = b.opts.generation.take();
        let out = self.tower(b, x, wide);
        b.opts.generation = generation;
        out
    }

    /// The encoders, the concatenation and the projector on `[T·L, D]` tokens.
    fn tower(&self, b: &mut Builder, x: ValueId, wide: u64) -> LayerResult<ValueId> {
        let patch_embeds = b.g.ops.iter().rev().find(|o| o.name == "convolution").and_then(|o| o.outputs.first().copied());
        let (t, n, d) = (self.num_tiles, self.tile_tokens, self.layer.d_model);
        let (l, k) = (padded(n), self.intermediate_layers.len() as u64);
        let tokens = t.saturating_mul(l);
        // `_prepare_aspect_ratio_attention_mask`: `[1, T·L, T·L]` in the parameters' dtype
        let pdt = b.param_dtype();
        let mask = b.op("aspect_ratio_mask", &[], &[(Shape::new([tokens, tokens]), pdt)], &[], false, &[], GradRule::Alloc)[0];
        b.set_batched(mask);
        let mut h = x;
        let mut states = Vec::new();
        for _ in 0..self.num_layers {
            h = b.in_unit(|b| self.block(b, h, mask, false))?;
            states.push(h);
        }
        // `output = self.transformer(hidden_states, ...)`: the caller's `hidden_states` (the
        // padded tokens) lives until the local encoder returns, then is reassigned (`resolve`
        // does not hold this layer's input to its end)
        b.hold(x);
        let h0 = LayerNorm { normalized_shape: d, eps: 1e-5, elementwise_affine: true, bias: true }.lower(b, h)?;
        let rows = self.num_aspect_ratios.saturating_add(1);
        let h1 = b.view(h0, Shape::new([t, l, d]));
        let h1 = tile_embedding(b, h1, rows, Shape::new([t, 1, d]));
        let mut g = b.view(h1, Shape::new([tokens, d]));
        for _ in 0..self.num_global_layers {
            g = b.in_unit(|b| self.block(b, g, mask, true))?;
        }
        let dt = b.dtype(g);
        let picked: Vec<ValueId> = self.intermediate_layers.iter().map(|&i| states[i as usize]).collect();
        // `torch.stack(..., dim=-1)`: a new `[T·L, D, k]`; sliced to `[T, P+1, D·k]` by a reshape (a copy)
        let stacked = if picked.is_empty() {
            None
        } else {
            let s = b.op("stack", &picked, &[(Shape::new([tokens, d.saturating_mul(k)]), dt)], &[], false, &[], GradRule::Alloc)[0];
            let sliced = if l > n { copy(b, s, Shape::new([t.saturating_mul(n), d.saturating_mul(k)])) } else { s };
            Some(sliced)
        };
        // the global output with its padding sliced off (a view; `reshape` copies it at the cat)
        let last = b.view_with_grad(g, Shape::new([t.saturating_mul(n), d]), GradRule::Alloc);
        let mut ins = vec![last];
        ins.extend(stacked);
        let out = b.op("cat", &ins, &[(Shape::new([t.saturating_mul(n), wide]), dt)], &[], false, &[], GradRule::Alloc)[0];
        // `encoder_states` and the mask live until the tower returns, and so does the patch
        // conv's output (`patch_embeds`, a local of `MllamaVisionModel.forward`, made by the
        // `tiled_patch_embed` before this layer)
        for s in states {
            b.hold(s);
        }
        b.hold(mask);
        if let Some(conv) = patch_embeds {
            b.hold(conv);
        }
        // `MllamaModel.forward` returns the tower's output (`image_outputs=vision_outputs`, its
        // `last_hidden_state`): referenced until the forward returns (measured in the prefill of
        // `generate()`, `tests/generate_vlm2.rs`)
        b.forward_locals.push(out);
        let Some(p) = self.projection_dim else { return Ok(out) };
        // ... and its local `cross_attention_states`, the projector's output, which it passes to
        // `self.language_model`: held to the forward's end, past the last cross-attention layer
        let projected = Linear { in_features: wide, out_features: p, bias: true, tied_weight: false }.lower(b, out)?;
        b.forward_locals.push(projected);
        Ok(projected)
    }
}

#[cfg(test)]
mod tests {
    use crate::lower::LowerOptions;
    use crate::resolve::resolve;
    use crate::spec::ModelSpec;

    /// Parameters as `MllamaVisionModel` has them (`modeling_mllama.py`), counted by hand: a
    /// 16-wide tower, 2 tiles of 1 channel, 8-pixel images in 4-pixel patches (P = 4), 3 aspect ratios.
    #[test]
    fn tiled_tower_parameters_and_shapes() {
        let text = r#"{"input": {"shape": [2, 8, 8]}, "layers": [
            {"kind": "tiled_patch_embed", "hidden_size": 16, "num_channels": 1, "patch_size": 4, "num_tiles": 2, "num_aspect_ratios": 3},
            {"kind": "tiled_vision_encoder", "layer": {"d_model": 16, "nhead": 2, "dim_feedforward": 24, "norm_first": true, "bias": false, "mlp_bias": true, "norm_bias": true},
             "num_layers": 3, "num_global_layers": 1,
             "intermediate_layers": [0, 2], "num_tiles": 2, "tile_tokens": 5, "num_aspect_ratios": 3}]}"#;
        let r = resolve(&ModelSpec::from_json(text).unwrap(), None, LowerOptions::default()).unwrap();
        let (d, t, n, rows) = (16u64, 2, 5, 4);
        // conv, pre-tile (table + gate), class, gate, positions, tile positions, layernorm_pre
        let embed = d * 16 + (rows * t * d + 1) + d + 1 + n * d + rows * t * n * d + 2 * d;
        assert_eq!(r.layers[0].params, embed);
        assert_eq!(r.layers[0].output_shape.0, vec![2 * 8, 16]);
        let layer = 4 * d * d + (d * 24 + 24) + (24 * d + d) + 4 * d;
        let enc = 3 * layer + 2 * d + (rows * t * d + 1) + (layer + 2);
        assert_eq!(r.layers[1].params, enc);
        assert_eq!(r.layers[1].output_shape.0, vec![t * n, 3 * d]);
        let bad = text.replace("[0, 2]", "[3]");
        assert!(resolve(&ModelSpec::from_json(&bad).unwrap(), None, LowerOptions::default()).is_err());
    }
}
