//! The model as the verifier builds it with candle-nn: variables created as layers are first
//! met (like a `VarBuilder`), then a forward pass through the built modules.

use super::nn::{adaptive_avg, batch_norm_train, conv2d, dropout, embedding, layer_norm, linear, max_pool, softmax};
use super::tensor::{product, BinaryOp, Tensor, Tracer, UnaryOp};
use crate::error::{Error, Result};
use crate::layer::activation::GeluApprox;
use crate::layer::transformer::{FfnActivation, TransformerLayer};
use crate::memory::breakdown::Category;
use crate::layer::args::{NamedPadding, Padding};
use crate::spec::Layer;
use std::rc::Rc;

/// Layer row meaning "no row of its own": keep the enclosing one.
const NO_ROW: u32 = u32::MAX;

/// The built model: its variables and the buffers candle-nn keeps beside them.
pub(super) struct Model {
    tracer: Rc<Tracer>,
    /// Trainable variables, in creation order (the optimizer's order).
    pub(super) vars: Vec<Tensor>,
    /// BatchNorm running statistics: variables in the `VarMap` that the optimizer never sees.
    buffers: Vec<Tensor>,
    /// The next per-layer table row.
    row: u32,
    train: bool,
}

/// One built layer, with the per-layer table row it reports to.
pub(super) enum Module {
    Linear { w: Tensor, b: Option<Tensor>, row: u32 },
    Conv { w: Tensor, b: Option<Tensor>, pad: u64, stride: u64, dilation: u64, row: u32 },
    BatchNorm { w: Tensor, b: Tensor, row: u32 },
    LayerNorm { w: Tensor, b: Tensor, row: u32 },
    Activation(UnaryOp, u32),
    /// Drop probability.
    Dropout(f64, u32),
    MaxPool { kernel: u64, stride: u64, pad: u64, row: u32 },
    AdaptiveAvg { out: u64, row: u32 },
    Flatten(u32),
    Embedding { w: Tensor, row: u32 },
    Positional { w: Tensor, per_sample: bool, row: u32 },
    /// Token index.
    SelectToken(u64, u32),
    Sequential(Vec<Module>, u32),
    Residual { body: Vec<Module>, shortcut: Option<Vec<Module>>, row: u32 },
    Transformer(Box<EncoderLayer>, u32),
}

/// A linear layer's weight and bias.
struct LinearParts {
    w: Tensor,
    b: Option<Tensor>,
}

/// A layer norm's weight and bias.
struct NormParts {
    w: Tensor,
    b: Tensor,
}

/// `TransformerEncoderLayer` as candle-nn modules.
pub(super) struct EncoderLayer {
    q: LinearParts,
    k: LinearParts,
    v: LinearParts,
    o: LinearParts,
    ln1: NormParts,
    ln2: NormParts,
    fc1: LinearParts,
    fc2: LinearParts,
    heads: u64,
    activation: UnaryOp,
    dropout: f64,
    attention_dropout: f64,
    norm_first: bool,
}

impl Model {
    pub(super) fn new(tracer: &Rc<Tracer>, train: bool) -> Model {
        Model { tracer: tracer.clone(), vars: Vec::new(), buffers: Vec::new(), row: 0, train }
    }

    /// Builds `layers` as one sequential module without a row of its own.
    pub(super) fn build(&mut self, layers: &[Layer]) -> Result<Module> {
        Ok(Module::Sequential(self.layers(layers)?, NO_ROW))
    }

    fn layers(&mut self, layers: &[Layer]) -> Result<Vec<Module>> {
        layers.iter().map(|l| self.layer(l)).collect()
    }

    fn next_row(&mut self) -> u32 {
        let r = self.row;
        self.row += 1;
        r
    }
    fn var(&mut self, shape: &[u64]) -> Tensor {
        let v = self.tracer.var(shape);
        self.vars.push(v.clone());
        v
    }
    /// A buffer variable, alive as long as the model.
    fn buffer(&mut self, shape: &[u64]) {
        self.tracer.set_category(Category::Buffers);
        let v = self.tracer.var(shape);
        self.tracer.set_category(Category::Parameters);
        self.buffers.push(v);
    }
    fn linear(&mut self, i: u64, o: u64, bias: bool) -> LinearParts {
        let w = self.var(&[o, i]);
        let b = bias.then(|| self.var(&[o]));
        LinearParts { w, b }
    }
    /// A norm's weight and bias (layer norm, and batch norm's affine part).
    fn norm_params(&mut self, d: u64) -> NormParts {
        let w = self.var(&[d]);
        let b = self.var(&[d]);
        NormParts { w, b }
    }

    fn layer(&mut self, l: &Layer) -> Result<Module> {
        let row = self.next_row();
        Ok(match l {
            Layer::Linear(x) => {
                let LinearParts { w, b } = self.linear(x.in_features, x.out_features, x.bias);
                Module::Linear { w, b, row }
            }
            Layer::Conv2d(c) => {
                let k = c.kernel_size.0[0];
                let w = self.var(&[c.out_channels, c.in_channels, k, c.kernel_size.0[1]]);
                let b = c.bias.then(|| self.var(&[c.out_channels]));
                let dilation = c.dilation.0[0];
                let pad = match c.padding {
                    Padding::Explicit(p) => p.0[0],
                    Padding::Named(NamedPadding::Valid) => 0,
                    Padding::Named(NamedPadding::Same) => dilation * (k - 1) / 2,
                };
                Module::Conv { w, b, pad, stride: c.stride.0[0], dilation, row }
            }
            Layer::BatchNorm2d(b) => {
                let NormParts { w, b } = self.norm_params(b.num_features);
                // running mean and variance: variables in candle-nn, not trained
                self.buffer(&[w.dims()[0]]);
                self.buffer(&[w.dims()[0]]);
                Module::BatchNorm { w, b, row }
            }
            Layer::LayerNorm(n) => {
                let NormParts { w, b } = self.norm_params(n.normalized_shape);
                Module::LayerNorm { w, b, row }
            }
            Layer::Relu(_) => Module::Activation(UnaryOp::Relu, row),
            Layer::Tanh => Module::Activation(UnaryOp::Tanh, row),
            Layer::Gelu(g) => Module::Activation(if g.approximate == GeluApprox::Tanh { UnaryOp::Gelu } else { UnaryOp::GeluErf }, row),
            Layer::Dropout(d) => Module::Dropout(d.p, row),
            Layer::MaxPool2d(m) => {
                let kernel = m.kernel_size.0[0];
                Module::MaxPool { kernel, stride: m.stride.unwrap_or(m.kernel_size).0[0], pad: m.padding.0[0], row }
            }
            Layer::AdaptiveAvgPool2d(a) => Module::AdaptiveAvg { out: a.output_size.0[0], row },
            Layer::Flatten(_) => Module::Flatten(row),
            Layer::Embedding(e) => Module::Embedding { w: self.var(&[e.num_embeddings, e.embedding_dim]), row },
            Layer::PositionalEmbedding(p) => {
                Module::Positional { w: self.var(&[p.num_embeddings, p.embedding_dim]), per_sample: p.per_sample, row }
            }
            Layer::SelectToken(s) => Module::SelectToken(s.index.max(0) as u64, row),
            Layer::Sequential { layers, .. } => Module::Sequential(self.layers(layers)?, row),
            Layer::Residual { body, shortcut, .. } => {
                let body = self.layers(body)?;
                let shortcut = shortcut.as_deref().map(|s| self.layers(s)).transpose()?;
                Module::Residual { body, shortcut, row }
            }
            Layer::Repeat { times, body } => {
                let mut copies = Vec::new();
                for _ in 0..*times {
                    copies.push(Module::Sequential(self.layers(body)?, NO_ROW));
                }
                Module::Sequential(copies, row)
            }
            Layer::TransformerEncoderLayer(t) => Module::Transformer(Box::new(self.transformer(t)), row),
            other => {
                return Err(Error::Layer { path: String::new(), kind: other.kind().into(), message: "not supported by the candle profile".into() })
            }
        })
    }

    fn transformer(&mut self, t: &TransformerLayer) -> EncoderLayer {
        let (d, f) = (t.d_model, t.dim_feedforward);
        let q = self.linear(d, d, true);
        let k = self.linear(d, d, true);
        let v = self.linear(d, d, true);
        let o = self.linear(d, d, true);
        let ln1 = self.norm_params(d);
        let fc1 = self.linear(d, f, true);
        let fc2 = self.linear(f, d, true);
        let ln2 = self.norm_params(d);
        let activation = match t.activation {
            FfnActivation::Relu => UnaryOp::Relu,
            FfnActivation::GeluTanh => UnaryOp::Gelu,
            _ => UnaryOp::GeluErf,
        };
        EncoderLayer {
            q,
            k,
            v,
            o,
            ln1,
            ln2,
            fc1,
            fc2,
            heads: t.nhead,
            activation,
            dropout: t.dropout,
            attention_dropout: t.attention_dropout.unwrap_or(t.dropout),
            norm_first: t.norm_first,
        }
    }

    fn set_row(&self, row: u32) {
        if row != NO_ROW {
            self.tracer.set_layer(row);
        }
    }

    fn forward_all(&self, modules: &[Module], x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        for m in modules {
            y = self.forward(m, &y)?;
        }
        Ok(y)
    }

    /// The module's forward, as candle-nn runs it in training (or inference) mode.
    pub(super) fn forward(&self, module: &Module, x: &Tensor) -> Result<Tensor> {
        Ok(match module {
            Module::Linear { w, b, row } => {
                self.set_row(*row);
                linear(x, w, b.as_ref())
            }
            Module::Conv { w, b, pad, stride, dilation, row } => {
                self.set_row(*row);
                conv2d(x, w, b.as_ref(), *pad, *stride, *dilation)
            }
            Module::BatchNorm { w, b, row } => {
                self.set_row(*row);
                batch_norm_train(x, w, b)
            }
            Module::LayerNorm { w, b, row } => {
                self.set_row(*row);
                layer_norm(x, w, b)
            }
            Module::Activation(op, row) => {
                self.set_row(*row);
                x.unary(*op)
            }
            Module::Dropout(p, row) => {
                self.set_row(*row);
                self.dropout(x.clone(), *p)
            }
            Module::MaxPool { kernel, stride, pad, row } => {
                self.set_row(*row);
                max_pool(x, *kernel, *stride, *pad)
            }
            Module::AdaptiveAvg { out, row } => {
                self.set_row(*row);
                adaptive_avg(x, *out)?
            }
            Module::Flatten(row) => {
                self.set_row(*row);
                let d = x.dims();
                x.reshape(&[d[0], product(&d[1..])])
            }
            Module::Embedding { w, row } => {
                self.set_row(*row);
                embedding(x, w)
            }
            Module::Positional { w, per_sample, row } => {
                self.set_row(*row);
                let (b, s) = (x.dims()[0], x.dims()[1]);
                // ids made in the forward: token type ids are (B, S) zeros, positions (S)
                let ids = if *per_sample { self.tracer.zeros(&[b, s], true) } else { self.tracer.zeros(&[s], true) };
                let e = embedding(&ids, w);
                drop(ids);
                x.broadcast_binary(&e, BinaryOp::Add)
            }
            Module::SelectToken(i, row) => {
                self.set_row(*row);
                x.narrow(1, *i, 1).squeeze(1)
            }
            Module::Sequential(modules, row) => {
                self.set_row(*row);
                self.forward_all(modules, x)?
            }
            Module::Residual { body, shortcut, row } => {
                self.set_row(*row);
                let y = self.forward_all(body, x)?;
                let s = match shortcut {
                    None => x.clone(),
                    Some(sc) => self.forward_all(sc, x)?,
                };
                self.set_row(*row);
                y.add(&s)
            }
            Module::Transformer(t, row) => {
                self.set_row(*row);
                self.transformer_forward(t, x)
            }
        })
    }

    /// Dropout in training with `p > 0`, else the input itself.
    fn dropout(&self, y: Tensor, p: f64) -> Tensor {
        if self.train && p > 0.0 {
            dropout(&y)
        } else {
            y
        }
    }

    fn transformer_forward(&self, t: &EncoderLayer, x: &Tensor) -> Tensor {
        let lin = |p: &LinearParts, x: &Tensor| linear(x, &p.w, p.b.as_ref());
        let attn = |x: &Tensor| -> Tensor {
            let (b, s, d) = (x.dims()[0], x.dims()[1], x.dims()[2]);
            let h = t.heads;
            let split = |p: &LinearParts| lin(p, x).reshape(&[b, s, h, d / h]).transpose(1, 2).contiguous();
            let q = split(&t.q);
            let k = split(&t.k);
            let v = split(&t.v);
            let scores = q.matmul(&k.t()).affine(1.0);
            let probs = self.dropout(softmax(&scores), t.attention_dropout);
            let ctx = probs.matmul(&v).transpose(1, 2).reshape(&[b, s, d]);
            self.dropout(lin(&t.o, &ctx), t.dropout)
        };
        let mlp = |x: &Tensor| -> Tensor {
            let h = lin(&t.fc1, x).unary(t.activation);
            self.dropout(lin(&t.fc2, &h), t.dropout)
        };
        let norm = |p: &NormParts, x: &Tensor| layer_norm(x, &p.w, &p.b);
        if t.norm_first {
            let h = x.add(&attn(&norm(&t.ln1, x)));
            h.add(&mlp(&norm(&t.ln2, &h)))
        } else {
            let h = norm(&t.ln1, &attn(x).add(x));
            norm(&t.ln2, &mlp(&h).add(&h))
        }
    }
}
