//! Ollama as llama.cpp with Ollama's defaults and names. Read from ollama/ollama at commit
//! fb30760 (2026-08-21), which runs the upstream `llama-server` for GGUF models:
//!
//! - `llm/llama_server.go` (the launch flags, lines 369–409): `-c num_ctx × num_parallel`,
//!   `-np num_parallel`, `--cache-type-k` and `--cache-type-v` both `OLLAMA_KV_CACHE_TYPE` when set,
//!   `--flash-attn on|off` when `OLLAMA_FLASH_ATTENTION` is set, else `auto` (`off` where a GPU
//!   cannot run it; `LlamaServerFlashAttention`, lines 597–611), `-b num_batch -ub num_batch`
//!   (`appendBatchArgs`), `-ngl num_gpu` only when `num_gpu` is set (else llama-server fits the
//!   layers itself: here the most layers that fit).
//! - `api/types.go` (`DefaultOptions`, lines 1113–1119): `num_batch` 512, `num_gpu` −1 (dynamic),
//!   `num_ctx` `OLLAMA_CONTEXT_LENGTH`.
//! - `server/routes.go` (lines 2043–2057): without `OLLAMA_CONTEXT_LENGTH` the default context is
//!   262144 with at least 47 GiB of VRAM in all, 32768 with at least 23 GiB, else 4096.
//! - `llm/server.go` (lines 112–116): `num_ctx` is capped at the model's training context.
//! - `envconfig/config.go` (line 275): `OLLAMA_NUM_PARALLEL` defaults to 1.

use crate::gguf::GgmlType;

use super::params::{FlashAttn, Params};

/// Ollama's settings (a Modelfile's `PARAMETER`s and the server's environment); `None` = default.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Ollama {
    /// `num_ctx` (per request, i.e. per parallel slot).
    pub num_ctx: Option<u64>,
    /// `num_gpu`: layers on the GPUs.
    pub num_gpu: Option<u64>,
    /// `num_batch` (512).
    pub num_batch: Option<u64>,
    /// `OLLAMA_NUM_PARALLEL` (1).
    pub num_parallel: Option<u64>,
    /// `OLLAMA_KV_CACHE_TYPE` (f16).
    pub kv_cache_type: Option<GgmlType>,
    /// `OLLAMA_FLASH_ATTENTION`.
    pub flash_attention: Option<bool>,
    /// `OLLAMA_CONTEXT_LENGTH`.
    pub context_length: Option<u64>,
}

const GIB: u64 = 1 << 30;

/// The default `num_ctx` for the GPUs' total memory (`server/routes.go`).
pub fn default_num_ctx(total_vram: u64) -> u64 {
    if total_vram >= 47 * GIB {
        262_144
    } else if total_vram >= 23 * GIB {
        32_768
    } else {
        4096
    }
}

impl Ollama {
    /// The per-slot context Ollama asks for: `num_ctx`, else `OLLAMA_CONTEXT_LENGTH`, else the
    /// VRAM tier's default; capped at the model's training context (when it has one).
    pub fn num_ctx(&self, total_vram: u64, n_ctx_train: u64) -> u64 {
        let c = self.num_ctx.or(self.context_length.filter(|&c| c > 0)).unwrap_or_else(|| default_num_ctx(total_vram));
        if n_ctx_train > 0 {
            c.min(n_ctx_train)
        } else {
            c
        }
    }

    /// The llama-server settings Ollama launches with.
    pub fn params(&self, total_vram: u64, n_ctx_train: u64) -> Params {
        let np = self.num_parallel.unwrap_or(1).max(1);
        let batch = self.num_batch.unwrap_or(512);
        let kv = self.kv_cache_type.unwrap_or(GgmlType::F16);
        Params {
            n_ctx: self.num_ctx(total_vram, n_ctx_train) * np,
            n_parallel: np,
            n_batch: batch,
            n_ubatch: batch,
            type_k: kv,
            type_v: kv,
            flash_attn: match self.flash_attention {
                Some(true) => FlashAttn::On,
                Some(false) => FlashAttn::Off,
                None => FlashAttn::Auto,
            },
            n_gpu_layers: self.num_gpu,
            ..Params::default()
        }
    }

    /// The environment and Modelfile lines for these settings (defaults left out).
    pub fn config_lines(&self) -> (Vec<String>, Vec<String>) {
        let mut env = Vec::new();
        if let Some(n) = self.num_parallel {
            env.push(format!("OLLAMA_NUM_PARALLEL={n}"));
        }
        if let Some(t) = self.kv_cache_type {
            env.push(format!("OLLAMA_KV_CACHE_TYPE={}", t.name));
        }
        if let Some(f) = self.flash_attention {
            env.push(format!("OLLAMA_FLASH_ATTENTION={}", u8::from(f)));
        }
        if let Some(c) = self.context_length {
            env.push(format!("OLLAMA_CONTEXT_LENGTH={c}"));
        }
        let mut modelfile = Vec::new();
        if let Some(c) = self.num_ctx {
            modelfile.push(format!("PARAMETER num_ctx {c}"));
        }
        if let Some(g) = self.num_gpu {
            modelfile.push(format!("PARAMETER num_gpu {g}"));
        }
        if let Some(b) = self.num_batch {
            modelfile.push(format!("PARAMETER num_batch {b}"));
        }
        (env, modelfile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_slots_multiply_the_context_and_the_tier_sets_the_default() {
        let o = Ollama { num_parallel: Some(4), ..Ollama::default() };
        let p = o.params(24 * GIB, 131_072);
        assert_eq!((p.n_ctx, p.n_parallel), (4 * 32_768, 4));
        assert_eq!(Ollama::default().params(8 * GIB, 131_072).n_ctx, 4096);
        assert_eq!(Ollama::default().params(80 * GIB, 40_960).n_ctx, 40_960, "capped at the training context");
        let q = Ollama { kv_cache_type: Some(GgmlType::Q8_0), flash_attention: Some(true), ..Ollama::default() }.params(0, 0);
        assert_eq!((q.type_k, q.type_v, q.flash_attn, q.n_ubatch), (GgmlType::Q8_0, GgmlType::Q8_0, FlashAttn::On, 512));
    }
}
