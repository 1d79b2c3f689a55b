//! `nn.LSTM`, `nn.GRU`, `nn.RNN` with `batch_first=True`: `[S, input_size]` → `[S, H·dirs]`
//! (the `output` of the returned tuple).
//!
//! Memory follows cuDNN's training path: per layer and direction the output sequence, and a
//! reserve space holding every gate pre-activation and cell state for backward
//! (`S × (gates + 1) × H` values); this is an approximation of cuDNN's reserve layout.

use super::{positive, LayerResult};
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::serde_util::{is_false, t};
use crate::units::Shape;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recurrent {
    pub input_size: u64,
    pub hidden_size: u64,
    #[serde(default = "one")]
    pub num_layers: u64,
    #[serde(default = "t")]
    pub bias: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub bidirectional: bool,
    #[serde(default)]
    pub dropout: f64,
}

fn one() -> u64 {
    1
}

impl Recurrent {
    /// `gates`: 4 for LSTM, 3 for GRU, 1 for a plain RNN.
    pub fn lower(&self, b: &mut Builder, x: ValueId, gates: u64) -> LayerResult<ValueId> {
        positive(self.hidden_size, "hidden_size")?;
        positive(self.num_layers, "num_layers")?;
        let s = b.shape(x).0.clone();
        if s.len() != 2 {
            return Err(format!("expected a [S, {}] input, got {}", self.input_size, b.shape(x)));
        }
        super::expect_last(b.shape(x), self.input_size, "input features")?;
        if self.num_layers > 10_000 {
            return Err(format!("{} layers is beyond what the core simulates (at most 10,000)", self.num_layers));
        }
        let dirs = if self.bidirectional { 2 } else { 1 };
        let h = self.hidden_size;
        let seq = s[0];
        let mut cur = x;
        for layer in 0..self.num_layers {
            let gh = gates.saturating_mul(h);
            let inp = if layer == 0 { self.input_size } else { h.saturating_mul(dirs) };
            let mut ins = vec![cur];
            for _ in 0..dirs {
                ins.push(b.param(Shape::new([gh, inp])));
                ins.push(b.param(Shape::new([gh, h])));
                if self.bias {
                    ins.push(b.param(Shape::new([gh])));
                    ins.push(b.param(Shape::new([gh])));
                }
            }
            let (ins, dt) = b.autocast(CastPolicy::Lower, &ins);
            let out = Shape::new([seq, h.saturating_mul(dirs)]);
            let reserve = Shape::new([seq, (gates + 1).saturating_mul(gh / gates.max(1)).saturating_mul(dirs)]);
            cur = b.op("rnn_layer", &ins, &[(out, dt)], &ins[..1], true, &[(reserve, true, dt)], GradRule::Alloc)[0];
            if self.dropout > 0.0 && layer + 1 < self.num_layers {
                cur = super::activation::dropout(b, cur, self.dropout);
            }
        }
        Ok(cur)
    }
}

#[cfg(test)]
mod tests {
    //! PyTorch's recurrent weights per layer and direction: `weight_ih [G·H, in]`,
    //! `weight_hh [G·H, H]`, `bias_ih` and `bias_hh [G·H]`, with G = 4 (LSTM), 3 (GRU), 1 (RNN).

    use crate::layer::test_util::{error, one};
    use serde_json::json;

    fn rnn(kind: &str, extra: serde_json::Value) -> serde_json::Value {
        let mut v = json!({"kind": kind, "input_size": 10, "hidden_size": 20, "num_layers": 2});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        v
    }

    #[test]
    fn lstm_gru_rnn_params() {
        // nn.LSTM(10, 20, 2) (the example in PyTorch's docs): layer 0 4·20·(10 + 20) + 2·4·20 = 2,560,
        // layer 1 4·20·(20 + 20) + 160 = 3,360; 5,920 in all; output [S, 20]
        let l = one(rnn("lstm", json!({})), &[5, 10]);
        assert_eq!((l.shape, l.params), (vec![5, 20], 5_920));
        // nn.GRU(10, 20, 2): ¾ of it, 4,440; nn.RNN(10, 20, 2): ¼, 1,480
        assert_eq!(one(rnn("gru", json!({})), &[5, 10]).params, 4_440);
        assert_eq!(one(rnn("rnn", json!({})), &[5, 10]).params, 1_480);
        // bias=False: the weights only, 800 + 1,600 + 1,600 + 1,600 = 5,600
        assert_eq!(one(rnn("lstm", json!({"bias": false})), &[5, 10]).params, 5_600);
    }

    #[test]
    fn bidirectional_lstm() {
        // nn.LSTM(10, 20, 2, bidirectional=True): layer 0 2·2,560 = 5,120; layer 1 reads 2·20:
        // 2·(4·20·(40 + 20) + 160) = 9,920; 15,040 in all; output [S, 2·20]
        let l = one(rnn("lstm", json!({"bidirectional": true})), &[5, 10]);
        assert_eq!((l.shape, l.params), (vec![5, 40], 15_040));
    }

    #[test]
    fn recurrent_input_checks() {
        let e = error(rnn("lstm", json!({})), &[5, 12]);
        assert!(e.contains("expected 10 input features, got 12"), "{e}");
        let e = error(rnn("gru", json!({})), &[10]);
        assert!(e.contains("expected a [S, 10] input"), "{e}");
    }
}
