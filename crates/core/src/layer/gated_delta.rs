//! Gated DeltaNet linear attention (`Qwen3NextGatedDeltaNet`, `modeling_qwen3_next.py`,
//! transformers 5.24): `[S, hidden]` → `[S, hidden]` with a fixed recurrent state instead of a
//! growing KV cache.
//!
//! Parameters (exact, from `__init__`): `in_proj_qkvz` (H → 2·key_dim + 2·value_dim),
//! `in_proj_ba` (H → 2·v_heads), a bias-free depthwise `conv1d` over `conv_dim = 2·key_dim +
//! value_dim` channels, `dt_bias` and `A_log` (`v_heads` each), the gated RMSNorm over one head
//! (`head_v_dim` weights) and `out_proj` (value_dim → H).
//!
//! Memory (modelled from `torch_chunk_gated_delta_rule`, the PyTorch path without the `fla`
//! kernels, chunks of 64): fp32 copies of q, k, v at `v_heads` (`repeat_interleave` when there
//! are fewer key heads), their L2 norms, `k_beta` and `v_beta`, the `[v_heads, S, 64]` pairwise
//! decays, the `ut_system` and intra-chunk attention of that size, `solve_triangular`'s new
//! values and `k_cumdecay`, one `[v_heads, Dk, Dv]` state per chunk saved by the chunk loop, and
//! the output: the training path. Under `no_grad` (generation, inference) the rules run as
//! `gated_delta_infer.rs` follows them, with their Python locals. In `generate()` the layer
//! caches its conv and recurrent state (`state_cache.rs`).

use super::activation::{unary, Saves};
use super::linear::Linear;
use super::activation::mul;
use super::ssm::{causal_conv, rms, seq_of, tensor};
use super::gated_delta_infer::{rule, Dims};
use super::state_cache::{cache_states, StateSize};
use super::{positive, LayerResult};
use crate::lower::Builder;
use crate::graph::ValueId;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// The chunk length of `torch_chunk_gated_delta_rule` (its default, which Qwen3-Next uses).
const CHUNK: u64 = 64;

/// `Qwen3NextGatedDeltaNet(config)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatedDeltaNet {
    pub hidden_size: u64,
    /// `linear_num_key_heads`
    pub num_k_heads: u64,
    /// `linear_num_value_heads`
    pub num_v_heads: u64,
    /// `linear_key_head_dim`
    pub head_k_dim: u64,
    /// `linear_value_head_dim`
    pub head_v_dim: u64,
    /// `linear_conv_kernel_dim`
    #[serde(default = "four")]
    pub conv_kernel: u64,
}

fn four() -> u64 {
    4
}

impl GatedDeltaNet {
    fn key_dim(&self) -> u64 {
        self.num_k_heads.saturating_mul(self.head_k_dim)
    }

    fn value_dim(&self) -> u64 {
        self.num_v_heads.saturating_mul(self.head_v_dim)
    }

    pub fn state(&self) -> StateSize {
        StateSize {
            conv_channels: self.key_dim().saturating_mul(2).saturating_add(self.value_dim()),
            conv_kernel: self.conv_kernel,
            recurrent: self.num_v_heads.saturating_mul(self.head_k_dim).saturating_mul(self.head_v_dim),
        }
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        for (v, n) in [(self.hidden_size, "hidden_size"), (self.num_k_heads, "num_k_heads"), (self.num_v_heads, "num_v_heads"), (self.head_k_dim, "head_k_dim"), (self.head_v_dim, "head_v_dim"), (self.conv_kernel, "conv_kernel")] {
            positive(v, n)?;
        }
        if !self.num_v_heads.is_multiple_of(self.num_k_heads) {
            return Err(format!("num_v_heads ({}) must be a multiple of num_k_heads ({})", self.num_v_heads, self.num_k_heads));
        }
        let s = seq_of(b, x, self.hidden_size)?;
        let (h, kd, vd, hv, dk, dv) = (self.hidden_size, self.key_dim(), self.value_dim(), self.num_v_heads, self.head_k_dim, self.head_v_dim);
        let conv_dim = 2 * kd + vd;
        let lin = |i, o| Linear { in_features: i, out_features: o, bias: false, tied_weight: false };
        let qkvz = lin(h, 2 * kd + 2 * vd).lower(b, x)?;
        let ba = lin(h, 2 * hv).lower(b, x)?;
        let cdt = b.dtype(qkvz);
        // `z` stays a view of the projection (the norm's SiLU saves it, keeping all of `qkvz`);
        // `torch.cat((q, k, v))` for the conv
        let infer = !b.opts.training;
        let (z, mixed, copies) = if infer {
            // no_grad (`gated_delta_infer.rs`): `fix_query_key_value_ordering`'s reshapes of the
            // strided splits copy v and z, `x.reshape(b, s, -1)` q and k; the cat reads them.
            // `z` lives to the norm; q, k, v until `torch.split` rebinds them after the conv
            let cp = |b: &mut Builder, n: u64| tensor(b, "reshape", &[qkvz], Shape::new([s, n]), cdt, &[]);
            let (q, k, v, z) = (cp(b, kd), cp(b, kd), cp(b, vd), cp(b, vd));
            let mixed = tensor(b, "cat", &[q, k, v], Shape::new([conv_dim, s]), cdt, &[]);
            (z, mixed, vec![q, k, v])
        } else {
            let z = b.view(qkvz, Shape::new([s, vd]));
            (z, tensor(b, "cat", &[qkvz], Shape::new([conv_dim, s]), cdt, &[]), vec![])
        };
        let act = causal_conv(b, mixed, conv_dim, self.conv_kernel, s, false);
        copies.into_iter().for_each(|v| b.hold(v));
        // beta = b.sigmoid(); g = -A_log.float().exp() * softplus(a.float() + dt_bias)
        let f = DType::F32;
        let bv = b.view(ba, Shape::new([s, hv]));
        let beta = unary(b, "sigmoid", bv, Saves::Output);
        let dt_bias = b.param(Shape::new([hv]));
        let a_log = b.param(Shape::new([hv]));
        let a = unary(b, "exp", a_log, Saves::Output);
        let sp = tensor(b, "add", &[bv, dt_bias], Shape::new([s, hv]), f, &[]);
        let sp = unary(b, "softplus", sp, Saves::Input);
        let g = tensor(b, "mul", &[a, sp], Shape::new([s, hv]), f, &[a, sp]);
        let (out, state) = if infer {
            let decode = b.opts.generation.is_some_and(|g| !g.is_prefill()) && s == 1;
            let dims = Dims { hv, nk: self.num_k_heads, dk, dv, chunk: CHUNK, seq: s, decode, dtype: cdt };
            let (out, state) = rule(b, &dims, act, beta, g);
            (out, Some(state))
        } else {
            (self.chunked_train(b, act, beta, g, s, cdt), None)
        };
        // `Qwen3NextRMSNormGated(core_attn_out, z)` per head: the norm first (fp32), `weight [Dv]`,
        // then `* silu(z.float())`, cast back; then `out_proj`
        let xf = b.cast(out, f);
        let normed = rms(b, xf);
        let normed = b.cast(normed, cdt);
        let w = b.param(Shape::new([dv]));
        let wn = mul(b, w, normed);
        let zf = b.cast(z, f);
        let gate = unary(b, "silu", zf, Saves::Input);
        let y = mul(b, wn, gate);
        let y = b.cast(y, cdt);
        let y = lin(vd, h).lower(b, y)?;
        if infer {
            // the forward's locals until it returns: both projections, the conv output (q, k,
            // v are its views), beta, g and the returned `last_recurrent_state`
            [qkvz, ba, act, beta, g].into_iter().chain(state).for_each(|v| b.hold(v));
        }
        cache_states(b, self.state());
        Ok(y)
    }

    /// The chunked rule as training runs it: what its backward saves (module docs).
    fn chunked_train(&self, b: &mut Builder, act: ValueId, beta: ValueId, g: ValueId, s: u64, cdt: DType) -> ValueId {
        let (hv, dk, dv) = (self.num_v_heads, self.head_k_dim, self.head_v_dim);
        let f = DType::F32;
        let padded = s.div_ceil(CHUNK).saturating_mul(CHUNK);
        let chunks = padded / CHUNK;
        let qk = Shape::new([hv, padded, dk]);
        let vv = Shape::new([hv, padded, dv]);
        let qk_norm = |b: &mut Builder| {
            let c = tensor(b, "to_fp32", &[act], qk.clone(), f, &[]);
            // l2norm: x * rsqrt((x * x).sum(-1) + eps)
            let inv = tensor(b, "rsqrt_sum_sq", &[c], Shape::new([hv, padded, 1]), f, &[c]);
            tensor(b, "mul", &[c, inv], qk.clone(), f, &[c, inv])
        };
        let q = qk_norm(b);
        let k = qk_norm(b);
        let q = tensor(b, "mul_scalar", &[q], qk.clone(), f, &[]);
        let v = tensor(b, "to_fp32", &[act], vv.clone(), f, &[]);
        let v_beta = tensor(b, "mul", &[v, beta], vv.clone(), f, &[v, beta]);
        let k_beta = tensor(b, "mul", &[k, beta], qk.clone(), f, &[k, beta]);
        let cum = tensor(b, "cumsum", &[g], Shape::new([hv, padded]), f, &[]);
        let pairs = Shape::new([hv, padded, CHUNK]);
        let diff = tensor(b, "sub", &[cum], pairs.clone(), f, &[]);
        let masked = tensor(b, "masked_fill", &[diff], pairs.clone(), f, &[]);
        let decay = b.op("exp", &[masked], &[(pairs.clone(), f)], &[], true, &[], crate::graph::GradRule::Alloc)[0];
        let kk = tensor(b, "matmul", &[k_beta, k], pairs.clone(), f, &[k_beta, k]);
        let ut = tensor(b, "mul", &[kk, decay], pairs.clone(), f, &[kk, decay]);
        let qk_attn = tensor(b, "matmul", &[q, k], pairs.clone(), f, &[q, k]);
        let intra = tensor(b, "mul", &[qk_attn, decay], pairs, f, &[qk_attn, decay]);
        let cum_exp = unary(b, "exp", cum, Saves::Output);
        let decayed_k = tensor(b, "mul", &[k_beta, cum_exp], qk.clone(), f, &[k_beta, cum_exp]);
        let new_values = b.op("solve_triangular", &[ut, v_beta], &[(vv.clone(), f)], &[ut], true, &[], crate::graph::GradRule::Alloc)[0];
        let k_cum = b.op("solve_triangular", &[ut, decayed_k], &[(qk.clone(), f)], &[ut], true, &[], crate::graph::GradRule::Alloc)[0];
        let q = tensor(b, "mul", &[q, cum_exp], qk.clone(), f, &[q, cum_exp]);
        let k = tensor(b, "mul", &[k, cum_exp], qk, f, &[k, cum_exp]);
        // the chunk loop: each chunk's new state [hv, Dk, Dv] (saved by the next chunk's matmuls),
        // `v_new` and the inter-chunk attention, written into `core_attn_out`
        let states = tensor(b, "chunk_loop_states", &[k_cum, q, k, new_values], Shape::new([chunks, hv, dk, dv]), f, &[k_cum, q, k]);
        let v_new = tensor(b, "chunk_loop_values", &[new_values, states], vv.clone(), f, &[new_values, states, intra]);
        let out = tensor(b, "chunk_loop_out", &[intra, v_new, states], vv, f, &[]);
        tensor(b, "to", &[out], Shape::new([s, self.value_dim()]), cdt, &[])
    }
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::one;
    use serde_json::json;

    #[test]
    fn gated_delta_net_params() {
        // 2 key heads of 16, 4 value heads of 16: key_dim 32, value_dim 64, conv_dim 128;
        // in_proj_qkvz 64·192, in_proj_ba 64·8, conv 128·4, dt_bias + A_log 8, norm 16, out_proj 64·64
        let l = one(json!({"kind": "gated_delta_net", "hidden_size": 64, "num_k_heads": 2, "num_v_heads": 4, "head_k_dim": 16, "head_v_dim": 16}), &[70, 64]);
        assert_eq!((l.shape, l.params), (vec![70, 64], 64 * 192 + 64 * 8 + 128 * 4 + 8 + 16 + 64 * 64));
    }
}
