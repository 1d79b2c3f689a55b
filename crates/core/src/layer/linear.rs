//! `nn.Linear` and the SwiGLU feed-forward of LLaMA.

use super::{expect_last, positive, LayerResult};
use crate::finetune::LinearRole;
use super::linear_op::linear;
use crate::graph::ValueId;
use crate::lower::Builder;
use crate::serde_util::{is_false, t};
use crate::units::Shape;
use serde::{Deserialize, Serialize};

/// `nn.Linear(in_features, out_features, bias=True)`, applied to the last dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Linear {
    pub in_features: u64,
    pub out_features: u64,
    #[serde(default = "t")]
    pub bias: bool,
    /// The weight is the first embedding's (GPT-2 `lm_head`, tied LSTM LMs): no new weight.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tied_weight: bool,
}

impl Linear {
    /// The caller may set `b.role` (which projection this is) for fine-tuning: frozen,
    /// quantised or adapted linears are chosen by their Hugging Face module name.
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let role = b.role.take();
        if let Some(r) = role {
            let full = crate::finetune::names::module_names(r, b.style)[0];
            let short = full.rsplit('.').next().unwrap_or(full);
            if r != LinearRole::Head && !b.linear_names.contains(&short) {
                b.linear_names.push(short);
            }
        }
        positive(self.in_features, "in_features")?;
        positive(self.out_features, "out_features")?;
        expect_last(b.shape(x), self.in_features, "input features")?;
        b.param_role = role;
        let w = if self.tied_weight {
            let w = b.tied_embedding.ok_or("`tied_weight` needs an embedding layer earlier in the model")?;
            let ws = &b.shape(w).0;
            if ws != &[self.out_features, self.in_features] {
                return Err(format!(
                    "tied weight has shape [{}, {}] but this layer needs [{}, {}]",
                    ws[0], ws[1], self.out_features, self.in_features
                ));
            }
            w
        } else {
            b.param(Shape::new([self.out_features, self.in_features]))
        };
        let bias = self.bias.then(|| b.param(Shape::new([self.out_features])));
        b.param_role = None;
        quantise_frozen(b, w, role);
        let out = if b.seq_shards > 1 { super::seq_parallel::split_linear(b, x, w, bias, role)? } else { linear(b, x, w, bias) };
        Ok(if super::lora::is_targeted(b, role) {
            // peft's `lora.bnb.Linear4bit.forward`: `result = result.clone()` ("defensively")
            let four_bit = b.quant_format_of(w).is_some_and(|f| matches!(f, crate::finetune::BaseFormat::Nf4 | crate::finetune::BaseFormat::Fp4));
            let out = if four_bit { super::activation::clone(b, out) } else { out };
            super::lora::adapt(b, x, out, self.in_features, self.out_features)
        } else {
            out
        })
    }
}

/// A frozen linear weight of a quantised base takes its bitsandbytes layout; transformers keeps
/// the output head (and embeddings and norms, which are not linears) in the compute dtype
/// (`integrations/bitsandbytes.py`, `get_keys_to_not_convert`).
fn quantise_frozen(b: &mut Builder, w: ValueId, role: Option<crate::finetune::LinearRole>) {
    let ft = b.opts.finetune;
    let Some(format) = ft.quant_format() else { return };
    if b.value(w).requires_grad || role == Some(crate::finetune::LinearRole::Head) || b.quant_format_of(w).is_some() {
        return;
    }
    let shape = &b.shape(w).0;
    let (rows, numel) = (shape[0], b.shape(w).numel());
    if let Some(bytes) = super::bnb::stored_bytes(format, numel, rows, ft.double_quant) {
        b.set_quantised(w, bytes, format);
    }
}

/// LLaMA's MLP: `down_proj(silu(gate_proj(x)) * up_proj(x))`, no biases by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatedMlp {
    pub hidden_size: u64,
    pub intermediate_size: u64,
    #[serde(default)]
    pub bias: bool,
    /// T5 v1.1's gated-GELU (`T5DenseGatedActDense`): the gate goes through the tanh GELU
    /// written out in Python (`gelu_new`) instead of SiLU, and the product through dropout
    /// before `wo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gelu_new_dropout: Option<f64>,
}

impl GatedMlp {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        self.lower_fused(b, x, false)
    }

    /// `fused`: one `gate_up_proj` chunked into `gate` and `up` (`Glm4MLP.forward`:
    /// `gate, up_states = up_states.chunk(2, dim=-1)`; `up_states` is rebound to the product, but
    /// the `gate` view keeps the whole output's storage until the forward returns): both halves
    /// are held to the down projection.
    pub fn lower_fused(&self, b: &mut Builder, x: ValueId, fused: bool) -> LayerResult<ValueId> {
        positive(self.intermediate_size, "intermediate_size")?;
        let proj = |i, o| Linear { in_features: i, out_features: o, bias: self.bias, tied_weight: false };
        b.role = Some(LinearRole::Gate);
        let gate = proj(self.hidden_size, self.intermediate_size).lower(b, x)?;
        b.role = Some(LinearRole::Up);
        let up = proj(self.hidden_size, self.intermediate_size).lower(b, x)?;
        let (act, p) = match self.gelu_new_dropout {
            Some(p) => (super::activation::Gelu { approximate: super::activation::GeluApprox::New }.lower(b, gate)?, p),
            None => (super::activation::unary(b, "silu", gate, super::activation::Saves::Input), 0.0),
        };
        let prod = super::activation::mul(b, act, up);
        let prod = super::activation::dropout(b, prod, p);
        b.role = Some(LinearRole::Down);
        let out = proj(self.intermediate_size, self.hidden_size).lower(b, prod)?;
        if fused {
            b.hold(gate);
            b.hold(up);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    //! Parameter counts as `sum(p.numel() for p in m.parameters())` gives them in PyTorch.

    use crate::layer::test_util::{error, one};
    use serde_json::json;

    #[test]
    fn linear_shape_and_params() {
        // nn.Linear(768, 3072) (BERT-base intermediate): 768·3072 + 3072 = 2,362,368
        let l = one(json!({"kind": "linear", "in_features": 768, "out_features": 3072}), &[128, 768]);
        assert_eq!(l.shape, [128, 3072]);
        assert_eq!(l.params, 2_362_368);
        // nn.Linear(4096, 1000, bias=False): 4,096,000
        let l = one(json!({"kind": "linear", "in_features": 4096, "out_features": 1000, "bias": false}), &[4096]);
        assert_eq!(l.shape, [1000]);
        assert_eq!(l.params, 4_096_000);
    }

    #[test]
    fn linear_names_the_mismatched_features() {
        // VGG's classifier on an unflattened 512×7×7 map: PyTorch's "mat1 and mat2 shapes cannot be multiplied"
        let e = error(json!({"kind": "linear", "in_features": 25088, "out_features": 4096}), &[512, 7, 7]);
        assert!(e.contains("expected 25088 input features, got 7"), "{e}");
    }

    #[test]
    fn tied_lm_head_adds_no_weight() {
        // GPT-2: lm_head.weight is transformer.wte.weight, so the model has 50257·768 = 38,597,376
        // parameters in the two, counted once (`model.parameters()` deduplicates)
        let spec = crate::spec::ModelSpec::from_json(
            &json!({"input": {"shape": [16], "dtype": "int64"}, "layers": [
                {"kind": "embedding", "num_embeddings": 50257, "embedding_dim": 768},
                {"kind": "linear", "in_features": 768, "out_features": 50257, "bias": false, "tied_weight": true}]})
            .to_string(),
        )
        .unwrap();
        let r = crate::resolve::resolve(&spec, None, crate::lower::LowerOptions::default()).unwrap();
        assert_eq!(r.layers[1].params, 0);
        assert_eq!(r.graph.param_numel(), 38_597_376);
        assert_eq!(r.layers[1].output_shape.0, [16, 50257]);
        // without an embedding there is nothing to tie to
        let e = error(json!({"kind": "linear", "in_features": 4, "out_features": 4, "tied_weight": true}), &[4]);
        assert!(e.contains("needs an embedding"), "{e}");
    }

    #[test]
    fn gated_mlp_is_llama_mlp() {
        // LlamaMLP(hidden 4096, intermediate 11008), no biases: gate, up and down are
        // 4096·11008 each: 3 · 45,088,768 = 135,266,304 (LLaMA-7B, per layer)
        let m = one(json!({"kind": "gated_mlp", "hidden_size": 4096, "intermediate_size": 11008}), &[8, 4096]);
        assert_eq!(m.shape, [8, 4096]);
        assert_eq!(m.params, 135_266_304);
        // with biases: + 11008 · 2 + 4096
        let m = one(json!({"kind": "gated_mlp", "hidden_size": 4096, "intermediate_size": 11008, "bias": true}), &[8, 4096]);
        assert_eq!(m.params, 135_266_304 + 2 * 11008 + 4096);
    }
}
