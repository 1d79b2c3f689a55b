//! Pooling over `[C, H, W]` inputs.

use super::args::Pair;
use super::conv::conv_out;
use super::LayerResult;
use crate::graph::{GradRule, ValueId};
use crate::lower::Builder;
use crate::serde_util::is_false;
use crate::units::{DType, Shape};
use serde::{Deserialize, Serialize};

fn one() -> Pair {
    Pair::splat(1)
}
fn yes() -> bool {
    true
}

/// `nn.MaxPool2d(kernel_size, stride=kernel_size, padding=0, dilation=1, ceil_mode=False)`.
/// Training keeps the input and int64 indices for backward; without autograd the indices are
/// still computed (`max_pool2d_with_indices`, as on CUDA) and dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxPool2d {
    pub kernel_size: Pair,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<Pair>,
    #[serde(default)]
    pub padding: Pair,
    #[serde(default = "one")]
    pub dilation: Pair,
    #[serde(default, skip_serializing_if = "is_false")]
    pub ceil_mode: bool,
}

/// `nn.AvgPool2d(kernel_size, stride=kernel_size, padding=0, ceil_mode=False, count_include_pad=True)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AvgPool2d {
    pub kernel_size: Pair,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stride: Option<Pair>,
    #[serde(default)]
    pub padding: Pair,
    #[serde(default, skip_serializing_if = "is_false")]
    pub ceil_mode: bool,
    #[serde(default = "yes")]
    pub count_include_pad: bool,
}

/// `nn.AdaptiveAvgPool2d(output_size)`; to 1×1 it lowers to a mean and saves nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdaptiveAvgPool2d {
    pub output_size: Pair,
}

fn window(
    b: &Builder,
    x: ValueId,
    k: Pair,
    stride: Option<Pair>,
    pad: Pair,
    dil: Pair,
    ceil: bool,
) -> LayerResult<Shape> {
    let s = b.shape(x).0.clone();
    if s.len() != 3 {
        return Err(format!("expected a [C, H, W] input, got {}", b.shape(x)));
    }
    let stride = stride.unwrap_or(k);
    let mut out = vec![s[0]];
    for i in 0..2 {
        super::positive(k.0[i], "kernel_size")?;
        super::positive(stride.0[i], "stride")?;
        if pad.0[i].saturating_mul(2) > k.0[i] {
            return Err(format!("padding ({}) must be at most half the kernel size ({})", pad.0[i], k.0[i]));
        }
        out.push(conv_out(s[i + 1], k.0[i], stride.0[i], pad.0[i], dil.0[i], ceil).ok_or_else(|| {
            format!("kernel {} does not fit the input size {} in dimension {i}", k.0[i], s[i + 1])
        })?);
    }
    Ok(Shape::from(out))
}

impl MaxPool2d {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let out = window(b, x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)?;
        let dt = b.dtype(x);
        let indices = (out.clone(), true, DType::I64);
        let y = b.op("max_pool2d", &[x], &[(out, dt)], &[x], false, std::slice::from_ref(&indices), GradRule::Alloc)[0];
        if !b.g.ops.last().is_some_and(|op| op.recorded) {
            // Without autograd CUDA still runs max_pool2d_with_indices; the indices are dropped at once.
            let idx = crate::graph::Value { storage: 0, shape: indices.0, batched: true, dtype: DType::I64, requires_grad: false };
            b.last_fwd_scratch(idx.bytes());
        }
        Ok(y)
    }
}

impl AvgPool2d {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let out = window(b, x, self.kernel_size, self.stride, self.padding, one(), self.ceil_mode)?;
        let dt = b.dtype(x);
        Ok(b.op("avg_pool2d", &[x], &[(out, dt)], &[x], false, &[], GradRule::Alloc)[0])
    }
}

impl AdaptiveAvgPool2d {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() != 3 {
            return Err(format!("expected a [C, H, W] input, got {}", b.shape(x)));
        }
        let [oh, ow] = self.output_size.0;
        super::positive(oh.min(ow), "output_size")?;
        let out = Shape::new([s[0], oh, ow]);
        let dt = b.dtype(x);
        Ok(if oh == 1 && ow == 1 {
            b.op("mean", &[x], &[(out, dt)], &[], false, &[], GradRule::Alloc)[0]
        } else {
            b.op("adaptive_avg_pool2d", &[x], &[(out, dt)], &[x], false, &[], GradRule::Alloc)[0]
        })
    }
}

#[cfg(test)]
mod tests {
    //! Output sizes as PyTorch's `pooling_output_shape` gives them; pooling has no parameters.

    use crate::layer::test_util::{error, one};
    use serde_json::json;

    #[test]
    fn max_pool_resnet_and_vgg() {
        // resnet18 `maxpool`: nn.MaxPool2d(3, 2, 1) on 64×112×112 → 64×56×56
        let p = one(json!({"kind": "max_pool2d", "kernel_size": 3, "stride": 2, "padding": 1}), &[64, 112, 112]);
        assert_eq!((p.shape, p.params), (vec![64, 56, 56], 0));
        // VGG: nn.MaxPool2d(2, 2) (stride defaults to the kernel) on 512×14×14 → 512×7×7
        let p = one(json!({"kind": "max_pool2d", "kernel_size": 2}), &[512, 14, 14]);
        assert_eq!(p.shape, [512, 7, 7]);
    }

    #[test]
    fn max_pool_ceil_mode() {
        // GoogLeNet: nn.MaxPool2d(3, 2, ceil_mode=True) on 64×112×112 → 56 (floor mode: 55)
        let p = one(json!({"kind": "max_pool2d", "kernel_size": 3, "stride": 2, "ceil_mode": true}), &[64, 112, 112]);
        assert_eq!(p.shape, [64, 56, 56]);
        let p = one(json!({"kind": "max_pool2d", "kernel_size": 3, "stride": 2}), &[64, 112, 112]);
        assert_eq!(p.shape, [64, 55, 55]);
        // nn.MaxPool2d(2, 2, padding=1, ceil_mode=True) on 1×5×5: ceil((5 + 2 − 2)/2) + 1 = 4, but
        // the fourth window would start at 6 ≥ 5 + 1, in the right padding alone, so PyTorch drops it: 3
        let p = one(json!({"kind": "max_pool2d", "kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": true}), &[1, 5, 5]);
        assert_eq!(p.shape, [1, 3, 3]);
        // nn.MaxPool2d(2, 2, ceil_mode=True) on 1×5×5 → 3 (the last window hangs over the edge)
        let p = one(json!({"kind": "max_pool2d", "kernel_size": 2, "ceil_mode": true}), &[1, 5, 5]);
        assert_eq!(p.shape, [1, 3, 3]);
    }

    #[test]
    fn max_pool_keeps_int64_indices_for_backward() {
        // max_pool2d_with_indices: an output and int64 indices of the same shape, both allocated;
        // after a conv (the input needs a gradient, so autograd records the pool)
        let p = one(json!({"kind": "sequential", "layers": [
            {"kind": "conv2d", "in_channels": 8, "out_channels": 8, "kernel_size": 1},
            {"kind": "max_pool2d", "kernel_size": 2}]}), &[8, 16, 16]);
        let g = &p.resolved.graph;
        let op = g.ops.iter().find(|o| o.name == "max_pool2d").unwrap();
        assert_eq!(op.allocs.len(), 2);
        // per sample: 8·8·8 float32 values and as many int64 indices
        let bytes: Vec<u64> = op.allocs.iter().map(|&s| g.storages[s as usize].bytes.per_sample).collect();
        assert_eq!(bytes, [8 * 8 * 8 * 4, 8 * 8 * 8 * 8]);
        assert!(op.saved.contains(&op.allocs[1]), "the indices are saved for backward");
    }

    #[test]
    fn avg_pool_and_adaptive() {
        // Inception's nn.AvgPool2d(3, stride=1, padding=1) keeps the size
        let p = one(json!({"kind": "avg_pool2d", "kernel_size": 3, "stride": 1, "padding": 1}), &[192, 35, 35]);
        assert_eq!(p.shape, [192, 35, 35]);
        // nn.AvgPool2d(2) on 7×7 → 3×3 (floor), with ceil_mode → 4×4
        let p = one(json!({"kind": "avg_pool2d", "kernel_size": 2}), &[1, 7, 7]);
        assert_eq!(p.shape, [1, 3, 3]);
        let p = one(json!({"kind": "avg_pool2d", "kernel_size": 2, "ceil_mode": true}), &[1, 7, 7]);
        assert_eq!(p.shape, [1, 4, 4]);
        // VGG's nn.AdaptiveAvgPool2d((7, 7)) and ResNet's nn.AdaptiveAvgPool2d(1): any input size
        let p = one(json!({"kind": "adaptive_avg_pool2d", "output_size": [7, 7]}), &[512, 14, 14]);
        assert_eq!((p.shape, p.params), (vec![512, 7, 7], 0));
        let p = one(json!({"kind": "adaptive_avg_pool2d", "output_size": 1}), &[512, 7, 7]);
        assert_eq!(p.shape, [512, 1, 1]);
    }

    #[test]
    fn pool_refuses_what_pytorch_refuses() {
        // "pad should be at most half of effective kernel size"
        let e = error(json!({"kind": "max_pool2d", "kernel_size": 2, "padding": 2}), &[1, 8, 8]);
        assert!(e.contains("at most half the kernel size"), "{e}");
        let e = error(json!({"kind": "max_pool2d", "kernel_size": 2}), &[8, 8]);
        assert!(e.contains("expected a [C, H, W] input"), "{e}");
        let e = error(json!({"kind": "avg_pool2d", "kernel_size": 5}), &[1, 4, 4]);
        assert!(e.contains("does not fit"), "{e}");
    }
}
