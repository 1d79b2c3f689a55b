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
    Ok(Shape(out))
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
