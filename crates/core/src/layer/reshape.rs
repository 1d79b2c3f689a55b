//! Shape-only layers: views where PyTorch makes views.

use super::LayerResult;
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::units::Shape;
use serde::{Deserialize, Serialize};

fn one() -> i64 {
    1
}
fn minus_one() -> i64 {
    -1
}

/// `nn.Flatten(start_dim=1, end_dim=-1)`; dims count the batch as 0, like PyTorch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flatten {
    #[serde(default = "one")]
    pub start_dim: i64,
    #[serde(default = "minus_one")]
    pub end_dim: i64,
}

impl Default for Flatten {
    fn default() -> Self {
        Flatten { start_dim: 1, end_dim: -1 }
    }
}

impl Flatten {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        let rank = s.len() as i64 + 1;
        let norm = |d: i64| if d < 0 { d + rank } else { d };
        let (start, end) = (norm(self.start_dim), norm(self.end_dim));
        if start < 1 || end >= rank || start > end {
            return Err(format!(
                "cannot flatten dims {}..={} of a {rank}-d input (batch is dim 0 and is never flattened)",
                self.start_dim, self.end_dim
            ));
        }
        let (start, end) = (start as usize - 1, end as usize - 1);
        let mut out: Vec<u64> = s[..start].to_vec();
        out.push(s[start..=end].iter().fold(1u64, |a, &d| a.saturating_mul(d)));
        out.extend_from_slice(&s[end + 1..]);
        Ok(b.view(x, Shape::from(out)))
    }
}

/// `x[:, index]`: picks one position of the first per-sample dimension (a view). Its backward
/// allocates a zero gradient of the whole input (`select_backward`). `-1` is the last position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SelectToken {
    #[serde(default)]
    pub index: i64,
}

impl SelectToken {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() < 2 {
            return Err(format!("expected a [S, D] input, got {}", b.shape(x)));
        }
        let n = s[0] as i64;
        if self.index >= n || self.index < -n {
            return Err(format!("index {} is out of range for {n} positions", self.index));
        }
        Ok(b.view_with_grad(x, Shape::new(s[1..].iter().copied()), GradRule::Alloc))
    }
}

/// `x.transpose(dim0, dim1)` with per-sample dims counted from 1 (a view).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transpose {
    pub dim0: usize,
    pub dim1: usize,
}

impl Transpose {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let mut s = b.shape(x).0.clone();
        let rank = s.len();
        for d in [self.dim0, self.dim1] {
            if d == 0 || d > rank {
                return Err(format!("dim {d} is out of range: per-sample dims are 1..={rank} (0 is the batch)"));
            }
        }
        s.swap(self.dim0 - 1, self.dim1 - 1);
        Ok(b.view(x, Shape(s)))
    }
}

#[cfg(test)]
mod tests {
    use crate::layer::test_util::{error, one};
    use serde_json::json;

    #[test]
    fn flatten_shapes() {
        // VGG: nn.Flatten() on 512×7×7 → 25,088
        let f = one(json!({"kind": "flatten"}), &[512, 7, 7]);
        assert_eq!((f.shape, f.params), (vec![25_088], 0));
        // ViT patches: x.flatten(2) on [768, 14, 14] → [768, 196]
        assert_eq!(one(json!({"kind": "flatten", "start_dim": 2}), &[768, 14, 14]).shape, [768, 196]);
        // nn.Flatten(1, 2) on [4, 5, 6] → [20, 6]
        assert_eq!(one(json!({"kind": "flatten", "start_dim": 1, "end_dim": 2}), &[4, 5, 6]).shape, [20, 6]);
        // flattening the batch dimension is refused
        let e = error(json!({"kind": "flatten", "start_dim": 0}), &[4, 5]);
        assert!(e.contains("cannot flatten"), "{e}");
    }

    #[test]
    fn views_allocate_nothing() {
        // flatten and transpose are views: the output is the input's storage (value 0, the batch)
        for layer in [json!({"kind": "flatten"}), json!({"kind": "transpose", "dim0": 1, "dim1": 2}), json!({"kind": "select_token"})] {
            let r = one(layer.clone(), &[4, 5]).resolved;
            assert_eq!(r.graph.storage_of(r.model_output), r.graph.storage_of(0), "{layer} allocated memory");
        }
    }

    #[test]
    fn transpose_and_select_token() {
        // ViT: x.flatten(2).transpose(1, 2): [768, 196] → [196, 768]
        assert_eq!(one(json!({"kind": "transpose", "dim0": 1, "dim1": 2}), &[768, 196]).shape, [196, 768]);
        let e = error(json!({"kind": "transpose", "dim0": 0, "dim1": 1}), &[4, 5]);
        assert!(e.contains("out of range"), "{e}");
        // BERT's pooler / ViT's head: x[:, 0] on [197, 768] → [768]; x[:, -1] too
        assert_eq!(one(json!({"kind": "select_token", "index": 0}), &[197, 768]).shape, [768]);
        assert_eq!(one(json!({"kind": "select_token", "index": -1}), &[197, 768]).shape, [768]);
        let e = error(json!({"kind": "select_token", "index": 197}), &[197, 768]);
        assert!(e.contains("out of range for 197 positions"), "{e}");
    }
}
