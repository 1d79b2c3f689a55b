//! vLLM's accounting identities, monotonicity, and one capacity worked out by hand.

use super::*;

const LLAMA_31_8B: &str = r#"{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4096,
"intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,
"vocab_size":128256,"max_position_embeddings":131072,"rms_norm_eps":1e-5,"tie_word_embeddings":false}"#;

fn llama() -> ModelSpec {
    crate::import::hf::from_config_json(LLAMA_31_8B).unwrap()
}

/// 80 GiB, the figure the worked examples below use (the GPU table's `h100-80gb` now holds the
/// total CUDA reports, 81,559 MiB, since the `ux` merge).
fn h100(context: u64) -> ServeConfig {
    ServeConfig::new(80 << 30, context)
}

/// Llama-3.1-8B, bf16, one H100 80 GB (80 GiB = 85,899,345,920 B), defaults:
///
/// ```text
/// requested  = ceil(85,899,345,920 × 0.9)                        = 77,309,411,328
/// weights    = 8,030,261,248 params × 2                           = 16,060,522,496
/// forward    = 8192 tokens × (2·4096 + 2·14336 + 14336) × 2      =    838,860,800
///              (MLP moment: residual + normed input + gate_up + SiluAndMul output)
/// sampler    = 256 reqs × 128,256 × (2 + 25) + hidden 8192 × 4096 × 2
///            = 886,505,472 + 67,108,864                           =    953,614,336  ← activation peak
/// non-torch  = 136 MiB                                            =    142,606,336
/// pool       = 77,309,411,328 − the three                         = 60,152,668,160
///              (CUDA graphs outside the budget, vLLM's default)
/// per token  = 32 layers × 2 × 8 kv heads × 128 × 2 B            =        131,072
/// blocks     = 60,152,668,160 // (16 × 131,072)                   =         28,683 → 458,928 tokens
/// at 8192    = 28,683 // 512 blocks                               =             56 sequences
/// graphs     = 512 × 51,200 × 2 + 51 capture sizes × 1 MiB        =    105,906,176
/// headroom   = 85,899,345,920 − 77,309,411,328 − 450 MiB − graphs =  8,012,169,216
/// ```
#[test]
fn llama_8b_on_one_h100_worked_by_hand() {
    let c = capacity(&llama(), &h100(8192)).unwrap();
    assert_eq!(c.requested_bytes, 77_309_411_328);
    assert_eq!(c.weights_bytes, 16_060_522_496);
    assert_eq!(c.activation_peak_bytes, 953_614_336);
    assert_eq!(c.non_torch_bytes, 142_606_336);
    assert_eq!(c.kv_pool_bytes, 60_152_668_160);
    assert_eq!(c.kv_bytes_per_token, 131_072);
    assert_eq!(c.num_blocks, 28_683);
    assert_eq!(c.kv_tokens, 458_928);
    assert_eq!(c.max_concurrency, 56);
    assert_eq!(c.cuda_graph_bytes, 105_906_176);
    assert!(!c.cuda_graph_in_budget);
    assert_eq!(c.headroom_bytes, 8_012_169_216);
    assert_eq!(capture_sizes(512).len(), 51);
    assert_eq!(capture_sizes(16), [1, 2, 4, 8, 16]);
}

#[test]
fn accounting_identities() {
    for cfg in [
        h100(8192),
        ServeConfig { tensor_parallel: 2, kv_dtype: KvDtype::Fp8, ..h100(32768) },
        ServeConfig { estimate_cudagraphs: true, ..h100(4096) },
    ] {
        let c = capacity(&llama(), &cfg).unwrap();
        let graphs = if c.cuda_graph_in_budget { c.cuda_graph_bytes } else { 0 };
        assert_eq!(c.requested_bytes, c.weights_bytes + c.activation_peak_bytes + c.non_torch_bytes + graphs + c.kv_pool_bytes);
        assert_eq!(c.page_bytes, 16 * c.kv_bytes_per_token);
        assert!(c.num_blocks * c.page_bytes <= c.kv_pool_bytes && c.kv_pool_bytes < (c.num_blocks + 1) * c.page_bytes);
        assert_eq!(c.kv_tokens, 16 * c.num_blocks);
        assert_eq!(c.max_concurrency, c.num_blocks / c.context.div_ceil(16));
    }
}

#[test]
fn more_memory_more_tokens_and_fp8_doubles_them() {
    let tokens = |cfg: ServeConfig| capacity(&llama(), &cfg).unwrap();
    let mut last = 0;
    for u in [0.5, 0.7, 0.9, 0.95] {
        let t = tokens(ServeConfig { gpu_memory_utilization: u, ..h100(8192) }).kv_tokens;
        assert!(t > last, "utilisation {u}: {t} tokens");
        last = t;
    }
    let bf16 = tokens(h100(8192));
    let fp8 = tokens(ServeConfig { kv_dtype: KvDtype::Fp8, ..h100(8192) });
    assert_eq!(fp8.kv_bytes_per_token * 2, bf16.kv_bytes_per_token);
    assert_eq!(fp8.num_blocks, bf16.kv_pool_bytes / (bf16.page_bytes / 2));
    assert!(fp8.kv_tokens >= 2 * bf16.kv_tokens);
    // 4-bit weights leave more for the cache; a bigger batch budget leaves less
    assert!(tokens(ServeConfig { weights: Some(WeightFormat::Awq { group_size: 128 }), ..h100(8192) }).kv_tokens > bf16.kv_tokens);
    assert!(tokens(ServeConfig { max_num_batched_tokens: 32768, ..h100(8192) }).kv_tokens < bf16.kv_tokens);
    // tensor parallelism halves the matrices (norms are replicated) and the KV heads per rank
    let tp2 = tokens(ServeConfig { tensor_parallel: 2, ..h100(8192) });
    let norms = (2 * 32 + 1) * 4096 * 2;
    assert_eq!(tp2.weights_bytes, (bf16.weights_bytes - norms) / 2 + norms);
    // the CUDA-graph pool counts against the budget only when asked (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1)
    let est = tokens(ServeConfig { estimate_cudagraphs: true, ..h100(8192) });
    assert_eq!(est.kv_pool_bytes, bf16.kv_pool_bytes - bf16.cuda_graph_bytes);
    assert_eq!(tokens(ServeConfig { enforce_eager: true, ..h100(8192) }).cuda_graph_bytes, 0);
    assert_eq!(tp2.kv_bytes_per_token * 2, bf16.kv_bytes_per_token);
}

#[test]
fn longest_context_at_a_concurrency() {
    let c = capacity(&llama(), &ServeConfig { concurrency: Some(56), ..h100(8192) }).unwrap();
    let l = c.max_context_at_concurrency.unwrap();
    // 56 × cdiv(l, 16) blocks fit, one more block each does not
    assert!(56 * l.div_ceil(16) <= c.num_blocks && 56 * (l.div_ceil(16) + 1) > c.num_blocks, "{l}");
    assert!(l >= 8192);
    let one = capacity(&llama(), &ServeConfig { concurrency: Some(1), ..h100(8192) }).unwrap();
    assert_eq!(one.max_context_at_concurrency, Some(one.kv_tokens));
}

#[test]
fn gqa_sliding_window_and_mla_caches() {
    use kv::CacheLayer;
    let gqa = CacheLayer { heads: 8, head_dim: 128, latent: false, window: None };
    assert_eq!(gqa.token_bytes(1, KvDtype::Bf16), 2 * 8 * 128 * 2);
    // fewer KV heads than ranks: replicated, one head per rank
    assert_eq!(gqa.token_bytes(16, KvDtype::Bf16), 2 * 128 * 2);
    // DeepSeek-V3's latent: 512 + 64 values, once, on every rank
    let mla = CacheLayer { heads: 1, head_dim: 576, latent: true, window: None };
    assert_eq!(mla.token_bytes(8, KvDtype::Bf16), 576 * 2);
    // a 4096-token window caps a sliding layer's share of a 32K request
    let mut spec = llama();
    if let crate::spec::Layer::Repeat { body, .. } = &mut spec.layers[1] {
        if let crate::spec::Layer::TransformerDecoderLayer(t) = &mut body[0] {
            t.sliding_window = Some(4096);
        }
    }
    let full = capacity(&llama(), &h100(32768)).unwrap();
    let windowed = capacity(&spec, &h100(32768)).unwrap();
    assert_eq!(windowed.num_blocks, full.num_blocks);
    // a windowed layer holds min(window − 1 + max_num_batched_tokens, context) tokens + 1 block:
    // cdiv(4095 + 8192, 16) + 1 = 769 blocks against 2048 for the whole 32K
    assert_eq!(windowed.max_concurrency, full.num_blocks / 769);
    assert_eq!(full.max_concurrency, full.num_blocks / 2048);
}

#[test]
fn bad_settings_are_refused() {
    let e = capacity(&llama(), &ServeConfig { kv_dtype: KvDtype::Q4, ..h100(8192) }).unwrap_err().to_string();
    assert!(e.contains("q4") && e.contains("fp8"), "{e}");
    assert!(capacity(&llama(), &ServeConfig { gpu_memory_utilization: 1.5, ..h100(8192) }).is_err());
    assert!(capacity(&llama(), &ServeConfig { tensor_parallel: 0, ..h100(8192) }).is_err());
    let mlp = crate::spec::ModelSpec::from_json(r#"{"version":1,"input":{"shape":[16]},"layers":[{"kind":"linear","in_features":16,"out_features":4}]}"#).unwrap();
    assert!(capacity(&mlp, &h100(8192)).unwrap_err().to_string().contains("no causal attention layers"));
    let bert = crate::presets::build("bert-base").unwrap();
    assert!(capacity(&bert, &h100(512)).unwrap_err().to_string().contains("encoder"));
}

/// vLLM's own log for Meta-Llama-3-8B on an H100 (vllm-project/vllm PR #10511, "Some sanity
/// checks"): "model weights take 14.96GiB", and "7.48GiB" at `-tp 2` (Llama-3-8B has
/// Llama-3.1-8B's shapes: 8,030,261,248 parameters).
#[test]
fn weights_match_vllms_log() {
    let gib = |b: u64| (b as f64 / (1u64 << 30) as f64 * 100.0).round() / 100.0;
    let one = capacity(&llama(), &h100(8192)).unwrap();
    assert_eq!(gib(one.weights_bytes), 14.96);
    let two = capacity(&llama(), &ServeConfig { tensor_parallel: 2, ..h100(8192) }).unwrap();
    assert_eq!(gib(two.weights_bytes), 7.48);
}

/// Serving the page's setup: its weights, dtype, KV dtype and tensor-parallel degree.
#[test]
fn serving_takes_the_setups_weights_kv_dtype_and_parallelism() {
    use crate::distributed::{DistConfig, Strategy};
    use crate::formats::WeightFormat;
    use crate::generation::KvDType;
    let mut c = crate::config::TrainConfig { precision: Precision::Fp16, ..Default::default() };
    c.generate.kv_dtype = Some(KvDType::Fp8);
    c.weights = Some(WeightFormat::parse("nf4").unwrap());
    let d = DistConfig { gpus: 4, strategy: Strategy::Tp, ..DistConfig::default() };
    let s = ServeConfig::for_setup(&c, &d, 80 << 30, 4096);
    assert_eq!((s.precision, s.kv_dtype, s.tensor_parallel, s.weights, s.context), (Precision::Fp16, KvDtype::Fp8, 4, c.weights, 4096));
    let plain = ServeConfig::for_setup(&crate::config::TrainConfig::default(), &DistConfig::default(), 80 << 30, 4096);
    assert_eq!((plain.precision, plain.kv_dtype, plain.tensor_parallel, plain.weights), (Precision::Bf16, KvDtype::Bf16, 1, None));
}
