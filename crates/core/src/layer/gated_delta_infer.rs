//! Gated DeltaNet under `no_grad` (`generate()`'s forwards, `modeling_qwen3_next.py`,
//! transformers 5.24, the PyTorch paths without `fla`): what lives is what the Python code
//! holds, not what a backward would save, so the rule is followed op by op with its locals.
//!
//! * **Prefill** (`torch_chunk_gated_delta_rule`): q, k (`repeat_interleave` to the value heads),
//!   v, beta and the decay become fp32 `[v_heads, S, d]` copies (`.transpose(1, 2).to(float32,
//!   memory_format=contiguous)`; the list holds the old and new ones until it is unpacked), q and
//!   k are L2-normed (`x * rsqrt((x * x).sum(-1) + eps)`), q scaled, all five padded to whole
//!   chunks (`F.pad` copies even by 0; the generator keeps the three old ones until it is
//!   exhausted), `v_beta`, `k_beta`, the `[v_heads, S, 64]` pairwise decays (`sub`,
//!   `masked_fill`, `exp`: each rebinding frees the last), `ut_system` and `intra_chunk_attn`
//!   (a matmul's temporary times the decays), `decayed_k_beta`, the two `solve_triangular`s,
//!   the zero state and output, q and k decayed once more (rebound), then the chunk loop: `v_new`,
//!   `inter_chunk_attn`, `intra @ v_new`, and the new `[v_heads, Dk, Dv]` state. Every local lives
//!   until the function returns the output (`transpose(1, 2).to(dtype, contiguous)`: a copy) and
//!   the state, which the layer keeps to its end (`cache.update_recurrent_state` copies it).
//! * **Decode** (`torch_recurrent_gated_delta_rule`, one token): the same fp32 copies of one
//!   token, the cached state read in place (`initial_state.to(value)`), and per step
//!   `state * decay`, `state * k` (summed), `k * delta`, their sum (the new state) and
//!   `state * q` (summed): `[v_heads, Dk, Dv]` temporaries.

use super::ssm::tensor;
use crate::lower::Builder;
use crate::graph::ValueId;
use crate::units::{DType, Shape};

/// One forward of a layer: value heads, key heads, key and value head sizes, the chunk length,
/// the tokens, whether it is a one-token decode step, and the compute dtype.
pub struct Dims {
    pub hv: u64,
    pub nk: u64,
    pub dk: u64,
    pub dv: u64,
    pub chunk: u64,
    pub seq: u64,
    pub decode: bool,
    pub dtype: DType,
}

/// The rule on the conv output `act` (`[conv_dim, S]`), `beta` and `g` (`[S, hv]`): returns the
/// `[S, hv·dv]` output in `cdt`; the state the caller keeps is held to the last op emitted.
pub fn rule(b: &mut Builder, d: &Dims, act: ValueId, beta: ValueId, g: ValueId) -> (ValueId, ValueId) {
    let (s, decode, cdt) = (d.seq, d.decode, d.dtype);
    let f = DType::F32;
    let (hv, dk, dv) = (d.hv, d.dk, d.dv);
    let qk_s = Shape::new([hv, s, dk]);
    let vv_s = Shape::new([hv, s, dv]);
    let small = Shape::new([hv, s]);
    // `repeat_interleave` of q and k to the value heads (a copy only when there are fewer)
    let (qr, kr) = if d.nk != hv {
        let r = |b: &mut Builder| tensor(b, "repeat_interleave", &[act], Shape::new([s, hv, dk]), cdt, &[]);
        (r(b), r(b))
    } else {
        (act, act)
    };
    let q0 = tensor(b, "to_fp32", &[qr], qk_s.clone(), f, &[]);
    let k0 = tensor(b, "to_fp32", &[kr], qk_s.clone(), f, &[]);
    let v0 = tensor(b, "to_fp32", &[act], vv_s.clone(), f, &[]);
    let beta0 = tensor(b, "to_fp32", &[beta], small.clone(), f, &[]);
    let g0 = tensor(b, "to_fp32", &[g], small.clone(), f, &[]);
    b.hold(qr);
    b.hold(kr);
    let l2 = |b: &mut Builder, x: ValueId| {
        let shape = b.shape(x).clone();
        let sq = tensor(b, "mul", &[x, x], shape.clone(), f, &[]);
        let inv = tensor(b, "rsqrt_sum", &[sq], Shape::new([hv, s, 1]), f, &[]);
        tensor(b, "mul", &[x, inv], shape, f, &[])
    };
    let q1 = l2(b, q0);
    let k1 = l2(b, k0);
    let q2 = tensor(b, "mul_scalar", &[q1], qk_s.clone(), f, &[]);
    if decode {
        // `initial_state.to(value)`: the cache's fp32 state itself; `zeros_like(value)`
        let out0 = tensor(b, "zeros_like", &[v0], vv_s, f, &[]);
        let st = Shape::new([hv, dk, dv]);
        let s1 = tensor(b, "mul", &[g0], st.clone(), f, &[]);
        let t = tensor(b, "mul", &[s1, k1], st.clone(), f, &[]);
        let mem = tensor(b, "sum", &[t], Shape::new([hv, dv]), f, &[]);
        let delta = tensor(b, "mul", &[v0, mem, beta0], Shape::new([hv, dv]), f, &[]);
        let t2 = tensor(b, "mul", &[k1, delta], st.clone(), f, &[]);
        let s2 = tensor(b, "add", &[s1, t2], st.clone(), f, &[]);
        let t3 = tensor(b, "mul", &[s2, q2], st, f, &[]);
        tensor(b, "sum_into", &[t3, out0], Shape::new([hv, dv]), f, &[]);
        let out = tensor(b, "to_contiguous", &[out0], Shape::new([s, hv * dv]), cdt, &[]);
        for v in [q2, k1, v0, beta0, g0, out0] {
            b.hold(v);
        }
        return (out, s2);
    }
    let padded = s.div_ceil(d.chunk).saturating_mul(d.chunk);
    let qk = Shape::new([hv, padded, dk]);
    let vv = Shape::new([hv, padded, dv]);
    let pad_small = Shape::new([hv, padded]);
    let qp = tensor(b, "pad", &[q2], qk.clone(), f, &[]);
    let kp = tensor(b, "pad", &[k1], qk.clone(), f, &[]);
    let vp = tensor(b, "pad", &[v0], vv.clone(), f, &[]);
    for v in [q2, k1, v0] {
        b.hold(v);
    }
    let betap = tensor(b, "pad", &[beta0], pad_small.clone(), f, &[]);
    let decayp = tensor(b, "pad", &[g0], pad_small.clone(), f, &[]);
    let v_beta = tensor(b, "mul", &[vp, betap], vv.clone(), f, &[]);
    let k_beta = tensor(b, "mul", &[kp, betap], qk.clone(), f, &[]);
    let cum = tensor(b, "cumsum", &[decayp], pad_small.clone(), f, &[]);
    let pairs = Shape::new([hv, padded, d.chunk]);
    let p0 = tensor(b, "sub", &[cum], pairs.clone(), f, &[]);
    let p1 = tensor(b, "masked_fill", &[p0], pairs.clone(), f, &[]);
    let decay = tensor(b, "exp", &[p1], pairs.clone(), f, &[]);
    let kk = tensor(b, "matmul", &[k_beta, kp], pairs.clone(), f, &[]);
    let ut = tensor(b, "mul", &[kk, decay], pairs.clone(), f, &[]);
    let qk_attn = tensor(b, "matmul", &[qp, kp], pairs.clone(), f, &[]);
    let intra = tensor(b, "mul", &[qk_attn, decay], pairs, f, &[]);
    let cum_exp = tensor(b, "exp", &[cum], pad_small.clone(), f, &[]);
    let decayed_k = tensor(b, "mul", &[k_beta, cum_exp], qk.clone(), f, &[]);
    let new_values = tensor(b, "solve_triangular", &[ut, v_beta], vv.clone(), f, &[]);
    let k_cum = tensor(b, "solve_triangular", &[ut, decayed_k], qk.clone(), f, &[]);
    let st = Shape::new([hv, dk, dv]);
    let state0 = tensor(b, "zeros", &[new_values], st.clone(), f, &[]);
    let out0 = tensor(b, "zeros_like", &[new_values], vv, f, &[]);
    let q3 = tensor(b, "mul", &[qp, cum_exp], qk.clone(), f, &[]);
    let rest = tensor(b, "exp", &[cum], pad_small, f, &[]);
    let k3 = tensor(b, "mul", &[kp, rest], qk, f, &[]);
    // the loop, one chunk's tensors at a time (`[hv, chunk, d]`): each iteration's `v_new`,
    // `inter_chunk_attn` and state stay bound until the next one rebinds them, so from the
    // second chunk on two of each are live; two iterations are the steady state
    let cv = Shape::new([hv, d.chunk.min(padded), dv]);
    let (mut state, mut last) = (state0, Vec::new());
    for _ in 0..(padded / d.chunk).min(2) {
        let read = tensor(b, "matmul", &[k_cum, state], cv.clone(), f, &[]);
        let v_new = tensor(b, "sub", &[new_values, read], cv.clone(), f, &[]);
        let inter = tensor(b, "matmul", &[q3, state], cv.clone(), f, &[]);
        last.drain(..).for_each(|v| b.hold(v));
        let local = tensor(b, "matmul", &[intra, v_new], cv.clone(), f, &[]);
        tensor(b, "add_into", &[inter, local, out0], cv.clone(), f, &[]);
        let decayed = tensor(b, "mul", &[state], st.clone(), f, &[]);
        let update = tensor(b, "matmul", &[k3, v_new], st.clone(), f, &[]);
        let old = state;
        state = tensor(b, "add", &[decayed, update], st.clone(), f, &[]);
        b.hold(old);
        last = vec![v_new, inter];
    }
    let (v_new, inter) = (last[0], last[1]);
    let out = tensor(b, "to_contiguous", &[out0], Shape::new([s, hv * dv]), cdt, &[]);
    for v in [vp, betap, decayp, v_beta, k_beta, cum, decay, ut, intra, decayed_k, new_values, k_cum, out0, q3, k3, v_new, inter] {
        b.hold(v);
    }
    (out, state)
}
