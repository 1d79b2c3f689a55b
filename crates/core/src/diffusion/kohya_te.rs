//! kohya-ss/sd-scripts' text-encoder LoRA: what `train_network.py` (and
//! `sdxl_train_network.py`) run without `--network_train_unet_only`, read from its source
//! (commit 48d368fa):
//!
//! - the network (`networks/lora.py`, `LoRANetwork.__init__`): a `LoRAModule` of rank
//!   `--network_dim` on every `Linear` inside each `CLIPAttention` / `CLIPSdpaAttention` /
//!   `CLIPMLP` of each text encoder (`TEXT_ENCODER_TARGET_REPLACE_MODULE`: `q_proj`, `k_proj`,
//!   `v_proj`, `out_proj`, `fc1`, `fc2`; not the embeddings, norms or SDXL's `text_projection`),
//!   created before the UNet's; `prepare_optimizer_params` puts them in their own param group
//!   (`--text_encoder_lr`), so a foreach optimizer's step temporaries are the larger group's;
//! - the encoders frozen in `weight_dtype` (`t_enc.to(dtype=te_weight_dtype)`), their encoding
//!   inside the step under `torch.set_grad_enabled(True), accelerator.autocast()`
//!   (`process_batch`): SD's `text_encoder(tokens)[0]` (`strategy_sd.py`, no `--clip_skip`),
//!   SDXL's `_get_hidden_states_sdxl` (`strategy_sdxl.py`): the first encoder's
//!   `hidden_states[11]`, the second's `hidden_states[-2]`, the pool from its
//!   `last_hidden_state` at the EOS token through `text_projection`; then `call_unet`'s
//!   `torch.cat([hs1, hs2], dim=2)` and the pool beside the size embeddings;
//! - `--gradient_checkpointing`: `t_enc.gradient_checkpointing_enable()` (each
//!   `CLIPEncoderLayer`), `t_enc.train()`, and `prepare_text_encoder_grad_ckpt_workaround`:
//!   `text_model.embeddings.requires_grad_(True)`, so the token and position embeddings' weights
//!   get a gradient that no optimizer clears (they are not in its groups): a persistent
//!   `[vocab + positions, hidden]` gradient in the weight dtype per encoder.
//!
//! The encoders' unused tail (SDXL's first encoder past layer 11) is lowered with the rest; its
//! activations are a few `[77, hidden]` tensors. Checked against measured steps
//! (`tests/diffusion.rs`, `tools/measure_kohya_lora.py te`).

use super::text::TextEncoder;
use crate::error::{Error, Result};
use crate::graph::ValueId;
use crate::lower::Builder;
use crate::spec::Layer;
use crate::units::{DType, Shape};

/// What the encoders hand the UNet: its `encoder_hidden_states` and, for SDXL, the pool.
#[derive(Debug, Clone, Copy)]
pub struct Conds {
    pub text: ValueId,
    pub pool: Option<ValueId>,
    /// Bytes of the embeddings' gradients kept between steps (checkpointing's workaround).
    pub embedding_grad_bytes: u64,
}

/// Lowers kohya's encoding of `text_len` tokens by `encoders` (one: SD 1.x/2.x; two: SDXL) into
/// `b` (a kohya builder), with the LoRA inside their attention and MLP blocks.
/// `weights`: what the encoders but their embeddings are stored in (fp8 under `--fp8_base`).
pub fn encode(b: &mut Builder, encoders: &[&TextEncoder], weights: DType, text_len: u64, cross_dim: u64) -> Result<Conds> {
    let saved = b.kohya.ok_or_else(|| Error::Config("kohya text encoders need a kohya step".into()))?;
    // the token ids require no grad; the UNet's latents are the next input that does
    if let Some(k) = b.kohya.as_mut() {
        k.grad_inputs = 0;
    }
    b.frozen = true;
    let checkpointing = b.opts.checkpointing && b.opts.training;
    let mut emb_grads = 0u64;
    let mut outs = Vec::new();
    for te in encoders {
        let e = lower_encoder(b, te, weights, saved.base, text_len, checkpointing)?;
        emb_grads = emb_grads.saturating_add(e.embedding_grad_bytes);
        outs.push(e);
    }
    if let Some(k) = b.kohya.as_mut() {
        *k = crate::finetune::kohya::Kohya { grad_inputs: 1, in_scope: false, ..saved };
    }
    let (text, pool) = match outs.as_slice() {
        [sd] => (sd.last, None),
        [one, two] => {
            let hs1 = *one.hidden.get(11).ok_or_else(|| Error::Config(format!("SDXL's first text encoder needs 11 layers or more (kohya reads hidden_states[11]), it has {}", one.hidden.len() - 1)))?;
            let n2 = two.hidden.len();
            if n2 < 3 {
                return Err(Error::Config("SDXL's second text encoder needs 2 layers or more (kohya reads hidden_states[-2])".into()));
            }
            let hs2 = two.hidden[n2 - 2];
            let pool = two.pool.ok_or_else(|| Error::Config("SDXL's second text encoder has no text_projection (CLIPTextModelWithProjection)".into()))?;
            let (s1, s2) = (b.shape(hs1).clone(), b.shape(hs2).clone());
            let shape = Shape::new([s1.0[0], s1.last().saturating_add(s2.last())]);
            (super::ops::cat(b, &[hs1, hs2], shape), Some(pool))
        }
        _ => return Err(Error::Config(format!("kohya trains one text encoder (SD 1.x/2.x) or two (SDXL), not {}", encoders.len()))),
    };
    let width = b.shape(text).last();
    if width != cross_dim {
        return Err(Error::Config(format!("the text encoders give {width}-wide embeddings but the UNet's cross_attention_dim is {cross_dim}")));
    }
    Ok(Conds { text, pool, embedding_grad_bytes: emb_grads })
}

struct Encoded {
    /// `hidden_states`: the embeddings' output, then each layer's.
    hidden: Vec<ValueId>,
    /// `last_hidden_state` (after `final_layer_norm`).
    last: ValueId,
    /// The projected pool (`CLIPTextModelWithProjection`).
    pool: Option<ValueId>,
    embedding_grad_bytes: u64,
}

fn lower_encoder(b: &mut Builder, te: &TextEncoder, weights: DType, base: DType, text_len: u64, checkpointing: bool) -> Result<Encoded> {
    if te.t5.is_some() {
        return Err(Error::Config(format!("kohya's text-encoder LoRA wraps CLIP encoders, not {}", te.class)));
    }
    let len = te.max_len.map_or(text_len, |m| m.min(text_len.max(1)));
    let err = |l: &Layer, m: String| Error::Config(format!("{} ({}): {m}", te.class, l.kind()));
    let mut x = b.input(Shape::new([len]), DType::I64);
    let (mut hidden, mut last, mut pool) = (Vec::new(), None, None);
    let mut emb_params = 0u64;
    let mut in_layers = false;
    let set_scope = |b: &mut Builder, on: bool| {
        if let Some(k) = b.kohya.as_mut() {
            k.in_scope = on;
        }
    };
    // the embeddings stay in the weight dtype (`prepare_text_encoder_fp8`), the rest is `weights`
    let set_weights = |b: &mut Builder, dt: DType| {
        if let Some(k) = b.kohya.as_mut() {
            k.weights = dt;
        }
    };
    for l in &te.spec.layers {
        match l {
            Layer::Repeat { times, body } => {
                in_layers = true;
                set_weights(b, weights);
                if checkpointing {
                    // `embeddings.requires_grad_(True)`: the first layer's input needs a gradient
                    b.g.values[x as usize].requires_grad = true;
                }
                hidden.push(x);
                for _ in 0..*times {
                    // one `CLIPEncoderLayer`: a checkpointing unit under --gradient_checkpointing
                    let opened = b.begin_unit();
                    b.layer_locals.clear();
                    set_scope(b, true);
                    let mut y = x;
                    for inner in body {
                        let input = y;
                        y = inner.lower_leaf(b, y).map_err(|m| err(inner, m))?;
                        b.hold(input);
                    }
                    set_scope(b, false);
                    for v in std::mem::take(&mut b.layer_locals) {
                        b.hold(v);
                    }
                    if opened {
                        b.end_unit();
                    }
                    x = y;
                    hidden.push(x);
                }
            }
            leaf => {
                set_weights(b, if in_layers { weights } else { base });
                let before = b.param_numel;
                let input = x;
                x = leaf.lower_leaf(b, x).map_err(|m| err(leaf, m))?;
                b.hold(input);
                if !in_layers {
                    emb_params = emb_params.saturating_add(b.param_numel - before);
                }
                match leaf {
                    Layer::LayerNorm(_) => last = Some(x),
                    Layer::Linear(_) => pool = Some(x),
                    _ => {}
                }
            }
        }
    }
    let last = last.ok_or_else(|| Error::Config(format!("{}: no final_layer_norm", te.class)))?;
    let size = base.size();
    let embedding_grad_bytes = if checkpointing { emb_params.saturating_mul(size) } else { 0 };
    Ok(Encoded { hidden, last, pool, embedding_grad_bytes })
}

/// Bytes of a frozen text encoder of `params` parameters kept on the GPU under `--fp8_base`:
/// fp8, but its token and position embeddings in the weight dtype (`weight_size` bytes).
pub fn fp8_bytes(te: &TextEncoder, params: u64, weight_size: u64) -> u64 {
    let emb: u64 = te
        .spec
        .layers
        .iter()
        .map(|l| match l {
            Layer::Embedding(e) => e.num_embeddings.saturating_mul(e.embedding_dim),
            Layer::PositionalEmbedding(e) => e.num_embeddings.saturating_mul(e.embedding_dim),
            _ => 0,
        })
        .sum();
    let emb = emb.min(params);
    (params - emb).saturating_add(emb.saturating_mul(weight_size))
}
