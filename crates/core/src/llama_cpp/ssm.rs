//! Mamba and Mamba-2 graphs (`src/models/mamba.cpp`, `build_mamba_layer` and
//! `build_mamba2_layer` in `src/models/mamba-base.cpp`, `build_rs` / `build_rs_inp` in
//! `src/llama-graph.cpp`), for the reserve's micro-batch: `n_seqs` sequences (`-np`) of
//! `n_tokens / n_seqs` tokens each, the recurrent memory full (`init_full`: `n_rs` = its size,
//! one cell per sequence, head 0, the zeroed cell 0). Followed line by line for the tensors
//! (op, type, shape, sources, expansion order); checked against llama.cpp's own reserved graphs
//! and its compute buffers (`tests/llama_cpp_recurrent.rs`).

use crate::gguf::GgmlType;

use super::build::Builder;
use super::ggml::{Op, T};

const F32: GgmlType = GgmlType::F32;

/// The recurrent graph of `b`'s model (`mamba` or `mamba2`).
pub(super) fn mamba(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    let v2 = hp.arch == "mamba2";
    if !ssm_ok(b, v2) {
        return None;
    }
    b.at_layer(0);
    let mut inp_l = b.inp_embd()?;
    let (main, extra) = rs_inp(b);
    let out_ids = b.inp_out_ids();
    for il in 0..n {
        b.at_layer(il);
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let mut cur = if v2 { mamba2_layer(b, il, cur, main, extra)? } else { mamba_layer(b, il, cur, main, extra)? };
        if il + 1 == n {
            cur = b.g.get_rows(cur, out_ids);
            inp_l = b.g.get_rows(inp_l, out_ids);
        }
        inp_l = b.g.add(cur, inp_l);
    }
    b.head_out(inp_l, false)
}

/// Whether the metadata has the state sizes the recurrent layers need (Mamba-2 also heads and
/// groups) and every recurrent layer's convolution weights agree with them (`create_tensor`
/// checks the shapes).
fn ssm_ok(b: &Builder, v2: bool) -> bool {
    let (hp, m) = (b.hp, b.hp.ssm);
    if !hp.recurrent.iter().any(|&r| r) {
        return true;
    }
    if m.d_conv == 0 || m.d_inner == 0 || m.d_state == 0 || (v2 && (m.dt_rank == 0 || m.n_group == 0)) {
        return false;
    }
    let ch = if v2 { m.d_inner + 2 * m.n_group * m.d_state } else { m.d_inner };
    (0..hp.n_layer as usize).filter(|&il| hp.recurrent[il]).all(|il| {
        b.h.tensor(&format!("blk.{il}.ssm_conv1d.weight")).is_some_and(|t| t.ne(0) == m.d_conv && t.ne(1) == ch)
    })
}

/// `build_rs_inp_impl`: `s_copy` (one cell per sequence) and its views for the batch's
/// sequences and the rest (none: the memory has as many cells as sequences).
fn rs_inp(b: &mut Builder) -> (T, T) {
    let n_seqs = b.s.n_seqs.max(1);
    let n_rs = n_seqs;
    let s_copy = b.g.input(GgmlType::I32, [n_rs, 1, 1, 1]);
    let i32b = GgmlType::I32.bytes;
    let main = b.g.view(s_copy, [n_seqs, 1, 1, 1], [n_seqs * i32b; 3]);
    let extra = b.g.view(s_copy, [n_rs - n_seqs, 1, 1, 1], [(n_rs - n_seqs) * i32b; 3]);
    (main, extra)
}

/// Whether the file sets `{arch}.<k>` to a non-zero number (llama.cpp's optional scales).
fn scale_set(b: &Builder, k: &str) -> bool {
    b.h.get(&format!("{}.{k}", b.hp.arch)).and_then(crate::gguf::Value::as_f64).is_some_and(|x| x != 0.0)
}

/// granitehybrid (`models/granite-hybrid.cpp`, Granite 4.0-H): Mamba-2 layers where
/// `head_count_kv` is 0, attention layers elsewhere; granite and granitemoe (`models/granite.cpp`,
/// Granite 3.x, the same layers without the recurrent ones) (`build_inp_mem_hybrid`: the recurrent
/// inputs and the KV cache's), the embedding, residual and logit scales when set, a dense FFN
/// or experts with an optional shared expert.
pub(super) fn granite_hybrid(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    if !ssm_ok(b, true) {
        return None;
    }
    if b.h.get(&format!("{}.n_deepstack_layers", hp.arch)).and_then(crate::gguf::Value::as_u64).unwrap_or(0) > 0 {
        return None; // Granite vision's deepstack embeddings: not followed
    }
    b.at_layer(0);
    let mut inp_l = b.inp_embd()?;
    if scale_set(b, "embedding_scale") {
        inp_l = b.g.scale(inp_l);
        b.g.expand(inp_l);
    }
    let (main, extra) = rs_inp(b);
    let inp = b.attn_inp(b.s.n_kv);
    let out_ids = b.inp_out_ids();
    let rope = !matches!(b.h.get(&format!("{}.rope.scaling.finetuned", hp.arch)), Some(crate::gguf::Value::Bool(false)));
    let pos = rope.then(|| b.inp_pos());
    let residual = scale_set(b, "residual_scale");
    for il in 0..n {
        b.at_layer(il);
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let mut cur = if hp.recurrent[il] {
            mamba2_layer(b, il, cur, main, extra)?
        } else {
            let (mut q, mut k, v) = b.qkv(il, cur, hp.head_k, hp.head_v)?;
            if let Some(pos) = pos {
                let freqs = b.wl(il, "rope_freqs.weight").or_else(|| b.w("rope_freqs.weight"));
                q = b.g.rope(q, pos, freqs);
                k = b.g.rope(k, pos, freqs);
            }
            b.attn(&inp, il, q, k, v, None, false)?
        };
        let mut inp_sa = inp_sa;
        if il + 1 == n {
            cur = b.g.get_rows(cur, out_ids);
            inp_sa = b.g.get_rows(inp_sa, out_ids);
        }
        if residual {
            cur = b.g.scale(cur);
        }
        let ffn_inp = b.g.add(cur, inp_sa);
        let w = b.wl(il, "ffn_norm.weight");
        let cur = b.rms_norm(ffn_inp, w);
        let mut cur = if b.h.tensor(&format!("blk.{il}.ffn_gate_inp.weight")).is_some() {
            let w_scale = b.h.get(&format!("{}.expert_weights_scale", hp.arch)).and_then(crate::gguf::Value::as_f64).unwrap_or(0.0);
            let moe = b.moe(il, cur, true, w_scale != 0.0 && w_scale != 1.0)?;
            match b.h.tensor(&format!("blk.{il}.ffn_up_shexp.weight")) {
                Some(_) => {
                    let sh = b.shared_expert(il, cur)?;
                    b.g.add(moe, sh)
                }
                None => moe,
            }
        } else {
            b.ffn(il, cur, "ffn")?
        };
        if residual {
            cur = b.g.scale(cur);
        }
        inp_l = b.g.add(cur, ffn_inp);
    }
    let logit_scale = scale_set(b, "logit_scale");
    b.head_out_scaled(inp_l, false, logit_scale)
}

/// jamba (`models/jamba.cpp`): Mamba-1 layers (dt, B and C normalised) where `head_count_kv` is
/// 0, attention layers without RoPE elsewhere, a dense FFN or experts per layer.
pub(super) fn jamba(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    if !ssm_ok(b, false) {
        return None;
    }
    b.at_layer(0);
    let mut inp_l = b.inp_embd()?;
    let (main, extra) = rs_inp(b);
    let inp = b.attn_inp(b.s.n_kv);
    let out_ids = b.inp_out_ids();
    for il in 0..n {
        b.at_layer(il);
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let mut cur = if hp.recurrent[il] {
            mamba_layer(b, il, cur, main, extra)?
        } else {
            let (q, k, v) = b.qkv(il, cur, hp.head_k, hp.head_v)?;
            b.attn(&inp, il, q, k, v, None, false)?
        };
        if il + 1 == n {
            cur = b.g.get_rows(cur, out_ids);
            inp_l = b.g.get_rows(inp_l, out_ids);
        }
        let ffn_inp = b.g.add(inp_l, cur);
        let w = b.wl(il, "ffn_norm.weight");
        let cur = b.rms_norm(ffn_inp, w);
        let cur = if b.h.tensor(&format!("blk.{il}.ffn_gate_inp.weight")).is_some() {
            let w_scale = b.h.get("jamba.expert_weights_scale").and_then(crate::gguf::Value::as_f64).unwrap_or(0.0);
            b.moe(il, cur, false, w_scale != 0.0 && w_scale != 1.0)?
        } else {
            b.ffn(il, cur, "ffn")?
        };
        inp_l = b.g.add(ffn_inp, cur);
    }
    b.head_out(inp_l, false)
}

/// falcon-h1 (`models/falcon-h1.cpp`): attention (RoPE) and a Mamba-2 mixer side by side in
/// every layer, each on its own norm of the input, summed; the FFN norm is `blk.N.ffn_norm`.
pub(super) fn falcon_h1(b: &mut Builder) -> Option<()> {
    let hp = b.hp;
    let n = hp.n_layer as usize;
    if !ssm_ok(b, true) {
        return None;
    }
    b.at_layer(0);
    let mut inp_l = b.inp_embd()?;
    let pos = b.inp_pos();
    let (main, extra) = rs_inp(b);
    let inp = b.attn_inp(b.s.n_kv);
    let out_ids = b.inp_out_ids();
    for il in 0..n {
        b.at_layer(il);
        let inp_sa = inp_l;
        let w = b.wl(il, "attn_norm.weight");
        let cur = b.rms_norm(inp_l, w);
        let (q, k, v) = b.qkv(il, cur, hp.head_k, hp.head_v)?;
        let q = b.g.rope(q, pos, None);
        let k = b.g.rope(k, pos, None);
        let attn_out = b.attn(&inp, il, q, k, v, None, false)?;
        let cur = b.rms_norm(inp_l, w);
        let ssm_out = mamba2_layer(b, il, cur, main, extra)?;
        let cur = b.g.add(attn_out, ssm_out);
        let mut inp_sa = b.g.add(cur, inp_sa);
        if il + 1 == n {
            inp_sa = b.g.get_rows(inp_sa, out_ids);
        }
        let w = b.wl(il, "ffn_norm").or_else(|| b.wl(il, "ffn_norm.weight"));
        let cur = b.rms_norm(inp_sa, w);
        let cur = b.ffn(il, cur, "ffn")?;
        inp_l = b.g.add(cur, inp_sa);
    }
    b.head_out(inp_l, false)
}

/// The recurrent cache tensors of layer `il`: R `[n_embd_r, rows]`, S `[n_embd_s, rows]`.
fn states(b: &mut Builder) -> (T, T, u64) {
    let rows = b.s.n_seqs.max(1);
    let r = b.g.external(F32, [b.hp.ssm.n_embd_r(), rows, 1, 1]);
    let s = b.g.external(F32, [b.hp.ssm.n_embd_s(), rows, 1, 1]);
    (r, s, rows)
}

/// `build_rs`: the zeroed cell, the states of the batch's sequences (`rows` of them, by
/// `get_rows` or by the SSM scan `scan`), and the other states copied along. Returns the first.
/// How `build_rs` reads the batch's states (`get_state_rows`): `(builder, states, ids)`.
type GetRows<'a> = &'a dyn Fn(&mut Builder, T, T) -> T;

fn build_rs(b: &mut Builder, s: T, size: u64, main: T, extra: T, scan: Option<GetRows>) -> T {
    let rows = b.g.ne(s)[1];
    let states = b.g.reshape(s, [size, rows, 1, 1]);
    let nb1 = b.g.t[states].nb[1];
    let zero = b.g.view(states, [size, 1, 1, 1], [nb1, nb1, nb1]);
    let z = b.g.scale_inplace(zero);
    b.g.expand(z);
    let out = match scan {
        Some(f) => f(b, states, main),
        None => b.g.get_rows(states, main),
    };
    b.g.expand(out);
    let rest = b.g.get_rows(states, extra);
    let n_rest = b.g.ne(extra)[0];
    let dst = b.g.view(s, [size, n_rest, 1, 1], [nb1, nb1 * n_rest, nb1 * n_rest]);
    let c = b.g.cpy(rest, dst);
    b.g.expand(c);
    out
}

/// `ggml_ssm_conv(sx, c)`: f32 `[d_inner, n_t, n_s]`.
fn ssm_conv(b: &mut Builder, sx: T, c: T) -> T {
    let (nx, nc) = (b.g.ne(sx), b.g.ne(c));
    b.g.op(Op::Other, F32, [nc[1], nx[0] + 1 - nc[0], nx[2], 1], vec![sx, c])
}

/// `ggml_ssm_scan(s, x, dt, A, B, C, ids)` with `K` = 1: f32 `[nelements(x) + d_state·head_dim·n_head·n_seqs]`.
fn ssm_scan(b: &mut Builder, src: [T; 7]) -> T {
    let (s, x, ids) = (b.g.ne(src[0]), b.g.t[src[1]].nelements(), b.g.ne(src[6])[0]);
    b.g.op(Op::Other, F32, [x + s[0] * s[1] * s[2] * ids, 1, 1, 1], src.to_vec())
}

/// The conv state's update: the last `d_conv - 1` columns of `conv_x` into R, through a 1-d
/// view of R (Mamba-1) or a 2-d one, a row per sequence (Mamba-2).
fn store_conv(b: &mut Builder, conv_x: T, r: T, ch: u64, n_seqs: u64, rows_2d: bool) {
    let d = b.hp.ssm.d_conv - 1;
    let nb = b.g.t[conv_x].nb;
    let last = b.g.view(conv_x, [d, ch, n_seqs, 1], [nb[1], nb[2], nb[2] * n_seqs]);
    let row = d * ch;
    let dst = if rows_2d {
        b.g.view(r, [row, n_seqs, 1, 1], [row * 4, row * 4 * n_seqs, row * 4 * n_seqs])
    } else {
        b.g.view(r, [row * n_seqs, 1, 1, 1], [row * n_seqs * 4; 3])
    };
    let c = b.g.cpy(last, dst);
    b.g.expand(c);
}

/// The micro-batch's sequences and tokens per sequence.
fn batch(b: &Builder) -> (u64, u64) {
    let n_seqs = b.s.n_seqs.max(1);
    (n_seqs, b.s.n_tokens / n_seqs)
}

fn mamba_layer(b: &mut Builder, il: usize, cur: T, main: T, extra: T) -> Option<T> {
    let m = b.hp.ssm;
    let (n_seqs, nst) = batch(b);
    let (r, s, rows) = states(b);
    let conv = build_rs(b, r, m.n_embd_r(), main, extra, None);
    let conv = b.g.reshape(conv, [m.d_conv - 1, m.d_inner, n_seqs, 1]);
    let cur = b.g.reshape(cur, [b.hp.n_embd, nst, n_seqs, 1]);
    let w_in = b.wl(il, "ssm_in.weight")?;
    let xz = b.g.mul_mat(w_in, cur);
    let nb = b.g.t[xz].nb;
    let x = b.g.view(xz, [m.d_inner, nst, n_seqs, 1], [nb[1], nb[2], nb[3]]);
    let z = b.g.view(xz, [m.d_inner, nst, n_seqs, 1], [nb[1], nb[2], nb[3]]);
    let xt = b.g.transpose(x);
    let conv_x = super::mla::concat0(b, conv, xt);
    store_conv(b, conv_x, r, m.d_inner, n_seqs, false);
    let c1 = b.wl(il, "ssm_conv1d.weight")?;
    let x = ssm_conv(b, conv_x, c1);
    let x = match b.wl(il, "ssm_conv1d.bias") {
        Some(bias) => b.g.add(x, bias),
        None => x,
    };
    let x = b.g.unary(x);
    let w_x = b.wl(il, "ssm_x.weight")?;
    let x_db = b.g.mul_mat(w_x, x);
    let nb = b.g.t[x_db].nb;
    let dt = b.g.view(x_db, [m.dt_rank, nst, n_seqs, 1], [nb[1], nb[2], nb[3]]);
    let bc = |b: &mut Builder| b.g.view(x_db, [m.d_state, 1, nst, n_seqs], [m.d_state * 4, nb[1], nb[2]]);
    let (bb, cc) = (bc(b), bc(b));
    // FalconMamba (`ssm.dt_b_c_rms`, no weights) and Jamba (`ssm_{dt,b,c}_norm`) normalise dt, B, C.
    let rms = b.h.get(&format!("{}.ssm.dt_b_c_rms", b.hp.arch)).is_some_and(|v| matches!(v, crate::gguf::Value::Bool(true)));
    let norms = [b.wl(il, "ssm_dt_norm.weight"), b.wl(il, "ssm_b_norm.weight"), b.wl(il, "ssm_c_norm.weight")];
    let (dt, bb, cc) = if rms || norms.iter().all(Option::is_some) {
        (b.rms_norm(dt, norms[0]), b.rms_norm(bb, norms[1]), b.rms_norm(cc, norms[2]))
    } else {
        (b.g.cont(dt), bb, cc)
    };
    let w_dt = b.wl(il, "ssm_dt.weight")?;
    let dt = b.g.mul_mat(w_dt, dt);
    let dt = match b.wl(il, "ssm_dt.bias") {
        Some(bias) => b.g.add(dt, bias),
        None => dt,
    };
    let keep = x;
    let x = b.g.reshape(x, [1, m.d_inner, nst, n_seqs]);
    let a = b.wl(il, "ssm_a")?;
    let scan = move |b: &mut Builder, states: T, ids: T| {
        let ssm = b.g.reshape(states, [m.d_state, 1, m.d_inner, rows]);
        ssm_scan(b, [ssm, x, dt, a, bb, cc, ids])
    };
    let y_ssm = build_rs(b, s, m.n_embd_s(), main, extra, Some(&scan));
    store_ssm(b, y_ssm, s, m.d_state * m.d_inner, n_seqs);
    let nb = b.g.t[x].nb;
    let y = b.g.view(y_ssm, [m.d_inner, nst, n_seqs, 1], [nb[2], nb[3], nb[3] * n_seqs]);
    let d = b.wl(il, "ssm_d")?;
    let xd = b.g.mul(keep, d);
    let y = b.g.add(y, xd);
    let zc = b.g.cont(z);
    let y = b.g.glu_split(zc, y);
    let w_out = b.wl(il, "ssm_out.weight")?;
    let cur = b.g.mul_mat(w_out, y);
    Some(b.g.reshape(cur, [b.hp.n_embd, nst * n_seqs, 1, 1]))
}

/// The SSM state's update: the final states after the outputs in `y_ssm`, into S.
fn store_ssm(b: &mut Builder, y_ssm: T, s: T, per_seq: u64, n_seqs: u64) {
    let src = b.g.view(y_ssm, [per_seq * n_seqs, 1, 1, 1], [per_seq * n_seqs * 4; 3]);
    let dst = b.g.view(s, [per_seq * n_seqs, 1, 1, 1], [per_seq * n_seqs * 4; 3]);
    let c = b.g.cpy(src, dst);
    b.g.expand(c);
}

fn mamba2_layer(b: &mut Builder, il: usize, cur: T, main: T, extra: T) -> Option<T> {
    let m = b.hp.ssm;
    let (n_seqs, nst) = batch(b);
    let n_head = m.dt_rank;
    let head_dim = m.d_inner.checked_div(n_head)?;
    let ch = m.d_inner + 2 * m.n_group * m.d_state;
    let (r, s, rows) = states(b);
    let conv = build_rs(b, r, m.n_embd_r(), main, extra, None);
    let conv = b.g.reshape(conv, [m.d_conv - 1, ch, n_seqs, 1]);
    let w_in = b.wl(il, "ssm_in.weight")?;
    let zx = b.g.mul_mat(w_in, cur);
    let ne0 = b.g.ne(zx)[0];
    let zx = b.g.reshape(zx, [ne0, nst, n_seqs, 1]);
    let nb = b.g.t[zx].nb;
    let z = b.g.view(zx, [head_dim, n_head, nst, n_seqs], [head_dim * 4, nb[1], nb[2]]);
    let xbc = b.g.view(zx, [ch, nst, n_seqs, 1], [nb[1], nb[2], nb[3]]);
    let dt = b.g.view(zx, [n_head, nst, n_seqs, 1], [nb[1], nb[2], nb[3]]);
    let xt = b.g.transpose(xbc);
    let conv_x = super::mla::concat0(b, conv, xt);
    store_conv(b, conv_x, r, ch, n_seqs, true);
    let c1 = b.wl(il, "ssm_conv1d.weight")?;
    let xbc = ssm_conv(b, conv_x, c1);
    let xbc = match b.wl(il, "ssm_conv1d.bias") {
        Some(bias) => b.g.add(xbc, bias),
        None => xbc,
    };
    let xbc = b.g.unary(xbc);
    let nb = b.g.t[xbc].nb;
    let x = b.g.view(xbc, [head_dim, n_head, nst, n_seqs], [head_dim * 4, nb[1], nb[2]]);
    let bc = |b: &mut Builder| b.g.view(xbc, [m.d_state, m.n_group, nst, n_seqs], [m.d_state * 4, nb[1], nb[2]]);
    let (bb, cc) = (bc(b), bc(b));
    let dtc = b.g.cont(dt);
    let dt = match b.wl(il, "ssm_dt.bias") {
        Some(bias) => b.g.add(dtc, bias),
        None => dtc,
    };
    let a = b.wl(il, "ssm_a")?;
    let scan = move |b: &mut Builder, states: T, ids: T| {
        let ssm = b.g.reshape(states, [m.d_state, head_dim, n_head, rows]);
        ssm_scan(b, [ssm, x, dt, a, bb, cc, ids])
    };
    let y_ssm = build_rs(b, s, m.n_embd_s(), main, extra, Some(&scan));
    {
        let dd = m.d_state * m.d_inner;
        let src = b.g.view(y_ssm, [dd, n_seqs, 1, 1], [dd * 4, dd * 4 * n_seqs, dd * 4 * n_seqs]);
        let dst = b.g.view(s, [dd, n_seqs, 1, 1], [dd * 4, dd * 4 * rows, dd * 4 * rows]);
        let c = b.g.cpy(src, dst);
        b.g.expand(c);
    }
    let nbx = b.g.t[x].nb;
    let y = b.g.view(y_ssm, [head_dim, n_head, nst, n_seqs], [nbx[1], n_head * nbx[1], nst * n_head * nbx[1]]);
    let d = b.wl(il, "ssm_d")?;
    let xd = b.g.mul(x, d);
    let y = b.g.add(y, xd);
    let zc = b.g.cont(z);
    let mut y = b.g.glu_split(zc, y);
    if let Some(norm) = b.wl(il, "ssm_norm.weight") {
        let gsz = m.d_inner / m.n_group.max(1);
        y = b.g.reshape(y, [gsz, m.n_group.max(1), nst, n_seqs]);
        y = b.rms_norm(y, Some(norm));
    }
    let y = b.g.reshape(y, [m.d_inner, nst * n_seqs, 1, 1]);
    let w_out = b.wl(il, "ssm_out.weight")?;
    Some(b.g.mul_mat(w_out, y))
}
