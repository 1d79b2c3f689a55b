//! diffusers' `AutoencoderKL` (`models/autoencoders/autoencoder_kl.py`, `vae.py` `Encoder` and
//! `Decoder`, `unet_2d_blocks.py` `DownEncoderBlock2D` / `UpDecoderBlock2D` / `UNetMidBlock2D`,
//! `resnet.py` `ResnetBlock2D` / `Downsample2D` / `Upsample2D`), lowered op by op as the
//! modules' `forward`s run them. The SD 1.x/2.x/SDXL VAE has 4 latent channels and quant convs;
//! SD3's and Flux's 16 and none (`use_quant_conv: false`).

use super::cfg::Cfg;
use super::ops;
use crate::error::Result;
use crate::graph::ValueId;
use crate::layer::LayerResult;
use crate::lower::Builder;
use crate::units::{DType, Shape};

/// `AutoencoderKL`'s config fields that shape it (the rest: scaling and shift factors,
/// `force_upcast`, are read by the pipeline).
#[derive(Debug, Clone, PartialEq)]
pub struct VaeConfig {
    pub in_channels: u64,
    pub out_channels: u64,
    pub block_out_channels: Vec<u64>,
    pub layers_per_block: u64,
    pub latent_channels: u64,
    pub norm_num_groups: u64,
    pub use_quant_conv: bool,
    pub use_post_quant_conv: bool,
    pub mid_block_add_attention: bool,
    /// `sample_size`: the tile edge `enable_tiling()` decodes at (`tile_sample_min_size`).
    pub sample_size: u64,
    /// `force_upcast`: SDXL's pipeline decodes an fp16 VAE in fp32 (`upcast_vae`).
    pub force_upcast: bool,
}

impl VaeConfig {
    pub fn from_cfg(c: &Cfg) -> Result<VaeConfig> {
        let boc = c.sizes("block_out_channels", 0, &[64])?;
        let n = boc.len();
        for (key, want) in [("down_block_types", "DownEncoderBlock2D"), ("up_block_types", "UpDecoderBlock2D")] {
            let types = c.strs(key, &[])?;
            if types.iter().any(|t| t != want) || (!types.is_empty() && types.len() != n) {
                return Err(crate::Error::Import(format!("{}: `{key}` must be {n} × {want}, got {types:?}", c.class)));
            }
        }
        if let Some(act) = c.str("act_fn")? {
            if act != "silu" {
                return Err(crate::Error::Import(format!("{}: `act_fn` {act} is not supported (silu)", c.class)));
            }
        }
        let sample_size = match c.get("sample_size") {
            Some(serde_json::Value::Array(a)) => a.first().and_then(|v| v.as_u64()).unwrap_or(512),
            _ => c.size("sample_size", 32)?,
        };
        Ok(VaeConfig {
            in_channels: c.size("in_channels", 3)?,
            out_channels: c.size("out_channels", 3)?,
            block_out_channels: boc,
            layers_per_block: c.size("layers_per_block", 1)?,
            latent_channels: c.size("latent_channels", 4)?,
            norm_num_groups: c.size("norm_num_groups", 32)?,
            use_quant_conv: c.flag("use_quant_conv", true)?,
            use_post_quant_conv: c.flag("use_post_quant_conv", true)?,
            mid_block_add_attention: c.flag("mid_block_add_attention", true)?,
            sample_size,
            force_upcast: c.flag("force_upcast", true)?,
        })
    }

    /// The spatial downsampling factor, `2^(blocks − 1)` (8 for every SD VAE).
    pub fn scale(&self) -> u64 {
        1u64 << (self.block_out_channels.len().saturating_sub(1)).min(16)
    }

    /// `Encoder` + `quant_conv` + `latent_dist.sample()` of a `[C, H, W]` image.
    pub fn encode(&self, b: &mut Builder, height: u64, width: u64) -> LayerResult<ValueId> {
        // the decoder's weights are resident too (one tensor: no op reads them here)
        b.param(Shape::new([self.half_params(false)?]));
        self.encode_only(b, height, width)
    }

    fn encode_only(&self, b: &mut Builder, height: u64, width: u64) -> LayerResult<ValueId> {
        let dt = b.float_dtype();
        let x = b.input(Shape::new([self.in_channels, height, width]), dt);
        let boc = &self.block_out_channels;
        let (g, eps) = (self.norm_num_groups, 1e-6);
        let mut h = ops::conv(b, x, self.in_channels, boc[0], 3, 1, 1)?;
        let mut cin = boc[0];
        for (i, &cout) in boc.iter().enumerate() {
            for j in 0..self.layers_per_block {
                h = resnet(b, h, if j == 0 { cin } else { cout }, cout, g, eps, None)?;
            }
            if i + 1 < boc.len() {
                // `Downsample2D(use_conv=True, padding=0)`: `F.pad(x, (0, 1, 0, 1))`, conv k3 s2
                let p = ops::pad_right_bottom(b, h);
                h = ops::conv(b, p, cout, cout, 3, 2, 0)?;
            }
            cin = cout;
        }
        h = self.mid(b, h)?;
        let c = *boc.last().unwrap_or(&1);
        h = ops::group_norm(b, h, g, c, eps)?;
        h = ops::silu(b, h);
        let two_l = self.latent_channels.saturating_mul(2);
        h = ops::conv(b, h, c, two_l, 3, 1, 1)?;
        if self.use_quant_conv {
            h = ops::conv(b, h, two_l, two_l, 1, 1, 0)?;
        }
        // `DiagonalGaussianDistribution`: mean, logvar = chunk (views); logvar.clamp, std =
        // exp(0.5·logvar), var = exp(logvar); `sample()`: mean + std · randn
        let s = b.shape(h).0.clone();
        let half = Shape::new([self.latent_channels, s[1], s[2]]);
        let mean = b.view(h, half.clone());
        let logvar = ops::scalar(b, "clamp", mean);
        let half_lv = ops::scalar(b, "mul_scalar", logvar);
        let std = ops::scalar(b, "exp", half_lv);
        let var = ops::scalar(b, "exp", logvar);
        let noise = ops::scalar(b, "randn", std);
        let scaled = ops::mul(b, std, noise);
        let z = ops::add(b, mean, scaled);
        b.hold(var);
        Ok(z)
    }

    /// `post_quant_conv` + `Decoder` of a `[L, h, w]` latent into `[C, 8h, 8w]`.
    pub fn decode(&self, b: &mut Builder, h: u64, w: u64) -> LayerResult<ValueId> {
        // the encoder's weights are resident too (one tensor: no op reads them here)
        b.param(Shape::new([self.half_params(true)?]));
        let dt = b.float_dtype();
        let z = b.input(Shape::new([self.latent_channels, h, w]), dt);
        self.decode_from(b, z)
    }

    pub fn decode_from(&self, b: &mut Builder, z: ValueId) -> LayerResult<ValueId> {
        let l = self.latent_channels;
        let z = if self.use_post_quant_conv { ops::conv(b, z, l, l, 1, 1, 0)? } else { z };
        let boc: Vec<u64> = self.block_out_channels.iter().rev().copied().collect();
        let (g, eps) = (self.norm_num_groups, 1e-6);
        let mut h = ops::conv(b, z, l, boc[0], 3, 1, 1)?;
        h = self.mid(b, h)?;
        let mut cin = boc[0];
        for (i, &cout) in boc.iter().enumerate() {
            // block-level group offloading onloads one `decoder.up_blocks[i]` at a time
            // (`AutoencoderKL._group_offload_block_modules` names `encoder`, `decoder`,
            // `quant_conv`, `post_quant_conv`: each is grouped by its own blocks, so a decode
            // never onloads the encoder); the rest of the decoder is one group
            b.set_layer(1 + i as u32);
            // `sample = up_block(sample)`: the block's input lives until the block returns
            let input = h;
            for j in 0..self.layers_per_block + 1 {
                h = resnet(b, h, if j == 0 { cin } else { cout }, cout, g, eps, None)?;
            }
            if i + 1 < boc.len() {
                // `Upsample2D(use_conv=True)`: nearest ×2, then conv k3 p1
                let before = h;
                let u = ops::upsample2x(b, h);
                h = ops::conv(b, u, cout, cout, 3, 1, 1)?;
                ops::keep(b, &[before]);
            }
            ops::keep(b, &[input]);
            cin = cout;
        }
        b.set_layer(0);
        let c = *boc.last().unwrap_or(&1);
        h = ops::group_norm(b, h, g, c, eps)?;
        h = ops::silu(b, h);
        let out = ops::conv(b, h, c, self.out_channels, 3, 1, 1)?;
        // `_decode`'s `z` (after `post_quant_conv`) until the decoder returns
        ops::keep(b, &[z]);
        Ok(out)
    }

    /// Parameters of the encoder with `quant_conv` (`encoder`) or of `post_quant_conv` with the
    /// decoder, counted by lowering that half on a small input.
    fn half_params(&self, encoder: bool) -> LayerResult<u64> {
        let mut b = Builder::new(crate::lower::LowerOptions { training: false, ..Default::default() });
        let px = self.scale().saturating_mul(2);
        if encoder {
            let dt = b.float_dtype();
            let _ = dt;
            self.encode_only(&mut b, px, px)?;
        } else {
            let z = b.input(Shape::new([self.latent_channels, 2, 2]), DType::F32);
            self.decode_from(&mut b, z)?;
        }
        Ok(b.param_numel)
    }

    /// `UNetMidBlock2D(temb_channels=None)`: resnet, attention (one head of all channels), resnet.
    fn mid(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let c = *self.block_out_channels.last().unwrap_or(&1);
        let (g, eps) = (self.norm_num_groups, 1e-6);
        let mut h = resnet(b, x, c, c, g, eps, None)?;
        if self.mid_block_add_attention {
            h = spatial_attention(b, h, c, g, eps)?;
        }
        let out = resnet(b, h, c, c, g, eps, None)?;
        ops::keep(b, &[x]);
        Ok(out)
    }
}

/// `ResnetBlock2D(in, out, temb_channels)` with `time_embedding_norm="default"`:
/// `norm1, silu, conv1, (+ time_emb_proj(silu(temb))), norm2, silu, dropout, conv2`, then
/// `(conv_shortcut(x) + h) / output_scale_factor`. `temb` is the `[T]` time embedding.
pub fn resnet(b: &mut Builder, x: ValueId, cin: u64, cout: u64, groups: u64, eps: f64, temb: Option<(ValueId, u64)>) -> LayerResult<ValueId> {
    let h = ops::group_norm(b, x, groups, cin, eps)?;
    let h = ops::silu(b, h);
    let mut h = ops::conv(b, h, cin, cout, 3, 1, 1)?;
    if let Some((t, tdim)) = temb {
        let t = ops::silu(b, t);
        let t = ops::linear(b, t, tdim, cout, true)?;
        let t = b.view(t, Shape::new([cout, 1, 1]));
        h = ops::add(b, h, t);
    }
    let h = ops::group_norm(b, h, groups, cout, eps)?;
    let h = ops::silu(b, h);
    // dropout: the identity in eval
    let h = ops::conv(b, h, cout, cout, 3, 1, 1)?;
    let short = if cin != cout { ops::conv(b, x, cin, cout, 1, 1, 0)? } else { x };
    let out = ops::add(b, short, h);
    let out = ops::scalar(b, "div_scalar", out);
    // `input_tensor` (the caller's argument, then the shortcut's output) and `hidden_states`
    // (conv2's output) are locals until `forward` returns
    ops::keep(b, &[x, short, h]);
    Ok(out)
}

/// The VAE mid block's `Attention(_from_deprecated_attn_block=True)` over `[C, H, W]` with
/// `AttnProcessor2_0`: group norm, Q/K/V projections of the `[HW, C]` view (a transposed
/// input: `F.linear` copies it into a contiguous temporary each time), one head, `to_out`,
/// the transpose back (a copy), the residual and `/ rescale_output_factor`.
fn spatial_attention(b: &mut Builder, x: ValueId, c: u64, groups: u64, eps: f64) -> LayerResult<ValueId> {
    let s = b.shape(x).0.clone();
    let hw = s[1].saturating_mul(s[2]);
    let flat = b.view(x, Shape::new([c, hw]));
    let n = ops::group_norm(b, flat, groups, c, eps)?;
    let proj = |b: &mut Builder| -> LayerResult<ValueId> {
        let t = ops::copy(b, n, Shape::new([hw, c]));
        ops::linear(b, t, c, c, true)
    };
    let (q, k, v) = (proj(b)?, proj(b)?, proj(b)?);
    let (q, k, v) = (ops::heads(b, q, 1), ops::heads(b, k, 1), ops::heads(b, v, 1));
    let a = ops::sdpa(b, q, k, v);
    let o = ops::linear(b, a, c, c, true)?;
    let o = ops::copy(b, o, Shape::new([c, s[1], s[2]]));
    let r = ops::add(b, o, x);
    let out = ops::scalar(b, "div_scalar", r);
    // `residual`, `encoder_hidden_states` (the normed input), `query`, `key`, `value`: locals
    ops::keep(b, &[x, n, q, k, v]);
    Ok(out)
}

/// What `enable_tiling()` does to one decode (`tiled_decode`): latent tiles of edge
/// `tile_latent_min_size = tile_sample_min_size / 8` starting every `int(0.75 · edge)` (the
/// last ones cut by the latent's border), decoded one by one and all kept in `rows` until they
/// are blended and concatenated.
#[derive(Debug, Clone, PartialEq)]
pub struct Tiling {
    /// Latent tile heights (one per tile row) and widths (one per tile column).
    pub rows: Vec<u64>,
    pub cols: Vec<u64>,
}

impl Tiling {
    /// Tiling of an `h × w` latent with `tile_sample` pixel tiles (`None`: the latent fits in one
    /// tile, so `_decode` does not tile; `autoencoder_kl.py` `_decode`).
    pub fn of(h: u64, w: u64, tile_sample: u64, scale: u64) -> Option<Tiling> {
        let tile = (tile_sample / scale.max(1)).max(1);
        if h <= tile && w <= tile {
            return None;
        }
        let step = (((tile as f64) * 0.75) as u64).max(1);
        let sizes = |n: u64| (0..n).step_by(step as usize).map(|s| tile.min(n - s)).collect::<Vec<_>>();
        Some(Tiling { rows: sizes(h), cols: sizes(w) })
    }

    /// The tiles in `tiled_decode`'s order (row by row).
    pub fn tiles(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.rows.iter().flat_map(move |&r| self.cols.iter().map(move |&c| (r, c)))
    }
}

/// Bytes of one decoded `[C, H, W]` sample in `dtype`.
pub fn image_bytes(c: u64, h: u64, w: u64, dtype: DType) -> u64 {
    c.saturating_mul(h).saturating_mul(w).saturating_mul(dtype.size())
}
