//! The spec built with candle-nn 0.11, as a candle user writes it. `vramcalc-core`'s candle
//! profile (`memory/candle/`) traces exactly these calls; keep the two in step.

use anyhow::{bail, Context, Result};
use candle_core::{CpuStorage, CustomOp1, CustomOp2, DType, Device, Layout, Module, ModuleT, Shape, Tensor, D};
use candle_nn::{VarBuilder, VarMap};
use vramcalc_core::layer::activation::GeluApprox;
use vramcalc_core::layer::transformer::{FfnActivation, TransformerLayer};
use vramcalc_core::layer::args::{NamedPadding, Padding};
use vramcalc_core::spec::Layer;

pub enum Block {
    Linear(candle_nn::Linear),
    Conv(candle_nn::Conv2d),
    BatchNorm(candle_nn::BatchNorm),
    LayerNorm(Ln),
    Relu,
    Tanh,
    Gelu(bool),
    Dropout(f32),
    MaxPool { k: usize, s: usize, pad: usize },
    AdaptiveAvg(usize),
    Flatten,
    Embedding(candle_nn::Embedding),
    Positional { emb: candle_nn::Embedding, per_sample: bool },
    Select(usize),
    Seq(Vec<Block>),
    Residual { body: Vec<Block>, shortcut: Option<Vec<Block>> },
    Transformer(Box<Tf>),
}

/// candle-nn's `LayerNorm` non-fused path (the fused `ops::layer_norm` has no backward).
pub struct Ln {
    w: Tensor,
    b: Tensor,
    eps: f64,
}

pub struct Tf {
    q: candle_nn::Linear,
    k: candle_nn::Linear,
    v: candle_nn::Linear,
    o: candle_nn::Linear,
    ln1: Ln,
    fc1: candle_nn::Linear,
    fc2: candle_nn::Linear,
    ln2: Ln,
    heads: usize,
    gelu: Option<bool>,
    drop: f32,
    attn_drop: f32,
    norm_first: bool,
}

fn ln(d: usize, eps: f64, vb: VarBuilder) -> Result<Ln> {
    let w = vb.get_with_hints(d, "weight", candle_nn::Init::Const(1.))?;
    let b = vb.get_with_hints(d, "bias", candle_nn::Init::Const(0.))?;
    Ok(Ln { w, b, eps })
}

pub fn build(layers: &[Layer], vb: VarBuilder) -> Result<Vec<Block>> {
    layers.iter().enumerate().map(|(i, l)| layer(l, vb.pp(i.to_string()))).collect()
}

fn layer(l: &Layer, vb: VarBuilder) -> Result<Block> {
    let u = |v: u64| v as usize;
    Ok(match l {
        Layer::Linear(x) => {
            let (i, o) = (u(x.in_features), u(x.out_features));
            Block::Linear(if x.bias { candle_nn::linear(i, o, vb)? } else { candle_nn::linear_no_bias(i, o, vb)? })
        }
        Layer::Conv2d(c) => {
            let k = u(c.kernel_size.0[0]);
            let dil = u(c.dilation.0[0]);
            let padding = match c.padding {
                Padding::Explicit(p) => u(p.0[0]),
                Padding::Named(NamedPadding::Valid) => 0,
                Padding::Named(NamedPadding::Same) => dil * (k - 1) / 2,
            };
            let cfg = candle_nn::Conv2dConfig { padding, stride: u(c.stride.0[0]), dilation: dil, groups: 1, cudnn_fwd_algo: None };
            let (i, o) = (u(c.in_channels), u(c.out_channels));
            Block::Conv(if c.bias { candle_nn::conv2d(i, o, k, cfg, vb)? } else { candle_nn::conv2d_no_bias(i, o, k, cfg, vb)? })
        }
        Layer::BatchNorm2d(b) => {
            let cfg = candle_nn::BatchNormConfig { eps: b.eps, remove_mean: true, affine: true, momentum: b.momentum };
            Block::BatchNorm(candle_nn::batch_norm(u(b.num_features), cfg, vb)?)
        }
        Layer::LayerNorm(n) => Block::LayerNorm(ln(u(n.normalized_shape), n.eps, vb)?),
        Layer::Relu(_) => Block::Relu,
        Layer::Tanh => Block::Tanh,
        Layer::Gelu(g) => Block::Gelu(g.approximate == GeluApprox::Tanh),
        Layer::Dropout(d) => Block::Dropout(d.p as f32),
        Layer::MaxPool2d(m) => Block::MaxPool { k: u(m.kernel_size.0[0]), s: u(m.stride.unwrap_or(m.kernel_size).0[0]), pad: u(m.padding.0[0]) },
        Layer::AdaptiveAvgPool2d(a) => Block::AdaptiveAvg(u(a.output_size.0[0])),
        Layer::Flatten(_) => Block::Flatten,
        Layer::Embedding(e) => Block::Embedding(candle_nn::embedding(u(e.num_embeddings), u(e.embedding_dim), vb)?),
        Layer::PositionalEmbedding(p) => {
            Block::Positional { emb: candle_nn::embedding(u(p.num_embeddings), u(p.embedding_dim), vb)?, per_sample: p.per_sample }
        }
        Layer::SelectToken(s) => Block::Select(s.index.max(0) as usize),
        Layer::Sequential { layers, .. } => Block::Seq(build(layers, vb)?),
        Layer::Residual { body, shortcut, .. } => Block::Residual {
            body: build(body, vb.pp("body"))?,
            shortcut: match shortcut {
                Some(s) => Some(build(s, vb.pp("shortcut"))?),
                None => None,
            },
        },
        Layer::Repeat { times, body } => {
            Block::Seq((0..*times).map(|i| Ok(Block::Seq(build(body, vb.pp(i.to_string()))?))).collect::<Result<_>>()?)
        }
        Layer::TransformerEncoderLayer(t) => Block::Transformer(Box::new(transformer(t, vb)?)),
        other => bail!("not supported by the verifier: {}", other.kind()),
    })
}

fn transformer(t: &TransformerLayer, vb: VarBuilder) -> Result<Tf> {
    let (d, f) = (t.d_model as usize, t.dim_feedforward as usize);
    Ok(Tf {
        q: candle_nn::linear(d, d, vb.pp("q"))?,
        k: candle_nn::linear(d, d, vb.pp("k"))?,
        v: candle_nn::linear(d, d, vb.pp("v"))?,
        o: candle_nn::linear(d, d, vb.pp("o"))?,
        ln1: ln(d, t.layer_norm_eps, vb.pp("ln1"))?,
        fc1: candle_nn::linear(d, f, vb.pp("fc1"))?,
        fc2: candle_nn::linear(f, d, vb.pp("fc2"))?,
        ln2: ln(d, t.layer_norm_eps, vb.pp("ln2"))?,
        heads: t.nhead as usize,
        gelu: match t.activation {
            FfnActivation::Relu => None,
            FfnActivation::GeluTanh => Some(true),
            _ => Some(false),
        },
        drop: t.dropout as f32,
        attn_drop: t.attention_dropout.unwrap_or(t.dropout) as f32,
        norm_first: t.norm_first,
    })
}

impl Ln {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        // candle-nn LayerNorm::forward, non-fused branch (fp32: to_dtype is a no-op)
        let hidden = x.dim(D::Minus1)?;
        let mean_x = (x.sum_keepdim(D::Minus1)? / hidden as f64)?;
        let x = x.broadcast_sub(&mean_x)?;
        let norm_x = (x.sqr()?.sum_keepdim(D::Minus1)? / hidden as f64)?;
        let x_normed = x.broadcast_div(&(norm_x + self.eps)?.sqrt()?)?;
        Ok(x_normed.broadcast_mul(&self.w)?.broadcast_add(&self.b)?)
    }
}

fn dropout(x: Tensor, p: f32, train: bool) -> Result<Tensor> {
    Ok(if train && p > 0.0 { candle_nn::ops::dropout(&x, p)? } else { x })
}

pub fn forward_all(blocks: &[Block], x: &Tensor, train: bool) -> Result<Tensor> {
    let mut y = x.clone();
    for b in blocks {
        y = b.forward(&y, train)?;
    }
    Ok(y)
}

impl Block {
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        Ok(match self {
            Block::Linear(l) => l.forward(x)?,
            Block::Conv(c) => c.forward(x)?,
            Block::BatchNorm(b) => b.forward_t(x, train)?,
            Block::LayerNorm(l) => l.forward(x)?,
            Block::Relu => x.relu()?,
            Block::Tanh => x.tanh()?,
            Block::Gelu(true) => x.gelu()?,
            Block::Gelu(false) => x.gelu_erf()?,
            Block::Dropout(p) => dropout(x.clone(), *p, train)?,
            Block::MaxPool { k, s, pad } => {
                if k == s && *pad == 0 {
                    x.max_pool2d(*k)?
                } else {
                    x.apply_op1(MaxPool { k: *k, s: *s, pad: *pad })?
                }
            }
            Block::AdaptiveAvg(out) => {
                let (_, _, h, _) = x.dims4()?;
                if *out == 1 {
                    x.mean_keepdim((2, 3))?
                } else if h == *out {
                    x.clone()
                } else if h % out == 0 {
                    x.avg_pool2d(h / out)?
                } else if out % h == 0 {
                    x.upsample_nearest2d(*out, *out)?
                } else {
                    bail!("adaptive_avg_pool2d from {h} to {out} has no candle equivalent")
                }
            }
            Block::Flatten => x.flatten_from(1)?,
            Block::Embedding(e) => e.forward(x)?,
            Block::Positional { emb, per_sample } => {
                let (b, s, _) = x.dims3()?;
                let e = if *per_sample {
                    let ids = Tensor::zeros((b, s), DType::U32, x.device())?;
                    emb.forward(&ids)?
                } else {
                    let ids = Tensor::arange(0u32, s as u32, x.device())?;
                    emb.forward(&ids)?
                };
                x.broadcast_add(&e)?
            }
            Block::Select(i) => x.narrow(1, *i, 1)?.squeeze(1)?,
            Block::Seq(v) => forward_all(v, x, train)?,
            Block::Residual { body, shortcut } => {
                let y = forward_all(body, x, train)?;
                let s = match shortcut {
                    None => x.clone(),
                    Some(sc) => forward_all(sc, x, train)?,
                };
                (y + s)?
            }
            Block::Transformer(t) => t.forward(x, train)?,
        })
    }
}

impl Tf {
    fn attn(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let (b, s, d) = x.dims3()?;
        let (h, hd) = (self.heads, d / self.heads);
        let split = |p: &candle_nn::Linear| -> Result<Tensor> { Ok(p.forward(x)?.reshape((b, s, h, hd))?.transpose(1, 2)?.contiguous()?) };
        let q = split(&self.q)?;
        let k = split(&self.k)?;
        let v = split(&self.v)?;
        let scores = (q.matmul(&k.t()?)? * (1.0 / (hd as f64).sqrt()))?;
        let probs = dropout(candle_nn::ops::softmax(&scores, D::Minus1)?, self.attn_drop, train)?;
        let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, s, d))?;
        dropout(self.o.forward(&ctx)?, self.drop, train)
    }

    fn mlp(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let h = self.fc1.forward(x)?;
        let h = match self.gelu {
            None => h.relu()?,
            Some(true) => h.gelu()?,
            Some(false) => h.gelu_erf()?,
        };
        dropout(self.fc2.forward(&h)?, self.drop, train)
    }

    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        Ok(if self.norm_first {
            let h = x.add(&self.attn(&self.ln1.forward(x)?, train)?)?;
            h.add(&self.mlp(&self.ln2.forward(&h)?, train)?)?
        } else {
            let h = self.ln1.forward(&self.attn(x, train)?.add(x)?)?;
            self.ln2.forward(&self.mlp(&h, train)?.add(&h)?)?
        })
    }
}

/// Max pooling with padding or overlapping windows, which candle's `max_pool2d` (and its
/// backward, which needs `kernel == stride`) lacks. Forward allocates the output; backward
/// allocates the input gradient (routing each output's gradient to its window's first maximum).
struct MaxPool {
    k: usize,
    s: usize,
    pad: usize,
}

impl MaxPool {
    fn out(&self, h: usize) -> usize {
        (h + 2 * self.pad - self.k) / self.s + 1
    }
    /// Calls `f(out_index, in_index)` with each output's argmax in the input.
    fn argmax(&self, x: &[f32], l: &Layout, mut f: impl FnMut(usize, usize)) -> Shape {
        let (b, c, h, w) = (l.dims()[0], l.dims()[1], l.dims()[2], l.dims()[3]);
        let st = l.stride();
        let (oh, ow) = (self.out(h), self.out(w));
        let mut o = 0;
        for bi in 0..b {
            for ci in 0..c {
                for y in 0..oh {
                    for xx in 0..ow {
                        let mut best = f32::NEG_INFINITY;
                        let mut at = usize::MAX;
                        for ky in 0..self.k {
                            for kx in 0..self.k {
                                let (iy, ix) = ((y * self.s + ky) as isize - self.pad as isize, (xx * self.s + kx) as isize - self.pad as isize);
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let i = l.start_offset() + bi * st[0] + ci * st[1] + iy as usize * st[2] + ix as usize * st[3];
                                if x[i] > best || at == usize::MAX {
                                    best = x[i];
                                    at = ((bi * c + ci) * h + iy as usize) * w + ix as usize;
                                }
                            }
                        }
                        f(o, at);
                        o += 1;
                    }
                }
            }
        }
        Shape::from((b, c, oh, ow))
    }
}

impl CustomOp1 for MaxPool {
    fn name(&self) -> &'static str {
        "max-pool2d-padded"
    }
    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = s.as_slice::<f32>()?;
        let (b, c, h, w) = (l.dims()[0], l.dims()[1], l.dims()[2], l.dims()[3]);
        let mut out = vec![0f32; b * c * self.out(h) * self.out(w)];
        let (st, off) = (l.stride().to_vec(), l.start_offset());
        let shape = self.argmax(x, l, |o, at| {
            let (bc, rest) = (at / (h * w), at % (h * w));
            let (bi, ci) = (bc / c, bc % c);
            out[o] = x[off + bi * st[0] + ci * st[1] + (rest / w) * st[2] + (rest % w) * st[3]];
        });
        Ok((CpuStorage::F32(out), shape))
    }
    fn bwd(&self, arg: &Tensor, _res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        Ok(Some(arg.apply_op2_no_bwd(grad, &MaxPoolBwd(MaxPool { k: self.k, s: self.s, pad: self.pad }))?))
    }
}

struct MaxPoolBwd(MaxPool);

impl CustomOp2 for MaxPoolBwd {
    fn name(&self) -> &'static str {
        "max-pool2d-padded-bwd"
    }
    fn cpu_fwd(&self, s1: &CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let x = s1.as_slice::<f32>()?;
        let g = s2.as_slice::<f32>()?;
        let mut gx = vec![0f32; l1.shape().elem_count()];
        let (gs, goff) = (l2.stride().to_vec(), l2.start_offset());
        let (gc, gh, gw) = (l2.dims()[1], l2.dims()[2], l2.dims()[3]);
        self.0.argmax(x, l1, |o, at| {
            let (bc, rest) = (o / (gh * gw), o % (gh * gw));
            let (bi, ci) = (bc / gc, bc % gc);
            gx[at] += g[goff + bi * gs[0] + ci * gs[1] + (rest / gw) * gs[2] + (rest % gw) * gs[3]];
        });
        Ok((CpuStorage::F32(gx), l1.shape().clone()))
    }
}

/// The model's variables: trainable ones and BatchNorm running statistics.
pub fn trainable(vm: &VarMap) -> Vec<candle_core::Var> {
    let data = vm.data().lock().unwrap_or_else(|e| e.into_inner());
    let mut named: Vec<_> = data.iter().filter(|(n, _)| !n.contains("running_")).map(|(n, v)| (n.clone(), v.clone())).collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named.into_iter().map(|(_, v)| v).collect()
}

pub fn var_bytes(vm: &VarMap) -> u64 {
    vm.all_vars().iter().map(|v| (v.elem_count() * v.dtype().size_in_bytes()) as u64).sum()
}

pub fn device(spec: &str) -> Result<Device> {
    Ok(match spec {
        "cpu" => Device::Cpu,
        s => match cuda_ordinal(s)? {
            Some(i) => {
                crate::gpu::require_cuda_training()?;
                Device::new_cuda(i).with_context(|| format!("creating candle's CUDA device {i}"))?
            }
            None => bail!("unknown device `{s}` (cpu, cuda or cuda:N)"),
        },
    })
}

/// `cuda` → 0, `cuda:N` → N, anything else → `None`.
pub fn cuda_ordinal(spec: &str) -> Result<Option<usize>> {
    Ok(match spec {
        "cuda" => Some(0),
        s => match s.strip_prefix("cuda:") {
            Some(n) => Some(n.parse().map_err(|_| anyhow::anyhow!("--device cuda:N: `{n}` is not a device index"))?),
            None => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_device_names() {
        assert_eq!(cuda_ordinal("cuda").unwrap(), Some(0));
        assert_eq!(cuda_ordinal("cuda:3").unwrap(), Some(3));
        assert_eq!(cuda_ordinal("cpu").unwrap(), None);
        assert_eq!(cuda_ordinal("gpu").unwrap(), None);
        assert!(cuda_ordinal("cuda:x").unwrap_err().to_string().contains("not a device index"));
    }

    #[test]
    fn unknown_devices_are_named() {
        assert!(device("tpu").unwrap_err().to_string().contains("unknown device `tpu`"));
    }
}
