//! diffusers' `WanTransformer3DModel` (`models/transformers/transformer_wan.py`:
//! `WanTransformerBlock`, `WanAttnProcessor`, `WanTimeTextImageEmbedding`), text-to-video
//! (no image embedder), lowered op by op. Per sample the video tokens are `[S, D]` with
//! `S = F'·(H/2)·(W/2)` for a `[16, F', H, W]` latent; the text `[512, 4096]` (UMT5).

use super::cfg::Cfg;
use super::ops;
use crate::error::{Error, Result};
use crate::finetune::LinearRole;
use crate::graph::{GradRule, ValueId};
use crate::layer::LayerResult;
use crate::lower::{Builder, CastPolicy};
use crate::units::{DType, Shape};

#[derive(Debug, Clone, PartialEq)]
pub struct WanConfig {
    pub in_channels: u64,
    pub out_channels: u64,
    pub heads: u64,
    pub head_dim: u64,
    pub layers: u64,
    pub ffn_dim: u64,
    pub freq_dim: u64,
    pub text_dim: u64,
    pub patch: [u64; 3],
    pub cross_attn_norm: bool,
    pub rope_max_seq_len: u64,
}

impl WanConfig {
    pub fn from_cfg(c: &Cfg) -> Result<WanConfig> {
        c.refuse("image_dim", "image-to-video's image embedder is not modelled")?;
        c.refuse("added_kv_proj_dim", "image-to-video's image K/V projections are not modelled")?;
        if let Some(q) = c.str("qk_norm")? {
            if q != "rms_norm_across_heads" {
                return Err(Error::Import(format!("{}: `qk_norm` {q} is not supported (rms_norm_across_heads)", c.class)));
            }
        }
        let p = c.sizes("patch_size", 3, &[1, 2, 2])?;
        Ok(WanConfig {
            in_channels: c.size("in_channels", 16)?,
            out_channels: c.size("out_channels", 16)?,
            heads: c.size("num_attention_heads", 40)?,
            head_dim: c.size("attention_head_dim", 128)?,
            layers: c.size("num_layers", 40)?,
            ffn_dim: c.size("ffn_dim", 13824)?,
            freq_dim: c.size("freq_dim", 256)?,
            text_dim: c.size("text_dim", 4096)?,
            patch: [p[0], p[1], p[2]],
            cross_attn_norm: c.flag("cross_attn_norm", true)?,
            rope_max_seq_len: c.size("rope_max_seq_len", 1024)?,
        })
    }

    /// `WanRotaryPosEmbed`'s `freqs_cos` and `freqs_sin` buffers (`[max_seq_len, head_dim]`
    /// each, in the model's dtype).
    pub fn buffer_numel(&self) -> u64 {
        self.rope_max_seq_len.saturating_mul(self.head_dim).saturating_mul(2)
    }

    /// One forward on a `[C, frames, h, w]` latent with `text_len` text tokens.
    pub fn forward(&self, b: &mut Builder, frames: u64, h: u64, w: u64, text_len: u64) -> LayerResult<ValueId> {
        let d = self.heads.saturating_mul(self.head_dim);
        let [pt, ph, pw] = self.patch;
        let (f2, h2, w2) = ((frames / pt).max(1), (h / ph).max(1), (w / pw).max(1));
        let s = f2.saturating_mul(h2).saturating_mul(w2);
        let dt = b.float_dtype();
        // fp32 at build, cast with the model (`Module.to(dtype)` casts floating buffers)
        b.buffer(self.buffer_numel(), dt);
        let x = b.input(Shape::new([self.in_channels, frames, h, w]), dt);
        let text = b.input(Shape::new([text_len, self.text_dim]), dt);
        // `patch_embedding`: Conv3d(k = s = patch), then flatten(2).transpose(1, 2) (a view)
        let wt = b.param(Shape::new([d, self.in_channels, pt, ph, pw]));
        let bias = b.param(Shape::new([d]));
        let (ins, cdt) = b.autocast(CastPolicy::Lower, &[x, wt, bias]);
        let conv = b.op("convolution", &ins, &[(Shape::new([d, f2, h2, w2]), cdt)], &ins[..2], false, &[], GradRule::Alloc)[0];
        let mut hs = b.view(conv, Shape::new([s, d]));
        // `rotary_emb = self.rope(hidden_states)`: cos and sin `[S, head_dim]` in the buffers'
        // dtype, one for the whole batch, `forward`'s locals
        let table = |b: &mut Builder, name: &'static str| b.op(name, &[], &[(Shape::new([s, self.head_dim]), dt)], &[], false, &[], GradRule::Alloc)[0];
        let (cos, sin) = (table(b, "rope_cos"), table(b, "rope_sin"));
        // `condition_embedder`: time (sinusoids → TimestepEmbedding), `time_proj(silu(temb))`
        // (6·D), the text through `PixArtAlphaTextProjection(act_fn="gelu_tanh")`
        let t = ops::vector_input(b, self.freq_dim);
        let temb = ops::timestep_embedding(b, t, self.freq_dim, d)?;
        let a = ops::silu(b, temb);
        let tproj = ops::linear(b, a, d, d.saturating_mul(6), true)?;
        let e = ops::linear(b, text, self.text_dim, d, true)?;
        let e = ops::gelu(b, e);
        let text = ops::linear(b, e, d, d, true)?;
        let tproj = b.view(tproj, Shape::new([6, d]));
        // each block is one group of block-level group offloading (`set_layer`)
        for i in 0..self.layers {
            b.set_layer(1 + i as u32);
            hs = b.in_unit(|b| self.block(b, hs, text, tproj, (cos, sin)))?;
        }
        b.set_layer(0);
        // `scale_shift_table` (1, 2, D); `norm_out(x.float()) * (1 + scale) + shift`, `proj_out`
        b.param(Shape::new([1, 2, d]));
        let m = modulated_norm(b, hs, d, temb, false)?;
        let pp = pt.saturating_mul(ph).saturating_mul(pw).saturating_mul(self.out_channels);
        let o = ops::linear(b, m, d, pp, true)?;
        // unpatchify: reshape, permute, flatten (a copy)
        let out = ops::copy(b, o, Shape::new([self.out_channels, frames, h, w]));
        ops::keep(b, &[cos, sin]);
        Ok(out)
    }

    fn block(&self, b: &mut Builder, x: ValueId, text: ValueId, tproj: ValueId, rope: (ValueId, ValueId)) -> LayerResult<ValueId> {
        let d = self.heads.saturating_mul(self.head_dim);
        // `scale_shift_table + temb.float()`: the six modulation vectors in fp32
        let table = b.param(Shape::new([1, 6, d]));
        let tf = b.cast(tproj, DType::F32);
        let m = ops::add(b, table, tf);
        let m = b.view(m, Shape::new([1, d]));
        let dt = b.dtype(x);
        // the caller's `hidden_states`, and the locals `norm_hidden_states` and `attn_output`
        // until reassigned (the last ones and `ff_output` until `forward` returns)
        let input = x;
        let n = modulated_norm(b, x, d, m, false)?;
        let n1 = b.cast(n, dt);
        let a1 = self.attention(b, n1, None, Some(rope))?;
        let xf = b.cast(x, DType::F32);
        let g = ops::mul(b, a1, m);
        let x1 = ops::add(b, xf, g);
        let x = b.cast(x1, dt);
        // `norm2`: an affine FP32LayerNorm (`cross_attn_norm`), or the identity
        let n = if self.cross_attn_norm {
            let xf = b.cast(x, DType::F32);
            let n = ops::layer_norm(b, xf, d, true)?;
            b.cast(n, dt)
        } else {
            x
        };
        ops::keep(b, &[n1]);
        let a = self.attention(b, n, Some(text), None)?;
        ops::keep(b, &[a1]);
        let x = ops::add(b, x, a);
        let n3 = modulated_norm(b, x, d, m, false)?;
        ops::keep(b, &[n]);
        let n = b.cast(n3, dt);
        let f = ops::linear(b, n, d, self.ffn_dim, true)?;
        let f = ops::gelu(b, f);
        let f = ops::linear(b, f, self.ffn_dim, d, true)?;
        let xf = b.cast(x, DType::F32);
        let ff = b.cast(f, DType::F32);
        let g = ops::mul(b, ff, m);
        let x1 = ops::add(b, xf, g);
        let out = b.cast(x1, dt);
        ops::keep(b, &[input, x, n, a, f]);
        Ok(out)
    }

    /// `WanAttention` with `WanAttnProcessor`: Q/K/V (K/V from `context` for cross-attention),
    /// `norm_q`/`norm_k` RMSNorm over all heads, rotary on Q and K (self-attention), SDPA,
    /// `to_out[0]`.
    fn attention(&self, b: &mut Builder, x: ValueId, context: Option<ValueId>, rope: Option<(ValueId, ValueId)>) -> LayerResult<ValueId> {
        let d = self.heads.saturating_mul(self.head_dim);
        let kv_in = context.unwrap_or(x);
        let q = ops::linear_as(b, x, d, d, true, LinearRole::Q)?;
        let k = ops::linear_as(b, kv_in, d, d, true, LinearRole::K)?;
        let v = ops::linear_as(b, kv_in, d, d, true, LinearRole::V)?;
        let mut q = ops::torch_rms_norm(b, q, d);
        let mut k = ops::torch_rms_norm(b, k, d);
        if let Some((cos, sin)) = rope {
            q = rotary(b, q, cos, sin);
            k = rotary(b, k, cos, sin);
        }
        let (q, k, v) = (ops::heads(b, q, self.heads), ops::heads(b, k, self.heads), ops::heads(b, v, self.heads));
        let a = ops::sdpa(b, q, k, v);
        let out = ops::linear_as(b, a, d, d, true, LinearRole::O)?;
        // `query`, `key`, `value` are the processor's locals until it returns
        ops::keep(b, &[q, k, v]);
        Ok(out)
    }
}

/// `(norm(x.float()) * (1 + scale) + shift)` with an `FP32LayerNorm(elementwise_affine=False)`.
fn modulated_norm(b: &mut Builder, x: ValueId, d: u64, m: ValueId, affine: bool) -> LayerResult<ValueId> {
    let xf = b.cast(x, DType::F32);
    let n = ops::layer_norm(b, xf, d, affine)?;
    let s = ops::mul(b, n, m);
    Ok(ops::add(b, s, m))
}

/// Wan's `apply_rotary_emb`: `out = empty_like(x)`; `out[..., 0::2] = x1·cos − x2·sin`;
/// `out[..., 1::2] = x1·sin + x2·cos` (products of half the width in the promotion of `x`'s
/// and the tables' dtypes), `out.type_as(x)`.
fn rotary(b: &mut Builder, x: ValueId, cos: ValueId, sin: ValueId) -> ValueId {
    let s = b.shape(x).0.clone();
    let dt = b.dtype(x);
    let half = Shape::new([s[0], s[1] / 2]);
    let out = b.op("empty_like", &[x], &[(Shape(s.clone()), dt)], &[], false, &[], GradRule::Alloc)[0];
    let x1 = b.view(x, half.clone());
    let c = b.view(cos, half.clone());
    let sn = b.view(sin, half.clone());
    let pd = if dt == DType::F32 || b.dtype(cos) == DType::F32 { DType::F32 } else { dt };
    for _ in 0..2 {
        let p = b.op("mul", &[x1, c], &[(half.clone(), pd)], &[], false, &[], GradRule::Alloc)[0];
        let q = b.op("mul", &[x1, sn], &[(half.clone(), pd)], &[], false, &[], GradRule::Alloc)[0];
        let r = b.op("sub", &[p, q], &[(half.clone(), pd)], &[], false, &[], GradRule::Alloc)[0];
        b.inplace("copy_", out, Some(r), false, GradRule::Alias);
    }
    out
}
