//! diffusers' `UNet2DConditionModel` (`models/unets/unet_2d_condition.py`) with its blocks
//! (`unet_2d_blocks.py`: `CrossAttnDownBlock2D`, `DownBlock2D`, `UNetMidBlock2DCrossAttn`,
//! `CrossAttnUpBlock2D`, `UpBlock2D`), `Transformer2DModel` (`transformers/transformer_2d.py`)
//! and `BasicTransformerBlock` (`attention.py`) with `AttnProcessor2_0`: SD 1.x/2.x and SDXL.
//! The skip connections are the down path's outputs, alive until the up path concatenates them.

use super::cfg::Cfg;
use super::ops;
use super::vae;
use crate::error::{Error, Result};
use crate::finetune::LinearRole;
use crate::graph::ValueId;
use crate::layer::LayerResult;
use crate::lower::Builder;
use crate::units::Shape;

#[derive(Debug, Clone, PartialEq)]
pub struct UnetConfig {
    pub in_channels: u64,
    pub out_channels: u64,
    pub block_out_channels: Vec<u64>,
    /// Per down block: whether it has cross-attention (`CrossAttnDownBlock2D`).
    pub down_attn: Vec<bool>,
    /// Per up block (in the up path's order).
    pub up_attn: Vec<bool>,
    pub layers_per_block: Vec<u64>,
    pub transformer_layers: Vec<u64>,
    pub heads: Vec<u64>,
    pub cross_attention_dim: u64,
    pub norm_num_groups: u64,
    pub use_linear_projection: bool,
    /// SDXL's `addition_embed_type="text_time"`: `(addition_time_embed_dim, projection_class_embeddings_input_dim)`.
    pub text_time: Option<(u64, u64)>,
    pub mid_attention: bool,
}

impl UnetConfig {
    pub fn from_cfg(c: &Cfg) -> Result<UnetConfig> {
        let boc = c.sizes("block_out_channels", 0, &[320, 640, 1280, 1280])?;
        let n = boc.len();
        let down = c.strs("down_block_types", &["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"])?;
        let up = c.strs("up_block_types", &["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"])?;
        let kinds = |types: &[String], attn: &str, plain: &str| -> Result<Vec<bool>> {
            if types.len() != n {
                return Err(Error::Import(format!("{}: {} block types for {n} `block_out_channels`", c.class, types.len())));
            }
            types
                .iter()
                .map(|t| match t.as_str() {
                    t if t == attn => Ok(true),
                    t if t == plain => Ok(false),
                    other => Err(Error::Import(format!("{}: block type `{other}` is not supported ({attn}, {plain})", c.class))),
                })
                .collect()
        };
        let down_attn = kinds(&down, "CrossAttnDownBlock2D", "DownBlock2D")?;
        let up_attn = kinds(&up, "CrossAttnUpBlock2D", "UpBlock2D")?;
        for key in ["class_embed_type", "encoder_hid_dim", "time_cond_proj_dim", "reverse_transformer_layers_per_block", "dual_cross_attention", "only_cross_attention", "num_class_embeds", "attention_type_gated"] {
            c.refuse(key, "not in SD 1.x/2.x/SDXL")?;
        }
        if let Some(t) = c.str("mid_block_type")? {
            if t != "UNetMidBlock2DCrossAttn" {
                return Err(Error::Import(format!("{}: `mid_block_type` {t} is not supported", c.class)));
            }
        }
        if c.str("resnet_time_scale_shift")?.is_some_and(|s| s != "default") {
            return Err(Error::Import(format!("{}: only `resnet_time_scale_shift` \"default\" is supported", c.class)));
        }
        // `num_attention_heads = num_attention_heads or attention_head_dim` (a naming quirk of
        // the original configs: SD's `attention_head_dim: 8` is 8 heads)
        let heads = match c.get("num_attention_heads") {
            Some(_) => c.sizes("num_attention_heads", n, &[8])?,
            None => c.sizes("attention_head_dim", n, &[8])?,
        };
        let cross = c.sizes("cross_attention_dim", n, &[1280])?;
        if cross.iter().any(|&d| d != cross[0]) {
            return Err(Error::Import(format!("{}: per-block `cross_attention_dim` values that differ are not supported", c.class)));
        }
        let text_time = match c.str("addition_embed_type")? {
            None => None,
            Some("text_time") => Some((c.size("addition_time_embed_dim", 256)?, c.size("projection_class_embeddings_input_dim", 2816)?)),
            Some(other) => return Err(Error::Import(format!("{}: `addition_embed_type` {other} is not supported (text_time)", c.class))),
        };
        Ok(UnetConfig {
            in_channels: c.size("in_channels", 4)?,
            out_channels: c.size("out_channels", 4)?,
            layers_per_block: c.sizes("layers_per_block", n, &[2])?,
            transformer_layers: c.sizes("transformer_layers_per_block", n, &[1])?,
            heads,
            cross_attention_dim: cross[0],
            norm_num_groups: c.size("norm_num_groups", 32)?,
            use_linear_projection: c.flag("use_linear_projection", false)?,
            mid_attention: true,
            text_time,
            block_out_channels: boc,
            down_attn,
            up_attn,
        })
    }

    /// One denoiser forward on a `[C, h, w]` latent with `text_len` tokens of text embeddings.
    pub fn forward(&self, b: &mut Builder, h: u64, w: u64, text_len: u64) -> LayerResult<ValueId> {
        self.forward_cond(b, h, w, text_len, None)
    }

    /// [`UnetConfig::forward`] on conditioning computed in the same graph (kohya's text-encoder
    /// LoRA, `diffusion/kohya_te.rs`): `cond` is the `[L, cross_attention_dim]` text embeddings
    /// and, for `text_time`, the pooled text embeds that `add_embedding` reads beside the time ids.
    pub fn forward_cond(&self, b: &mut Builder, h: u64, w: u64, text_len: u64, cond: Option<(ValueId, Option<ValueId>)>) -> LayerResult<ValueId> {
        let boc = &self.block_out_channels;
        let n = boc.len();
        let dt = b.float_dtype();
        let x = b.input(Shape::new([self.in_channels, h, w]), dt);
        let text = match cond {
            Some((text, _)) => text,
            None => b.input(Shape::new([text_len, self.cross_attention_dim]), dt),
        };
        let tdim = boc[0].saturating_mul(4);
        // `time_proj` (sinusoids, no parameters) then `time_embedding`
        let t = ops::vector_input(b, boc[0]);
        let mut temb = ops::timestep_embedding(b, t, boc[0], tdim)?;
        if let Some((time_dim, proj_in)) = self.text_time {
            // `add_time_proj(time_ids.flatten())` concatenated with the pooled `text_embeds`
            let _ = time_dim;
            let added = match cond.and_then(|c| c.1) {
                // `torch.concat([text_embeds, time_embeds], dim=-1)`
                Some(pool) => {
                    let p = b.shape(pool).last();
                    let time = ops::vector_input(b, proj_in.saturating_sub(p));
                    ops::cat(b, &[pool, time], Shape::new([proj_in]))
                }
                None => ops::vector_input(b, proj_in),
            };
            let aug = ops::timestep_embedding(b, added, proj_in, tdim)?;
            temb = ops::add(b, temb, aug);
        }
        let g = self.norm_num_groups;
        let eps = 1e-5;
        let ctx = Ctx { text, temb, tdim, groups: g, cross: self.cross_attention_dim, linear: self.use_linear_projection };
        let mut hs = ops::conv(b, x, self.in_channels, boc[0], 3, 1, 1)?;
        let mut skips = vec![hs];
        let mut cin = boc[0];
        // block-level group offloading onloads one `down_blocks[i]` / `up_blocks[i]` at a time
        // (`set_layer`: the op's group); the rest is one group
        #[allow(clippy::needless_range_loop)]
        for i in 0..n {
            b.set_layer(1 + i as u32);
            // `sample, res_samples = downsample_block(hidden_states=sample, ...)`: the input is
            // the caller's until the block returns
            let input = hs;
            let cout = boc[i];
            for j in 0..self.layers_per_block[i] {
                hs = b.in_unit(|b| resnet(b, hs, if j == 0 { cin } else { cout }, cout, g, eps, Some((ctx.temb, tdim))))?;
                if self.down_attn[i] {
                    hs = ctx.attention_block(b, hs, cout, self.heads[i], self.transformer_layers[i])?;
                }
                skips.push(hs);
            }
            if i + 1 < n {
                hs = conv_scope(b, |b| ops::conv(b, hs, cout, cout, 3, 2, 1))?;
                skips.push(hs);
            }
            ops::keep(b, &[input]);
            cin = cout;
        }
        b.set_layer(0);
        let c = boc[n - 1];
        let input = hs;
        // `UNetMidBlock2DCrossAttn.forward`: `resnets[0]` runs outside checkpointing (inside, in
        // kohya's `original_unet.py`)
        hs = if sd1_port(b) { b.in_unit(|b| resnet(b, hs, c, c, g, eps, Some((ctx.temb, tdim))))? } else { resnet(b, hs, c, c, g, eps, Some((ctx.temb, tdim)))? };
        if self.mid_attention {
            hs = ctx.attention_block(b, hs, c, self.heads[n - 1], self.transformer_layers[n - 1])?;
        }
        hs = b.in_unit(|b| resnet(b, hs, c, c, g, eps, Some((ctx.temb, tdim))))?;
        ops::keep(b, &[input]);
        let rev: Vec<u64> = boc.iter().rev().copied().collect();
        let mut prev = rev[0];
        for i in 0..n {
            b.set_layer(1 + (n + i) as u32);
            let input = hs;
            let cout = rev[i];
            let skip_in = rev[(i + 1).min(n - 1)];
            let layers = self.layers_per_block[n - 1 - i] + 1;
            // `res_samples`, the block's skips, are the caller's until the block returns
            let mut used = Vec::new();
            for j in 0..layers {
                let skip = skips.pop().ok_or("the up path has more resnets than the down path has outputs")?;
                used.push(skip);
                let skip_c = b.shape(skip).0[0];
                let res_in = if j == 0 { prev } else { cout };
                let want = if j == layers - 1 { skip_in } else { cout };
                if skip_c != want {
                    return Err(format!("skip connection of {skip_c} channels where {want} were expected"));
                }
                let s = b.shape(hs).0.clone();
                let joined = ops::cat(b, &[hs, skip], Shape::new([res_in + skip_c, s[1], s[2]]));
                hs = b.in_unit(|b| resnet(b, joined, res_in + skip_c, cout, g, eps, Some((ctx.temb, tdim))))?;
                if self.up_attn[i] {
                    hs = ctx.attention_block(b, hs, cout, self.heads[n - 1 - i], self.transformer_layers[n - 1 - i])?;
                }
            }
            if i + 1 < n {
                let before = hs;
                let u = ops::upsample2x(b, hs);
                hs = conv_scope(b, |b| ops::conv(b, u, cout, cout, 3, 1, 1))?;
                ops::keep(b, &[before]);
            }
            ops::keep(b, &used);
            ops::keep(b, &[input]);
            prev = cout;
        }
        b.set_layer(0);
        hs = ops::group_norm(b, hs, g, boc[0], eps)?;
        hs = ops::silu(b, hs);
        ops::conv(b, hs, boc[0], self.out_channels, 3, 1, 1)
    }
}

/// What every block of one forward reads: the text embeddings and the time embedding.
struct Ctx {
    text: ValueId,
    temb: ValueId,
    #[allow(dead_code)]
    tdim: u64,
    groups: u64,
    cross: u64,
    linear: bool,
}

/// `ResnetBlock2D` (`vae::resnet`), inside kohya's conv scope.
fn resnet(b: &mut Builder, x: ValueId, cin: u64, cout: u64, groups: u64, eps: f64, temb: Option<(ValueId, u64)>) -> LayerResult<ValueId> {
    conv_scope(b, |b| vae::resnet(b, x, cin, cout, groups, eps, temb))
}

/// A `ResnetBlock2D`, `Downsample2D` or `Upsample2D`: kohya's network wraps its Linear and convs
/// with `conv_dim` (`UNET_TARGET_REPLACE_MODULE_CONV2D_3X3`).
fn conv_scope<T>(b: &mut Builder, f: impl FnOnce(&mut Builder) -> T) -> T {
    let on = b.kohya.is_some_and(|k| k.conv_dim > 0);
    set_kohya_scope(b, on);
    let out = f(b);
    set_kohya_scope(b, false);
    out
}

/// Lowering for kohya's SD 1.x/2.x UNet port and its checkpointing units.
fn sd1_port(b: &Builder) -> bool {
    b.kohya.is_some_and(|k| k.sd1_checkpointing)
}

impl Ctx {
    /// A `Transformer2DModel` as its block calls it: one checkpointing unit of its own in
    /// kohya's `original_unet.py` (`torch.utils.checkpoint.checkpoint(create_custom_forward(attn,
    /// return_dict=False), ..., use_reentrant=False)`), else units per `BasicTransformerBlock`.
    fn attention_block(&self, b: &mut Builder, x: ValueId, c: u64, heads: u64, layers: u64) -> LayerResult<ValueId> {
        if sd1_port(b) {
            b.in_unit(|b| self.transformer(b, x, c, heads, layers))
        } else {
            self.transformer(b, x, c, heads, layers)
        }
    }

    /// `Transformer2DModel` on `[C, H, W]`: group norm, `proj_in` (1×1 conv, or linear after
    /// the permute), `layers` × `BasicTransformerBlock`, `proj_out`, the permute back and the
    /// residual.
    fn transformer(&self, b: &mut Builder, x: ValueId, c: u64, heads: u64, layers: u64) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        let hw = s[1].saturating_mul(s[2]);
        let n = ops::group_norm(b, x, self.groups, c, 1e-6)?;
        // kohya's `LoRANetwork` wraps every Linear and 1×1 Conv2d of a `Transformer2DModel`
        set_kohya_scope(b, true);
        let mut h = if self.linear {
            let t = ops::copy(b, n, Shape::new([hw, c]));
            ops::linear(b, t, c, c, true)?
        } else {
            let p = ops::conv(b, n, c, c, 1, 1, 0)?;
            ops::copy(b, p, Shape::new([hw, c]))
        };
        // with gradient checkpointing, `Transformer2DModel.forward` checkpoints each block
        // (`_gradient_checkpointing_func(block, ...)`); the norm and projections are not
        for _ in 0..layers {
            let input = h;
            h = b.in_unit(|b| self.block(b, h, c, heads))?;
            ops::keep(b, &[input]);
        }
        let out = if self.linear {
            let p = ops::linear(b, h, c, c, true)?;
            ops::copy(b, p, Shape::new([c, s[1], s[2]]))
        } else {
            let t = ops::copy(b, h, Shape::new([c, s[1], s[2]]));
            ops::conv(b, t, c, c, 1, 1, 0)?
        };
        set_kohya_scope(b, false);
        let out = ops::add(b, out, x);
        // `residual` and the last block's output are locals until `forward` returns
        ops::keep(b, &[x, h]);
        Ok(out)
    }

    /// `BasicTransformerBlock(norm_type="layer_norm")`: self-attention, cross-attention to the
    /// text, GEGLU feed-forward (`ff_inner = 4·dim`), each pre-norm with a residual.
    fn block(&self, b: &mut Builder, x: ValueId, d: u64, heads: u64) -> LayerResult<ValueId> {
        // the locals `norm_hidden_states` and `attn_output` live until reassigned, the last
        // ones (and `ff_output`) until `forward` returns
        let input = x;
        let n1 = ops::layer_norm(b, x, d, true)?;
        let a1 = attention(b, n1, None, d, d, heads)?;
        let x = ops::add(b, a1, x);
        let n2 = ops::layer_norm(b, x, d, true)?;
        ops::keep(b, &[n1]);
        let a2 = attention(b, n2, Some(self.text), d, self.cross, heads)?;
        ops::keep(b, &[a1]);
        let x = ops::add(b, a2, x);
        let n = ops::layer_norm(b, x, d, true)?;
        ops::keep(b, &[n2]);
        let inner = d.saturating_mul(4);
        let p = ops::linear(b, n, d, inner.saturating_mul(2), true)?;
        let s = b.shape(p).0.clone();
        let half = Shape::new([s[0], inner]);
        let (hid, gate) = (b.view(p, half.clone()), b.view(p, half));
        let g = ops::gelu(b, gate);
        let m = ops::mul(b, hid, g);
        let f = ops::linear(b, m, inner, d, true)?;
        let out = ops::add(b, f, x);
        ops::keep(b, &[input, n, a2, f]);
        Ok(out)
    }
}

/// Marks the lowering inside (or out of) a `Transformer2DModel` for kohya's LoRA.
fn set_kohya_scope(b: &mut Builder, on: bool) {
    if let Some(k) = b.kohya.as_mut() {
        k.in_scope = on;
    }
}

/// `Attention(bias=False, out_bias=True)` with `AttnProcessor2_0` on `[S, D]`: Q from `x`, K
/// and V from `context` (self-attention when `None`), SDPA, `to_out[0]`, `/ rescale_output_factor`.
fn attention(b: &mut Builder, x: ValueId, context: Option<ValueId>, d: u64, kv_dim: u64, heads: u64) -> LayerResult<ValueId> {
    let kv_in = context.unwrap_or(x);
    let q = ops::linear_as(b, x, d, d, false, LinearRole::Q)?;
    let k = ops::linear_as(b, kv_in, kv_dim, d, false, LinearRole::K)?;
    let v = ops::linear_as(b, kv_in, kv_dim, d, false, LinearRole::V)?;
    let (q, k, v) = (ops::heads(b, q, heads), ops::heads(b, k, heads), ops::heads(b, v, heads));
    let a = ops::sdpa(b, q, k, v);
    let o = ops::linear_as(b, a, d, d, true, LinearRole::O)?;
    let out = ops::scalar(b, "div_scalar", o);
    // `query`, `key`, `value` are the processor's locals until it returns
    ops::keep(b, &[q, k, v]);
    Ok(out)
}
