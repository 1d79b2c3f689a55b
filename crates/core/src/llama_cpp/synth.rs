//! A GGUF header without the file: the tensor list `convert_hf_to_gguf.py` writes for a Hugging
//! Face `config.json` (llama, mistral, qwen2, qwen3, qwen3_moe), each tensor typed as
//! `llama-quantize` types it for a recipe (`formats::ggml::GgufRecipe::tensor_type`, the rules of
//! `src/llama-quant.cpp`; 1-D tensors stay f32). Checked against a file llama.cpp's own
//! `llama_model_quantize` wrote (`tests/llama_cpp.rs`). Tensor offsets follow one after another at
//! 32-byte alignment; the tokenizer is left out (`n_vocab` comes from `token_embd`).

use serde_json::Value as Json;

use crate::formats::ggml::{GgmlType as MixType, GgufRecipe, MixModel, TensorCategory};
use crate::gguf::{GgmlType, Header, TensorInfo, Value};

use super::error::LlamaError;

fn field(c: &Json, k: &str) -> Option<u64> {
    c.get(k).and_then(Json::as_u64)
}

fn need(c: &Json, k: &str) -> Result<u64, LlamaError> {
    field(c, k).ok_or_else(|| LlamaError::Metadata(format!("config.json: missing {k}")))
}

fn ggml_of(t: MixType) -> GgmlType {
    // Both tables name ggml's types the same way.
    GgmlType::from_name(t.name()).unwrap_or(GgmlType::F16)
}

/// `(gguf arch, has q/k bias, has q/k norms, MoE)` for a `model_type`.
fn family(model_type: &str) -> Option<(&'static str, bool, bool, bool)> {
    Some(match model_type {
        "llama" | "mistral" => ("llama", false, false, false),
        "qwen2" => ("qwen2", true, false, false),
        "qwen3" => ("qwen3", false, true, false),
        "qwen3_moe" => ("qwen3moe", false, true, true),
        _ => return None,
    })
}

/// The header of `config` quantized with `recipe` (`Uniform(F16)` for an unquantized file).
pub fn header_from_config(config: &Json, recipe: GgufRecipe) -> Result<Header, LlamaError> {
    let mt = config.get("model_type").and_then(Json::as_str).unwrap_or("");
    let (arch, qkv_bias, qk_norm, moe) = family(mt)
        .ok_or_else(|| LlamaError::Unsupported(format!("model_type {mt:?} (llama, mistral, qwen2, qwen3, qwen3_moe)")))?;
    let e = need(config, "hidden_size")?;
    let n_layer = need(config, "num_hidden_layers")?;
    let h = need(config, "num_attention_heads")?;
    if h == 0 || n_layer == 0 || n_layer > 512 {
        return Err(LlamaError::Metadata("config.json: num_attention_heads and num_hidden_layers must be 1.. (at most 512 layers)".into()));
    }
    let kv = field(config, "num_key_value_heads").unwrap_or(h);
    let hd = field(config, "head_dim").unwrap_or(e / h);
    let ff = need(config, "intermediate_size")?;
    let vocab = need(config, "vocab_size")?;
    let tied = config.get("tie_word_embeddings").and_then(Json::as_bool).unwrap_or(false);
    let (n_expert, n_used, ff_exp) = if moe {
        (need(config, "num_experts")?, need(config, "num_experts_per_tok")?, need(config, "moe_intermediate_size")?)
    } else {
        (0, 0, 0)
    };
    let mix = MixModel { n_layer, n_gqa: h / kv.max(1), n_expert: n_expert.max(1), is_70b: arch == "llama" && n_layer == 80, tied };

    let mut tensors: Vec<(String, Vec<u64>, GgmlType)> = Vec::new();
    let mut add = |name: String, dims: Vec<u64>, cat: TensorCategory, index: u64| {
        // The router stays f32 (`llama-quant.cpp` never quantizes `ffn_gate_inp`).
        let t = if dims.len() == 1 || name.ends_with("ffn_gate_inp.weight") { GgmlType::F32 } else { ggml_of(recipe.tensor_type(&mix, cat, index, dims[0])) };
        tensors.push((name, dims, t));
    };
    use TensorCategory as C;
    add("token_embd.weight".into(), vec![e, vocab], C::TokenEmbd, 0);
    for i in 0..n_layer {
        let p = format!("blk.{i}.");
        add(format!("{p}attn_norm.weight"), vec![e], C::Other, i);
        add(format!("{p}attn_q.weight"), vec![e, h * hd], C::AttnQ, i);
        add(format!("{p}attn_k.weight"), vec![e, kv * hd], C::AttnK, i);
        add(format!("{p}attn_v.weight"), vec![e, kv * hd], C::AttnV, i);
        if qkv_bias {
            add(format!("{p}attn_q.bias"), vec![h * hd], C::Other, i);
            add(format!("{p}attn_k.bias"), vec![kv * hd], C::Other, i);
            add(format!("{p}attn_v.bias"), vec![kv * hd], C::Other, i);
        }
        if qk_norm {
            add(format!("{p}attn_q_norm.weight"), vec![hd], C::Other, i);
            add(format!("{p}attn_k_norm.weight"), vec![hd], C::Other, i);
        }
        add(format!("{p}attn_output.weight"), vec![h * hd, e], C::AttnOutput, i);
        add(format!("{p}ffn_norm.weight"), vec![e], C::Other, i);
        if moe {
            add(format!("{p}ffn_gate_inp.weight"), vec![e, n_expert], C::Other, i);
            add(format!("{p}ffn_gate_exps.weight"), vec![e, ff_exp, n_expert], C::FfnGate, i);
            add(format!("{p}ffn_up_exps.weight"), vec![e, ff_exp, n_expert], C::FfnUp, i);
            add(format!("{p}ffn_down_exps.weight"), vec![ff_exp, e, n_expert], C::FfnDown, i);
        } else {
            add(format!("{p}ffn_gate.weight"), vec![e, ff], C::FfnGate, i);
            add(format!("{p}ffn_up.weight"), vec![e, ff], C::FfnUp, i);
            add(format!("{p}ffn_down.weight"), vec![ff, e], C::FfnDown, i);
        }
    }
    add("output_norm.weight".into(), vec![e], C::Other, 0);
    if !tied {
        add("output.weight".into(), vec![e, vocab], C::Output, 0);
    }

    let mut infos = Vec::with_capacity(tensors.len());
    let mut offset = 0u64;
    for (name, dims, t) in tensors {
        if dims[0] % t.blck != 0 {
            return Err(LlamaError::Metadata(format!("{name}: {} columns, not a multiple of {}'s block", dims[0], t.name)));
        }
        let info = TensorInfo { name, dims, ggml_type: t, offset };
        offset += info.n_bytes().div_ceil(32) * 32;
        infos.push(info);
    }
    let a = |k: &str| format!("{arch}.{k}");
    let mut metadata = vec![
        ("general.architecture".to_string(), Value::Str(arch.into())),
        (a("block_count"), Value::U32(n_layer as u32)),
        (a("embedding_length"), Value::U64(e)),
        (a("feed_forward_length"), Value::U64(ff)),
        (a("attention.head_count"), Value::U64(h)),
        (a("attention.head_count_kv"), Value::U64(kv)),
        (a("attention.key_length"), Value::U64(hd)),
        (a("attention.value_length"), Value::U64(hd)),
        (a("context_length"), Value::U64(field(config, "max_position_embeddings").unwrap_or(4096))),
    ];
    if moe {
        metadata.push((a("expert_count"), Value::U64(n_expert)));
        metadata.push((a("expert_used_count"), Value::U64(n_used)));
        metadata.push((a("expert_feed_forward_length"), Value::U64(ff_exp)));
    }
    Ok(Header { version: 3, metadata, tensors: infos, alignment: 32, header_end: 0, data_offset: 0, data_size: offset })
}

/// The recipe for a `llama-quantize` name (`Q4_K_M`, `Q8_0`, `F16`, …), case-insensitive.
pub fn recipe(name: &str) -> Option<GgufRecipe> {
    crate::formats::WeightFormat::parse(&format!("gguf-{}", name.to_ascii_lowercase())).ok().and_then(|f| match f {
        crate::formats::WeightFormat::Gguf(r) => Some(r),
        _ => None,
    })
}
