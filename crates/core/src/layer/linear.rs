//! `nn.Linear` and the SwiGLU feed-forward of LLaMA.

use super::{expect_last, positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};
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
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.in_features, "in_features")?;
        positive(self.out_features, "out_features")?;
        expect_last(b.shape(x), self.in_features, "input features")?;
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
        Ok(linear(b, x, w, bias))
    }
}

/// `F.linear`: saves the (autocast) input and weight; output in the compute dtype.
pub fn linear(b: &mut Builder, x: ValueId, w: ValueId, bias: Option<ValueId>) -> ValueId {
    let mut ins = vec![x, w];
    ins.extend(bias);
    let (ins, dt) = b.autocast(CastPolicy::Lower, &ins);
    let out_shape = b.shape(x).with_last(b.shape(w).0[0]);
    b.op("linear", &ins, &[(out_shape, dt)], &ins[..2], false, &[], GradRule::Alloc)[0]
}

/// LLaMA's MLP: `down_proj(silu(gate_proj(x)) * up_proj(x))`, no biases by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatedMlp {
    pub hidden_size: u64,
    pub intermediate_size: u64,
    #[serde(default)]
    pub bias: bool,
}

impl GatedMlp {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        positive(self.intermediate_size, "intermediate_size")?;
        let proj = |i, o| Linear { in_features: i, out_features: o, bias: self.bias, tied_weight: false };
        let gate = proj(self.hidden_size, self.intermediate_size).lower(b, x)?;
        let up = proj(self.hidden_size, self.intermediate_size).lower(b, x)?;
        let act = super::activation::unary(b, "silu", gate, super::activation::Saves::Input);
        let prod = super::activation::mul(b, act, up);
        proj(self.intermediate_size, self.hidden_size).lower(b, prod)
    }
}
