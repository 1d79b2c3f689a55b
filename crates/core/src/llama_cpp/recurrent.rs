//! The recurrent state of Mamba-style layers (`llama_memory_recurrent`,
//! `src/llama-memory-recurrent.cpp`), read from source and measured on the CPU backend
//! (`tests/llama_cpp_recurrent.rs`, data from `tools/llama_cpp/measure_recurrent.py`):
//!
//! - `llama_model::create_memory` makes `mem_size = max(1, n_seq_max)` cells (one per sequence,
//!   whatever the context) with R and S in f32 (`GGML_TYPE_F32` for both) and no rollback rows
//!   (`n_rs_seq` 0 unless speculative decoding asks: `n_rows = mem_size * (1 + n_rs_seq)`);
//! - per recurrent layer a tensor R `[n_embd_r, n_rows]` (the convolution state) and S
//!   `[n_embd_s, n_rows]` (the SSM state), on the layer's device (`offload_kqv`, on by default),
//!   one buffer per buffer type, each tensor rounded to the buffer's alignment.

use crate::gguf::GgmlType;

use super::hparams::Hparams;
use super::kv::Context;
use super::placement::Buft;

/// One device's share of the recurrent state: R and S bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RsBytes {
    pub r: u64,
    pub s: u64,
}

/// The recurrent-state buffers by buffer type (none for a model without recurrent layers).
pub fn rs_buffers(hp: &Hparams, ctx: &Context, layer_dev: &[Option<usize>]) -> Vec<(Buft, RsBytes)> {
    let rows = ctx.n_seq.max(1);
    let f32 = GgmlType::F32;
    let (nr, ns) = (hp.ssm.n_embd_r(), hp.ssm.n_embd_s());
    let mut out: Vec<(Buft, RsBytes)> = Vec::new();
    for (il, dev) in layer_dev.iter().enumerate().take(hp.n_layer as usize) {
        if !hp.recurrent[il] {
            continue;
        }
        let buft = dev.map_or(Buft::Cpu, Buft::Cuda);
        let r = buft.alloc(nr, f32, f32.row_bytes(nr) * rows);
        let s = buft.alloc(ns, f32, f32.row_bytes(ns) * rows);
        match out.iter_mut().find(|(b, _)| *b == buft) {
            Some((_, x)) => {
                x.r += r;
                x.s += s;
            }
            None => out.push((buft, RsBytes { r, s })),
        }
    }
    out
}
