//! `generate()` of one small config of each SSM hybrid, linear-attention and MoE family against
//! transformers 5.24 / torch 2.15 (CPU, 1 thread, fp32, eager, dynamic cache, greedy, batch 1,
//! prompt 64, 16 new tokens): `data/generate_moe2.jsonl`, written by
//! `tools/measure_generate_moe2.sh` (`tools/measure_generate_hf.py`: measure_llm.py's
//! FakeTensorMode + MemTracker generate mirror on any class, its cache bytes counting the
//! linear-attention layers' conv and recurrent states and MiniMax's `linear_cache` too).
//! Configs: `tools/generate_configs/<family>.json`.

mod common;
use common::generate::{self, check, Record};
/// The records of one family; `n` of them.
fn family(model_type: &str, n: usize) -> Vec<Record> {
    generate::family(include_str!("data/generate_moe2.jsonl"), model_type, n)
}

/// `Mamba2ForCausalLM` (2 layers, 8 heads of 16, 2 groups, N = 16, chunk 16). Cache exact (conv
/// `[conv_dim, 4]` + fp32 `[h, P, N]` per layer); peak and prefill −0.79 %, decode −0.01 %.
/// Without `mamba_ssm` the prefill runs `mamba2_chunk_scan` of `modeling_mamba2.py`, whose
/// tensors are its locals to its return under `no_grad`; a decode step runs
/// `mamba2_selective_state_update` (`layer/ssm.rs` `state_update`), not the chunked scan.
#[test]
fn mamba2_generation_against_transformers() {
    check(&family("mamba2", 1), 0.01);
}

/// `FalconH1ForCausalLM` (2 layers, each attention and Mamba-2 in parallel). Cache exact;
/// peak and prefill −0.76 %, decode −0.23 %.
#[test]
fn falcon_h1_generation_against_transformers() {
    check(&family("falcon_h1", 1), 0.01);
}

/// `BambaForCausalLM` (2 layers: Mamba-2, then attention). Cache exact; peak and prefill
/// −0.73 %, decode −0.01 %.
#[test]
fn bamba_generation_against_transformers() {
    check(&family("bamba", 1), 0.01);
}

/// `MiniMaxForCausalLM` (2 layers: full attention, then lightning attention, block 16; MoE).
/// `generate()` gives MiniMax no cache (`_supports_default_dynamic_cache`): its model makes a
/// `MiniMaxCache` whose lightning layers keep one `[heads, d, d]` fp32 state each
/// (`linear_cache`). Cache exact; peak and prefill +0.75 %, decode −0.00 %.
#[test]
fn minimax_generation_against_transformers() {
    check(&family("minimax", 1), 0.01);
}

/// `Llama4ForCausalLM` (4 layers: three chunked-attention RoPE layers of chunk 32 and one
/// full no-RoPE layer; MoE with a shared expert). The dynamic cache's chunked layers are
/// sliding layers of the chunk: after the prefill they hold the whole prompt (a view of the
/// prefill's `cat`), at the end 32 tokens each, the full layer all 79 (65,536 → 44,800 bytes).
/// Cache exact; peak and prefill −0.59 %, decode −0.00 %.
#[test]
fn llama4_text_generation_against_transformers() {
    check(&family("llama4_text", 1), 0.01);
}

/// `GraniteMoeForCausalLM` (2 layers, 8 experts, top 2: `GraniteMoeParallelExperts`). Cache
/// exact; peak and prefill +0.70 % (+0.35 % before the layer input was held to the layer's return), decode +0.01 %.
#[test]
fn granitemoe_generation_against_transformers() {
    check(&family("granitemoe", 1), 0.01);
}

/// `Glm4MoeForCausalLM` (a dense first layer, then 8 routed experts + 1 shared). Cache exact;
/// peak and prefill −0.22 %, decode +0.00 %.
#[test]
fn glm4_moe_generation_against_transformers() {
    check(&family("glm4_moe", 1), 0.01);
}

/// `OlmoeForCausalLM`, `PhimoeForCausalLM`, `Ernie4_5_MoeForCausalLM` (2 layers, `grouped_mm`
/// experts): cache exact, decode −0.01 %; peak and prefill −0.22 %, −0.22 %, −0.23 %. Under
/// `no_grad` the tensors `grouped_mm_experts_forward` names live to its return
/// (`selected_hidden_states_g`, the down projection's `proj_out`; before: −3.0 %), the decoder
/// layer's input lives to the layer's return (its caller's `hidden_states`; before: −1.1 %), and
/// ERNIE 4.5 runs its shared experts before the routed ones, keeping `shared_output` (before:
/// −1.4 %).
#[test]
fn grouped_mm_moe_generation_against_transformers() {
    for t in ["olmoe", "phimoe", "ernie4_5_moe"] {
        check(&family(t, 1), 0.01);
    }
}

/// `DeepseekV2ForCausalLM` (a dense first layer, then 8 routed experts + 1 shared; latent
/// attention, `q_lora_rank` none) at batch 1 and 2. transformers 5.24 caches the latents
/// (normed `k_nope` and rotated `k_pe`: exact) and expands the whole cache through `kv_b_proj`
/// in every forward, a decode step too (`expand_kv`; `layer/mla.rs` `expand_latent`); the
/// decoder layer keeps the eager probabilities (`hidden_states, _ = self.self_attn(...)`) and the
/// model's forward its causal mask. Peak and prefill −0.50 % and −0.87 % (before: −3.0 %).
/// Decode −0.05 % at batch 1 (+1.31 % while every batch copied; before that −4.45 %), −0.08 %
/// at batch 2: `matmul(attn_weights, value_states)` copies the strided values only where the
/// batch does not fold into the heads (batch > 1; `Builder::fold_batch`, a batch of one lowered
/// apart).
#[test]
fn deepseek_v2_generation_against_transformers() {
    check(&family("deepseek_v2", 2), 0.01);
}

/// A batch of one is lowered apart where `matmul` folds it (`Builder::fold_batch`): a model
/// prepared at batch 2 answers batch 1 as one prepared there does, in `generate()` and in
/// training, and batch 1's decode peak lies below the per-sample line through batches 2 and 3
/// (the values' copy is gone), where a graph linear in the batch would put it on the line.
#[test]
fn a_batch_of_one_folds_into_the_heads_as_a_view() {
    use vramcalc_core::{AttentionImpl, Mode, Prepared, TrainConfig};
    let rec = &family("deepseek_v2", 2)[1];
    let train = TrainConfig { mode: Mode::Train, attention: AttentionImpl::Eager, seq_len: Some(64), ..TrainConfig::default() };
    for cfg in [rec.config, train] {
        let at2 = Prepared::new(&rec.spec, &TrainConfig { batch: 2, ..cfg }).unwrap();
        let at1 = Prepared::new(&rec.spec, &TrainConfig { batch: 1, ..cfg }).unwrap();
        assert_eq!(at2.estimate_at(1).unwrap(), at1.estimate(), "{:?}", cfg.mode);
        assert_eq!(at2.peak_at(1), at1.peak_at(1));
    }
    let decode = |batch| vramcalc_core::estimate(&rec.spec, &TrainConfig { batch, ..rec.config }).unwrap().generation.unwrap().decode_peak_bytes;
    assert!(decode(1) < 2 * decode(2) - decode(3), "{} {} {}", decode(1), decode(2), decode(3));
}
