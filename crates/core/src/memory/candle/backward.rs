//! `Tensor::backward`, mirroring `candle-core/src/backprop.rs`: nodes in the reverse of a
//! depth-first topological sort, each node's gradient taken out of the store and detached, each
//! input's gradient accumulated out of place (see the module docs of `candle` for what that keeps
//! alive).

use super::tensor::{BinaryOp, Op, Tensor, Tracer, UnaryOp};
use std::collections::HashMap;
use std::rc::Rc;

/// candle's `GradStore`: gradients by tensor id.
pub(super) struct GradStore(HashMap<usize, Tensor>);

impl GradStore {
    pub(super) fn get(&self, t: &Tensor) -> Option<&Tensor> {
        self.0.get(&t.id())
    }
    /// `or_insert`: a zeros tensor the size of `t` on first touch.
    fn take_or_zeros(&mut self, t: &Tensor) -> Tensor {
        match self.0.remove(&t.id()) {
            Some(g) => g,
            None => t.zeros_like(),
        }
    }
    /// `*sum = sum.op(&g)`: the new sum is made while the old one is alive, then replaces it.
    fn accumulate(&mut self, t: &Tensor, g: &Tensor, op: BinaryOp) {
        self.replace(t, |sum| sum.binary(g, op));
    }
    /// `*sum = sum.add(&g.broadcast_as(sum))`: for gradients computed at a smaller shape.
    fn accumulate_broadcast(&mut self, t: &Tensor, g: &Tensor) {
        self.replace(t, |sum| sum.add(&g.broadcast_as(sum.dims())));
    }
    /// Takes the running sum (zeros on first touch), computes its replacement from it and
    /// stores that; the rule's temporaries are made after the sum, as in candle.
    fn replace(&mut self, t: &Tensor, new: impl FnOnce(&Tensor) -> Tensor) {
        let sum = self.take_or_zeros(t);
        let new = new(&sum);
        self.0.insert(t.id(), new);
        drop(sum);
    }
}

/// The tensors that lead to a variable, in the order backward visits them.
fn sorted_nodes(root: &Tensor) -> Vec<Tensor> {
    fn walk(n: &Tensor, nodes: &mut Vec<Tensor>, seen: &mut HashMap<usize, bool>) -> bool {
        if let Some(&leads) = seen.get(&n.id()) {
            return leads;
        }
        let mut leads = false;
        if n.is_var() {
            leads = true;
        } else if n.is_int() {
        } else if let Some(op) = n.op() {
            let skip = matches!(op, Op::Affine(_, m) if *m == 0.0) || matches!(op, Op::Cmp(_));
            if !skip {
                for a in op.args() {
                    leads |= walk(a, nodes, seen);
                }
            }
        }
        seen.insert(n.id(), leads);
        if leads {
            nodes.push(n.clone());
        }
        leads
    }
    let mut nodes = Vec::new();
    walk(root, &mut nodes, &mut HashMap::new());
    nodes.reverse();
    nodes
}

/// The gradients of `loss` with respect to every variable it depends on.
pub(super) fn backward(tracer: &Rc<Tracer>, loss: &Tensor) -> GradStore {
    let nodes = sorted_nodes(loss);
    let mut grads = GradStore(HashMap::new());
    grads.0.insert(loss.id(), loss.zeros_like());
    for node in &nodes {
        if node.is_var() {
            continue;
        }
        let Some(orig) = grads.0.remove(&node.id()) else { continue };
        let grad = orig.detach();
        let Some(op) = node.op() else { continue };
        input_grads(tracer, &mut grads, node, op, &grad);
        drop(grad);
        drop(orig);
    }
    grads
}

/// Accumulates the gradients of `op`'s inputs, given the gradient `grad` of its output `node`.
fn input_grads(tracer: &Rc<Tracer>, grads: &mut GradStore, node: &Tensor, op: &Op, grad: &Tensor) {
    use BinaryOp::{Add, Sub};
    match op {
        Op::Binary(l, r, Add) => {
            grads.accumulate(l, grad, Add);
            grads.accumulate(r, grad, Add);
        }
        Op::Binary(l, r, Sub) => {
            grads.accumulate(l, grad, Add);
            grads.accumulate(r, grad, Sub);
        }
        Op::Binary(l, r, BinaryOp::Mul) => {
            let lg = grad.mul(r);
            grads.accumulate(l, &lg, Add);
            let rg = grad.mul(l);
            grads.accumulate(r, &rg, Add);
        }
        Op::Binary(l, r, BinaryOp::Div) => {
            let lg = grad.div(r);
            grads.accumulate(l, &lg, Add);
            let rg = grad.mul(l).div(&r.unary(UnaryOp::Sqr));
            grads.accumulate(r, &rg, Sub);
        }
        Op::Conv2d { arg, kernel, pad, stride, dilation } => {
            let (gh, kh) = (grad.dims()[2], kernel.dims()[2]);
            let out_size = (gh - 1) * stride + dilation * (kh - 1) + 1 - 2 * pad;
            let out_pad = arg.dims()[2] - out_size;
            let ga = grad.conv_transpose2d(kernel, *pad, out_pad, *stride, *dilation);
            grads.accumulate(arg, &ga, Add);
            // candle swaps stride and dilation for the kernel's gradient
            let gk = arg.transpose(0, 1).conv2d(&grad.transpose(0, 1), *pad, *dilation, *stride).transpose(0, 1);
            let (k0, k1) = (kernel.dims()[2], kernel.dims()[3]);
            let gk = if gk.dims()[2] != k0 || gk.dims()[3] != k1 { gk.narrow(2, 0, k0).narrow(3, 0, k1) } else { gk };
            grads.accumulate(kernel, &gk, Add);
        }
        Op::ConvTranspose2d { .. } | Op::IndexAdd(..) | Op::Cmp(_) => {}
        Op::Matmul(l, r) => {
            let lg = grad.matmul(&r.t());
            grads.accumulate(l, &lg, Add);
            let rg = l.t().matmul(grad);
            grads.accumulate(r, &rg, Add);
        }
        Op::Broadcast(arg) => {
            let (ad, nd) = (arg.dims(), node.dims());
            let left = nd.len() - ad.len();
            let mut sum_dims: Vec<usize> = (0..left).collect();
            for (i, (n, a)) in nd[left..].iter().zip(ad).enumerate() {
                if n != a {
                    sum_dims.push(i + left);
                }
            }
            let mut ag = grad.sum_keepdim(&sum_dims);
            for _ in 0..left {
                ag = ag.squeeze(0);
            }
            grads.accumulate_broadcast(arg, &ag);
        }
        Op::Sum(arg, reduced) => {
            let g = broadcast_back(arg, grad, reduced);
            grads.accumulate(arg, &g, Add);
        }
        Op::Max(arg, reduced) => {
            let n = broadcast_back(arg, node, reduced);
            let g = broadcast_back(arg, grad, reduced);
            let g = n.cmp().to_f32().mul(&g);
            grads.accumulate_broadcast(arg, &g);
        }
        Op::Copy(arg) => grads.accumulate(arg, grad, Add),
        Op::ToDType(arg) => grads.accumulate(arg, &grad.to_f32(), Add),
        Op::Affine(arg, mul) => grads.accumulate(arg, &grad.affine(*mul), Add),
        Op::Unary(arg, unary) => unary_grad(grads, node, arg, *unary, grad),
        Op::Transpose(arg, a, b) => grads.accumulate(arg, &grad.transpose(*a, *b), Add),
        Op::Reshape(arg) => grads.accumulate(arg, &grad.reshape(arg.dims()), Add),
        Op::Narrow(arg, dim, start, len) => {
            // the gradient is padded back with zeros on each side that was cut
            let ad = arg.dims().to_vec();
            let zeros = |size: u64| {
                let mut d = ad.clone();
                d[*dim] = size;
                tracer.zeros(&d, false)
            };
            let left = (*start > 0).then(|| zeros(*start));
            let right = ad[*dim] - start - len;
            let right = (right > 0).then(|| zeros(right));
            let g = if left.is_none() && right.is_none() { grad.clone() } else { grad.out(&ad, false, Op::Copy(grad.clone())) };
            drop((left, right));
            grads.accumulate(arg, &g, Add);
        }
        Op::MaxPool(arg) => {
            let (b, c, h, w) = (arg.dims()[0], arg.dims()[1], arg.dims()[2], arg.dims()[3]);
            let _upsampled = node.out(&[b, c, h, w], false, Op::Upsample(node.clone()));
            let mask = arg.cmp().to_f32();
            let avg = mask.out(node.dims(), false, Op::AvgPool(mask.clone()));
            let ga = grad.mul(&avg);
            let gu = ga.out(&[b, c, h, w], false, Op::Upsample(ga.clone()));
            let g = gu.mul(&mask);
            grads.accumulate(arg, &g, Add);
        }
        Op::AvgPool(arg) => {
            let (b, c, h, w) = (arg.dims()[0], arg.dims()[1], arg.dims()[2], arg.dims()[3]);
            let gu = grad.out(&[b, c, h, w], false, Op::Upsample(grad.clone()));
            grads.accumulate(arg, &gu.affine(1.0), Add);
        }
        Op::Upsample(arg) => {
            // `grad.conv2d(ones(c,1,s,s), groups = c)`: per channel a chunk conv, then a cat
            let g = arg.zeros_like();
            let sum = grads.take_or_zeros(arg);
            drop(sum);
            grads.0.insert(arg.id(), g);
        }
        Op::PoolCustom(arg) => grads.accumulate(arg, &arg.zeros_like(), Add),
        Op::IndexSelect(arg, ids) => {
            grads.replace(arg, |sum| {
                let ids = ids.contiguous();
                sum.out(sum.dims(), false, Op::IndexAdd(sum.clone(), ids.clone(), grad.clone()))
            });
        }
        Op::Gather(arg, _) => grads.replace(arg, |sum| sum.out(sum.dims(), false, Op::Copy(sum.clone()))),
    }
}

/// The gradient rules of candle's unary ops.
fn unary_grad(grads: &mut GradStore, node: &Tensor, arg: &Tensor, op: UnaryOp, grad: &Tensor) {
    use BinaryOp::Add;
    match op {
        UnaryOp::Log => grads.accumulate(arg, &grad.div(arg), Add),
        UnaryOp::Exp => grads.accumulate(arg, &grad.mul(node), Add),
        UnaryOp::Tanh => grads.replace(arg, |sum| {
            let minus = node.unary(UnaryOp::Sqr).affine(1.0);
            sum.sub(&grad.mul(&minus))
        }),
        UnaryOp::Relu => grads.replace(arg, |sum| {
            let zeros = arg.zeros_like();
            let rg = arg.cmp().to_f32();
            drop(zeros);
            sum.add(&grad.mul(&rg))
        }),
        UnaryOp::Neg => grads.accumulate(arg, grad, BinaryOp::Sub),
        UnaryOp::Erf => {
            let e = arg.unary(UnaryOp::Sqr).unary(UnaryOp::Neg).unary(UnaryOp::Exp).affine(1.0);
            grads.accumulate(arg, &grad.mul(&e), Add);
        }
        // `let` ends the product's life before the accumulation allocates (as in candle)
        UnaryOp::Sqr => {
            let g = arg.mul(grad).affine(2.0);
            grads.accumulate(arg, &g, Add);
        }
        UnaryOp::Sqrt => {
            let g = grad.div(node).affine(0.5);
            grads.accumulate(arg, &g, Add);
        }
        UnaryOp::Gelu => grads.replace(arg, |sum| {
            let cube = arg.unary(UnaryOp::Sqr); // powf(3)
            let tanh = cube.affine(1.0).add(&arg.affine(1.0)).unary(UnaryOp::Tanh);
            let a = tanh.affine(0.5);
            let b = cube.affine(1.0).add(&arg.affine(1.0));
            let c = tanh.unary(UnaryOp::Sqr).affine(-1.0);
            let gg = a.add(&b.mul(&c)).affine(1.0);
            sum.add(&grad.mul(&gg))
        }),
        UnaryOp::GeluErf => grads.replace(arg, |sum| {
            let nhs = arg.unary(UnaryOp::Sqr).unary(UnaryOp::Neg).affine(0.5);
            let sea = nhs.unary(UnaryOp::Exp).affine(1.0).mul(arg);
            let ass = arg.affine(1.0);
            let ess = ass.unary(UnaryOp::Erf).affine(0.5);
            let gg = sea.affine(1.0).add(&ess);
            sum.add(&grad.mul(&gg))
        }),
    }
}

/// A reduced (keepdim) tensor broadcast back to the shape of `arg`.
fn broadcast_back(arg: &Tensor, node: &Tensor, reduced: &[u64]) -> Tensor {
    if arg.dims().len() == node.dims().len() {
        node.broadcast_as(arg.dims())
    } else {
        node.reshape(reduced).broadcast_as(arg.dims())
    }
}
