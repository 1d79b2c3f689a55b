//! The pieces of `llm_graph_context` (`src/llama-graph.cpp`) the model graphs are made of, for
//! one reserved micro-batch: the inputs (`build_inp_embd`, `build_inp_pos`, `build_inp_out_ids`,
//! `build_attn_inp_kv[_iswa]`), the norms, the Q/K/V projections (`build_qkv`), attention with the
//! KV cache (`build_attn`, `build_attn_mha`; the cache stores of `llama_kv_cache::cpy_k/cpy_v`
//! and views of `get_k/get_v`, `src/llama-kv-cache.cpp`), the feed-forward (`build_ffn`) and the
//! experts (`build_moe_ffn`). Each follows the source line by line as far as the tensors go (op,
//! type, shape, sources, the order of `ggml_build_forward_expand`); values are irrelevant.

use crate::gguf::{GgmlType, Header};

use super::ggml::{Graph, Op, T, FLAG_PINNED, FLAG_SHARED, FLAG_WEIGHT};
use super::hparams::Hparams;

/// The reserve's micro-batch and memory (`llama_context::graph_reserve` with `init_full`).
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub n_tokens: u64,
    pub n_outputs: u64,
    /// Streams of the KV cache (`n_seq_max` unless unified) and the cells of each.
    pub n_stream: u64,
    /// The micro-batch's sequences (`n_seq_max`, unified or not).
    pub n_seqs: u64,
    pub n_kv: u64,
    pub n_kv_swa: u64,
    pub flash_attn: bool,
    pub type_k: GgmlType,
    pub type_v: GgmlType,
}

/// One cache's graph inputs (`llm_graph_input_attn_kv`).
#[derive(Debug, Clone, Copy)]
pub struct AttnInp {
    pub k_idxs: T,
    pub v_idxs: T,
    pub mask: T,
    pub k_rot: Option<T>,
    pub v_rot: Option<T>,
    pub n_kv: u64,
}

pub struct Builder<'a> {
    pub g: Graph,
    pub h: &'a Header,
    pub hp: &'a Hparams,
    pub s: Shape,
    /// `model.dev_layer(il)` as a backend index, per layer (the output layer last).
    pub layer_backend: Vec<usize>,
    /// Where each weight is (its buffer's backend); `None`: on its layer's backend.
    pub slots: Option<&'a WeightSlots>,
    /// `llama_context::graph_get_cb`: a layer's "norm" nodes stay on the layer's device when
    /// the batch has fewer than 32 tokens or every layer is offloaded.
    pub pin_norms: bool,
    /// The layer being built (`at_layer`).
    layer: usize,
}

/// The backend of each weight's buffer by tensor name (`placement::place`), and of the tied
/// output's copy of `token_embd`.
#[derive(Debug, Clone, Default)]
pub struct WeightSlots {
    pub by_name: std::collections::HashMap<String, usize>,
    pub tied_output: Option<usize>,
}

const F32: GgmlType = GgmlType::F32;

impl<'a> Builder<'a> {
    pub fn new(h: &'a Header, hp: &'a Hparams, s: Shape, layer_backend: Vec<usize>) -> Builder<'a> {
        Builder { g: Graph::default(), h, hp, s, layer_backend, slots: None, pin_norms: false, layer: 0 }
    }

    /// A weight of the file, `None` when it has none of that name.
    pub fn w(&mut self, name: &str) -> Option<T> {
        let slot = self.slots.and_then(|s| s.by_name.get(name).copied());
        self.w_in(name, slot)
    }

    /// The tied output: `token_embd` as loaded again on the output layer's device.
    pub fn w_tied_output(&mut self) -> Option<T> {
        let slot = self.slots.and_then(|s| s.tied_output);
        self.w_in("token_embd.weight", slot)
    }

    fn w_in(&mut self, name: &str, slot: Option<usize>) -> Option<T> {
        let t = self.h.tensor(name)?;
        let ne = std::array::from_fn(|i| t.ne(i));
        let x = self.g.external(t.ggml_type, ne);
        let w = &mut self.g.t[x];
        w.flags |= FLAG_WEIGHT;
        if matches!(name.split('.').next(), Some("rope_freqs" | "rope_factors_long" | "rope_factors_short")) {
            w.flags |= FLAG_SHARED;
        }
        if let Some(b) = slot {
            w.backend = b;
        }
        Some(x)
    }
    pub fn wl(&mut self, il: usize, name: &str) -> Option<T> {
        self.w(&format!("blk.{il}.{name}"))
    }

    /// The layer the next tensors belong to (the scheduler's assignment follows the weights).
    pub fn at_layer(&mut self, il: usize) {
        self.layer = il;
        self.g.backend = self.layer_backend.get(il).copied().unwrap_or(0);
    }

    // ---- inputs ----

    /// `build_inp_embd`: `get_rows(tok_embd, inp_tokens)` and the `inp_embd` alternative that
    /// `ggml_build_forward_select` puts in the graph too.
    pub fn inp_embd(&mut self) -> Option<T> {
        let n = self.s.n_tokens;
        let tokens = self.g.input(GgmlType::I32, [n, 1, 1, 1]);
        let embd = self.g.input(F32, [self.hp.n_embd, n, 1, 1]);
        let tok = self.w("token_embd.weight")?;
        // `token_embd` is always in host memory, so its `get_rows` runs on the CPU.
        let layer = self.g.backend;
        self.g.backend = 0;
        let cur = self.g.get_rows(tok, tokens);
        self.g.backend = layer;
        self.g.expand(cur);
        self.g.expand(embd);
        Some(cur)
    }
    pub fn inp_pos(&mut self) -> T {
        self.g.input(GgmlType::I32, [self.s.n_tokens, 1, 1, 1])
    }
    pub fn inp_out_ids(&mut self) -> T {
        self.g.input(GgmlType::I32, [self.s.n_outputs, 1, 1, 1])
    }

    /// `build_attn_inp_kq_mask`, the index inputs and the Hadamard rotations
    /// (`llama_kv_cache::build_input_{k,v}_{idxs,rot}`) of one cache of `n_kv` cells per stream.
    pub fn attn_inp(&mut self, n_kv: u64) -> AttnInp {
        let (n, fa) = (self.s.n_tokens, self.s.flash_attn);
        let k_idxs = self.g.input(GgmlType::I64, [n, 1, 1, 1]);
        let v_len = if fa { n } else { n * self.hp.n_embd_v_gqa_max() };
        let v_idxs = self.g.input(GgmlType::I64, [v_len, 1, 1, 1]);
        let mask_ty = if fa { GgmlType::F16 } else { F32 };
        let mask = self.g.input(mask_ty, [n_kv, n / self.s.n_stream, 1, self.s.n_stream]);
        let (k_rot, v_rot) = self.rot_inputs();
        AttnInp { k_idxs, v_idxs, mask, k_rot, v_rot, n_kv }
    }

    /// `build_attn_inp_k` (MLA's K-only cache): the K indices and the mask, no rotation.
    pub fn attn_inp_k(&mut self, n_kv: u64) -> AttnInp {
        let (n, fa) = (self.s.n_tokens, self.s.flash_attn);
        let k_idxs = self.g.input(GgmlType::I64, [n, 1, 1, 1]);
        let mask_ty = if fa { GgmlType::F16 } else { F32 };
        let mask = self.g.input(mask_ty, [n_kv, n / self.s.n_stream, 1, self.s.n_stream]);
        AttnInp { k_idxs, v_idxs: k_idxs, mask, k_rot: None, v_rot: None, n_kv }
    }

    /// `attn_rot_k` / `attn_rot_v` (`llama_kv_cache` constructor): a quantized cache type and
    /// one head size for every layer, a multiple of 64.
    fn rot_inputs(&mut self) -> (Option<T>, Option<T>) {
        let hp = self.hp;
        let n = hp.n_layer as usize;
        let all = |f: &dyn Fn(usize) -> u64| {
            let first = f(0);
            if (0..n).all(|il| f(il) == first) { first } else { 0 }
        };
        let head_k = all(&|il| if hp.is_mla { hp.kv_lora_rank + hp.n_rot } else if hp.is_swa[il] { hp.head_k_swa } else { hp.head_k });
        let head_v = if hp.is_mla { 0 } else { all(&|il| if hp.is_swa[il] { hp.head_v_swa } else { hp.head_v }) };
        // `hparams.n_embd_head_k()` of layer 0 (the `% 64` test).
        let k0 = if hp.is_mla { hp.kv_lora_rank + hp.n_rot } else { hp.head_k };
        let k_rot = (head_k > 0 && self.s.type_k.is_quantized() && k0.is_multiple_of(64)).then(|| {
            // The largest power of two from 64 up dividing the head (`do nrot *= 2 while …`).
            let mut nrot: u64 = 64;
            while nrot <= head_k / 2 && head_k.is_multiple_of(nrot * 2) {
                nrot *= 2;
            }
            nrot
        });
        let v_rot = (head_v > 0 && self.s.type_v.is_quantized() && hp.head_v.is_multiple_of(64)).then_some(64);
        let k = k_rot.map(|r| self.g.input(F32, [r, r, 1, 1]));
        let v = v_rot.map(|r| self.g.input(F32, [r, r, 1, 1]));
        (k, v)
    }

    // ---- building blocks ----

    /// `build_norm(cur, w, NULL, LLM_NORM_RMS)`.
    pub fn rms_norm(&mut self, cur: T, w: Option<T>) -> T {
        let cur = self.g.rms_norm(cur);
        if w.is_some() && self.pin_norms && self.layer < self.hp.n_layer as usize {
            // `cb(cur, "norm", il)` of a layer's norm (`build_norm`).
            self.g.t[cur].flags |= FLAG_PINNED;
        }
        match w {
            Some(w) => self.g.mul(cur, w),
            None => cur,
        }
    }

    /// `build_norm(cur, w, b, LLM_NORM)`: layer norm, then the weight and the bias when present.
    pub fn layer_norm(&mut self, cur: T, w: Option<T>, bias: Option<T>) -> T {
        let cur = self.g.norm(cur);
        if (w.is_some() || bias.is_some()) && self.pin_norms && self.layer < self.hp.n_layer as usize {
            self.g.t[cur].flags |= FLAG_PINNED;
        }
        let cur = match w {
            Some(w) => self.g.mul(cur, w),
            None => cur,
        };
        match bias {
            Some(bias) => self.g.add(cur, bias),
            None => cur,
        }
    }

    /// `build_lora_mm` plus an optional bias.
    pub fn mm(&mut self, w: T, cur: T, b: Option<T>) -> T {
        let cur = self.g.mul_mat(w, cur);
        match b {
            Some(b) => self.g.add(cur, b),
            None => cur,
        }
    }

    /// `build_qkv`, the separate-Q/K/V path (with biases), reshaped to heads.
    pub fn qkv(&mut self, il: usize, cur: T, head_k: u64, head_v: u64) -> Option<(T, T, T)> {
        let n = self.s.n_tokens;
        let (nh, nkv) = (self.hp.n_head[il], self.hp.n_head_kv[il]);
        let proj = |b: &mut Builder, x: &str| {
            let w = b.wl(il, &format!("attn_{x}.weight"))?;
            let bias = b.wl(il, &format!("attn_{x}.bias"));
            Some(b.mm(w, cur, bias))
        };
        let q = proj(self, "q")?;
        let k = proj(self, "k")?;
        let v = proj(self, "v")?;
        let q = self.g.reshape(q, [head_k, nh, n, 1]);
        let k = self.g.reshape(k, [head_k, nkv, n, 1]);
        let v = self.g.reshape(v, [head_v, nkv, n, 1]);
        Some((q, k, v))
    }

    /// `llama_mul_mat_hadamard`.
    fn hadamard(&mut self, cur: T, rot: T) -> T {
        let n = self.g.ne(rot)[0];
        let ne = self.g.ne(cur);
        let el = self.g.t[cur].nelements();
        let contiguous = self.g.t[cur].nb == super::ggml::strides(self.g.t[cur].ty, ne);
        let res = if contiguous {
            self.g.reshape(cur, [n, el / n, 1, 1])
        } else {
            let ty = self.g.t[cur].ty;
            self.g.op(Op::Cont, ty, [n, el / n, 1, 1], vec![cur])
        };
        let res = self.g.mul_mat(rot, res);
        self.g.reshape(res, ne)
    }

    /// `build_attn` with a KV cache (`kv_iswa` picks the `_iswa` variant's expand order), then
    /// the output projection `wo` (+ bias).
    #[allow(clippy::too_many_arguments)]
    pub fn attn(&mut self, inp: &AttnInp, il: usize, q: T, k: T, v: T, kq_scale_softcap: Option<f32>, iswa: bool) -> Option<T> {
        self.attn_sinks(inp, il, q, k, v, kq_scale_softcap, iswa, None)
    }

    /// `build_attn` with attention sinks (gpt-oss: `blk.N.attn_sinks`, a source of the softmax or
    /// flash attention, `ggml_soft_max_add_sinks` / `ggml_flash_attn_ext_add_sinks`).
    #[allow(clippy::too_many_arguments)]
    pub fn attn_sinks(&mut self, inp: &AttnInp, il: usize, q: T, k: T, v: T, kq_scale_softcap: Option<f32>, iswa: bool, sinks: Option<T>) -> Option<T> {
        let (mut q, mut k, mut v) = (q, k, v);
        if let Some(r) = inp.k_rot {
            q = self.hadamard(q, r);
            k = self.hadamard(k, r);
        }
        if let Some(r) = inp.v_rot {
            v = self.hadamard(v, r);
        }
        self.g.expand(q);
        if iswa {
            self.g.expand(k);
            self.g.expand(v);
        } else {
            self.g.expand(v);
            self.g.expand(k);
        }
        let (kc, vc) = self.cache(il, inp.n_kv);
        let ck = self.cpy_k(kc, k, inp.k_idxs);
        self.g.expand(ck);
        let cv = self.cpy_v(vc, v, inp.v_idxs);
        self.g.expand(cv);
        let (kv, vv) = self.get_kv(il, kc, vc, inp.n_kv);
        let mut cur = self.mha_sinks(q, kv, vv, inp.mask, kq_scale_softcap, None, sinks);
        if let Some(r) = inp.v_rot {
            cur = self.hadamard(cur, r);
        }
        let wo = self.wl(il, "attn_output.weight")?;
        let bo = self.wl(il, "attn_output.bias");
        Some(self.mm(wo, cur, bo))
    }

    /// The layer's K and V cache tensors (`llama_kv_cache` constructor): `[n_embd_k_gqa, cells,
    /// n_stream]`; V padded to the widest layer when transposed.
    pub fn cache(&mut self, il: usize, cells: u64) -> (T, T) {
        let hp = self.hp;
        let ns = self.s.n_stream;
        let k = self.g.external(self.s.type_k, [hp.n_embd_k_gqa(il), cells, ns, 1]);
        let ve = if self.s.flash_attn { hp.n_embd_v_gqa(il) } else { hp.n_embd_v_gqa_max() };
        let v = self.g.external(self.s.type_v, [ve, cells, ns, 1]);
        (k, v)
    }

    /// `llama_kv_cache::cpy_k`.
    pub fn cpy_k(&mut self, kc: T, k_cur: T, idxs: T) -> T {
        let ne = self.g.ne(k_cur);
        let nb2 = self.g.t[k_cur].nb[2];
        let kv = self.g.view(k_cur, [ne[0] * ne[1], ne[2], 1, 1], [nb2, nb2 * ne[2], nb2 * ne[2]]);
        let kc = self.merge_streams(kc);
        self.g.set_rows(kc, kv, idxs)
    }

    fn merge_streams(&mut self, c: T) -> T {
        let ne = self.g.ne(c);
        if ne[2] > 1 {
            self.g.reshape(c, [ne[0], ne[1] * ne[2], 1, 1])
        } else {
            c
        }
    }

    /// `llama_kv_cache::cpy_v`.
    pub fn cpy_v(&mut self, vc: T, v_cur: T, idxs: T) -> T {
        let ne = self.g.ne(v_cur);
        let nb2 = self.g.t[v_cur].nb[2];
        let gqa = ne[0] * ne[1];
        if self.s.flash_attn {
            let vv = self.g.view(v_cur, [gqa, ne[2], 1, 1], [nb2, nb2 * ne[2], nb2 * ne[2]]);
            let vc = self.merge_streams(vc);
            return self.g.set_rows(vc, vv, idxs);
        }
        let ty = self.g.t[v_cur].ty;
        let mut cur = if ty.row_bytes(gqa) == nb2 {
            self.g.reshape(v_cur, [gqa, ne[2], 1, 1])
        } else {
            self.g.op(Op::Cont, ty, [gqa, ne[2], 1, 1], vec![v_cur])
        };
        let vne = self.g.ne(vc);
        if gqa < vne[0] {
            cur = self.g.op(Op::Other, ty, [vne[0], ne[2], 1, 1], vec![cur]);
        }
        let vel = self.g.t[vc].nelements();
        let view = self.g.reshape(vc, [1, vel, 1, 1]);
        let el = self.g.t[cur].nelements();
        let cur = self.g.reshape(cur, [1, el, 1, 1]);
        self.g.set_rows(view, cur, idxs)
    }

    /// `llama_kv_cache::get_k` / `get_v` over every stream.
    pub fn get_kv(&mut self, il: usize, kc: T, vc: T, n_kv: u64) -> (T, T) {
        let hp = self.hp;
        let ns = self.s.n_stream;
        let (tk, tv) = (self.s.type_k, self.s.type_v);
        let size = self.g.ne(kc)[1];
        let hk = if hp.is_swa[il] { hp.head_k_swa } else { hp.head_k };
        let hv = if hp.is_swa[il] { hp.head_v_swa } else { hp.head_v };
        let nkv = hp.n_head_kv[il];
        let ek = self.g.ne(kc)[0];
        let k = self.g.view(kc, [hk, nkv, n_kv, ns], [tk.row_bytes(hk), tk.row_bytes(ek), tk.row_bytes(ek * size)]);
        let ev = self.g.ne(vc)[0];
        let v = if self.s.flash_attn {
            self.g.view(vc, [hv, nkv, n_kv, ns], [tv.row_bytes(hv), tv.row_bytes(ev), tv.row_bytes(ev * size)])
        } else {
            self.g.view(vc, [n_kv, nkv, hv, ns], [tv.row_bytes(size * hv), tv.row_bytes(size), tv.row_bytes(size * ev)])
        };
        (k, v)
    }

    /// `build_attn_mha`: `softcap` is gemma2's attention logit soft-capping (scale, tanh, scale),
    /// `v_mla` MLA's decompression of V.
    pub fn mha(&mut self, q: T, k: T, v: T, mask: T, softcap: Option<f32>, v_mla: Option<T>) -> T {
        self.mha_sinks(q, k, v, mask, softcap, v_mla, None)
    }

    #[allow(clippy::too_many_arguments)]
    fn mha_sinks(&mut self, q: T, k: T, v: T, mask: T, softcap: Option<f32>, v_mla: Option<T>, sinks: Option<T>) -> T {
        let v_trans = self.g.t[v].nb[1] > self.g.t[v].nb[2];
        let ns = self.g.ne(k)[3];
        let (qne, qnb) = (self.g.ne(q), self.g.t[q].nb);
        let q = self.g.view(q, [qne[0], qne[1], qne[2] / ns, ns], [qnb[1], qnb[2], qnb[2] * (qne[2] / ns)]);
        let q = self.g.permute(q, [0, 2, 1, 3]);
        let k = self.g.permute(k, [0, 2, 1, 3]);
        let mut v = self.g.permute(v, [0, 2, 1, 3]);
        let cur = if self.s.flash_attn {
            if v_trans {
                v = self.g.transpose(v);
            }
            let mut cur = self.g.flash_attn_ext(q, k, v, mask, sinks);
            if let Some(vm) = v_mla {
                let p = self.g.permute(cur, [0, 2, 1, 3]);
                let m = self.g.mul_mat(vm, p);
                let p = self.g.permute(m, [0, 2, 1, 3]);
                cur = self.g.cont(p);
            }
            let ne = self.g.ne(cur);
            self.g.reshape(cur, [ne[0] * ne[1], ne[2] * ne[3], 1, 1])
        } else {
            let mut kq = self.g.mul_mat(k, q);
            if softcap.is_some() {
                kq = self.g.scale(kq);
                kq = self.g.unary(kq);
                kq = self.g.scale(kq);
            }
            let kq = self.g.soft_max(kq, Some(mask), sinks);
            if !v_trans {
                let t = self.g.transpose(v);
                v = self.g.cont(t);
            }
            let mut kqv = self.g.mul_mat(v, kq);
            if let Some(vm) = v_mla {
                kqv = self.g.mul_mat(vm, kqv);
            }
            let p = self.g.permute(kqv, [0, 2, 1, 3]);
            let ne = self.g.ne(p);
            let ty = self.g.t[p].ty;
            self.g.op(Op::Cont, ty, [ne[0] * ne[1], ne[2] * ne[3], 1, 1], vec![p])
        };
        self.g.expand(cur);
        cur
    }

    /// `build_ffn` with a parallel gate (SwiGLU or GEGLU: the same tensors).
    pub fn ffn(&mut self, il: usize, cur: T, prefix: &str) -> Option<T> {
        let up = self.wl(il, &format!("{prefix}_up.weight"))?;
        let gate = self.wl(il, &format!("{prefix}_gate.weight"));
        let down = self.wl(il, &format!("{prefix}_down.weight"))?;
        Some(self.ffn_with(cur, up, gate, down))
    }

    pub fn ffn_with(&mut self, cur: T, up: T, gate: Option<T>, down: T) -> T {
        let tmp = self.g.mul_mat(up, cur);
        let act = match gate {
            Some(g) => {
                let gc = self.g.mul_mat(g, cur);
                self.g.glu_split(gc, tmp)
            }
            None => self.g.unary(tmp),
        };
        self.g.mul_mat(down, act)
    }

    /// The shared expert (`build_ffn(cur, ffn_up_shexp, ffn_gate_shexp, ffn_down_shexp)`, SiLU, parallel).
    pub fn shared_expert(&mut self, il: usize, cur: T) -> Option<T> {
        let up = self.wl(il, "ffn_up_shexp.weight")?;
        let gate = self.wl(il, "ffn_gate_shexp.weight");
        let down = self.wl(il, "ffn_down_shexp.weight")?;
        Some(self.ffn_with(cur, up, gate, down))
    }

    /// The last layer keeps only the output rows (`get_rows(…, inp_out_ids)`) of its two inputs.
    pub fn last_rows(&mut self, il: usize, n: usize, a: T, b: T, out_ids: T) -> (T, T) {
        if il + 1 == n {
            (self.g.get_rows(a, out_ids), self.g.get_rows(b, out_ids))
        } else {
            (a, b)
        }
    }

    /// `build_moe_ffn` with softmax gating (qwen3moe): `norm_w` normalises the chosen experts'
    /// weights, `scale` multiplies them.
    pub fn moe(&mut self, il: usize, cur: T, norm_w: bool, scale: bool) -> Option<T> {
        self.moe_gated(il, cur, norm_w, scale, false)
    }

    /// `build_moe_ffn`, softmax or (`sigmoid`) sigmoid gating, with the selection bias
    /// `exp_probs_b` when the file has one.
    pub fn moe_gated(&mut self, il: usize, cur: T, norm_w: bool, scale: bool, sigmoid: bool) -> Option<T> {
        self.moe_impl(il, cur, norm_w, scale, sigmoid, false)
    }

    /// Llama 4's `build_moe_ffn` (`weight_before_ffn`): experts chosen by the logits, their
    /// sigmoid weights multiplied into the repeated input before the experts, not after.
    pub fn moe_llama4(&mut self, il: usize, cur: T, scale: bool) -> Option<T> {
        self.moe_impl(il, cur, false, scale, true, true)
    }

    fn moe_impl(&mut self, il: usize, cur: T, norm_w: bool, scale: bool, sigmoid: bool, llama4: bool) -> Option<T> {
        let ne = self.g.ne(cur);
        let (n_embd, n_tokens) = (ne[0], ne[1]);
        let n_expert = self.hp.n_expert;
        let n_used = self.hp.n_expert_used;
        // `llama_model_base::load_hparams` refuses these (`LLAMA_MAX_EXPERTS` = 1024).
        if n_used == 0 || n_used > n_expert || n_expert > 1024 {
            return None;
        }
        let gate_inp = self.wl(il, "ffn_gate_inp.weight")?;
        let logits = self.g.mul_mat(gate_inp, cur);
        let probs = if sigmoid { self.g.unary(logits) } else { self.g.soft_max(logits, None, None) };
        let selection = match self.wl(il, "exp_probs_b.bias") {
            Some(bias) => self.g.add(probs, bias),
            None => probs,
        };
        let selection = if llama4 { logits } else { selection };
        // `ggml_argsort_top_k`: an argsort and a view of its first `n_used`.
        let sorted = self.g.op(Op::Argsort, GgmlType::I32, self.g.ne(selection), vec![selection]);
        let snb = self.g.t[sorted].nb;
        let selected = self.g.view(sorted, [n_used, n_tokens, 1, 1], [snb[1], snb[2], snb[3]]);
        let probs3 = self.g.reshape(probs, [1, n_expert, n_tokens, 1]);
        let mut weights = self.g.get_rows(probs3, selected);
        if norm_w {
            let w2 = self.g.reshape(weights, [n_used, n_tokens, 1, 1]);
            let sum = self.g.op(Op::SumRows, F32, [1, n_tokens, 1, 1], vec![w2]);
            let sum = self.g.unary_like(Op::Clamp, sum, vec![sum]);
            let w2 = self.g.div(w2, sum);
            weights = self.g.reshape(w2, [1, n_used, n_tokens, 1]);
        }
        if scale {
            weights = self.g.scale(weights);
        }
        self.g.expand(weights);
        let mut cur = self.g.reshape(cur, [n_embd, 1, n_tokens, 1]);
        if llama4 {
            let repeated = self.g.op(Op::Repeat, F32, [n_embd, n_used, n_tokens, 1], vec![cur]);
            cur = self.g.mul(repeated, weights);
        }
        let up_e = self.wl(il, "ffn_up_exps.weight")?;
        let gate_e = self.wl(il, "ffn_gate_exps.weight")?;
        let down_e = self.wl(il, "ffn_down_exps.weight")?;
        let up = self.g.mul_mat_id(up_e, cur, selected);
        let gate = self.g.mul_mat_id(gate_e, cur, selected);
        let act = self.g.glu_split(gate, up);
        let mut experts = self.g.mul_mat_id(down_e, act, selected);
        if !llama4 {
            experts = self.g.mul(experts, weights);
        }
        Some(self.sum_experts(experts, n_used))
    }

    /// The end of `build_moe_ffn`: the weighted experts' outputs `[n_embd, n_used, n_tokens]`
    /// summed expert by expert (views of each expert's rows, added in turn; `cont` for one).
    pub fn sum_experts(&mut self, experts: T, n_used: u64) -> T {
        self.g.expand(experts);
        let ne = self.g.ne(experts);
        let (n_embd, n_tokens) = (ne[0], ne[2]);
        let enb = self.g.t[experts].nb;
        let mut views = Vec::new();
        // Expert `i`'s rows (`view_2d` at offset `i·nb[1]`; offsets take no memory).
        for _ in 0..n_used.max(1) {
            let v = self.g.view(experts, [n_embd, n_tokens, 1, 1], [enb[2], enb[2] * n_tokens, enb[2] * n_tokens]);
            self.g.expand(v);
            views.push(v);
        }
        let mut out = views[0];
        for &v in &views[1..] {
            out = self.g.add(out, v);
            self.g.expand(out);
        }
        if n_used == 1 {
            out = self.g.cont(out);
        }
        out
    }

    /// `build_inp_embd`, `build_inp_pos` and `build_inp_out_ids` on the first layer's device:
    /// `(embeddings, positions, output ids)`.
    pub fn start(&mut self) -> Option<(T, T, T)> {
        self.at_layer(0);
        let embd = self.inp_embd()?;
        Some((embd, self.inp_pos(), self.inp_out_ids()))
    }

    /// The output norm and head; `softcap`: gemma2's final logit soft-capping.
    pub fn head_out(&mut self, cur: T, softcap: bool) -> Option<()> {
        self.head_out_scaled(cur, softcap, false)
    }

    /// [`head_out`](Self::head_out), the logits scaled after (`ggml_scale`: granite's `logit_scale`).
    pub fn head_out_scaled(&mut self, cur: T, softcap: bool, logit_scale: bool) -> Option<()> {
        self.head_norm_out(cur, false, softcap, logit_scale)
    }

    /// The head after a layer norm (`LLM_NORM`, weight and optional bias) or an RMS norm.
    pub fn head_norm_out(&mut self, cur: T, layer_norm: bool, softcap: bool, logit_scale: bool) -> Option<()> {
        let b = self;
        let n = b.hp.n_layer as usize;
        b.at_layer(n);
        let w = b.w("output_norm.weight");
        let cur = if layer_norm {
            let bias = b.w("output_norm.bias");
            b.layer_norm(cur, w, bias)
        } else {
            b.rms_norm(cur, w)
        };
        b.g.set_output(cur);
        let out = b.w("output.weight").or_else(|| b.w_tied_output())?;
        let mut cur = b.g.mul_mat(out, cur);
        if let Some(bias) = b.w("output.bias") {
            cur = b.g.add(cur, bias);
        }
        if softcap {
            cur = b.g.scale(cur);
            cur = b.g.unary(cur);
            cur = b.g.scale(cur);
        }
        if logit_scale {
            cur = b.g.scale(cur);
        }
        b.g.set_output(cur);
        b.g.expand(cur);
        Some(())
    }

    /// The end of a layer's attention block: the last layer keeps only the output rows
    /// (`get_rows(…, inp_out_ids)` of the attention output and the residual), the residual add
    /// (`ffn_inp`) and the FFN norm. Returns `(ffn_inp, normed)`.
    pub fn ffn_input(&mut self, il: usize, cur: T, inp_sa: T, out_ids: T) -> (T, T) {
        let (mut cur, mut inp_sa) = (cur, inp_sa);
        if il + 1 == self.hp.n_trunk() as usize {
            cur = self.g.get_rows(cur, out_ids);
            inp_sa = self.g.get_rows(inp_sa, out_ids);
        }
        let ffn_inp = self.g.add(cur, inp_sa);
        let w = self.wl(il, "ffn_norm.weight");
        (ffn_inp, self.rms_norm(ffn_inp, w))
    }

    /// `build_norm(cur, blk.il.<name>.weight, blk.il.<name>.bias, LLM_NORM_RMS)`.
    pub fn norm_bias(&mut self, il: usize, name: &str, cur: T) -> T {
        let w = self.wl(il, &format!("{name}.weight"));
        let cur = self.rms_norm(cur, w);
        match self.wl(il, &format!("{name}.bias")) {
            Some(bias) => self.g.add(cur, bias),
            None => cur,
        }
    }

    /// `build_qkv`'s fused path: Q, K and V as 3-d views of one `attn_qkv` product.
    pub fn split_qkv(&mut self, il: usize, qkv: T, head: u64) -> (T, T, T) {
        let n = self.s.n_tokens;
        let (nh, nkv) = (self.hp.n_head[il], self.hp.n_head_kv[il]);
        let (ty, nb1) = (self.g.t[qkv].ty, self.g.t[qkv].nb[1]);
        let row = ty.row_bytes(head);
        let mut view = |heads: u64| self.g.view(qkv, [head, heads, n, 1], [row, nb1, nb1 * n]);
        (view(nh), view(nkv), view(nkv))
    }
}
