//! The hyperparameters llama.cpp reads from a GGUF's metadata, as far as its buffers depend on
//! them (`llama_model_base::load_hparams` in `src/llama-model.cpp`, the per-arch
//! `load_arch_hparams` in `src/models/*.cpp`, `src/llama-hparams.cpp`).

use crate::gguf::{Header, Value};

use super::error::LlamaError;

/// What the buffers depend on. Per-layer arrays have `n_layer` entries.
#[derive(Debug, Clone, PartialEq)]
pub struct Hparams {
    pub arch: String,
    /// `{arch}.block_count` (`n_layer_all`).
    pub n_layer: u32,
    pub n_embd: u64,
    /// `{arch}.attention.head_count`, per layer (scalar or array in the file).
    pub n_head: Vec<u64>,
    /// `{arch}.attention.head_count_kv`, per layer; defaults to `n_head`.
    pub n_head_kv: Vec<u64>,
    /// `{arch}.attention.key_length` (default `n_embd / n_head[0]`), and for sliding-window layers
    /// `key_length_swa` (default the same).
    pub head_k: u64,
    pub head_v: u64,
    pub head_k_swa: u64,
    pub head_v_swa: u64,
    /// Which layers use the sliding window (`hparams.is_swa`), and its width.
    pub is_swa: Vec<bool>,
    pub n_swa: u64,
    /// Multi-head latent attention (`key_length_mla` and `value_length_mla` set): the cache keeps
    /// only K (the latent and the rope part), no V (`llama_kv_cache`: `has_v = !is_mla`).
    pub is_mla: bool,
    /// `vocab.n_tokens()`: the tokenizer's token list.
    pub n_vocab: u64,
    pub n_ctx_train: u64,
    /// `{arch}.feed_forward_length`, per layer.
    pub n_ff: Vec<u64>,
    pub n_expert: u64,
    pub n_expert_used: u64,
    pub n_ff_exp: u64,
    /// MLA: `attention.kv_lora_rank`, `rope.dimension_count` and `key_length_mla` (0 otherwise).
    pub kv_lora_rank: u64,
    /// `leading_dense_block_count`: MoE models' first dense layers.
    pub n_dense_lead: u64,
    pub n_rot: u64,
    pub head_k_mla: u64,
    /// Mamba's state sizes (`{arch}.ssm.*`), for the recurrent layers; zero elsewhere.
    pub ssm: Ssm,
    /// Which layers keep a recurrent state instead of a KV cache (`hparams.is_recr`).
    pub recurrent: Vec<bool>,
    /// `{arch}.nextn_predict_layers`: the last layers are multi-token-prediction blocks, outside
    /// the graph and the KV cache, and (for the architectures in [`MTP_SKIP_ARCHS`]) not loaded
    /// unless asked for (`TENSOR_SKIP` when `load_mtp` is off, llama.cpp's default).
    pub n_layer_nextn: u32,
    /// Every layer keeps both, a KV cache and a recurrent state (falcon-h1: attention and
    /// Mamba-2 side by side; `create_memory`'s filters both true).
    pub attn_and_recurrent: bool,
}

/// `ssm_d_conv`, `ssm_d_inner`, `ssm_d_state`, `ssm_n_group`, `ssm_dt_rank`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ssm {
    pub d_conv: u64,
    pub d_inner: u64,
    pub d_state: u64,
    pub n_group: u64,
    pub dt_rank: u64,
}

impl Ssm {
    /// `n_embd_r()`: the convolution state per sequence (`src/llama-hparams.cpp`):
    /// `(d_conv - 1) * (d_inner + 2 * n_group * d_state)` (Mamba-1 files have no group count: 0).
    pub fn n_embd_r(&self) -> u64 {
        self.d_conv.saturating_sub(1) * (self.d_inner + 2 * self.n_group * self.d_state)
    }
    /// `n_embd_s()`: the SSM state per sequence, `d_state * d_inner`.
    pub fn n_embd_s(&self) -> u64 {
        self.d_state * self.d_inner
    }
}

/// The architectures whose every layer is recurrent and sized here (`llm_arch_is_recurrent`).
const RECURRENT_ARCHS: &[&str] = &["mamba", "mamba2"];

/// The architectures whose loaders skip the MTP layers' tensors unless `load_mtp`
/// (`mtp_flags |= TENSOR_SKIP` in `src/models/<arch>.cpp`).
pub const MTP_SKIP_ARCHS: &[&str] = &["deepseek2", "glm4moe", "glm4", "exaone4", "exaone-moe", "mimo2", "cohere2moe", "bailingmoe2", "nemotron_h", "gemma4"];

/// Hybrid architectures sized here (`llm_arch_is_hybrid`) and which of their layers are
/// recurrent: those where `head_count_kv` is 0 (`load_arch_hparams` of granite-hybrid.cpp, jamba.cpp).
const HYBRID_ARCHS: &[&str] = &["granitehybrid", "jamba", "falcon-h1"];

/// Architectures whose layers alternate with sliding-window attention, with the pattern
/// `load_swa_pattern(ml, n)` gets in their `load_arch_hparams` (`src/models/<arch>.cpp`) and the
/// default window. gemma3 uses a window only when the file sets one.
const SWA_ARCHS: &[(&str, u32, Option<u64>)] = &[
    ("gemma2", 2, Some(4096)),
    ("gemma3", 6, None),
    ("gemma-embedding", 6, None),
    ("gpt-oss", 2, None),
    ("cohere2", 4, None),
    // `models/llama4.cpp`: chunked attention of 8192 on 3 layers of 4 unless the file sets the
    // window to 0 (the window itself is always 8192: see `from_header`).
    ("llama4", 4, Some(8192)),
    // `models/olmo2.cpp`: OLMo 3 files set a window (3 sliding layers of 4).
    ("olmo2", 4, None),
];

/// Architectures whose memory is recurrent or hybrid (`llm_arch_is_recurrent` / `_hybrid`), which
/// this model does not size (but [`RECURRENT_ARCHS`]).
const RECURRENT_PREFIXES: &[&str] = &["mamba", "rwkv", "jamba", "falcon-h1", "granitehybrid", "plamo2", "lfm2", "nemotron_h", "qwen3next", "qwen35"];

fn key<'a>(h: &'a Header, arch: &str, k: &str) -> Option<&'a Value> {
    h.get(&format!("{arch}.{k}"))
}

fn u64_of(h: &Header, arch: &str, k: &str) -> Result<Option<u64>, LlamaError> {
    match key(h, arch, k) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| LlamaError::Metadata(format!("{arch}.{k}: expected an unsigned integer, found {v:?}"))),
    }
}

/// `get_key_or_arr`: a scalar for every layer, or an array of `n_layer` values.
fn per_layer(h: &Header, arch: &str, k: &str, n_layer: u32) -> Result<Option<Vec<u64>>, LlamaError> {
    let Some(v) = key(h, arch, k) else { return Ok(None) };
    if let Some(a) = v.as_array() {
        if a.items.len() != n_layer as usize {
            return Err(LlamaError::Metadata(format!("{arch}.{k}: {} values for {n_layer} layers", a.items.len())));
        }
        return a
            .items
            .iter()
            .map(|x| x.as_u64().ok_or_else(|| LlamaError::Metadata(format!("{arch}.{k}: not an unsigned integer"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Some);
    }
    Ok(u64_of(h, arch, k)?.map(|x| vec![x; n_layer as usize]))
}

fn required(v: Option<u64>, arch: &str, k: &str) -> Result<u64, LlamaError> {
    v.ok_or_else(|| LlamaError::Metadata(format!("missing {arch}.{k}")))
}

impl Hparams {
    pub fn from_header(h: &Header) -> Result<Hparams, LlamaError> {
        let arch = h.architecture().ok_or_else(|| LlamaError::Metadata("missing general.architecture".into()))?.to_string();
        if !RECURRENT_ARCHS.contains(&arch.as_str()) && !HYBRID_ARCHS.contains(&arch.as_str()) && RECURRENT_PREFIXES.iter().any(|p| arch.starts_with(p)) {
            return Err(LlamaError::Unsupported(format!("architecture {arch:?} keeps a recurrent state; only attention caches are sized")));
        }
        let a = arch.as_str();
        let n_layer = required(u64_of(h, a, "block_count")?, a, "block_count")?;
        if n_layer == 0 || n_layer > 512 {
            return Err(LlamaError::Metadata(format!("{a}.block_count = {n_layer} (llama.cpp takes 1..=512)")));
        }
        let n_layer = n_layer as u32;
        let n_embd = required(u64_of(h, a, "embedding_length")?, a, "embedding_length")?;
        let n_head = per_layer(h, a, "attention.head_count", n_layer)?.unwrap_or_else(|| vec![0; n_layer as usize]);
        let n_head_kv = per_layer(h, a, "attention.head_count_kv", n_layer)?.unwrap_or_else(|| n_head.clone());
        let head0 = n_head[0];
        let default_head = n_embd.checked_div(head0).unwrap_or(0);
        let head_k = u64_of(h, a, "attention.key_length")?.unwrap_or(default_head);
        let head_v = u64_of(h, a, "attention.value_length")?.unwrap_or(default_head);
        let head_k_swa = u64_of(h, a, "attention.key_length_swa")?.unwrap_or(head_k);
        let head_v_swa = u64_of(h, a, "attention.value_length_swa")?.unwrap_or(head_v);
        let mla_k = u64_of(h, a, "attention.key_length_mla")?.unwrap_or(0);
        let mla_v = u64_of(h, a, "attention.value_length_mla")?.unwrap_or(0);

        let mut is_swa = vec![false; n_layer as usize];
        let mut n_swa = 0;
        if let Some(&(_, pattern, default)) = SWA_ARCHS.iter().find(|(n, _, _)| *n == a) {
            let mut window = u64_of(h, a, "attention.sliding_window")?.or(default);
            if a == "llama4" && window != Some(0) {
                window = Some(8192);
            }
            if let Some(w) = window.filter(|&w| w > 0) {
                n_swa = w;
                // `load_swa_pattern`: a bool array, else a period (`set_swa_pattern`: a layer
                // uses the window unless it is the last of its period).
                match key(h, a, "attention.sliding_window_pattern") {
                    Some(Value::Array(arr)) => {
                        for (il, v) in arr.items.iter().enumerate().take(n_layer as usize) {
                            is_swa[il] = matches!(v, Value::Bool(true)) || v.as_u64().is_some_and(|x| x != 0);
                        }
                    }
                    other => {
                        let n = other.and_then(Value::as_u64).unwrap_or(pattern.into());
                        for (il, s) in is_swa.iter_mut().enumerate() {
                            *s = n == 0 || (il as u64 % n) < n - 1;
                        }
                    }
                }
            }
        }

        let n_vocab = match h.get("tokenizer.ggml.tokens").and_then(Value::as_array) {
            Some(t) => t.items.len() as u64,
            None => h
                .tensor("token_embd.weight")
                .map(|t| t.ne(1))
                .ok_or_else(|| LlamaError::Metadata("no tokenizer.ggml.tokens and no token_embd.weight".into()))?,
        };
        let recurrent = if a == "falcon-h1" {
            vec![true; n_layer as usize]
        } else if HYBRID_ARCHS.contains(&a) {
            n_head_kv.iter().map(|&h| h == 0).collect()
        } else {
            vec![RECURRENT_ARCHS.contains(&a); n_layer as usize]
        };
        let hp = Hparams {
            n_layer,
            n_embd,
            n_head_kv,
            n_head,
            head_k,
            head_v,
            head_k_swa,
            head_v_swa,
            is_swa,
            n_swa,
            is_mla: mla_k != 0 && mla_v != 0,
            n_vocab,
            n_ctx_train: u64_of(h, a, "context_length")?.unwrap_or(0),
            n_ff: per_layer(h, a, "feed_forward_length", n_layer)?.unwrap_or_else(|| vec![0; n_layer as usize]),
            n_expert: u64_of(h, a, "expert_count")?.unwrap_or(0),
            n_expert_used: u64_of(h, a, "expert_used_count")?.unwrap_or(0),
            n_ff_exp: u64_of(h, a, "expert_feed_forward_length")?.unwrap_or(0),
            kv_lora_rank: u64_of(h, a, "attention.kv_lora_rank")?.unwrap_or(0),
            n_dense_lead: u64_of(h, a, "leading_dense_block_count")?.unwrap_or(0),
            n_rot: u64_of(h, a, "rope.dimension_count")?.unwrap_or(head_k),
            head_k_mla: mla_k,
            ssm: Ssm {
                d_conv: u64_of(h, a, "ssm.conv_kernel")?.unwrap_or(0),
                d_inner: u64_of(h, a, "ssm.inner_size")?.unwrap_or(0),
                d_state: u64_of(h, a, "ssm.state_size")?.unwrap_or(0),
                n_group: u64_of(h, a, "ssm.group_count")?.unwrap_or(0),
                dt_rank: u64_of(h, a, "ssm.time_step_rank")?.unwrap_or(0),
            },
            recurrent,
            attn_and_recurrent: a == "falcon-h1",
            n_layer_nextn: u64_of(h, a, "nextn_predict_layers")?.unwrap_or(0).min(u64::from(n_layer) - 1) as u32,
            arch,
        };
        hp.check_bounds()?;
        Ok(hp)
    }

    /// Refuses sizes no model has (a hostile or corrupt header), so that no byte count overflows:
    /// widths (embedding, feed-forward, vocabulary, latent) up to 2^22, heads and head sizes up to
    /// 2^14, experts up to `LLAMA_MAX_EXPERTS` (1024).
    fn check_bounds(&self) -> Result<(), LlamaError> {
        let a = &self.arch;
        let check = |what: &str, v: u64, max: u64| {
            if v > max {
                Err(LlamaError::Metadata(format!("{a}: {what} = {v} (more than {max}, no model has that)")))
            } else {
                Ok(())
            }
        };
        check("embedding_length", self.n_embd, 1 << 22)?;
        check("vocabulary size", self.n_vocab, 1 << 22)?;
        check("context_length", self.n_ctx_train, 1 << 32)?;
        for &x in &self.n_ff {
            check("feed_forward_length", x, 1 << 22)?;
        }
        check("expert_feed_forward_length", self.n_ff_exp, 1 << 22)?;
        check("expert_count", self.n_expert, 1024)?;
        check("expert_used_count", self.n_expert_used, 1024)?;
        check("attention.kv_lora_rank", self.kv_lora_rank, 1 << 22)?;
        for &x in self.n_head.iter().chain(&self.n_head_kv) {
            check("attention.head_count(_kv)", x, 1 << 14)?;
        }
        for x in [self.head_k, self.head_v, self.head_k_swa, self.head_v_swa, self.head_k_mla, self.n_rot] {
            check("attention key/value length", x, 1 << 14)?;
        }
        check("attention.sliding_window", self.n_swa, 1 << 32)?;
        let m = &self.ssm;
        for (what, v) in [("ssm.conv_kernel", m.d_conv), ("ssm.inner_size", m.d_inner), ("ssm.state_size", m.d_state), ("ssm.group_count", m.n_group), ("ssm.time_step_rank", m.dt_rank)] {
            check(what, v, 1 << 16)?;
        }
        check("leading_dense_block_count", self.n_dense_lead, 1 << 16)
    }

    /// `n_embd_k_gqa(il)`: K elements per token and layer.
    pub fn n_embd_k_gqa(&self, il: usize) -> u64 {
        let head = if self.is_swa[il] { self.head_k_swa } else { self.head_k };
        head * self.n_head_kv[il]
    }

    /// `n_embd_v_gqa(il)`.
    pub fn n_embd_v_gqa(&self, il: usize) -> u64 {
        let head = if self.is_swa[il] { self.head_v_swa } else { self.head_v };
        head * self.n_head_kv[il]
    }

    /// `n_embd_v_gqa_max()`: a transposed V cache (no flash attention) pads every layer to it.
    pub fn n_embd_v_gqa_max(&self) -> u64 {
        (0..self.n_layer as usize).map(|il| self.n_embd_v_gqa(il)).max().unwrap_or(0)
    }

    /// The layers the graph runs (`hparams.n_layer()`: all but the MTP blocks).
    pub fn n_trunk(&self) -> u32 {
        self.n_layer - self.n_layer_nextn
    }

    /// Layer `il` is an MTP block whose tensors llama.cpp does not load.
    pub fn skipped_mtp(&self, il: usize) -> bool {
        self.n_layer_nextn > 0 && il >= self.n_trunk() as usize && MTP_SKIP_ARCHS.contains(&self.arch.as_str())
    }

    pub fn any_swa(&self) -> bool {
        self.is_swa.iter().any(|&s| s)
    }
}
