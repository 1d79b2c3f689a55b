//! `generate()` of an encoder–decoder against transformers 5.24 / torch 2.15 (CPU, 1 thread, fp32,
//! greedy, `EncoderDecoderCache` of dynamic caches): `data/generate_seq2seq.jsonl`, written by
//! `tools/measure_generate_seq2seq.sh` (`tools/trace_seq2seq_generate.py`: real tensors, every live
//! storage after each aten op, as `tools/trace_vlm_generate.py`). Config:
//! `tools/generate_configs/bart.json` (the training traces' small BART: 2 + 2 layers, d 256), at
//! batch 1 eager (source 128, 8 new tokens) and batch 2 SDPA (source 96, 12 new tokens). `check`:
//! the peak, the prefill and decode peaks, and the cache after the prefill and at the end.

#[path = "common/generate.rs"]
mod generate;
#[path = "common/vlm_generate.rs"]
mod vlm_generate;
use generate::{check, Record};

fn family(model_type: &str) -> Vec<Record> {
    vlm_generate::family(include_str!("data/generate_seq2seq.jsonl"), model_type, 2)
}

/// `BartForConditionalGeneration`: peak and prefill −0.03 % (batch 1, eager; batch 2, SDPA),
/// decode −0.03 % and −0.02 %, cache exact (the cross-attention layers' `[H, S, d]` keys and
/// values once, the self-attention layers one token per forward). `resolve/seq2seq.rs`: the
/// prefill runs the encoder outside generation, keeping `BartEncoder.forward`'s `inputs_embeds`
/// and `embed_pos` to its end and its stack's input only through its first layer (a loop), then
/// the decoder on its one start token; a decode step holds the encoder's weights and output.
/// Before: the encoder re-run and cached per forward on the prompt, the decoder on
/// `BART_TARGET_LEN` tokens (peak +16 % and +26 %, cache +192 % and +216 %); then the decode
/// −7.3 % while a decode step dropped the cross-attention's K/V projection weights, the prefill
/// −1.01 % and −1.47 % without the encoder's locals, +0.95 % with the stack's input held to its
/// end, the eager decode +0.95 % while `matmul` was taken to copy the cached keys, and batch 2's
/// prefill −0.75 % while `BartLearnedPositionalEmbedding`'s positions (`arange(...).expand(bsz,
/// -1) + offset`: `[b, S, D]`) were looked up once (`positional_embedding`'s `batched`).
#[test]
fn bart_generation_against_transformers() {
    check(&family("bart"), 0.01);
}

/// T5 and Whisper take the same path (not measured here): after the prefill each decoder layer
/// caches the encoder output's keys and values (`[H, S_enc, d]` each; Whisper's encoder halves
/// the frames, its second conv has stride 2) and one token of its own; at the end `new_tokens`
/// of its own (the last token is never fed back), the cross-attention part unchanged.
#[test]
fn t5_and_whisper_cache_the_encoder_output_once() {
    let t5 = serde_json::json!({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 64, "d_kv": 16,
        "d_ff": 128, "num_heads": 4, "num_layers": 2, "num_decoder_layers": 3, "vocab_size": 500});
    let whisper = serde_json::json!({"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"], "d_model": 64,
        "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
        "encoder_layers": 2, "decoder_layers": 3, "num_mel_bins": 16, "vocab_size": 500, "max_source_positions": 100, "max_target_positions": 64});
    // (config, source given as --seq-len, the encoder output's length, heads × head size)
    for (config, source, encoded, inner) in [(t5, 40, 40, 4 * 16), (whisper, 200, 100, 64)] {
        let spec = vramcalc_core::import::hf::from_config(config.as_object().unwrap()).unwrap();
        for (batch, new_tokens) in [(1, 5), (3, 9)] {
            let c = vramcalc_core::TrainConfig {
                batch,
                seq_len: Some(source),
                device: vramcalc_core::Device::Cpu,
                precision: vramcalc_core::Precision::Fp32,
                mode: vramcalc_core::Mode::Generate,
                generate: vramcalc_core::GenerateConfig { new_tokens, ..Default::default() },
                ..Default::default()
            };
            let g = vramcalc_core::estimate(&spec, &c).unwrap().generation.unwrap();
            // three decoder layers, K and V, fp32
            let per_token = 3 * 2 * inner * 4 * batch;
            assert_eq!(g.kv_cache_bytes_after_prefill, per_token * (encoded + 1), "{config}");
            assert_eq!(g.kv_cache_bytes, per_token * (encoded + new_tokens), "{config}");
            assert!(g.decode_peak_bytes > 0 && g.prefill_peak_bytes > 0);
            // transformers refuses a quantized cache for an encoder–decoder
            let kv_dtype = vramcalc_core::KvDType::parse("fp8");
            let q = vramcalc_core::TrainConfig { generate: vramcalc_core::GenerateConfig { kv_dtype, ..c.generate }, ..c };
            assert!(vramcalc_core::estimate(&spec, &q).unwrap_err().to_string().contains("quantized cache"));
        }
    }
}
