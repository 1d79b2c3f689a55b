//! State-space mixers: Mamba's `MambaMixer` (`modeling_mamba.py`, also Jamba's with its
//! `dt/b/c_layernorm`) and Mamba-2's `Mamba2Mixer` (`modeling_mamba2.py`, also Bamba's and
//! Falcon-H1's), `[S, hidden]` → `[S, hidden]`, as transformers 5.24 builds them.
//!
//! Parameters are read from the modules' `__init__` (exact). Memory follows the PyTorch-only
//! path (no `mamba_ssm` / `causal_conv1d` kernels installed; this is *modelled* from the code,
//! not measured):
//!
//! * Mamba (`mamba_selective_scan`'s sequential loop): `discrete_A = exp(A · dt)` and
//!   `deltaB_u = dt · B · x` are `[I, S, N]` fp32 tensors, and the loop's `S` new `[I, N]`
//!   states are all saved for backward (one `[I, S, N]` in total).
//!   Under `no_grad` the loop keeps one `[I, N]` state and lists the `S` outputs, and
//!   `discrete_A`, `discrete_B` and `deltaB_u` stay the scan's locals until it returns (its
//!   peak: measured in `tests/generate_families.rs`).
//! * Mamba-2 (`mamba2_chunk_scan`, chunks of `chunk_size` Q): `B`, `C` repeated to the heads
//!   (`[S, h, N]` fp32), `F.pad` copies of x, A, B, C (`pad_tensor_by_size` copies even by 0),
//!   the intra-chunk `L`, `G`, `M` (`[S, Q, h]` fp32 each), `B_decay`, the per-chunk states
//!   `[S/Q + 1, h, P, N]`, the two output halves, and each `einsum`'s contiguous copies of its
//!   operands, which its `bmm` saves.
//!
//! In `generate()` each mixer caches a fixed state per sequence (`state_cache.rs`).

use super::activation::{add, mul, unary, Saves};
use super::linear::Linear;
use super::state_cache::{cache_states, StateSize};
use super::{expect_last, positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::serde_util::t;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

/// `MambaMixer(config)`: `in_proj` (H → 2I), a depthwise `conv1d` (I channels, `conv_kernel`
/// taps), `x_proj` (I → R + 2N), `dt_proj` (R → I, biased), `A_log [I, N]`, `D [I]`,
/// `out_proj` (I → H).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MambaMixer {
    pub hidden_size: u64,
    pub intermediate_size: u64,
    /// N (`state_size`).
    #[serde(default = "sixteen")]
    pub state_size: u64,
    #[serde(default = "four")]
    pub conv_kernel: u64,
    /// R (`time_step_rank`).
    pub time_step_rank: u64,
    #[serde(default = "t")]
    pub conv_bias: bool,
    /// Biases of `in_proj` and `out_proj` (`use_bias`).
    #[serde(default)]
    pub bias: bool,
    /// Jamba's RMSNorms of the time step (R), B and C (N each) after `x_proj`.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub inner_norms: bool,
}

/// `Mamba2Mixer(config)`: `in_proj` (H → I + conv_dim + heads), a depthwise `conv1d` over
/// `conv_dim = I + 2·groups·N` channels, `dt_bias`, `A_log`, `D` (one per head), the gated
/// RMSNorm (I) and `out_proj` (I → H), with I = heads × head_dim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mamba2Mixer {
    pub hidden_size: u64,
    pub num_heads: u64,
    pub head_dim: u64,
    #[serde(default = "one_twenty_eight")]
    pub state_size: u64,
    #[serde(default = "one")]
    pub n_groups: u64,
    #[serde(default = "four")]
    pub conv_kernel: u64,
    #[serde(default = "two_fifty_six")]
    pub chunk_size: u64,
    #[serde(default = "t")]
    pub conv_bias: bool,
    /// Bias of `in_proj` (`use_bias`, Falcon-H1's `mamba_proj_bias`).
    #[serde(default)]
    pub bias: bool,
    /// Bias of `out_proj` (default `bias`; Falcon-H1's `projectors_bias`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_bias: Option<bool>,
    /// The gated RMSNorm before `out_proj` (Falcon-H1's `mamba_rms_norm` may turn it off).
    #[serde(default = "t")]
    pub gated_norm: bool,
}

fn one() -> u64 {
    1
}
fn four() -> u64 {
    4
}
fn sixteen() -> u64 {
    16
}
fn one_twenty_eight() -> u64 {
    128
}
fn two_fifty_six() -> u64 {
    256
}

/// A new tensor of `shape` computed from `inputs`, keeping `saved` for backward.
pub(crate) fn tensor(b: &mut Builder, name: &'static str, inputs: &[ValueId], shape: Shape, dt: DType, saved: &[ValueId]) -> ValueId {
    b.op(name, inputs, &[(shape, dt)], saved, false, &[], GradRule::Alloc)[0]
}

/// The sequence length of a `[S, features]` input.
pub(crate) fn seq_of(b: &Builder, x: ValueId, features: u64) -> LayerResult<u64> {
    let s = &b.shape(x).0;
    if s.len() != 2 {
        return Err(format!("expected a [S, {features}] input, got {}", b.shape(x)));
    }
    expect_last(b.shape(x), features, "features")?;
    Ok(s[0])
}

/// The depthwise causal conv (`causal_conv1d_fn`'s `F.conv1d(..., padding=K-1, groups=C)[..., :S]`)
/// and its SiLU: weight `[C, 1, K]`, bias `[C]`; the conv output is `[C, S + K − 1]`.
pub(crate) fn causal_conv(b: &mut Builder, x: ValueId, channels: u64, kernel: u64, seq: u64, bias: bool) -> ValueId {
    let w = b.param(Shape::new([channels, 1, kernel]));
    let mut ins = vec![x, w];
    if bias {
        ins.push(b.param(Shape::new([channels])));
    }
    let dt = b.dtype(x);
    let conv = tensor(b, "conv1d", &ins, Shape::new([channels, seq.saturating_add(kernel - 1)]), dt, &[x, w]);
    let sliced = b.view(conv, Shape::new([channels, seq]));
    unary(b, "silu", sliced, Saves::Input)
}

impl MambaMixer {
    pub fn state(&self) -> StateSize {
        StateSize { conv_channels: self.intermediate_size, conv_kernel: self.conv_kernel, recurrent: self.intermediate_size.saturating_mul(self.state_size) }
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        for (v, n) in [(self.hidden_size, "hidden_size"), (self.intermediate_size, "intermediate_size"), (self.state_size, "state_size"), (self.conv_kernel, "conv_kernel"), (self.time_step_rank, "time_step_rank")] {
            positive(v, n)?;
        }
        let s = seq_of(b, x, self.hidden_size)?;
        let (h, i, n, r) = (self.hidden_size, self.intermediate_size, self.state_size, self.time_step_rank);
        let lin = |i, o, bias| Linear { in_features: i, out_features: o, bias, tied_weight: false };
        let proj = lin(h, 2 * i, self.bias).lower(b, x)?;
        // `projected_states.transpose(1, 2).chunk(2, dim=1)`: views of one storage
        let hidden = b.view(proj, Shape::new([i, s]));
        let gate = b.view(proj, Shape::new([i, s]));
        let act = causal_conv(b, hidden, i, self.conv_kernel, s, self.conv_bias);
        let act_t = b.view(act, Shape::new([s, i]));
        let xdbc = lin(i, r + 2 * n, false).lower(b, act_t)?;
        let (ts, bm, cm) = if self.inner_norms {
            let norm = |b: &mut Builder, w: u64| {
                let v = b.view(xdbc, Shape::new([s, w]));
                super::norm::RmsNorm { normalized_shape: w, eps: 1e-6, t5: false }.lower(b, v)
            };
            (norm(b, r)?, norm(b, n)?, norm(b, n)?)
        } else {
            (b.view(xdbc, Shape::new([s, r])), b.view(xdbc, Shape::new([s, n])), b.view(xdbc, Shape::new([s, n])))
        };
        // `self.dt_proj.weight @ time_step.transpose(1, 2)`: [I, S]
        let dt_w = b.param(Shape::new([i, r]));
        let dt_b = b.param(Shape::new([i]));
        let cdt = b.dtype(xdbc);
        let time_step = tensor(b, "matmul", &[dt_w, ts], Shape::new([i, s]), cdt, &[dt_w, ts]);
        let a_log = b.param(Shape::new([i, n]));
        let d = b.param(Shape::new([i]));
        let f = DType::F32;
        // A = -exp(A_log.float())
        let a = unary(b, "exp", a_log, Saves::Output);
        let a = unary(b, "neg", a, Saves::Nothing);
        // dt = softplus(dt + bias)
        let dt = tensor(b, "add", &[time_step, dt_b], Shape::new([i, s]), f, &[]);
        let dt = unary(b, "softplus", dt, Saves::Input);
        let big = Shape::new([i, s, n]);
        let da = tensor(b, "mul", &[a, dt], big.clone(), f, &[a, dt]);
        let discrete_a = b.op("exp", &[da], &[(big.clone(), f)], &[], true, &[], GradRule::Alloc)[0];
        let discrete_b = tensor(b, "mul", &[dt, bm], big.clone(), f, &[dt, bm]);
        // the scan's `hidden_states` is the conv's output (`hidden_states_B_C` after `causal_conv1d_fn`)
        let delta_bu = tensor(b, "mul", &[discrete_b, act], big.clone(), f, &[discrete_b, act]);
        let (y, locals) = if b.opts.training {
            // the loop: `S` new [I, N] states, each saved by the next step's mul and its matmul with C
            let states = b.op("scan_loop", &[discrete_a, delta_bu, cm], &[(big.clone(), f)], &[discrete_a, cm], true, &[], GradRule::Alloc)[0];
            // backward: each step's `SelectBackward` of `discrete_A[:, :, i]` and `deltaB_u[:, :, i]`
            // makes a full-size zero gradient before it is accumulated: one more [I, S, N] at a time
            b.last_bwd_scratch(crate::graph::Lin { fixed: 0, per_sample: big.numel().saturating_mul(4) });
            (tensor(b, "stack", &[states], Shape::new([i, s]), f, &[]), vec![])
        } else if b.opts.generation.is_some_and(|g| !g.is_prefill()) && s == 1 {
            // a decode step (`mamba_selective_state_update`): `state.float() * dA + dBx`, a
            // temporary and the new state, then `ssm_state @ C`
            let tmp = tensor(b, "mul", &[discrete_a], big.clone(), f, &[]);
            let state = tensor(b, "add", &[tmp, delta_bu], big.clone(), f, &[]);
            let out = tensor(b, "matmul", &[state, cm], Shape::new([i, s]), cdt, &[]);
            (out, vec![discrete_a, discrete_b, delta_bu, state, dt, time_step, act, a])
        } else {
            // no grad (`mamba_selective_scan`'s recurrent loop): one [I, N] `ssm_state` at a time
            // (the last kept), the `S` outputs `scan_output[:, :, 0]` ([I] views of [I, 1]
            // matmuls, in the input dtype) listed in `scan_outputs`, then `torch.stack`
            let outs = tensor(b, "scan_outputs", &[discrete_a, delta_bu, cm], Shape::new([i, s]), cdt, &[]);
            let state = tensor(b, "ssm_state", &[outs], Shape::new([i, n]), cdt, &[]);
            (tensor(b, "stack", &[outs], Shape::new([i, s]), cdt, &[]), vec![discrete_a, discrete_b, delta_bu, outs, state, dt, time_step, act, a])
        };
        let skip = mul(b, act, d);
        let y = add(b, y, skip);
        let z = unary(b, "silu", gate, Saves::Input);
        let y = mul(b, y, z);
        // `discrete_A`, `discrete_B`, `deltaB_u`, the list, the state and `dt` are the scan's
        // locals until it returns (modeling_mamba.py `mamba_selective_scan`); `A`, `time_step`
        // and the conv output (`hidden_states_B_C`) the mixer's
        locals.into_iter().for_each(|v| b.hold(v));
        let compute = b.dtype(proj);
        let y = b.cast(y, compute);
        let y = b.view(y, Shape::new([s, i]));
        let out = lin(i, h, self.bias).lower(b, y)?;
        cache_states(b, self.state());
        Ok(out)
    }
}

impl Mamba2Mixer {
    fn inner(&self) -> u64 {
        self.num_heads.saturating_mul(self.head_dim)
    }

    fn conv_dim(&self) -> u64 {
        self.inner().saturating_add(self.n_groups.saturating_mul(self.state_size).saturating_mul(2))
    }

    pub fn state(&self) -> StateSize {
        StateSize {
            conv_channels: self.conv_dim(),
            conv_kernel: self.conv_kernel,
            recurrent: self.inner().saturating_mul(self.state_size),
        }
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        for (v, n) in [(self.hidden_size, "hidden_size"), (self.num_heads, "num_heads"), (self.head_dim, "head_dim"), (self.state_size, "state_size"), (self.n_groups, "n_groups"), (self.conv_kernel, "conv_kernel"), (self.chunk_size, "chunk_size")] {
            positive(v, n)?;
        }
        if !self.num_heads.is_multiple_of(self.n_groups) {
            return Err(format!("num_heads ({}) must be a multiple of n_groups ({})", self.num_heads, self.n_groups));
        }
        let s = seq_of(b, x, self.hidden_size)?;
        let (h, i, heads) = (self.hidden_size, self.inner(), self.num_heads);
        let conv_dim = self.conv_dim();
        let lin = |i, o, bias| Linear { in_features: i, out_features: o, bias, tied_weight: false };
        let proj = lin(h, i + conv_dim + heads, self.bias).lower(b, x)?;
        let gate = b.view(proj, Shape::new([s, i]));
        let xbc = b.view(proj, Shape::new([conv_dim, s]));
        let dt_raw = b.view(proj, Shape::new([s, heads]));
        let act = causal_conv(b, xbc, conv_dim, self.conv_kernel, s, self.conv_bias);
        let dt_bias = b.param(Shape::new([heads]));
        let a_log = b.param(Shape::new([heads]));
        let a = unary(b, "exp", a_log, Saves::Output);
        let a = unary(b, "neg", a, Saves::Nothing);
        let d = b.param(Shape::new([heads]));
        let y = if b.opts.generation.is_some_and(|g| !g.is_prefill()) && s == 1 {
            self.state_update(b, act, dt_raw, dt_bias, a, d)
        } else {
            self.chunk_scan(b, act, dt_raw, dt_bias, a, d, s)
        };
        let y = b.view(y, Shape::new([s, i]));
        let y = if self.gated_norm {
            gated_rms_norm(b, y, gate, i)
        } else {
            y
        };
        let compute = b.dtype(proj);
        let y = b.cast(y, compute);
        let out = lin(i, h, self.out_bias.unwrap_or(self.bias)).lower(b, y)?;
        if !b.opts.training {
            // `projected_states` and the conv's output are `forward`'s locals until it returns
            b.hold(proj);
            b.hold(act);
        }
        cache_states(b, self.state());
        Ok(out)
    }

    /// A decode step (`mamba2_selective_state_update`, `seq_len == 1` with a recurrent state):
    /// `dA = exp(dt · A)`, `dB = dt · B`, `dBx = dB · x`, `state · dA + dBx`, each `[h, P, N]`
    /// fp32, the function's locals until it returns; then `bmm` with C and the D skip.
    fn state_update(&self, b: &mut Builder, act: ValueId, dt_raw: ValueId, dt_bias: ValueId, a: ValueId, d: ValueId) -> ValueId {
        let (heads, p, n) = (self.num_heads, self.head_dim, self.state_size);
        let f = DType::F32;
        let hp = Shape::new([1, heads, p]);
        let hpn = Shape::new([heads, p, n]);
        // `dt.transpose(1, 2).expand(-1, -1, head_dim)` + `dt_bias[:, None].expand(...)`, softplus
        let dt = tensor(b, "add", &[dt_raw, dt_bias], hp.clone(), f, &[]);
        let dt = unary(b, "softplus", dt, Saves::Input);
        let dta = tensor(b, "mul", &[dt, a], hpn.clone(), f, &[]);
        let da = b.op("exp", &[dta], &[(hpn.clone(), f)], &[], true, &[], GradRule::Alloc)[0];
        let bc = tensor(b, "contiguous", &[act], Shape::new([heads, n]), f, &[]);
        let db = tensor(b, "mul", &[dt, bc], hpn.clone(), f, &[]);
        let dbx = tensor(b, "mul", &[db, act], hpn.clone(), f, &[]);
        let decayed = tensor(b, "mul", &[da], hpn.clone(), f, &[]);
        let state = tensor(b, "add", &[decayed, dbx], hpn, f, &[]);
        let cc = tensor(b, "contiguous", &[act], Shape::new([heads, n]), f, &[]);
        let out = tensor(b, "bmm", &[state, cc], hp.clone(), f, &[]);
        let skip = tensor(b, "mul", &[act, d], hp.clone(), f, &[]);
        let y = tensor(b, "add", &[out, skip], hp, f, &[]);
        [dt, da, bc, db, dbx, state, cc].into_iter().for_each(|v| b.hold(v));
        y
    }

    /// The prefill (`mamba2_chunk_scan`): every tensor it names stays alive to its return under
    /// `no_grad` (Python locals); in training autograd decides.
    #[allow(clippy::too_many_arguments)]
    fn chunk_scan(&self, b: &mut Builder, act: ValueId, dt_raw: ValueId, dt_bias: ValueId, a: ValueId, d: ValueId, s: u64) -> ValueId {
        let (heads, p, n, q) = (self.num_heads, self.head_dim, self.state_size, self.chunk_size);
        let f = DType::F32;
        let dt = tensor(b, "add", &[dt_raw, dt_bias], Shape::new([s, heads]), f, &[]);
        let dt = unary(b, "softplus", dt, Saves::Input);
        let dt = unary(b, "clamp", dt, Saves::Input);
        // `hidden_states.float()` (a view in fp32), B and C `.float().repeat_interleave(heads // groups)`
        let hs = if b.dtype(act) == f { b.view(act, Shape::new([s, heads, p])) } else { tensor(b, "to_fp32", &[act], Shape::new([s, heads, p]), f, &[]) };
        let bn = tensor(b, "repeat_interleave", &[act], Shape::new([s, heads, n]), f, &[]);
        let cn = tensor(b, "repeat_interleave", &[act], Shape::new([s, heads, n]), f, &[]);
        let padded = s.div_ceil(q).saturating_mul(q);
        let chunks = padded / q;
        let hp = Shape::new([padded, heads, p]);
        let hn = Shape::new([padded, heads, n]);
        // `D[..., None] * pad_tensor_by_size(hidden_states, pad_size)`: `F.pad` copies even by 0
        let pad_h = tensor(b, "pad", &[hs], hp.clone(), f, &[]);
        let d_res = tensor(b, "mul", &[d, pad_h], hp.clone(), f, &[d, pad_h]);
        let xdt = tensor(b, "mul", &[hs, dt], Shape::new([s, heads, p]), f, &[hs, dt]);
        let adt = tensor(b, "mul", &[a, dt], Shape::new([heads, s]), f, &[a, dt]);
        // `reshape_into_chunks` pads (copies) hidden, A, B and C; the unpadded ones die
        let xdt = tensor(b, "pad", &[xdt], hp.clone(), f, &[]);
        let adt = tensor(b, "pad", &[adt], Shape::new([heads, padded]), f, &[]);
        let bn = tensor(b, "pad", &[bn], hn.clone(), f, &[]);
        let cn = tensor(b, "pad", &[cn], hn.clone(), f, &[]);
        let a_cum = tensor(b, "cumsum", &[adt], Shape::new([heads, padded]), f, &[]);
        // 1. intra-chunk: L = exp(segment_sum(A)) [h, c, Q, Q]; G = C·B; M = G·L; Y_diag = M·x
        let qq = Shape::new([padded, q, heads]);
        let seg = tensor(b, "segment_sum", &[adt], qq.clone(), f, &[]);
        let l = b.op("exp", &[seg], &[(qq.clone(), f)], &[], true, &[], GradRule::Alloc)[0];
        let g = einsum(b, cn, bn, qq.clone(), true, true);
        let m = tensor(b, "mul", &[g, l], qq, f, &[g, l]);
        // M keeps G's `bmm` layout: its permutation is a view; x is copied
        let y_diag = einsum(b, m, xdt, hp.clone(), false, true);
        // 2. chunk states: decay_states [h, c, Q], B_decay [S, h, N], states [c, h, P, N]
        let decay = b.op("exp", &[a_cum], &[(Shape::new([heads, padded]), f)], &[], true, &[], GradRule::Alloc)[0];
        let b_decay = tensor(b, "mul", &[bn, decay], hn, f, &[bn, decay]);
        let states = einsum(b, b_decay, xdt, Shape::new([chunks, heads, p, n]), true, true);
        // 3. inter-chunk recurrence: cat with the initial state, decay_chunk [h, c+1, c+1]
        let all = Shape::new([chunks + 1, heads, p, n]);
        let states = tensor(b, "cat", &[states], all.clone(), f, &[]);
        let decay_chunk = tensor(b, "exp", &[a_cum], Shape::new([heads, chunks + 1, chunks + 1]), f, &[]);
        let new_states = einsum(b, decay_chunk, states, all, false, true);
        // 4. state → output: C·states, times exp(A_cumsum)
        let out_decay = b.op("exp", &[a_cum], &[(Shape::new([heads, padded]), f)], &[], true, &[], GradRule::Alloc)[0];
        // the states' `[b·c·h, n, p]` is a transposed view `bmm` reads as it is
        let cs = einsum(b, cn, new_states, hp.clone(), true, false);
        let y_off = tensor(b, "mul", &[cs, out_decay], hp.clone(), f, &[cs, out_decay]);
        let y = add(b, y_diag, y_off);
        let y = tensor(b, "contiguous", &[y], hp, f, &[]);
        let y = add(b, y, d_res);
        if !b.opts.training {
            [dt, bn, cn, d_res, xdt, adt, a_cum, l, g, m, y_diag, decay, b_decay, decay_chunk, new_states, out_decay, cs, y_off].into_iter().for_each(|v| b.hold(v));
        }
        y
    }
}

/// `torch.einsum` of two operands (`sumproduct_pair`): an operand whose permutation to the `bmm`
/// layout is not a (transposed) view is copied (`copy_x`, `copy_y`), and `bmm` saves what it
/// reads; the output is new.
fn einsum(b: &mut Builder, x: ValueId, y: ValueId, out: Shape, copy_x: bool, copy_y: bool) -> ValueId {
    let f = b.dtype(x);
    let operand = |b: &mut Builder, v: ValueId, copy: bool| {
        let shape = b.shape(v).clone();
        if copy { tensor(b, "clone", &[v], shape, f, &[]) } else { v }
    };
    let xc = operand(b, x, copy_x);
    let yc = operand(b, y, copy_y);
    tensor(b, "bmm", &[xc, yc], out, f, &[xc, yc])
}

/// `MambaRMSNormGated(hidden_states, gate)` (`modeling_mamba2.py`): `x.float() * silu(gate.float())`,
/// then the RMSNorm of that, `weight [width] * normed.to(input_dtype)` (casts to fp32 are no-ops in fp32).
pub(crate) fn gated_rms_norm(b: &mut Builder, x: ValueId, gate: ValueId, width: u64) -> ValueId {
    let input = b.dtype(x);
    let xf = b.cast(x, DType::F32);
    let gf = b.cast(gate, DType::F32);
    let z = unary(b, "silu", gf, Saves::Input);
    let xg = mul(b, xf, z);
    let normed = rms(b, xg);
    let normed = b.cast(normed, input);
    let w = b.param(Shape::new([width]));
    mul(b, w, normed)
}

/// `x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)` in fp32.
pub(crate) fn rms(b: &mut Builder, x: ValueId) -> ValueId {
    let sq = unary(b, "pow", x, Saves::Input);
    let rows = b.shape(x).with_last(1);
    let mean = tensor(b, "mean", &[sq], rows, DType::F32, &[]);
    let var = unary(b, "add_scalar", mean, Saves::Nothing);
    let inv = unary(b, "rsqrt", var, Saves::Output);
    mul(b, x, inv)
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::one;
    use serde_json::json;

    #[test]
    fn mamba_mixer_params() {
        // MambaConfig(hidden_size=64, state_size=16, expand=2, conv_kernel=4) mixer, I = 128, R = 4:
        // in_proj 64·256, conv 128·4 + 128, x_proj 128·36, dt_proj 4·128 + 128, A_log 128·16, D 128, out_proj 128·64
        let l = one(json!({"kind": "mamba_mixer", "hidden_size": 64, "intermediate_size": 128, "time_step_rank": 4}), &[8, 64]);
        let want = 64 * 256 + 128 * 4 + 128 + 128 * 36 + 4 * 128 + 128 + 128 * 16 + 128 + 128 * 64;
        assert_eq!((l.shape, l.params), (vec![8, 64], want));
    }

    #[test]
    fn mamba2_mixer_params() {
        // 4 heads of 32 (I = 128), N = 16, 1 group: conv_dim 160; in_proj 64·(128 + 160 + 4);
        // conv 160·4 + 160; dt_bias, A_log, D 4 each; norm 128; out_proj 128·64
        let l = one(json!({"kind": "mamba2_mixer", "hidden_size": 64, "num_heads": 4, "head_dim": 32, "state_size": 16, "chunk_size": 4}), &[10, 64]);
        let want = 64 * 292 + 160 * 4 + 160 + 12 + 128 + 128 * 64;
        assert_eq!((l.shape, l.params), (vec![10, 64], want));
    }
}
