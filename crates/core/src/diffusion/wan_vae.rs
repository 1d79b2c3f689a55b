//! diffusers' `AutoencoderKLWan` (`models/autoencoders/autoencoder_kl_wan.py`), Wan 2.1's causal
//! 3D VAE: `WanCausalConv3d` (causal time padding, a two-frame feature cache per conv),
//! `WanRMS_norm`, `WanResidualBlock`, `WanAttentionBlock` (one head per frame), `WanResample`.
//!
//! `_decode` runs the decoder one latent frame at a time (`x[:, :, i:i+1]`), each causal conv
//! reading the cache its previous chunk left (`feat_cache`: the last two frames of its input)
//! and replacing it conv by conv, and concatenates the decoded chunks (`torch.cat([out, out_],
//! 2)`). The peak is the last chunk: every conv's cache, the video decoded so far and the
//! previous chunk's `out_` beside the chunk's own tensors, or the final `cat` and `clamp`. The
//! first chunk (no caches: causal zero padding, `upsample3d` marks `"Rep"` and does not run
//! `time_conv`) and the second (one-frame caches) are built as `_decode` runs them. Every size
//! is read from `autoencoder_kl_wan.py` (diffusers 0.42.1: `WanCausalConv3d.forward`,
//! `WanResample.forward`, `WanResidualBlock.forward`, `AutoencoderKLWan._decode`) and checked
//! against measured decodes (`tests/data/diffusion_forward.jsonl`, exact on all six).

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

    /// Builds `_decode`'s last chunk of a `frames`-latent-frame video: `z` and `post_quant_conv`
    /// over every latent frame, the decoder on the last one with every causal conv's cache of
    /// the chunk before (`feat_cache`, replaced conv by conv), the video decoded so far (`out`)
    /// and the previous chunk's `out_` beside it, then `torch.cat([out, out_], 2)` and
    /// `torch.clamp`, the caches still alive until `clear_cache()`.
    ///
    /// `tile`: the latent's full `(frames, height, width)` when this is one tile of
    /// `tiled_decode` (`z[:, :, k:k+1, i:i+th, j:j+tw]`, a view, through `post_quant_conv`
    /// chunk by chunk; the decoded chunks kept in the `time` list and `torch.cat(time, dim=2)`
    /// after the last, no `clamp`); `frames` is then the chunks run so far (1: the first).
    fn decode_video(&self, b: &mut Builder, frames: u64, h: u64, w: u64, tile: Option<(u64, u64, u64)>, caches: &mut Caches) -> LayerResult<ValueId> {
        b.param(Shape::new([self.encoder_params()]));
        let dt = b.float_dtype();
        let (zf, zh, zw) = tile.unwrap_or((frames, h, w));
        let last_chunk = frames == zf;
        let z = b.input(Shape::new([self.z_dim, zf, zh, zw]), dt);
        let up_t = 1u64 << self.temperal_downsample.iter().filter(|&&t| t).count().min(16);
        let (ho, wo) = (h.saturating_mul(8), w.saturating_mul(8));
        let frame = |n: u64| Shape::new([self.out_channels, n, ho, wo]);
        // what the chunks before left: the caches, `out` and the last `out_`
        caches.make_old(b, z);
        let (done, last) = match frames {
            0 | 1 => (0, 0),
            2 => (1, 0),
            f => (1 + up_t * (f - 2), up_t),
        };
        let prev_out = (done > 0).then(|| ops::copy(b, z, frame(done)));
        // a tile's chunks are a list: the last chunk's `decoded` is in it, no `out_` beside
        let prev_last = (last > 0 && tile.is_none()).then(|| ops::copy(b, z, frame(last)));
        // block-level group offload (`AutoencoderKLWan._group_offload_block_modules`: `encoder`,
        // `decoder`, `quant_conv`, `post_quant_conv`, each grouped by its own blocks):
        // `post_quant_conv` is a group of its own, onloaded for its forward; in the decoder each
        // of `up_blocks` is one, the rest (`conv_in`, `mid_block`, `norm_out`, `conv_out`) one
        // onloaded for the decoder's forward; a decode never onloads the encoder
        let n = self.dim_mult.len();
        b.set_layer(n as u32 + 1);
        let (zq, chunk) = match tile {
            Some(_) => {
                let v = b.view(z, Shape::new([self.z_dim, 1, h, w]));
                let zq = conv3d(b, v, self.z_dim, self.z_dim, [1, 1, 1], None)?;
                (zq, zq)
            }
            None => {
                let zq = conv3d(b, z, self.z_dim, self.z_dim, [1, 1, 1], None)?;
                (zq, b.view(zq, Shape::new([self.z_dim, 1, h, w])))
            }
        };
        b.set_layer(0);
        let dims = self.decoder_dims();
        let mut x = conv3d(b, chunk, self.z_dim, dims[0], [3, 3, 3], Some(caches))?;
        // each block's input is its caller's local (`x = up_block(x, ...)`) until it returns
        let mid_in = x;
        x = resblock(b, x, dims[0], dims[0], caches)?;
        x = attention(b, x, dims[0])?;
        x = resblock(b, x, dims[0], dims[0], caches)?;
        ops::keep(b, &[mid_in]);
        let tu: Vec<bool> = self.temperal_downsample.iter().rev().copied().collect();
        for i in 0..n {
            b.set_layer(1 + i as u32);
            let mut cin = if i > 0 { dims[i] / 2 } else { dims[i] };
            let cout = dims[i + 1];
            let input = x;
            for _ in 0..self.num_res_blocks + 1 {
                x = resblock(b, x, cin, cout, caches)?;
                cin = cout;
            }
            if i + 1 != n {
                x = upsample(b, x, cout, tu[i], caches)?;
            }
            ops::keep(b, &[input]);
        }
        b.set_layer(0);
        let c = dims[n];
        x = rms_norm(b, x, c);
        x = ops::silu(b, x);
        let out_ = conv3d(b, x, c, self.out_channels, [3, 3, 3], Some(caches))?;
        let t_new = b.shape(out_).0[1];
        for v in prev_last.into_iter().chain(std::iter::once(zq)) {
            b.hold(v);
        }
        let out = match prev_out {
            Some(p) => ops::cat(b, &[p, out_], frame(done + t_new)),
            None if tile.is_some() && last_chunk => ops::copy(b, out_, frame(t_new)),
            None => out_,
        };
        let clamped = if tile.is_some() { out } else { ops::scalar(b, "clamp", out) };
        ops::keep(b, &[out_, zq]);
        for &v in caches.new.iter() {
            b.hold(v);
        }
        Ok(clamped)
    }

    /// The decode graph of a `frames`-frame video (`h × w` pixels) at a batch of one: its last
    /// chunk.
    pub fn decode(&self, b: &mut Builder, frames: u64, height: u64, width: u64) -> LayerResult<ValueId> {
        self.decode_at(b, frames, height, width, 1)
    }

    /// That decode at `batch` (the graph is per sample; a batch of one takes views where a
    /// larger one copies: `frames_of`).
    pub fn decode_at(&self, b: &mut Builder, frames: u64, height: u64, width: u64, batch: u64) -> LayerResult<ValueId> {
        self.decode_chunks(b, wan_latent_frames(frames), (height / 8).max(1), (width / 8).max(1), None, batch > 1)
    }

    /// One `th × tw` latent tile of `tiled_decode` over a `full` `(height, width)` latent of
    /// `frames` video frames at `batch`: its last chunk and the `torch.cat` of its chunks.
    pub fn decode_tile(&self, b: &mut Builder, frames: u64, th: u64, tw: u64, full: (u64, u64), batch: u64) -> LayerResult<ValueId> {
        let f = wan_latent_frames(frames);
        self.decode_chunks(b, f, th, tw, Some((f, full.0, full.1)), batch > 1)
    }

    /// The first chunk of that tile (no caches yet; its output not concatenated).
    pub fn decode_tile_first(&self, b: &mut Builder, frames: u64, th: u64, tw: u64, full: (u64, u64), batch: u64) -> LayerResult<ValueId> {
        self.decode_chunks(b, 1, th, tw, Some((wan_latent_frames(frames), full.0, full.1)), batch > 1)
    }

    fn decode_chunks(&self, b: &mut Builder, f: u64, h: u64, w: u64, tile: Option<(u64, u64, u64)>, batched: bool) -> LayerResult<ValueId> {
        // a batch of one takes views where a larger one copies (`frames_of`)
        b.opts.batch_of_one = !batched;
        // a first build of the chunk before (a first chunk when it is the first) on a scratch
        // builder lists the caches it leaves (`_conv_num` of them)
        let mut before = Caches { first: f <= 2, ..Caches::default() };
        if f > 1 {
            self.decode_video(&mut Builder::new(b.opts), f, h, w, tile, &mut before)?;
        }
        let mut caches = Caches { first: f == 1, prev: before.made, ..Caches::default() };
        self.decode_video(b, f, h, w, tile, &mut caches)
    }

    /// The output frames of `frames` latent frames: the first, then `2^(temporal upsamples)` each.
    pub fn out_frames(&self, latent_frames: u64) -> u64 {
        let up_t = 1u64 << self.temperal_downsample.iter().filter(|&&t| t).count().min(16);
        1 + up_t * latent_frames.saturating_sub(1)
    }

    /// The encoder is not simulated (text-to-video never encodes; cache latents for training).
    pub fn encode(&self, _b: &mut Builder, _frames: u64, _height: u64, _width: u64) -> LayerResult<ValueId> {
        Err("encoding video with AutoencoderKLWan is not modelled yet; train on cached latents".into())
    }
}

/// Wan's VAE keeps the first frame and compresses the rest 4× in time: `(F − 1) / 4 + 1`.
pub fn wan_latent_frames(frames: u64) -> u64 {
    frames.saturating_sub(1) / 4 + 1
}

/// `self._feat_map`: one cache per causal conv that reads one, in call order. `prev` are the
/// shapes the chunk before left (from a build of that chunk; `None`: `"Rep"`, a first chunk's
/// `upsample3d`), `old` those storages, `new` the caches this chunk makes, `made` their shapes.
#[derive(Default)]
struct Caches {
    /// The first chunk: every cache still `None`, `upsample3d` only marks its slot `"Rep"`.
    first: bool,
    prev: Vec<Option<Shape>>,
    old: Vec<Option<ValueId>>,
    new: Vec<ValueId>,
    made: Vec<Option<Shape>>,
}

impl Caches {
    /// The previous chunk's caches, alive from the start of this one.
    fn make_old(&mut self, b: &mut Builder, like: ValueId) {
        if !self.first {
            self.old = self.prev.iter().map(|s| s.as_ref().map(|s| ops::copy(b, like, s.clone()))).collect();
        }
    }

    /// A first chunk's `upsample3d`: `feat_cache[idx] = "Rep"`.
    fn rep(&mut self) {
        self.made.push(None);
    }

    /// `cache_x = x[:, :, -CACHE_T:].clone()`, and with one frame after a first chunk,
    /// `torch.cat` of the old cache's last frame (or, after `"Rep"`, of `torch.zeros_like`)
    /// before it; returns the old cache the conv reads.
    fn take(&mut self, b: &mut Builder, x: ValueId) -> Option<ValueId> {
        let s = b.shape(x).0.clone();
        let (c, t, h, w) = (s[0], s[1], s[2], s[3]);
        let old = self.old.get(self.made.len()).copied().flatten();
        let mut cache = ops::copy(b, x, Shape::new([c, CACHE_T.min(t), h, w]));
        if t < CACHE_T && !self.first {
            let mut parts = vec![cache];
            if old.is_none() {
                parts.insert(0, ops::copy(b, x, Shape::new([c, CACHE_T - t, h, w])));
            }
            cache = ops::cat(b, &parts, Shape::new([c, CACHE_T, h, w]));
        }
        self.made.push(Some(b.shape(cache).clone()));
        self.new.push(cache);
        old
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

/// `WanCausalConv3d` on `[C, T, H, W]`: with a cache, `cache_x` is cloned first (`Caches::take`),
/// then `torch.cat([old_cache, x], 2)` replaces the causal time padding; without one (a first
/// chunk, `time_conv` on `"Rep"`) `F.pad` adds the `2·padding` zero frames. `F.pad` always
/// copies (`constant_pad_nd` clones even at zero padding), then the conv. The old cache is
/// freed when `feat_cache[idx] = cache_x` replaces it, after the conv.
fn conv3d(b: &mut Builder, x: ValueId, cin: u64, cout: u64, k: [u64; 3], caches: Option<&mut Caches>) -> LayerResult<ValueId> {
    let s = b.shape(x).0.clone();
    if s.len() != 4 || s[0] != cin {
        return Err(format!("expected [{cin}, T, H, W], got {}", b.shape(x)));
    }
    let (t, h, w) = (s[1], s[2], s[3]);
    let dt = b.dtype(x);
    let mut input = x;
    let mut tpad = k[0] - 1;
    let mut old = None;
    if k[0] > 1 {
        if let Some(caches) = caches {
            old = caches.take(b, x);
        }
    }
    if let Some(o) = old {
        let ot = b.shape(o).0[1];
        input = ops::cat(b, &[o, x], Shape::new([cin, t + ot, h, w]));
        tpad = tpad.saturating_sub(ot);
    }
    let it = b.shape(input).0[1];
    let ph = (k[1] - 1) / 2;
    let padded = b.op("constant_pad_nd", &[input], &[(Shape::new([cin, it + tpad, h + 2 * ph, w + 2 * ph]), dt)], &[], false, &[], GradRule::Alloc)[0];
    let wt = b.param(Shape::new([cout, cin, k[0], k[1], k[2]]));
    let bias = b.param(Shape::new([cout]));
    let (ins, cdt) = b.autocast(CastPolicy::Lower, &[padded, wt, bias]);
    let out = b.op("convolution", &ins, &[(Shape::new([cout, it + tpad + 1 - k[0], h, w]), cdt)], &ins[..2], false, &[], GradRule::Alloc)[0];
    // the caller's argument lives until the call returns, the old cache until it is replaced
    b.hold(x);
    if let Some(o) = old {
        b.hold(o);
    }
    Ok(out)
}

/// `WanRMS_norm`: `F.normalize(x.float(), dim=1).to(x.dtype) * scale * gamma + bias` (the
/// bias is the float 0.0: an `add` that still allocates), its argument alive throughout.
fn rms_norm(b: &mut Builder, x: ValueId, c: u64) -> ValueId {
    let dt = b.dtype(x);
    let xf = b.cast(x, DType::F32);
    let nf = ops::scalar(b, "normalize", xf);
    // `F.normalize`: `input / input.norm(dim=1, keepdim=True).clamp_min(eps)`, the denominator
    // (one channel) alive through the division
    let numel = b.shape(xf).numel() / c.max(1);
    let size = b.dtype(xf).size();
    b.last_fwd_scratch(crate::graph::Lin { fixed: 0, per_sample: numel.saturating_mul(size) });
    let n = b.cast(nf, dt);
    let s = ops::scalar(b, "mul_scalar", n);
    let gamma = b.param(Shape::new([c, 1, 1, 1]));
    let g = ops::mul(b, s, gamma);
    let out = ops::scalar(b, "add_scalar", g);
    // `x = self.norm(x)`: the caller's `x` lives until the norm returns
    b.hold(x);
    out
}

/// `WanResidualBlock`: `h = conv_shortcut(x)`, norm, silu, conv1, norm, silu, conv2, `x + h`.
fn resblock(b: &mut Builder, x: ValueId, cin: u64, cout: u64, caches: &mut Caches) -> LayerResult<ValueId> {
    let short = if cin != cout { conv3d(b, x, cin, cout, [1, 1, 1], None)? } else { x };
    let h = rms_norm(b, x, cin);
    let h = ops::silu(b, h);
    let h = conv3d(b, h, cin, cout, [3, 3, 3], Some(caches))?;
    let h = rms_norm(b, h, cout);
    let h = ops::silu(b, h);
    let h = conv3d(b, h, cout, cout, [3, 3, 3], Some(caches))?;
    Ok(ops::add(b, h, short))
}

/// `x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)`: a copy, or a view when it can be one —
/// one frame, or a batch of one (the permuted `[1, T, C, H, W]` merges into `[T, C, H, W]`
/// with strides `(H·W, T·H·W, W, 1)`: `reshape` returns a view; `Builder::fold_batch`). Measured:
/// a 96 px, 9-frame decode at batch 1, 2 and 3 (`tests/data/diffusion_forward.jsonl`,
/// `wanvae-decode-tiled`).
fn frames_of(b: &mut Builder, x: ValueId) -> ValueId {
    let s = b.shape(x).0.clone();
    let shape = Shape::new([s[0], s[1].saturating_mul(s[2]), s[3]]);
    if s[1] == 1 { b.view(x, shape) } else { b.fold_batch(x, shape) }
}

/// `WanAttentionBlock` (per frame, one head over `H·W`): frames (`frames_of`), norm, `to_qkv`
/// 1×1 conv, the `[HW, 3C]` permute made contiguous, SDPA, the permute back (a view: the 1×1
/// `proj` reads it strided), `proj`, `x + identity`.
fn attention(b: &mut Builder, x: ValueId, c: u64) -> LayerResult<ValueId> {
    let s = b.shape(x).0.clone();
    let (t, h, w) = (s[1], s[2], s[3]);
    let hw = h.saturating_mul(w);
    let frames = frames_of(b, x);
    let n = rms_norm(b, frames, c);
    let qkv = ops::conv(b, n, c, 3 * c, 1, 1, 0)?;
    let qkv = ops::copy(b, qkv, Shape::new([t.saturating_mul(hw), 3 * c]));
    let part = Shape::new([1, t.saturating_mul(hw), c]);
    let (q, k, v) = (b.view(qkv, part.clone()), b.view(qkv, part.clone()), b.view(qkv, part));
    let a = ops::sdpa(b, q, k, v);
    let a = b.view(a, Shape::new([c, t.saturating_mul(h), w]));
    let p = ops::conv(b, a, c, c, 1, 1, 0)?;
    let p = b.view(p, Shape::new([c, t, h, w]));
    Ok(ops::add(b, p, x))
}

/// `WanResample(upsample3d | upsample2d)`: (3d, after a first chunk: the cached `time_conv`
/// doubling the channels, the frames interleaved by `torch.stack`), frames (`frames_of`),
/// `WanUpsample` (nearest ×2 in fp32: `x.float()`, then `type_as(x)`), a 2D conv to `c / 2`
/// channels. The input is the up block's local until it returns.
fn upsample(b: &mut Builder, x: ValueId, c: u64, temporal: bool, caches: &mut Caches) -> LayerResult<ValueId> {
    let input = x;
    let mut x = x;
    let dt = b.dtype(x);
    if temporal && caches.first {
        // `time_conv` is built (its weights are resident) but not run
        b.param(Shape::new([2 * c, c, 3, 1, 1]));
        b.param(Shape::new([2 * c]));
        caches.rep();
    } else if temporal {
        let t2 = conv3d(b, x, c, 2 * c, [3, 1, 1], Some(caches))?;
        let s = b.shape(t2).0.clone();
        x = b.op("stack", &[t2], &[(Shape::new([c, s[1] * 2, s[2], s[3]]), dt)], &[], false, &[], GradRule::Alloc)[0];
    }
    let s = b.shape(x).0.clone();
    let (t, h, w) = (s[1], s[2], s[3]);
    let frames = frames_of(b, x);
    let f32 = b.cast(frames, DType::F32);
    let up = ops::upsample2x(b, f32);
    let up = b.cast(up, dt);
    let conv = ops::conv(b, up, c, c / 2, 3, 1, 1)?;
    // `x = self.resample(x)`: the frames are `resample`'s (`nn.Sequential`) argument until it
    // returns, through the upsample and the conv
    ops::keep(b, &[input, frames]);
    Ok(b.view(conv, Shape::new([c / 2, t, h * 2, w * 2])))
}
