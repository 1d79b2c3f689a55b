//! Which GPUs Ollama hands llama-server, read from ollama/ollama at commit fb30760 (not
//! measured: no GPU here):
//!
//! - `server/sched.go` `selectLlamaServerPlacement` (lines 972–1031): with one GPU or
//!   `num_gpu 0`, every GPU; with `main_gpu` set, that GPU alone; otherwise, unless
//!   `OLLAMA_SCHED_SPREAD`, the single GPU with the most available memory among those whose 80 %
//!   holds the predicted VRAM (`bestSingleGPUFit`, lines 1060–1076: the first of equals, discrete
//!   before integrated); else every GPU of the best library group (`bestGPUGroupByAvailableMemory`),
//!   over which llama-server splits the layers itself (`-sm layer` by free memory:
//!   `LlamaServerRunner`'s device list, `llm/llama_server.go` lines 1073–1083).
//! - A single GPU is launched alone with `--split-mode none --main-gpu 0`
//!   (`singleLlamaServerGPUPlacement`, `appendMainGPUArgs` in `llm/llama_server.go` lines 641–647).
//! - The prediction (`PredictServerVRAM`, `llm/llama_server.go` lines 2678–2700): the file's size
//!   plus `2 × block_count × min(head_count_kv) × (embedding_length / max(head_count)) × ctx × 2`
//!   bytes, `ctx` the per-slot context (capped at the training context) times `OLLAMA_NUM_PARALLEL`
//!   (`effectiveLlamaServerContext`, `server/sched.go` line 793); keys missing count 1.
//!
//! Each GPU's available memory stands for its free memory (its capacity here).

use crate::gguf::{Header, Value};

use super::params::GpuDevice;
use super::error::LlamaError;

/// The GPUs Ollama gives llama-server: their indices in the list given, and whether llama-server
/// runs on one of them alone (`-sm none --main-gpu 0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub gpus: Vec<usize>,
    pub single: bool,
    /// `PredictServerVRAM`'s bytes.
    pub predicted: u64,
}

/// `UintOrArrayValue(key, 1)`: the smallest and largest of a scalar or an array (1 when absent).
fn min_max(h: &Header, key: &str) -> (u64, u64) {
    match h.get(key) {
        Some(Value::Array(a)) => {
            let v: Vec<u64> = a.items.iter().filter_map(Value::as_u64).collect();
            (v.iter().copied().min().unwrap_or(1), v.iter().copied().max().unwrap_or(1))
        }
        Some(v) => v.as_u64().map_or((1, 1), |x| (x, x)),
        None => (1, 1),
    }
}

/// `PredictServerVRAM(model, f, ctx)`: the file size and an f16 KV cache of `ctx` cells.
pub fn predict_server_vram(h: &Header, ctx: u64) -> u64 {
    let arch = h.architecture().unwrap_or_default();
    let k = |s: &str| format!("{arch}.{s}");
    let file = h.data_offset.saturating_add(h.data_size);
    let layers = h.get(&k("block_count")).and_then(Value::as_u64).unwrap_or(0);
    let kv_heads = min_max(h, &k("attention.head_count_kv")).0.max(1);
    let heads = min_max(h, &k("attention.head_count")).1;
    let embd = h.get(&k("embedding_length")).and_then(Value::as_u64).unwrap_or(0);
    let head_dim = embd.checked_div(heads).unwrap_or(0);
    let kv = [2, layers, kv_heads, head_dim, ctx, 2].iter().fold(1u64, |a, &x| a.saturating_mul(x));
    file.saturating_add(kv)
}

/// `selectLlamaServerPlacement` for the GPUs given (all CUDA: one library group), `ctx` the
/// context llama-server gets (`num_ctx × OLLAMA_NUM_PARALLEL`).
pub fn placement(h: &Header, ctx: u64, gpus: &[GpuDevice], num_gpu: Option<u64>, main_gpu: Option<usize>, sched_spread: bool) -> Result<Placement, LlamaError> {
    let predicted = predict_server_vram(h, ctx);
    let all = Placement { gpus: (0..gpus.len()).collect(), single: false, predicted };
    if gpus.len() <= 1 || num_gpu == Some(0) {
        return Ok(all);
    }
    if let Some(i) = main_gpu {
        if i >= gpus.len() {
            return Err(LlamaError::Params(format!("main_gpu {i}: {} GPUs are given", gpus.len())));
        }
        return Ok(Placement { gpus: vec![i], single: true, predicted });
    }
    if !sched_spread && predicted > 0 {
        let mut best: Option<usize> = None;
        for (i, g) in gpus.iter().enumerate() {
            if predicted > g.capacity.saturating_mul(80) / 100 {
                continue;
            }
            if best.is_none_or(|b| g.capacity > gpus[b].capacity) {
                best = Some(i);
            }
        }
        if let Some(i) = best {
            return Ok(Placement { gpus: vec![i], single: true, predicted });
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{Header, Value};

    fn header(file: u64) -> Header {
        let metadata = vec![
            ("general.architecture".into(), Value::Str("llama".into())),
            ("llama.block_count".into(), Value::U32(32)),
            ("llama.embedding_length".into(), Value::U32(4096)),
            ("llama.attention.head_count".into(), Value::U32(32)),
            ("llama.attention.head_count_kv".into(), Value::U32(8)),
        ];
        Header { version: 3, metadata, tensors: Vec::new(), alignment: 32, header_end: 0, data_offset: 0, data_size: file }
    }

    fn gpu(gib: u64) -> GpuDevice {
        GpuDevice { name: format!("{gib}G"), capacity: gib << 30 }
    }

    #[test]
    fn predicts_the_file_and_an_f16_cache() {
        // 2 × 32 layers × 8 heads × 128 × 8192 cells × 2 bytes = 1 GiB.
        assert_eq!(predict_server_vram(&header(5 << 30), 8192), 6 << 30);
    }

    #[test]
    fn one_gpu_when_80_percent_of_one_holds_it_else_all() {
        let h = header(5 << 30);
        let mixed = [gpu(8), gpu(24), gpu(12)];
        // 6 GiB predicted: the 24 GiB card (the most memory) alone.
        let p = placement(&h, 8192, &mixed, None, None, false).unwrap();
        assert_eq!((p.gpus, p.single), (vec![1], true));
        // 21 GiB: more than 80 % of every card: all of them, split by llama-server.
        let p = placement(&h, 8192 * 16, &mixed, None, None, false).unwrap();
        assert_eq!((p.gpus, p.single), (vec![0, 1, 2], false));
        // OLLAMA_SCHED_SPREAD, num_gpu 0, main_gpu.
        assert_eq!(placement(&h, 8192, &mixed, None, None, true).unwrap().gpus, vec![0, 1, 2]);
        assert_eq!(placement(&h, 8192, &mixed, Some(0), None, false).unwrap().gpus, vec![0, 1, 2]);
        assert_eq!(placement(&h, 8192, &mixed, None, Some(2), false).unwrap().gpus, vec![2]);
        assert!(placement(&h, 8192, &mixed, None, Some(3), false).is_err());
        // Equal cards: the first.
        assert_eq!(placement(&h, 8192, &[gpu(24), gpu(24)], None, None, false).unwrap().gpus, vec![0]);
    }
}
