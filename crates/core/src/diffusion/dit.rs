//! The diffusion transformers of SD3 and Flux: diffusers' `SD3Transformer2DModel`
//! (`models/transformers/transformer_sd3.py`, `JointTransformerBlock` in `attention.py`,
//! `JointAttnProcessor2_0`) and `FluxTransformer2DModel` (`transformer_flux.py`:
//! `FluxTransformerBlock`, `FluxSingleTransformerBlock`, `FluxAttnProcessor`), lowered op by op.
//! Per sample the image stream is `[S_img, D]` and the text stream `[S_txt, D]`.

use super::cfg::Cfg;
use super::ops;
use crate::error::{Error, Result};
use crate::finetune::LinearRole;
use crate::graph::ValueId;
use crate::layer::norm::RmsNorm;
use crate::layer::LayerResult;
use crate::lower::Builder;
use crate::units::{DType, Shape};

#[derive(Debug, Clone, PartialEq)]
pub struct FluxConfig {
    pub in_channels: u64,
    pub out_channels: u64,
    pub heads: u64,
    pub head_dim: u64,
    pub layers: u64,
    pub single_layers: u64,
    pub joint_attention_dim: u64,
    pub pooled_projection_dim: u64,
    pub guidance_embeds: bool,
    pub patch_size: u64,
}

impl FluxConfig {
    pub fn from_cfg(c: &Cfg) -> Result<FluxConfig> {
        let in_channels = c.size("in_channels", 64)?;
        Ok(FluxConfig {
            in_channels,
            out_channels: c.opt_size("out_channels")?.unwrap_or(in_channels),
            heads: c.size("num_attention_heads", 24)?,
            head_dim: c.size("attention_head_dim", 128)?,
            layers: c.count("num_layers", 19)?,
            single_layers: c.count("num_single_layers", 38)?,
            joint_attention_dim: c.size("joint_attention_dim", 4096)?,
            pooled_projection_dim: c.size("pooled_projection_dim", 768)?,
            guidance_embeds: c.flag("guidance_embeds", false)?,
            patch_size: c.size("patch_size", 1)?,
        })
    }

    /// One forward on an `h × w` latent (16 channels packed 2×2 into 64: `S_img = h·w/4`).
    pub fn forward(&self, b: &mut Builder, h: u64, w: u64, text_len: u64) -> LayerResult<ValueId> {
        let d = self.heads.saturating_mul(self.head_dim);
        let s_img = (h / 2).max(1).saturating_mul((w / 2).max(1));
        let dt = b.float_dtype();
        let x = b.input(Shape::new([s_img, self.in_channels]), dt);
        let text = b.input(Shape::new([text_len, self.joint_attention_dim]), dt);
        let pooled = ops::vector_input(b, self.pooled_projection_dim);
        let mut img = ops::linear(b, x, self.in_channels, d, true)?;
        // `CombinedTimestep(Guidance)TextProjEmbeddings`
        let t = ops::vector_input(b, 256);
        let mut temb = ops::timestep_embedding(b, t, 256, d)?;
        if self.guidance_embeds {
            let g = ops::vector_input(b, 256);
            let g = ops::timestep_embedding(b, g, 256, d)?;
            temb = ops::add(b, temb, g);
        }
        let p = text_projection(b, pooled, self.pooled_projection_dim, d)?;
        temb = ops::add(b, temb, p);
        let mut txt = ops::linear(b, text, self.joint_attention_dim, d, true)?;
        let s_all = s_img.saturating_add(text_len);
        // `ids = torch.cat((txt_ids, img_ids), dim=0)` (`[S, 3]` fp32) and `FluxPosEmbed`'s cos
        // and sin tables (`[S, head_dim]` fp32): one for the whole batch, `forward`'s locals
        let table = |b: &mut Builder, name: &'static str, d: u64| b.op(name, &[], &[(Shape::new([s_all, d]), DType::F32)], &[], false, &[], crate::graph::GradRule::Alloc)[0];
        let ids = table(b, "cat", 3);
        let rope = (table(b, "rope_cos", self.head_dim), table(b, "rope_sin", self.head_dim));
        let j = Joint { d, heads: self.heads, head_dim: self.head_dim, qk_norm: true, rope: Some(rope) };
        // each block is one group of block-level group offloading (`set_layer`)
        for i in 0..self.layers {
            b.set_layer(1 + i as u32);
            (txt, img) = b.in_unit(|b| j.double_block(b, txt, img, temb, false, false))?;
        }
        for i in 0..self.single_layers {
            b.set_layer(1 + (self.layers + i) as u32);
            (txt, img) = b.in_unit(|b| j.single_block(b, txt, img, temb))?;
        }
        b.set_layer(0);
        let out = ada_continuous(b, img, temb, d)?;
        let pp = self.patch_size.saturating_mul(self.patch_size).saturating_mul(self.out_channels);
        let out = ops::linear(b, out, d, pp, true)?;
        ops::keep(b, &[ids, rope.0, rope.1]);
        Ok(out)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sd3Config {
    pub in_channels: u64,
    pub out_channels: u64,
    pub heads: u64,
    pub head_dim: u64,
    pub layers: u64,
    pub patch_size: u64,
    pub joint_attention_dim: u64,
    pub caption_projection_dim: u64,
    pub pooled_projection_dim: u64,
    pub pos_embed_max_size: u64,
    pub qk_norm: bool,
    pub dual_attention_layers: Vec<u64>,
}

impl Sd3Config {
    pub fn from_cfg(c: &Cfg) -> Result<Sd3Config> {
        let qk_norm = match c.str("qk_norm")? {
            None => false,
            Some("rms_norm") => true,
            Some(o) => return Err(Error::Import(format!("{}: `qk_norm` {o} is not supported (rms_norm)", c.class))),
        };
        let dual = match c.get("dual_attention_layers") {
            None => Vec::new(),
            Some(serde_json::Value::Array(a)) => a.iter().map(|v| v.as_u64().ok_or_else(|| Error::Import(format!("{}: `dual_attention_layers` must be layer indices", c.class)))).collect::<Result<_>>()?,
            Some(v) => return Err(Error::Import(format!("{}: `dual_attention_layers` must be a list, got {v}", c.class))),
        };
        Ok(Sd3Config {
            in_channels: c.size("in_channels", 16)?,
            out_channels: c.size("out_channels", 16)?,
            heads: c.size("num_attention_heads", 18)?,
            head_dim: c.size("attention_head_dim", 64)?,
            layers: c.size("num_layers", 18)?,
            patch_size: c.size("patch_size", 2)?,
            joint_attention_dim: c.size("joint_attention_dim", 4096)?,
            caption_projection_dim: c.size("caption_projection_dim", 1152)?,
            pooled_projection_dim: c.size("pooled_projection_dim", 2048)?,
            pos_embed_max_size: c.size("pos_embed_max_size", 96)?,
            qk_norm,
            dual_attention_layers: dual,
        })
    }

    /// The `pos_embed` buffer `[1, max², D]` (fp32 at build, cast with the model).
    pub fn buffer_numel(&self) -> u64 {
        let d = self.heads.saturating_mul(self.head_dim);
        self.pos_embed_max_size.saturating_mul(self.pos_embed_max_size).saturating_mul(d)
    }

    pub fn forward(&self, b: &mut Builder, h: u64, w: u64, text_len: u64) -> LayerResult<ValueId> {
        let d = self.heads.saturating_mul(self.head_dim);
        if self.caption_projection_dim != d {
            return Err(format!("caption_projection_dim {} differs from the width {d}", self.caption_projection_dim));
        }
        let p = self.patch_size;
        let (gh, gw) = ((h / p).max(1), (w / p).max(1));
        if gh > self.pos_embed_max_size || gw > self.pos_embed_max_size {
            return Err(format!("a {gh}×{gw} patch grid is larger than pos_embed_max_size {}", self.pos_embed_max_size));
        }
        let s_img = gh.saturating_mul(gw);
        let dt = b.float_dtype();
        let x = b.input(Shape::new([self.in_channels, h, w]), dt);
        let text = b.input(Shape::new([text_len, self.joint_attention_dim]), dt);
        let pooled = ops::vector_input(b, self.pooled_projection_dim);
        b.buffer(self.buffer_numel(), dt);
        // `PatchEmbed`: conv k=p s=p, flatten(2).transpose(1, 2), + the cropped position table
        let conv = ops::conv(b, x, self.in_channels, d, p, p, 0)?;
        let seq = b.view(conv, Shape::new([s_img, d]));
        // `cropped_pos_embed`: a copy of the `[1, S, D]` window of the table (one for the batch)
        let pos = b.op("cropped_pos_embed", &[], &[(Shape::new([s_img, d]), dt)], &[], false, &[], crate::graph::GradRule::Alloc)[0];
        let mut img = ops::add(b, seq, pos);
        let t = ops::vector_input(b, 256);
        let temb = ops::timestep_embedding(b, t, 256, d)?;
        let pe = text_projection(b, pooled, self.pooled_projection_dim, d)?;
        let temb = ops::add(b, temb, pe);
        let mut txt = ops::linear(b, text, self.joint_attention_dim, self.caption_projection_dim, true)?;
        let j = Joint { d, heads: self.heads, head_dim: self.head_dim, qk_norm: self.qk_norm, rope: None };
        for i in 0..self.layers {
            b.set_layer(1 + i as u32);
            let last = i + 1 == self.layers;
            let dual = self.dual_attention_layers.contains(&i);
            (txt, img) = b.in_unit(|b| j.double_block(b, txt, img, temb, last, dual))?;
        }
        b.set_layer(0);
        let out = ada_continuous(b, img, temb, d)?;
        let out = ops::linear(b, out, d, p.saturating_mul(p).saturating_mul(self.out_channels), true)?;
        // unpatchify: reshape, einsum, reshape (a copy)
        Ok(ops::copy(b, out, Shape::new([self.out_channels, gh.saturating_mul(p), gw.saturating_mul(p)])))
    }
}

/// `PixArtAlphaTextProjection(in, d, act_fn="silu")`: `linear_2(silu(linear_1(x)))`.
fn text_projection(b: &mut Builder, x: ValueId, i: u64, d: u64) -> LayerResult<ValueId> {
    ops::timestep_embedding(b, x, i, d)
}

/// `AdaLayerNormContinuous(d, d, elementwise_affine=False)`: `emb = linear(silu(temb))`
/// (`2·d`), `norm(x) * (1 + scale) + shift`.
fn ada_continuous(b: &mut Builder, x: ValueId, temb: ValueId, d: u64) -> LayerResult<ValueId> {
    let e = ops::silu(b, temb);
    let e = ops::linear(b, e, d, d.saturating_mul(2), true)?;
    let n = ops::layer_norm(b, x, d, false)?;
    let scale = b.view(e, Shape::new([1, d]));
    let m = ops::mul(b, n, scale);
    Ok(ops::add(b, m, scale))
}

/// The joint (MMDiT) attention blocks both models share.
struct Joint {
    d: u64,
    heads: u64,
    head_dim: u64,
    qk_norm: bool,
    /// Flux's rotary tables (cos, sin); SD3 has none.
    rope: Option<(ValueId, ValueId)>,
}

impl Joint {
    /// `AdaLayerNormZero` (or `SD35AdaLayerNormZeroX`, 9 chunks, when `chunks` = 9):
    /// `emb = linear(silu(temb))`, `norm(x) * (1 + scale) + shift`; returns the modulated
    /// input and the embedding (whose chunks are views).
    fn ada_zero(&self, b: &mut Builder, x: ValueId, temb: ValueId, chunks: u64) -> LayerResult<(ValueId, ValueId)> {
        let d = self.d;
        let e = ops::silu(b, temb);
        let e = ops::linear(b, e, d, d.saturating_mul(chunks), true)?;
        let n = ops::layer_norm(b, x, d, false)?;
        let scale = b.view(e, Shape::new([1, d]));
        let m = ops::mul(b, n, scale);
        Ok((ops::add(b, m, scale), e))
    }

    /// Q, K, V projections of one stream, viewed per head, Q and K RMS-normed per head.
    /// The text stream's `add_q_proj`, `add_k_proj`, `add_v_proj` (`context`) are not LoRA
    /// targets by the default `to_q`, `to_k`, `to_v`, `to_out.0`: they get no role.
    fn qkv(&self, b: &mut Builder, x: ValueId, context: bool) -> LayerResult<[ValueId; 3]> {
        let d = self.d;
        let mut out = [0; 3];
        for (i, slot) in out.iter_mut().enumerate() {
            let p = if context { ops::linear(b, x, d, d, true)? } else { ops::linear_as(b, x, d, d, true, [LinearRole::Q, LinearRole::K, LinearRole::V][i])? };
            let s = b.shape(p).0[0];
            let v = b.view(p, Shape::new([s, self.heads, self.head_dim]));
            *slot = match (i < 2 && self.qk_norm, self.rope.is_some()) {
                // Flux: `torch.nn.RMSNorm(dim_head)`; SD3: diffusers' `RMSNorm`
                (true, true) => ops::torch_rms_norm(b, v, self.head_dim),
                (true, false) => RmsNorm { normalized_shape: self.head_dim, eps: 1e-6, t5: true }.lower(b, v)?,
                _ => v,
            };
        }
        Ok(out)
    }

    /// `apply_rotary_emb(x, (cos, sin))` (`embeddings.py`): `x_rotated` by `stack`, then
    /// `(x.float() * cos + x_rotated.float() * sin).to(x.dtype)`.
    fn rotary(&self, b: &mut Builder, x: ValueId) -> ValueId {
        let Some((cos, sin)) = self.rope else { return x };
        let sh = b.shape(x).0.clone();
        let dt0 = b.dtype(x);
        let neg = b.op("neg", &[x], &[(Shape::new([sh[0], sh[1], sh[2] / 2]), dt0)], &[], false, &[], crate::graph::GradRule::Alloc)[0];
        let rot = b.op("stack", &[neg, x], &[(Shape(sh.clone()), dt0)], &[], false, &[], crate::graph::GradRule::Alloc)[0];
        let xf = b.cast(x, DType::F32);
        let a = ops::mul(b, xf, cos);
        let rf = b.cast(rot, DType::F32);
        let c = ops::mul(b, rf, sin);
        let s = ops::add(b, a, c);
        let dt = b.dtype(x);
        let out = b.cast(s, dt);
        // `x_rotated` is a local, `x` the caller's `query` / `key`, until the function returns
        ops::keep(b, &[rot, x]);
        out
    }

    /// Attention over the streams joined on the sequence (`streams[0]` first), SDPA, the split
    /// back. The joined Q, K, V and each stream's other projections are the processor's locals
    /// until it returns.
    fn attend(&self, b: &mut Builder, streams: &[[ValueId; 3]]) -> Vec<ValueId> {
        let (h, hd) = (self.heads, self.head_dim);
        let lens: Vec<u64> = streams.iter().map(|s| b.shape(s[0]).0[0]).collect();
        let total: u64 = lens.iter().sum();
        let mut joined = [0; 3];
        for (i, slot) in joined.iter_mut().enumerate() {
            let parts: Vec<ValueId> = streams.iter().map(|s| s[i]).collect();
            let j = if parts.len() == 1 { parts[0] } else { ops::cat(b, &parts, Shape::new([total, h, hd])) };
            *slot = if i < 2 { self.rotary(b, j) } else { j };
        }
        let [q, k, v] = joined.map(|t| b.view(t, Shape::new([h, total, hd])));
        let out = ops::sdpa(b, q, k, v);
        let outs = lens.iter().map(|&l| b.view(out, Shape::new([l, self.d]))).collect();
        let mut keep = joined.to_vec();
        // the first stream's (Flux: the text's; SD3: the image's) projections stay named; a
        // lone stream's Q and K are rebound by `apply_rotary_emb` (`FluxAttnProcessor`)
        if streams.len() > 1 || self.rope.is_none() {
            keep.extend(streams[0]);
        } else {
            keep.push(streams[0][2]);
        }
        ops::keep(b, &keep);
        outs
    }

    /// `norm2(x) * (1 + scale) + shift` and `FeedForward(gelu-approximate)`: the modulated input
    /// and the raw output.
    /// `release`: the locals this norm's result replaces (`norm_hidden_states = self.norm2(...)`).
    fn ff(&self, b: &mut Builder, x: ValueId, gate: ValueId, release: &[ValueId]) -> LayerResult<(ValueId, ValueId)> {
        let d = self.d;
        let n = ops::layer_norm(b, x, d, false)?;
        ops::keep(b, release);
        let m = ops::mul(b, n, gate);
        let n = ops::add(b, m, gate);
        let f = ops::linear(b, n, d, d.saturating_mul(4), true)?;
        let f = ops::gelu(b, f);
        let f = ops::linear(b, f, d.saturating_mul(4), d, true)?;
        Ok((n, f))
    }

    /// Flux's `FluxTransformerBlock` / SD3's `JointTransformerBlock`: both streams modulated,
    /// joint attention (Flux: text first; SD3: image first), `to_out` / `to_add_out`, gated
    /// residuals and feed-forwards. `context_pre_only` (SD3's last block): the text only gives K
    /// and V. `dual` (SD3.5-Medium): a second self-attention of the image stream (`attn2`) on
    /// its own modulation of the same norm. The locals each `forward` keeps to its return are
    /// kept (Flux's `attention_outputs` tuple keeps both raw attention outputs).
    #[allow(clippy::too_many_arguments)]
    fn double_block(&self, b: &mut Builder, txt: ValueId, img: ValueId, temb: ValueId, context_pre_only: bool, dual: bool) -> LayerResult<(ValueId, ValueId)> {
        let d = self.d;
        let flux = self.rope.is_some();
        let (n_img, e_img) = self.ada_zero(b, img, temb, if dual { 9 } else { 6 })?;
        let gate = b.view(e_img, Shape::new([1, d]));
        let n_img2 = if dual {
            // `SD35AdaLayerNormZeroX`: `norm_hidden_states2 = norm(x) * (1 + scale_msa2) + shift_msa2`
            let m = ops::mul(b, n_img, gate);
            Some(ops::add(b, m, gate))
        } else {
            None
        };
        let n_txt = if context_pre_only { ada_continuous(b, txt, temb, d)? } else { self.ada_zero(b, txt, temb, 6)?.0 };
        let qi = self.qkv(b, n_img, false)?;
        let qt = self.qkv(b, n_txt, true)?;
        let outs = if flux { self.attend(b, &[qt, qi]) } else { self.attend(b, &[qi, qt]) };
        let (o_txt, o_img) = if flux { (outs[0], outs[1]) } else { (outs[1], outs[0]) };
        let a_txt_raw = if context_pre_only { None } else { Some(ops::linear(b, o_txt, d, d, true)?) };
        let a_raw = ops::linear_as(b, o_img, d, d, true, LinearRole::O)?;
        let a = ops::mul(b, a_raw, gate);
        let mut img2 = ops::add(b, img, a);
        let mut keep = vec![txt, img, a];
        if context_pre_only {
            keep.push(n_txt);
        }
        if flux {
            keep.push(a_raw);
        }
        if let Some(n2) = n_img2 {
            let q2 = self.qkv(b, n2, false)?;
            let o2 = self.attend(b, &[q2])[0];
            let a2 = ops::linear_as(b, o2, d, d, true, LinearRole::O)?;
            let a2g = ops::mul(b, a2, gate);
            img2 = ops::add(b, img2, a2g);
            keep.extend([n2, a2g]);
        }
        let (n_ff, f_raw) = self.ff(b, img2, gate, &[n_img])?;
        let f = ops::mul(b, f_raw, gate);
        let img3 = ops::add(b, img2, f);
        keep.extend([n_ff, f]);
        let Some(a_txt_raw) = a_txt_raw else {
            ops::keep(b, &keep);
            return Ok((txt, img3));
        };
        let a = ops::mul(b, a_txt_raw, gate);
        let txt2 = ops::add(b, txt, a);
        let (n_ff_t, f_t) = self.ff(b, txt2, gate, &[n_txt])?;
        let g = ops::mul(b, f_t, gate);
        let txt3 = ops::add(b, txt2, g);
        keep.extend([a, n_ff_t, f_t]);
        if flux {
            keep.push(a_txt_raw);
        }
        ops::keep(b, &keep);
        Ok((txt3, img3))
    }

    /// `FluxSingleTransformerBlock(encoder_hidden_states, hidden_states)`: the streams joined
    /// (`torch.cat`, text first), `AdaLayerNormZeroSingle` (3 chunks), `proj_mlp` (4·D) + tanh
    /// GELU beside the attention (no `to_out`), their concat through `proj_out` (5·D → D),
    /// gate, residual; returns views of the result (text, image).
    fn single_block(&self, b: &mut Builder, txt: ValueId, img: ValueId, temb: ValueId) -> LayerResult<(ValueId, ValueId)> {
        let d = self.d;
        let (st, si) = (b.shape(txt).0[0], b.shape(img).0[0]);
        let s = st + si;
        let x = ops::cat(b, &[txt, img], Shape::new([s, d]));
        let (n, e) = self.ada_zero(b, x, temb, 3)?;
        let gate = b.view(e, Shape::new([1, d]));
        let mlp = ops::linear(b, n, d, d.saturating_mul(4), true)?;
        let mlp = ops::gelu(b, mlp);
        let q = self.qkv(b, n, false)?;
        let a = self.attend(b, &[q])[0];
        let joined = ops::cat(b, &[a, mlp], Shape::new([s, d.saturating_mul(5)]));
        let o = ops::linear(b, joined, d.saturating_mul(5), d, true)?;
        let o = ops::mul(b, gate, o);
        ops::keep(b, &[joined]);
        let out = ops::add(b, x, o);
        ops::keep(b, &[txt, img, x, n, mlp, a]);
        Ok((b.view(out, Shape::new([st, d])), b.view(out, Shape::new([si, d]))))
    }
}
