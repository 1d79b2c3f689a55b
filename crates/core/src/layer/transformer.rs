//! Transformer layers (encoder and decoder blocks) as Hugging Face writes them, built from the
//! attention in `attention.rs`, the MLPs in `linear.rs` and the norms in `norm.rs`.

use super::activation::{add, dropout, unary, GeluApprox, Saves};
use super::attention::MultiheadAttention;
use super::linear::{GatedMlp, Linear};
use super::norm::{LayerNorm, RmsNorm};
pub use super::activation::FfnActivation;
pub use super::norm::NormKind;
use super::{positive, LayerResult};
use crate::finetune::{LinearRole, NameStyle};
use crate::graph::ValueId;
use crate::lower::Builder;
use crate::serde_util::{is_false, t};
use serde::{Deserialize, Serialize};

/// `nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
/// activation='relu', layer_norm_eps=1e-5, norm_first=False, bias=True)`, plus the switches the
/// Hugging Face families need (`gated_mlp`, `norm`, `num_kv_heads`, `rotary`, `fused_qkv`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerLayer {
    pub d_model: u64,
    pub nhead: u64,
    #[serde(default = "ffn")]
    pub dim_feedforward: u64,
    #[serde(default = "drop")]
    pub dropout: f64,
    /// Dropout on attention probabilities; defaults to `dropout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_dropout: Option<f64>,
    #[serde(default)]
    pub activation: FfnActivation,
    #[serde(default = "ln_eps")]
    pub layer_norm_eps: f64,
    #[serde(default, skip_serializing_if = "is_false")]
    pub norm_first: bool,
    #[serde(default = "t")]
    pub bias: bool,
    #[serde(default)]
    pub norm: NormKind,
    /// SwiGLU feed-forward (`down(silu(gate(x)) * up(x))`) instead of `fc2(act(fc1(x)))`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gated_mlp: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_kv_heads: Option<u64>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub rotary: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub fused_qkv: bool,
    /// Size of one attention head (default `d_model / nhead`; Gemma, Qwen3, Mistral set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u64>,
    /// Bias of the attention output projection (default `bias`; `bias` itself is Q/K/V's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_bias: Option<bool>,
    /// Biases of the feed-forward projections (default `bias`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_bias: Option<bool>,
    /// Bias of the LayerNorms (default `bias`; Falcon has bias-free linears and LayerNorm biases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm_bias: Option<bool>,
    /// Partial rotary: only the first `rotary_dim` features of each head rotate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary_dim: Option<u64>,
    /// Per-head norm (of the layer's `norm` kind, `head_dim` weights) on Q and K (Qwen3, Gemma 3, Phi).
    #[serde(default, skip_serializing_if = "is_false")]
    pub qk_norm: bool,
    /// Sliding-window attention span (recorded; training memory is unchanged, see `multihead_attention`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u64>,
    /// Attention-logit soft-capping (Gemma 2; eager attention only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logit_softcap: Option<f64>,
    /// Attention and feed-forward read the same input and their outputs are added to it
    /// (GPT-J style: GPT-NeoX, Falcon, Phi): `x + attn(n1(x)) + mlp(n2(x))`. Pre-norm only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<ParallelNorms>,
    /// Norms also on the attention and feed-forward outputs, before each residual add
    /// (Gemma 2/3's `post_attention_layernorm` and `post_feedforward_layernorm`). Pre-norm only.
    #[serde(default, skip_serializing_if = "is_false")]
    pub post_norms: bool,
    /// Dropout on the attention output before its residual add (default `dropout`; DistilBERT
    /// has none there, only after the feed-forward).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attn_out_dropout: Option<f64>,
    /// The attention runs eagerly whatever `attention` says (see `multihead_attention`'s).
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub eager_only: bool,
    /// The attention reads the model's local rotary pair (see `multihead_attention`'s).
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub rotary_local: bool,
    /// The attention runs over consecutive spans of these lengths (see `multihead_attention`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Vec<u64>>,
    /// The gated MLP's gate and up projections are one `gate_up_proj` whose output is chunked
    /// (GLM-4's `Glm4MLP`, Phi-3's `Phi3MLP`): same parameters, but the `gate` view keeps the
    /// whole `[S, 2I]` output referenced until the MLP's forward returns.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub fused_gate_up: bool,
    /// Elements of a rotary table buffer every layer reads, held once by the model (GPT-J's
    /// `GPTJRotaryEmbedding.embed_positions`, `[max_position_embeddings, rotary_dim]`, a
    /// non-persistent buffer in the model's dtype: `modeling_gptj.py`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary_buffer: Option<u64>,
    /// The attention's output stays in a local until the layer returns (StableLM's
    /// `self_attn_output`, `modeling_stablelm.py`; MPT's `attn_outputs`, `modeling_mpt.py`
    /// `MptBlock.forward`: neither is rebound). Pre-norm, sequential residuals only.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub attn_out_kept: bool,
    /// The first norm's output stays in a local until the layer returns (StableLM's
    /// `hidden_states = self.input_layernorm(hidden_states)`, never rebound after). Pre-norm,
    /// sequential residuals only.
    #[serde(default, skip_serializing_if = "crate::serde_util::is_false")]
    pub norm_out_kept: bool,
}

/// How a parallel attention + feed-forward block normalises its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParallelNorms {
    /// One norm feeds both (Phi, Falcon-7B's `input_layernorm`).
    Shared,
    /// One norm each (GPT-NeoX's `input_layernorm` / `post_attention_layernorm`, Falcon-40B's
    /// `ln_attn` / `ln_mlp`).
    Separate,
}

fn ffn() -> u64 {
    2048
}
fn drop() -> f64 {
    0.1
}
fn ln_eps() -> f64 {
    1e-5
}

impl TransformerLayer {
    pub fn lower(&self, b: &mut Builder, x: ValueId, causal: bool) -> LayerResult<ValueId> {
        positive(self.dim_feedforward, "dim_feedforward")?;
        // Hugging Face module names of this layer's linears (fine-tuning targets)
        b.style = NameStyle::of(self.gated_mlp || self.rotary, self.fused_qkv);
        if let Some(n) = self.rotary_buffer {
            let dt = b.float_dtype();
            b.shared_buffer("rotary_buffer", dt, crate::graph::Lin { fixed: n.saturating_mul(dt.size()), per_sample: 0 });
        }
        if !self.norm_first && (self.parallel.is_some() || self.post_norms) {
            return Err("`parallel` and `post_norms` need `norm_first: true`".into());
        }
        let attn = MultiheadAttention {
            embed_dim: self.d_model,
            num_heads: self.nhead,
            num_kv_heads: self.num_kv_heads,
            dropout: self.attention_dropout.unwrap_or(self.dropout),
            bias: self.bias,
            causal,
            rotary: self.rotary,
            fused_qkv: self.fused_qkv,
            head_dim: self.head_dim,
            out_bias: self.out_bias,
            rotary_dim: self.rotary_dim,
            qk_norm: self.qk_norm.then_some(self.norm),
            sliding_window: self.sliding_window,
            logit_softcap: self.logit_softcap,
            key_bias: None,
            position_bias: false,
            contiguous_heads: false,
            sinks: false,
            qk_norm_full: false,
            attention_chunk: None,
            output_gate: false,
            eager_only: self.eager_only,
            rotary_local: self.rotary_local,
            windows: self.windows.clone(),
        };
        let out = if let Some(p) = self.parallel {
            let n = self.norm(b, x)?;
            let (a, weights) = attn.lower_with_weights(b, n)?;
            let a = dropout(b, a, self.attn_out_dropout.unwrap_or(self.dropout));
            let n2 = match p {
                ParallelNorms::Shared => n,
                ParallelNorms::Separate => self.norm(b, x)?,
            };
            let (m, _) = self.mlp(b, n2)?;
            let am = add(b, m, a);
            let out = add(b, am, x);
            if let Some(w) = weights { b.hold(w) }
            out
        } else if self.norm_first {
            let n = self.norm(b, x)?;
            let (mut a, weights) = attn.lower_with_weights(b, n)?;
            // `hidden_states = self.input_layernorm(hidden_states)`, then `self.self_attn(
            // hidden_states=hidden_states, ...)`: the local keeps the norm's output until the
            // attention returns (`LlamaDecoderLayer.forward`, `Qwen2_5_VLDecoderLayer.forward`)
            b.hold(n);
            let attn_out = a;
            if self.post_norms {
                a = self.norm(b, a)?;
            }
            let a = dropout(b, a, self.attn_out_dropout.unwrap_or(self.dropout));
            let h = add(b, x, a);
            let n2 = self.norm(b, h)?;
            let (mut m, _) = self.mlp(b, n2)?;
            if self.post_norms {
                m = self.norm(b, m)?;
            }
            let out = add(b, h, m);
            if let Some(w) = weights { b.hold(w) }
            if self.norm_out_kept {
                b.hold(n);
            }
            if self.attn_out_kept {
                b.hold(attn_out);
            }
            out
        } else {
            // Hugging Face BERT: `hidden = self.LayerNorm(hidden + input)` keeps the old `hidden`
            // (the dropout output) alive while the norm runs, and `intermediate_output` stays
            // referenced through `BertOutput`.
            let (a, weights) = attn.lower_with_weights(b, x)?;
            let a = dropout(b, a, self.attn_out_dropout.unwrap_or(self.dropout));
            let h = add(b, a, x);
            let h = self.norm(b, h)?;
            b.hold(a);
            let (m, act) = self.mlp(b, h)?;
            let h2 = add(b, m, h);
            let out = self.norm(b, h2)?;
            b.hold(m);
            b.hold(act);
            if let Some(w) = weights { b.hold(w) }
            out
        };
        Ok(out)
    }

    pub(crate) fn norm(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        match self.norm {
            NormKind::LayerNorm => LayerNorm {
                normalized_shape: self.d_model,
                eps: self.layer_norm_eps,
                elementwise_affine: true,
                bias: self.norm_bias.unwrap_or(self.bias),
            }
            .lower(b, x),
            NormKind::RmsNorm => RmsNorm { normalized_shape: self.d_model, eps: self.layer_norm_eps, t5: false }.lower(b, x),
            NormKind::CohereLayerNorm => super::norm::cohere_layer_norm(b, x, self.d_model),
        }
    }

    /// The feed-forward block and its activation output (the intermediate tensor).
    pub(crate) fn mlp(&self, b: &mut Builder, x: ValueId) -> LayerResult<(ValueId, ValueId)> {
        let bias = self.mlp_bias.unwrap_or(self.bias);
        let (m, act) = if self.gated_mlp {
            let m = GatedMlp { hidden_size: self.d_model, intermediate_size: self.dim_feedforward, bias, gelu_new_dropout: None }.lower_fused(b, x, self.fused_gate_up)?;
            (m, m)
        } else {
            let fc = |i, o| Linear { in_features: i, out_features: o, bias, tied_weight: false };
            b.role = Some(LinearRole::FfnIn);
            let h = fc(self.d_model, self.dim_feedforward).lower(b, x)?;
            let h = match self.activation {
                FfnActivation::Relu => unary(b, "relu", h, Saves::Output),
                FfnActivation::Gelu | FfnActivation::GeluTanh => unary(b, "gelu", h, Saves::Input),
                FfnActivation::GeluNew => super::activation::Gelu { approximate: GeluApprox::New }.lower(b, h)?,
                FfnActivation::Silu => unary(b, "silu", h, Saves::Input),
                FfnActivation::QuickGelu => super::activation::quick_gelu(b, h),
                FfnActivation::BloomGelu => super::activation::bloom_gelu(b, h),
                FfnActivation::Relu2 => super::activation::relu2(b, h),
            };
            b.role = Some(LinearRole::FfnOut);
            (fc(self.dim_feedforward, self.d_model).lower(b, h)?, h)
        };
        // `hidden_states = self.mlp(hidden_states)`: the caller's local keeps the MLP's input
        b.hold(x);
        Ok((dropout(b, m, self.dropout), act))
    }
}
