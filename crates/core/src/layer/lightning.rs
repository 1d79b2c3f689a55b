//! MiniMax's lightning attention (`MiniMaxLightningAttention`, `modeling_minimax.py`,
//! transformers 5.24): linear attention computed block by block, `[S, hidden]` → `[S, hidden]`,
//! with a fixed `[heads, head_dim, head_dim]` state per sequence instead of a growing KV cache.
//!
//! Parameters (exact, from `__init__`): `qkv_proj` (hidden → 3·H·d), `out_proj` (H·d → hidden),
//! `output_gate` (hidden → H·d), all bias-free, and the RMSNorm `norm` (H·d weights). Four
//! persistent buffers: `slope_rate [H, 1, 1]`, `query_decay` and `key_decay [H, block, 1]`,
//! `diagonal_decay [1, H, block, block]`.
//!
//! Memory, read from `forward` (its PyTorch block loop, `num_blocks = ceil(S / block_size)`):
//! `silu(qkv_proj(x))` (saving the projection), then per block of `L` tokens `Q Kᵀ` (`[H, L, L]`,
//! freed after its product with `diagonal_decay`, which the matmul with V saves), `Q · query_decay`
//! and `K · key_decay` (`[H, L, d]`, saved by their matmuls), the new state `inter · block_decay +
//! Kᵀ V` (`[H, d, d]`, saved by the next block's matmul) and the block's output `[H, L, d]`, held
//! in a list until `torch.cat`. The blocks are summed into one op per kind. Then the transposed
//! output's `reshape` (a copy), the RMSNorm, `sigmoid(output_gate(x)) *` and `out_proj`. In
//! `generate()` the final state is the layer's cache (`MiniMaxCache.set_linear_cache`), in the
//! compute dtype (`torch.zeros(..., dtype=value_states.dtype)`), resident across decode steps.

use super::activation::{mul, unary, Saves};
use super::linear::Linear;
use super::norm::RmsNorm;
use super::ssm::{seq_of, tensor};
use super::state_cache::{cache_states, StateSize};
use super::{positive, LayerResult};
use crate::graph::ValueId;
use crate::lower::Builder;
use crate::units::Shape;
use serde::{Deserialize, Serialize};

/// `MiniMaxLightningAttention(config)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LightningAttention {
    pub hidden_size: u64,
    /// `num_attention_heads`
    pub num_heads: u64,
    /// `head_dim` (default `hidden_size / num_heads`)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u64>,
    /// `block_size` (default 256)
    #[serde(default = "block")]
    pub block_size: u64,
}

fn block() -> u64 {
    256
}

impl LightningAttention {
    fn dims(&self) -> LayerResult<(u64, u64)> {
        positive(self.hidden_size, "hidden_size")?;
        positive(self.num_heads, "num_heads")?;
        positive(self.block_size, "block_size")?;
        let d = match self.head_dim {
            Some(d) => d,
            None if self.hidden_size.is_multiple_of(self.num_heads) => self.hidden_size / self.num_heads,
            None => return Err(format!("hidden_size ({}) must be divisible by num_heads ({}) without head_dim", self.hidden_size, self.num_heads)),
        };
        positive(d, "head_dim")?;
        Ok((self.num_heads, d))
    }

    /// The cached state per sequence: `[H, d, d]` in the compute dtype (written here as the
    /// conv-state part of [`StateSize`], which is the compute-dtype one; no fp32 state).
    pub fn state(&self) -> StateSize {
        let (h, d) = self.dims().unwrap_or((0, 0));
        StateSize { conv_channels: h.saturating_mul(d), conv_kernel: d, recurrent: 0 }
    }

    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let (h, d) = self.dims()?;
        let s = seq_of(b, x, self.hidden_size)?;
        let (hid, bs) = (self.hidden_size, self.block_size);
        let hd = h.saturating_mul(d);
        let lin = |i, o| Linear { in_features: i, out_features: o, bias: false, tied_weight: false };
        // the persistent decay buffers, converted with the model
        let pdt = b.param_dtype();
        let buffers = h.saturating_add(h.saturating_mul(bs).saturating_mul(2)).saturating_add(h.saturating_mul(bs).saturating_mul(bs));
        b.buffer(buffers, pdt);
        let qkv = lin(hid, hd.saturating_mul(3)).lower(b, x)?;
        let act = unary(b, "silu", qkv, Saves::Input);
        let dt = b.dtype(act);
        // blocks: `full` of `bs` tokens and one of `rem`
        let (full, rem) = (s / bs, s % bs);
        let pairs = h.saturating_mul(full.saturating_mul(bs.saturating_mul(bs)).saturating_add(rem.saturating_mul(rem)));
        let blocks = full.saturating_add((rem > 0) as u64);
        let one = bs.min(s);
        // Q Kᵀ of one block: freed after `* diagonal_decay`
        let scores = tensor(b, "matmul", &[act], Shape::new([h, one, one]), dt, &[]);
        let intra = tensor(b, "mul", &[scores], Shape::new([pairs]), dt, &[]);
        let qd = tensor(b, "mul", &[act], Shape::new([h, s, d]), dt, &[]);
        let kd = tensor(b, "mul", &[act], Shape::new([h, s, d]), dt, &[]);
        // every block's new state, each saved by the next block's `Q · inter` matmul
        let states = tensor(b, "block_states", &[kd, act], Shape::new([blocks, h, d, d]), dt, &[kd, act]);
        // the blocks' outputs, listed until `torch.cat`
        let outs = tensor(b, "block_out", &[intra, act, qd, states], Shape::new([h, s, d]), dt, &[intra, act, qd, states]);
        let cat = tensor(b, "cat", &[outs], Shape::new([h, s, d]), dt, &[]);
        // `transpose(1, 2).reshape(S, H·d)`: a copy
        let y = tensor(b, "reshape", &[cat], Shape::new([s, hd]), dt, &[]);
        let y = RmsNorm { normalized_shape: hd, eps: 1e-6, t5: false }.lower(b, y)?;
        let g = lin(hid, hd).lower(b, x)?;
        let g = unary(b, "sigmoid", g, Saves::Output);
        let y = mul(b, g, y);
        let y = lin(hd, hid).lower(b, y)?;
        cache_states(b, self.state());
        Ok(y)
    }
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::one;
    use serde_json::json;

    #[test]
    fn lightning_attention_params() {
        // 4 heads of 16: qkv_proj 64·192, output_gate 64·64, out_proj 64·64, norm 64
        let l = one(json!({"kind": "lightning_attention", "hidden_size": 64, "num_heads": 4, "block_size": 16}), &[40, 64]);
        assert_eq!((l.shape, l.params), (vec![40, 64], 64 * 192 + 2 * 64 * 64 + 64));
    }
}
