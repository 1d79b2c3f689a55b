//! diffusers' `AutoencoderKLWan` (`models/autoencoders/autoencoder_kl_wan.py`), Wan 2.1's causal
//! 3D VAE: `WanCausalConv3d` (causal time padding, a two-frame feature cache per conv),
//! `WanRMS_norm`, `WanResidualBlock`, `WanAttentionBlock` (one head per frame), `WanResample`.
//!
//! `_decode` runs the decoder one latent frame at a time (`x[:, :, i:i+1]`), each conv reading
//! the cached last two frames of its previous input, and concatenates the decoded chunks
//! (`torch.cat([out, out_], 2)`). So the decode's peak is one steady-state chunk (one latent
//! frame, four video frames after the two temporal upsamplings) with every conv's cache, plus
//! the video decoded so far — or, at the last chunk, the old and the new `out` together.

use super::cfg::Cfg;
use super::ops;
use crate::error::{Error, Result};
use crate::graph::{GradRule, ValueId};
use crate::layer::LayerResult;
use crate::lower::{Builder, CastPolicy};
use crate::units::{DType, Shape};

/// `CACHE_T`: frames each causal conv keeps of its input.
const CACHE_T: u64 = 2;

#[derive(Debug, Clone, PartialEq)]
pub struct WanVaeConfig {
    pub base_dim: u64,
    pub z_dim: u64,
    pub dim_mult: Vec<u64>,
    pub num_res_blocks: u64,
    pub temperal_downsample: Vec<bool>,
    pub in_channels: u64,
    pub out_channels: u64,
}

impl WanVaeConfig {
    pub fn from_cfg(c: &Cfg) -> Result<WanVaeConfig> {
        c.refuse("is_residual", "Wan 2.2's residual VAE is not modelled")?;
        c.refuse("patch_size", "Wan 2.2's patchified VAE is not modelled")?;
        if let Some(serde_json::Value::Array(a)) = c.get("attn_scales") {
            if !a.is_empty() {
                return Err(Error::Import(format!("{}: `attn_scales` other than [] are not modelled", c.class)));
            }
        }
        let dim_mult = c.sizes("dim_mult", 0, &[1, 2, 4, 4])?;
        let td = match c.get("temperal_downsample") {
            None => vec![false, true, true],
            Some(serde_json::Value::Array(a)) => a.iter().map(|v| v.as_bool().ok_or_else(|| Error::Import(format!("{}: `temperal_downsample` must be booleans", c.class)))).collect::<Result<_>>()?,
            Some(v) => return Err(Error::Import(format!("{}: `temperal_downsample` must be a list, got {v}", c.class))),
        };
        if td.len() + 1 != dim_mult.len() {
            return Err(Error::Import(format!("{}: `temperal_downsample` needs {} entries", c.class, dim_mult.len().saturating_sub(1))));
        }
        Ok(WanVaeConfig {
            base_dim: c.size("base_dim", 96)?,
            z_dim: c.size("z_dim", 16)?,
            dim_mult,
            num_res_blocks: c.size("num_res_blocks", 2)?,
            temperal_downsample: td,
            in_channels: c.size("in_channels", 3)?,
            out_channels: c.size("out_channels", 3)?,
        })
    }

    /// Parameters of the encoder and `quant_conv` (`WanEncoder3d`), counted module by module.
    pub fn encoder_params(&self) -> u64 {
        let d = self.base_dim;
        let dims: Vec<u64> = std::iter::once(d).chain(self.dim_mult.iter().map(|m| d * m)).collect();
        let mut n = conv_params(self.in_channels, dims[0], 27);
        for i in 0..self.dim_mult.len() {
            let (mut cin, cout) = (dims[i], dims[i + 1]);
            for _ in 0..self.num_res_blocks {
                n += resblock_params(cin, cout);
                cin = cout;
            }
            if i + 1 != self.dim_mult.len() {
                n += conv_params(cout, cout, 9);
                if self.temperal_downsample[i] {
                    n += conv_params(cout, cout, 3);
                }
            }
        }
        let c = *dims.last().unwrap_or(&d);
        n += mid_params(c) + c + conv_params(c, self.z_dim * 2, 27);
        n + conv_params(self.z_dim * 2, self.z_dim * 2, 1)
    }

    fn decoder_dims(&self) -> Vec<u64> {
        let d = self.base_dim;
        let last = *self.dim_mult.last().unwrap_or(&1);
        std::iter::once(d * last).chain(self.dim_mult.iter().rev().map(|m| d * m)).collect()
    }

    /// `post_quant_conv` and one chunk of `WanDecoder3d` on a `[z, 1, h, w]` latent frame in
    /// the steady state (the caches full). The encoder's weights are resident as one tensor.
    pub fn decode_chunk(&self, b: &mut Builder, h: u64, w: u64) -> LayerResult<ValueId> {
        b.param(Shape::new([self.encoder_params()]));
        let dt = b.float_dtype();
        let z = b.input(Shape::new([self.z_dim, 1, h, w]), dt);
        let mut caches = Vec::new();
        let zq = conv3d(b, z, self.z_dim, self.z_dim, [1, 1, 1], None)?;
        let dims = self.decoder_dims();
        let mut x = conv3d(b, zq, self.z_dim, dims[0], [3, 3, 3], Some(&mut caches))?;
        // each block's input is its caller's local (`x = up_block(x, ...)`) until it returns
        let mid_in = x;
        x = resblock(b, x, dims[0], dims[0], &mut caches)?;
        x = attention(b, x, dims[0])?;
        x = resblock(b, x, dims[0], dims[0], &mut caches)?;
        ops::keep(b, &[mid_in]);
        let n = self.dim_mult.len();
        let tu: Vec<bool> = self.temperal_downsample.iter().rev().copied().collect();
        for i in 0..n {
            let mut cin = if i > 0 { dims[i] / 2 } else { dims[i] };
            let cout = dims[i + 1];
            let input = x;
            for _ in 0..self.num_res_blocks + 1 {
                x = resblock(b, x, cin, cout, &mut caches)?;
                cin = cout;
            }
            if i + 1 != n {
                x = upsample(b, x, cout, tu[i], &mut caches)?;
            }
            ops::keep(b, &[input]);
        }
        let c = dims[n];
        x = rms_norm(b, x, c);
        x = ops::silu(b, x);
        let out = conv3d(b, x, c, self.out_channels, [3, 3, 3], Some(&mut caches))?;
        for cache in caches {
            b.hold(cache);
        }
        // `_decode`'s `x` (all latent frames after `post_quant_conv`)
        ops::keep(b, &[zq]);
        Ok(out)
    }

    /// The decode graph of a `frames`-frame video (`h × w` pixels): one steady-state chunk.
    pub fn decode(&self, b: &mut Builder, _frames: u64, height: u64, width: u64) -> LayerResult<ValueId> {
        self.decode_chunk(b, (height / 8).max(1), (width / 8).max(1))
    }

    /// The encoder is not simulated (text-to-video never encodes; cache latents for training).
    pub fn encode(&self, _b: &mut Builder, _frames: u64, _height: u64, _width: u64) -> LayerResult<ValueId> {
        Err("encoding video with AutoencoderKLWan is not modelled yet; train on cached latents".into())
    }

    /// Bytes `_decode` adds beside one chunk's peak: the chunks decoded so far (`out`), and at the
    /// last chunk the new `out` of the whole video beside the old one; then `torch.clamp` copies
    /// it (`[3, F, H, W]` in the VAE's dtype).
    pub fn output_bytes(&self, frames: u64, height: u64, width: u64, dtype: DType) -> (u64, u64) {
        let frame = self.out_channels.saturating_mul(height).saturating_mul(width).saturating_mul(dtype.size());
        let video = frame.saturating_mul(frames);
        // during the last chunk: `out` (all but its 4 frames) and the previous chunk's `out_`
        // (a local until the next decoder call returns); at the last cat: old + chunk + new
        (frame.saturating_mul(frames.min(frames.saturating_sub(4).saturating_add(4))), video.saturating_mul(2))
    }
}

fn conv_params(cin: u64, cout: u64, k: u64) -> u64 {
    cin * cout * k + cout
}

fn resblock_params(cin: u64, cout: u64) -> u64 {
    let short = if cin != cout { conv_params(cin, cout, 1) } else { 0 };
    cin + conv_params(cin, cout, 27) + cout + conv_params(cout, cout, 27) + short
}

fn mid_params(c: u64) -> u64 {
    2 * resblock_params(c, c) + c + conv_params(c, 3 * c, 1) + conv_params(c, c, 1)
}

/// `WanCausalConv3d` on `[C, T, H, W]`: in the steady state `torch.cat([cache, x], 2)` (the two
/// cached frames replace the causal time padding), `F.pad` of the spatial border, the conv. The
/// new cache, `x[:, :, -2:].clone()`, is kept until the next chunk.
fn conv3d(b: &mut Builder, x: ValueId, cin: u64, cout: u64, k: [u64; 3], caches: Option<&mut Vec<ValueId>>) -> LayerResult<ValueId> {
    let s = b.shape(x).0.clone();
    if s.len() != 4 || s[0] != cin {
        return Err(format!("expected [{cin}, T, H, W], got {}", b.shape(x)));
    }
    let (t, h, w) = (s[1], s[2], s[3]);
    let dt = b.dtype(x);
    let mut input = x;
    if k[0] > 1 {
        if let Some(caches) = caches {
            let cache = b.op("clone", &[x], &[(Shape::new([cin, CACHE_T.min(t), h, w]), dt)], &[], false, &[], GradRule::Alias)[0];
            let cache = if t < CACHE_T { ops::cat(b, &[cache], Shape::new([cin, CACHE_T, h, w])) } else { cache };
            caches.push(cache);
            input = ops::cat(b, &[cache, x], Shape::new([cin, t + CACHE_T, h, w]));
        }
    }
    let ph = (k[1] - 1) / 2;
    let padded = b.op("constant_pad_nd", &[input], &[(Shape::new([cin, t + k[0] - 1, h + 2 * ph, w + 2 * ph]), dt)], &[], false, &[], GradRule::Alloc)[0];
    let wt = b.param(Shape::new([cout, cin, k[0], k[1], k[2]]));
    let bias = b.param(Shape::new([cout]));
    let (ins, cdt) = b.autocast(CastPolicy::Lower, &[padded, wt, bias]);
    Ok(b.op("convolution", &ins, &[(Shape::new([cout, t, h, w]), cdt)], &ins[..2], false, &[], GradRule::Alloc)[0])
}

/// `WanRMS_norm`: `F.normalize(x.float(), dim=1).to(x.dtype) * scale * gamma + bias` (the
/// bias is the float 0.0: an `add` that still allocates).
fn rms_norm(b: &mut Builder, x: ValueId, c: u64) -> ValueId {
    let dt = b.dtype(x);
    let xf = b.cast(x, DType::F32);
    let nf = ops::scalar(b, "normalize", xf);
    let n = b.cast(nf, dt);
    let s = ops::scalar(b, "mul_scalar", n);
    let gamma = b.param(Shape::new([c, 1, 1, 1]));
    let g = ops::mul(b, s, gamma);
    ops::scalar(b, "add_scalar", g)
}

/// `WanResidualBlock`: `h = conv_shortcut(x)`, norm, silu, conv1, norm, silu, conv2, `x + h`.
fn resblock(b: &mut Builder, x: ValueId, cin: u64, cout: u64, caches: &mut Vec<ValueId>) -> LayerResult<ValueId> {
    let short = if cin != cout { conv3d(b, x, cin, cout, [1, 1, 1], None)? } else { x };
    let h = rms_norm(b, x, cin);
    let h = ops::silu(b, h);
    let h = conv3d(b, h, cin, cout, [3, 3, 3], Some(caches))?;
    let h = rms_norm(b, h, cout);
    let h = ops::silu(b, h);
    let h = conv3d(b, h, cout, cout, [3, 3, 3], Some(caches))?;
    Ok(ops::add(b, h, short))
}

/// `WanAttentionBlock` (per frame, one head over `H·W`): permute-reshape (a copy), norm,
/// `to_qkv` 1×1 conv, the `[HW, 3C]` permute made contiguous, SDPA, the permute back (a
/// copy), `proj`, `x + identity`.
fn attention(b: &mut Builder, x: ValueId, c: u64) -> LayerResult<ValueId> {
    let s = b.shape(x).0.clone();
    let (t, h, w) = (s[1], s[2], s[3]);
    let hw = h.saturating_mul(w);
    let frames = ops::copy(b, x, Shape::new([c, t, h, w]));
    let n = rms_norm(b, frames, c);
    let n = b.view(n, Shape::new([c, t.saturating_mul(h), w]));
    let qkv = ops::conv(b, n, c, 3 * c, 1, 1, 0)?;
    let qkv = ops::copy(b, qkv, Shape::new([t.saturating_mul(hw), 3 * c]));
    let part = Shape::new([1, t.saturating_mul(hw), c]);
    let (q, k, v) = (b.view(qkv, part.clone()), b.view(qkv, part.clone()), b.view(qkv, part));
    let a = ops::sdpa(b, q, k, v);
    let a = ops::copy(b, a, Shape::new([c, t.saturating_mul(h), w]));
    let p = ops::conv(b, a, c, c, 1, 1, 0)?;
    let p = b.view(p, Shape::new([c, t, h, w]));
    Ok(ops::add(b, p, x))
}

/// `WanResample(upsample3d | upsample2d)`: (3d: the cached `time_conv` doubling the channels,
/// the frames interleaved by `stack`), permute-reshape to frames (a copy), nearest ×2, a 2D
/// conv to `c / 2` channels.
fn upsample(b: &mut Builder, x: ValueId, c: u64, temporal: bool, caches: &mut Vec<ValueId>) -> LayerResult<ValueId> {
    let mut x = x;
    let dt = b.dtype(x);
    if temporal {
        let t2 = conv3d(b, x, c, 2 * c, [3, 1, 1], Some(caches))?;
        let s = b.shape(t2).0.clone();
        x = b.op("stack", &[t2], &[(Shape::new([c, s[1] * 2, s[2], s[3]]), dt)], &[], false, &[], GradRule::Alloc)[0];
    }
    let s = b.shape(x).0.clone();
    let (t, h, w) = (s[1], s[2], s[3]);
    let frames = ops::copy(b, x, Shape::new([c, t.saturating_mul(h), w]));
    let frames = b.view(frames, Shape::new([c, t.saturating_mul(h), w]));
    let up = b.op("upsample_nearest2d", &[frames], &[(Shape::new([c, t.saturating_mul(h) * 2, w * 2]), dt)], &[], false, &[], GradRule::Alloc)[0];
    let conv = ops::conv(b, up, c, c / 2, 3, 1, 1)?;
    Ok(b.view(conv, Shape::new([c / 2, t, h * 2, w * 2])))
}
