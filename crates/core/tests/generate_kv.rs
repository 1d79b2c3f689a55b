//! The KV cache's size against its definition: `2 × layers × kv_heads × head_dim × tokens ×
//! batch × bytes` (grouped-query heads counted once), sliding-window layers capped at the window,
//! whole 16-token pages for the paged cache, DeepSeek's latent (`kv_lora_rank + rope` per token
//! and layer) for multi-head latent attention; and the generation estimate's invariants.

use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{estimate, Estimate, GenerateConfig, KvCacheKind, KvDType, Mode, Precision, TrainConfig};

fn hf(text: &str) -> ModelSpec {
    vramcalc_core::import::hf::from_config_json(text).unwrap()
}

fn generate(spec: &ModelSpec, batch: u64, prompt: u64, new_tokens: u64, cache: KvCacheKind, kv: Option<KvDType>) -> Estimate {
    let generate = GenerateConfig { prompt_len: Some(prompt), new_tokens, cache, logits_to_keep: 1, kv_dtype: kv };
    let config = TrainConfig { batch, precision: Precision::Bf16, mode: Mode::Generate, generate, ..TrainConfig::default() };
    estimate(spec, &config).unwrap()
}

fn kv_end(e: &Estimate) -> u64 {
    e.generation.as_ref().unwrap().kv_cache_bytes
}

fn llama_tiny() -> ModelSpec {
    hf(r#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 512, "num_hidden_layers": 6,
        "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1376, "vocab_size": 32000}"#)
}

#[test]
fn grouped_query_cache_is_its_formula_for_every_cache_kind() {
    let spec = llama_tiny();
    // 6 layers, 2 KV heads of 64, bf16, batch 3: P + G − 1 tokens at the end
    let per_token = 2 * 6 * 2 * 64 * 2 * 3;
    let (p, g) = (100u64, 30u64);
    assert_eq!(kv_end(&generate(&spec, 3, p, g, KvCacheKind::Dynamic, None)), per_token * (p + g - 1));
    assert_eq!(kv_end(&generate(&spec, 3, p, g, KvCacheKind::Static, None)), per_token * (p + g - 1));
    // pages of 16: 129 tokens take 9 pages
    assert_eq!(kv_end(&generate(&spec, 3, p, g, KvCacheKind::Paged, None)), per_token * 144);
    // fp8 / int8: one byte per element
    assert_eq!(kv_end(&generate(&spec, 3, p, g, KvCacheKind::Dynamic, Some(KvDType::Fp8))), per_token * (p + g - 1) / 2);
    assert_eq!(kv_end(&generate(&spec, 3, p, g, KvCacheKind::Paged, Some(KvDType::Int8))), per_token * 144 / 2);
}

#[test]
fn prefill_and_decode_peaks_behave_as_generate_does() {
    let spec = llama_tiny();
    let dynamic = generate(&spec, 2, 256, 64, KvCacheKind::Dynamic, None);
    let g = dynamic.generation.as_ref().unwrap();
    assert_eq!(dynamic.peak_bytes, g.prefill_peak_bytes.max(g.decode_peak_bytes));
    // the decode series rises with the cache and ends at the decode peak
    assert_eq!(g.decode_series.len(), 63);
    assert!(g.decode_series.windows(2).all(|w| w[0].1 <= w[1].1), "{:?}", g.decode_series);
    assert_eq!(g.decode_series.last().unwrap(), &(63, g.decode_peak_bytes));
    // each step of the envelope is what simulating that step gives: step t is the last decode
    // step of a run with t + 1 new tokens
    for t in [1u64, 10, 37, 62] {
        let direct = generate(&spec, 2, 256, t + 1, KvCacheKind::Dynamic, None).generation.unwrap().decode_peak_bytes;
        assert_eq!(g.decode_series[t as usize - 1], (t, direct), "step {t}");
    }
    // a static cache holds all its slots from the prefill on: no growth over the decode
    let st = generate(&spec, 2, 256, 64, KvCacheKind::Static, None);
    let sg = st.generation.as_ref().unwrap();
    assert_eq!(sg.kv_cache_bytes_after_prefill, sg.kv_cache_bytes);
    assert!(sg.decode_series.first().unwrap().1 == sg.decode_series.last().unwrap().1 || sg.decode_series.windows(2).all(|w| w[1].1 - w[0].1 < 1024));
    // and no `torch.cat` transient: its decode peak is not above the dynamic one's
    assert!(sg.decode_peak_bytes <= g.decode_peak_bytes);
    // logits for every position make the prefill bigger
    let mut all = TrainConfig { ..dynamic.config };
    all.generate.logits_to_keep = 0;
    let e = estimate(&spec, &all).unwrap();
    let logits = 2 * 256 * 32000 * 2;
    let floor = dynamic.param_bytes + g.kv_cache_bytes_after_prefill + logits;
    assert!(e.generation.unwrap().prefill_peak_bytes > floor.max(g.prefill_peak_bytes));
}

#[test]
fn sliding_window_layers_are_capped_at_the_window() {
    // Mistral: 32 layers, 8 KV heads of 128, every layer windowed at 4096
    let spec = hf(include_str!("data/hf/mistral.config.json"));
    let per_token = 2 * 32 * 8 * 128 * 2;
    let capped = generate(&spec, 1, 4000, 200, KvCacheKind::Dynamic, None);
    assert_eq!(kv_end(&capped), per_token * 4096);
    let under = generate(&spec, 1, 1000, 10, KvCacheKind::Dynamic, None);
    assert_eq!(kv_end(&under), per_token * 1009);
    // a static cache is sized min(window, max_cache_len)
    assert_eq!(kv_end(&generate(&spec, 1, 4000, 200, KvCacheKind::Static, None)), per_token * 4096);
    assert_eq!(kv_end(&generate(&spec, 1, 1000, 10, KvCacheKind::Static, None)), per_token * 1009);
}

#[test]
fn latent_attention_caches_the_latent() {
    // DeepSeek-V3: 61 layers, kv_lora_rank 512 + rope 64 per token, bf16
    let spec = hf(include_str!("data/hf/deepseek_v3.config.json"));
    let e = generate(&spec, 1, 64, 4, KvCacheKind::Dynamic, None);
    assert_eq!(kv_end(&e), 61 * 576 * 2 * 67);
}

#[test]
fn generate_refuses_what_it_cannot_run() {
    let spec = llama_tiny();
    let bad = |g: GenerateConfig| {
        let c = TrainConfig { batch: 1, mode: Mode::Generate, generate: g, ..TrainConfig::default() };
        estimate(&spec, &c).unwrap_err().to_string()
    };
    assert!(bad(GenerateConfig { new_tokens: 0, ..GenerateConfig::default() }).contains("--new-tokens"));
    assert!(bad(GenerateConfig { prompt_len: Some(0), ..GenerateConfig::default() }).contains("--prompt-len"));
    assert!(bad(GenerateConfig { logits_to_keep: 3, ..GenerateConfig::default() }).contains("--logits-to-keep"));
    // GPT-2's 1,024 learned positions
    let gpt2 = vramcalc_core::presets::build("gpt2").unwrap();
    let long = GenerateConfig { prompt_len: Some(1000), new_tokens: 100, ..GenerateConfig::default() };
    let c = TrainConfig { batch: 1, mode: Mode::Generate, generate: long, ..TrainConfig::default() };
    assert!(estimate(&gpt2, &c).unwrap_err().to_string().contains("1024 learned positions"));
    let bert = vramcalc_core::presets::build("bert-base").unwrap();
    let c = TrainConfig { batch: 1, mode: Mode::Generate, ..TrainConfig::default() };
    assert!(estimate(&bert, &c).unwrap_err().to_string().contains("needs a decoder"));
    let cnn = vramcalc_core::presets::build("resnet18").unwrap();
    let c = TrainConfig { batch: 1, mode: Mode::Generate, ..TrainConfig::default() };
    assert!(estimate(&cnn, &c).unwrap_err().to_string().contains("token model"));
}

/// Around a sliding window filling and across paged blocks the series is still what simulating
/// each step gives (a small Mistral: window 32, prompt 20, so the window fills at step 12).
#[test]
fn decode_series_is_exact_across_windows_and_pages() {
    let spec = hf(r#"{"model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 256, "num_hidden_layers": 3,
        "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 512, "vocab_size": 1000, "sliding_window": 32}"#);
    for cache in [KvCacheKind::Dynamic, KvCacheKind::Paged] {
        for attention in [vramcalc_core::AttentionImpl::Sdpa, vramcalc_core::AttentionImpl::Eager] {
            let run = |new_tokens: u64| {
                let generate = GenerateConfig { prompt_len: Some(20), new_tokens, cache, logits_to_keep: 1, kv_dtype: None };
                let c = TrainConfig { batch: 2, precision: Precision::Bf16, mode: Mode::Generate, attention, generate, ..TrainConfig::default() };
                estimate(&spec, &c).unwrap().generation.unwrap()
            };
            let series = run(40).decode_series;
            for t in [1u64, 5, 11, 12, 13, 14, 20, 27, 39] {
                assert_eq!(series[t as usize - 1], (t, run(t + 1).decode_peak_bytes), "{cache} {attention} step {t}");
            }
        }
    }
}

/// `--weights` reaches every forward of a generation: the decode steps hold the weights in their
/// stored format, as the prefill does (the last decode step once kept bf16 weights, so a 4-bit
/// model's generation peaked at its bf16 size).
#[test]
fn weights_apply_to_the_decode_steps() {
    use vramcalc_core::{GenerateConfig, Mode, Precision, TrainConfig};
    let spec = vramcalc_core::import::preset("qwen2.5-0.5b").unwrap();
    for w in ["gguf-q4_k_m", "nf4", "fp8"] {
        let weights = Some(vramcalc_core::formats::WeightFormat::parse(w).unwrap());
        let infer = TrainConfig { batch: 1, seq_len: Some(64), mode: Mode::Infer, precision: Precision::Bf16, weights, ..TrainConfig::default() };
        let generate = GenerateConfig { prompt_len: Some(2), new_tokens: 512, ..GenerateConfig::default() };
        let gen = TrainConfig { mode: Mode::Generate, generate, ..infer };
        let (i, g) = (vramcalc_core::estimate(&spec, &infer).unwrap(), vramcalc_core::estimate(&spec, &gen).unwrap());
        let bf16 = vramcalc_core::estimate(&spec, &TrainConfig { weights: None, ..gen }).unwrap();
        assert!(g.peak_at.starts_with("last decode step"), "{w}: {}", g.peak_at);
        assert_eq!(g.breakdown.parameters, i.breakdown.parameters, "{w}: decode vs infer weights");
        assert!(g.breakdown.parameters < bf16.breakdown.parameters, "{w}");
    }
}
