//! candle-nn 0.11's functions, call by call, on shadow tensors (what each keeps alive follows
//! from the calls: every tracked output holds its inputs).

use super::tensor::{product, BinaryOp, Op, Tensor, UnaryOp};
use crate::error::{Error, Result};

/// `candle_nn::Linear::forward`.
pub(super) fn linear(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
    let d = x.dims().to_vec();
    let y = match d.len() {
        3 if x.is_contiguous() => {
            let wt = w.t();
            x.reshape(&[d[0].saturating_mul(d[1]), d[2]]).matmul(&wt).reshape(&[d[0], d[1], w.dims()[0]])
        }
        3 => {
            let wt = w.broadcast_as(&[d[0], w.dims()[0], w.dims()[1]]).t();
            x.matmul(&wt)
        }
        _ => x.matmul(&w.t()),
    };
    match b {
        None => y,
        Some(b) => y.broadcast_binary(b, BinaryOp::Add),
    }
}

/// `candle_nn::Conv2d::forward`: the convolution, then the bias as a `(1, c, 1, 1)` view.
pub(super) fn conv2d(x: &Tensor, w: &Tensor, b: Option<&Tensor>, pad: u64, stride: u64, dilation: u64) -> Tensor {
    let y = x.conv2d(w, pad, stride, dilation);
    match b {
        None => y,
        Some(b) => y.broadcast_binary(&b.reshape(&[1, b.dims()[0], 1, 1]), BinaryOp::Add),
    }
}

/// `candle_nn::BatchNorm::forward_train` (fp32: `to_dtype` is a clone).
pub(super) fn batch_norm_train(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let xt = x.transpose(0, 1);
    let post = xt.dims().to_vec();
    let rest = product(&post[1..]);
    let xf = xt.reshape(&[post[0], rest]).contiguous();
    let mean = xf.mean_keepdim(&[1]);
    running_stat_update(&mean, post[0]);
    let xc = xf.broadcast_binary(&mean, BinaryOp::Sub);
    let norm = xc.unary(UnaryOp::Sqr).mean_keepdim(&[1]);
    running_stat_update(&norm, post[0]);
    let xn = xc.broadcast_binary(&norm.affine(1.0).unary(UnaryOp::Sqrt), BinaryOp::Div);
    let y = xn.broadcast_binary(&w.reshape(&[post[0], 1]), BinaryOp::Mul).broadcast_binary(&b.reshape(&[post[0], 1]), BinaryOp::Add);
    y.reshape(&post).transpose(0, 1)
}

/// A running statistic's update: `(rm * (1 - m)) + (stat.flatten_all() * m)`, then `set`
/// (its temporaries die at once).
fn running_stat_update(stat: &Tensor, channels: u64) {
    let scaled = stat.reshape(&[channels]).affine(0.1);
    let _updated = scaled.affine(1.0);
}

/// `candle_nn::LayerNorm::forward`'s non-fused path (the fused op has no backward).
pub(super) fn layer_norm(x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    let r = x.dims().len() - 1;
    let mean = x.sum_keepdim(&[r]).affine(1.0);
    let xc = x.broadcast_binary(&mean, BinaryOp::Sub);
    let norm = xc.unary(UnaryOp::Sqr).sum_keepdim(&[r]).affine(1.0);
    let xn = xc.broadcast_binary(&norm.affine(1.0).unary(UnaryOp::Sqrt), BinaryOp::Div);
    xn.broadcast_binary(w, BinaryOp::Mul).broadcast_binary(b, BinaryOp::Add)
}

/// `candle_nn::ops::dropout`: uniform noise, a comparison, an f32 mask scaled, a product.
pub(super) fn dropout(x: &Tensor) -> Tensor {
    let tracer = x.tracer();
    let rand = tracer.zeros(x.dims(), false);
    let scalar = tracer.zeros(&[], false);
    let threshold = scalar.broadcast_as(x.dims());
    let mask = rand.cmp().to_f32().affine(2.0);
    let y = x.mul(&mask);
    drop((rand, threshold));
    y
}

/// `candle_nn::ops::softmax` over the last dimension.
pub(super) fn softmax(x: &Tensor) -> Tensor {
    let d = x.dims().len() - 1;
    let max = x.max_keepdim(d);
    let diff = x.broadcast_binary(&max, BinaryOp::Sub);
    let num = diff.unary(UnaryOp::Exp);
    let den = num.sum_keepdim(&[d]);
    num.broadcast_binary(&den, BinaryOp::Div)
}

/// `candle_nn::loss::cross_entropy` = `log_softmax(inp, 1)` + `nll`.
pub(super) fn cross_entropy(inp: &Tensor, target: &Tensor) -> Tensor {
    let max = inp.max_keepdim(1);
    let diff = inp.broadcast_binary(&max, BinaryOp::Sub);
    let sum_exp = diff.unary(UnaryOp::Exp).sum_keepdim(&[1]);
    let log_sm = diff.broadcast_binary(&sum_exp.unary(UnaryOp::Log), BinaryOp::Sub);
    let idx = target.reshape(&[target.dims()[0], 1]);
    let g = log_sm.out(&[inp.dims()[0], 1], false, Op::Gather(log_sm.clone(), idx.clone()));
    g.sum_all().affine(1.0)
}

/// `candle_nn::Embedding::forward`: `index_select` on the flattened ids, reshaped.
pub(super) fn embedding(ids: &Tensor, w: &Tensor) -> Tensor {
    let mut dims = ids.dims().to_vec();
    dims.push(w.dims()[1]);
    let flat = ids.reshape(&[ids.numel()]);
    let v = w.out(&[ids.numel(), w.dims()[1]], false, Op::IndexSelect(w.clone(), flat.clone()));
    v.reshape(&dims)
}

/// Max pooling: candle's native kernel when windows tile the input, else the verifier's
/// custom op (output only; its backward allocates the input gradient).
pub(super) fn max_pool(x: &Tensor, kernel: u64, stride: u64, pad: u64) -> Tensor {
    let d = x.dims();
    let oh = (d[2] + 2 * pad - kernel) / stride + 1;
    let ow = (d[3] + 2 * pad - kernel) / stride + 1;
    let op = if kernel == stride && pad == 0 { Op::MaxPool(x.clone()) } else { Op::PoolCustom(x.clone()) };
    x.out(&[d[0], d[1], oh, ow], false, op)
}

/// Adaptive average pooling to `out`×`out`, as the verifier writes it with candle's ops.
pub(super) fn adaptive_avg(x: &Tensor, out: u64) -> Result<Tensor> {
    let d = x.dims().to_vec();
    let h = d[2];
    Ok(if out == 1 {
        x.mean_keepdim(&[2, 3])
    } else if h == out {
        x.clone()
    } else if h.is_multiple_of(out) {
        x.out(&[d[0], d[1], out, out], false, Op::AvgPool(x.clone()))
    } else if out.is_multiple_of(h) {
        x.out(&[d[0], d[1], out, out], false, Op::Upsample(x.clone()))
    } else {
        return Err(Error::Config(format!("adaptive_avg_pool2d from {h} to {out} has no candle equivalent")));
    })
}

/// candle-nn's `SGD::step` for one variable.
pub(super) fn sgd_update(theta: &Tensor, g: &Tensor) {
    let next = theta.sub(&g.affine(0.01));
    theta.set(&next);
}

/// candle-nn's `AdamW::step` for one variable, statement by statement.
pub(super) fn adamw_update(theta: &Tensor, m: &Tensor, v: &Tensor, g: &Tensor) {
    let next_m = m.affine(0.9).add(&g.affine(0.1));
    let next_v = v.affine(0.999).add(&g.unary(UnaryOp::Sqr).affine(0.001));
    let m_hat = next_m.affine(1.0);
    let v_hat = next_v.affine(1.0);
    let next_theta = theta.affine(1.0);
    let adjusted = m_hat.div(&v_hat.unary(UnaryOp::Sqrt).affine(1.0));
    let next_theta = next_theta.sub(&adjusted.affine(1e-3));
    m.set(&next_m);
    v.set(&next_v);
    theta.set(&next_theta);
}
