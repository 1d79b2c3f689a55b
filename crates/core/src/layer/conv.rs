//! Convolutions. Shapes are `[C, L]` (1-d) and `[C, H, W]` (2-d) per sample.
//!
//! Output size per spatial dimension (PyTorch's formula):
//! `out = floor((in + 2·pad − dilation·(k − 1) − 1) / stride) + 1`;
//! transposed: `out = (in − 1)·stride − 2·pad + dilation·(k − 1) + output_padding + 1`.

use super::{positive, LayerResult};
use super::args::{NamedPadding, Padding, Pair};
use crate::graph::{GradRule, ValueId};
use crate::lower::{Builder, CastPolicy};
use crate::serde_util::t;
use crate::units::Shape;
use serde::{Deserialize, Serialize};

fn one() -> Pair {
    Pair::splat(1)
}

/// `nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conv2d {
    pub in_channels: u64,
    pub out_channels: u64,
    pub kernel_size: Pair,
    #[serde(default = "one")]
    pub stride: Pair,
    #[serde(default)]
    pub padding: Padding,
    #[serde(default = "one")]
    pub dilation: Pair,
    #[serde(default = "one_u")]
    pub groups: u64,
    #[serde(default = "t")]
    pub bias: bool,
}

fn one_u() -> u64 {
    1
}

/// `nn.Conv1d`, same arguments as [`Conv2d`] with integer sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conv1d {
    pub in_channels: u64,
    pub out_channels: u64,
    pub kernel_size: u64,
    #[serde(default = "one_u")]
    pub stride: u64,
    #[serde(default)]
    pub padding: Padding,
    #[serde(default = "one_u")]
    pub dilation: u64,
    #[serde(default = "one_u")]
    pub groups: u64,
    #[serde(default = "t")]
    pub bias: bool,
}

/// `nn.ConvTranspose2d(..., output_padding=0)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConvTranspose2d {
    pub in_channels: u64,
    pub out_channels: u64,
    pub kernel_size: Pair,
    #[serde(default = "one")]
    pub stride: Pair,
    #[serde(default)]
    pub padding: Pair,
    #[serde(default)]
    pub output_padding: Pair,
    #[serde(default = "one")]
    pub dilation: Pair,
    #[serde(default = "one_u")]
    pub groups: u64,
    #[serde(default = "t")]
    pub bias: bool,
}

impl Default for Pair {
    fn default() -> Self {
        Pair::splat(0)
    }
}

/// Output length of a convolution or pooling window along one dimension; `None` if empty.
pub fn conv_out(input: u64, kernel: u64, stride: u64, pad: u64, dilation: u64, ceil_mode: bool) -> Option<u64> {
    let span = dilation.checked_mul(kernel.checked_sub(1)?)?.checked_add(1)?;
    let padded = input.checked_add(pad.checked_mul(2)?)?;
    if padded < span || stride == 0 {
        return None;
    }
    let room = padded - span;
    let mut out = if ceil_mode { room.div_ceil(stride) } else { room / stride }.saturating_add(1);
    // PyTorch: the last window must start inside the input or left padding.
    if ceil_mode && (out - 1).saturating_mul(stride) >= input.saturating_add(pad) {
        out -= 1;
    }
    Some(out)
}

fn check_channels(inp: u64, out: u64, groups: u64, got: u64) -> LayerResult<()> {
    positive(inp, "in_channels")?;
    positive(out, "out_channels")?;
    positive(groups, "groups")?;
    if got != inp {
        return Err(format!("expected {inp} input channels, got {got}"));
    }
    if !inp.is_multiple_of(groups) || !out.is_multiple_of(groups) {
        return Err(format!("in_channels ({inp}) and out_channels ({out}) must be divisible by groups ({groups})"));
    }
    Ok(())
}

fn spatial(
    input: &[u64],
    kernel: &[u64],
    stride: &[u64],
    padding: Padding,
    dilation: &[u64],
) -> LayerResult<Vec<u64>> {
    let mut out = Vec::with_capacity(input.len());
    for i in 0..input.len() {
        positive(kernel[i], "kernel_size")?;
        positive(stride[i], "stride")?;
        positive(dilation[i], "dilation")?;
        let o = match padding {
            Padding::Named(NamedPadding::Same) => {
                if stride[i] != 1 {
                    return Err("padding='same' is not supported for strided convolutions".into());
                }
                Some(input[i])
            }
            Padding::Named(NamedPadding::Valid) => conv_out(input[i], kernel[i], stride[i], 0, dilation[i], false),
            Padding::Explicit(p) => conv_out(input[i], kernel[i], stride[i], p.0[i.min(1)], dilation[i], false),
        };
        out.push(o.ok_or_else(|| {
            format!(
                "kernel {} (dilation {}) does not fit the padded input size {} in dimension {}",
                kernel[i], dilation[i], input[i], i
            )
        })?);
    }
    Ok(out)
}

/// The convolution op: saves input and weight, output in the compute dtype.
pub(super) fn conv_op(b: &mut Builder, x: ValueId, w: ValueId, bias: Option<ValueId>, out: Shape) -> ValueId {
    let mut ins = vec![x, w];
    ins.extend(bias);
    let (ins, dt) = b.autocast(CastPolicy::Lower, &ins);
    b.op("convolution", &ins, &[(out, dt)], &ins[..2], false, &[], GradRule::Alloc)[0]
}

impl Conv2d {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() != 3 {
            return Err(format!("expected a [C, H, W] input, got {}", b.shape(x)));
        }
        check_channels(self.in_channels, self.out_channels, self.groups, s[0])?;
        let hw = spatial(&s[1..], &self.kernel_size.0, &self.stride.0, self.padding, &self.dilation.0)?;
        let w = b.param(Shape::new([self.out_channels, self.in_channels / self.groups, self.kernel_size.0[0], self.kernel_size.0[1]]));
        let bias = self.bias.then(|| b.param(Shape::new([self.out_channels])));
        Ok(conv_op(b, x, w, bias, Shape::new([self.out_channels, hw[0], hw[1]])))
    }
}

impl Conv1d {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() != 2 {
            return Err(format!("expected a [C, L] input, got {}", b.shape(x)));
        }
        check_channels(self.in_channels, self.out_channels, self.groups, s[0])?;
        let l = spatial(&s[1..], &[self.kernel_size], &[self.stride], self.padding, &[self.dilation])?;
        let w = b.param(Shape::new([self.out_channels, self.in_channels / self.groups, self.kernel_size]));
        let bias = self.bias.then(|| b.param(Shape::new([self.out_channels])));
        Ok(conv_op(b, x, w, bias, Shape::new([self.out_channels, l[0]])))
    }
}

impl ConvTranspose2d {
    pub fn lower(&self, b: &mut Builder, x: ValueId) -> LayerResult<ValueId> {
        let s = b.shape(x).0.clone();
        if s.len() != 3 {
            return Err(format!("expected a [C, H, W] input, got {}", b.shape(x)));
        }
        check_channels(self.in_channels, self.out_channels, self.groups, s[0])?;
        let mut hw = [0u64; 2];
        for i in 0..2 {
            positive(self.kernel_size.0[i], "kernel_size")?;
            positive(self.stride.0[i], "stride")?;
            let grown = (s[i + 1].saturating_sub(1))
                .saturating_mul(self.stride.0[i])
                .saturating_add(self.dilation.0[i].saturating_mul(self.kernel_size.0[i] - 1))
                .saturating_add(self.output_padding.0[i])
                .saturating_add(1);
            hw[i] = grown
                .checked_sub(self.padding.0[i].saturating_mul(2))
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("padding {} leaves no output in dimension {i}", self.padding.0[i]))?;
        }
        let w = b.param(Shape::new([self.in_channels, self.out_channels / self.groups, self.kernel_size.0[0], self.kernel_size.0[1]]));
        let bias = self.bias.then(|| b.param(Shape::new([self.out_channels])));
        Ok(conv_op(b, x, w, bias, Shape::new([self.out_channels, hw[0], hw[1]])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_out_matches_pytorch() {
        assert_eq!(conv_out(224, 7, 2, 3, 1, false), Some(112));
        assert_eq!(conv_out(112, 3, 2, 1, 1, false), Some(56));
        assert_eq!(conv_out(5, 3, 1, 0, 2, false), Some(1));
        assert_eq!(conv_out(2, 3, 1, 0, 1, false), None);
        // ceil_mode (Inception's pools)
        assert_eq!(conv_out(147, 3, 2, 0, 1, true), Some(73));
        assert_eq!(conv_out(6, 3, 2, 0, 1, true), Some(3));
        assert_eq!(conv_out(5, 2, 2, 0, 1, true), Some(3));
    }

    // Shapes and parameter counts of whole layers, as PyTorch builds them.
    use crate::layer::test_util::{error, one};
    use serde_json::json;

    #[test]
    fn conv2d_resnet_stem() {
        // nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False) on 3×224×224 → 64×112×112;
        // weight 64·3·7·7 = 9,408 (torchvision resnet18 `conv1`)
        let c = one(json!({"kind": "conv2d", "in_channels": 3, "out_channels": 64, "kernel_size": 7, "stride": 2, "padding": 3, "bias": false}), &[3, 224, 224]);
        assert_eq!(c.shape, [64, 112, 112]);
        assert_eq!(c.params, 9_408);
        // with the default bias: + 64
        let c = one(json!({"kind": "conv2d", "in_channels": 3, "out_channels": 64, "kernel_size": 7, "stride": 2, "padding": 3}), &[3, 224, 224]);
        assert_eq!(c.params, 9_472);
    }

    #[test]
    fn conv2d_rectangular_grouped_dilated_same() {
        // nn.Conv2d(16, 33, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1)) on 16×50×100
        // (the example in PyTorch's Conv2d docs): H = (50 + 8 − 3·2 − 1)/2 + 1 = 26, W = 100;
        // params 33·16·3·5 + 33 = 7,953
        let c = one(json!({"kind": "conv2d", "in_channels": 16, "out_channels": 33, "kernel_size": [3, 5], "stride": [2, 1], "padding": [4, 2], "dilation": [3, 1]}), &[16, 50, 100]);
        assert_eq!(c.shape, [33, 26, 100]);
        assert_eq!(c.params, 7_953);
        // depthwise nn.Conv2d(64, 64, 3, padding=1, groups=64) (MobileNet): 64·1·3·3 + 64 = 640
        let c = one(json!({"kind": "conv2d", "in_channels": 64, "out_channels": 64, "kernel_size": 3, "padding": 1, "groups": 64}), &[64, 56, 56]);
        assert_eq!(c.shape, [64, 56, 56]);
        assert_eq!(c.params, 640);
        // padding='same' keeps 32×32 for an odd or even kernel
        let c = one(json!({"kind": "conv2d", "in_channels": 3, "out_channels": 8, "kernel_size": 4, "padding": "same"}), &[3, 32, 32]);
        assert_eq!(c.shape, [8, 32, 32]);
        assert_eq!(c.params, 8 * 3 * 16 + 8);
    }

    #[test]
    fn conv2d_refuses_what_pytorch_refuses() {
        let e = error(json!({"kind": "conv2d", "in_channels": 6, "out_channels": 4, "kernel_size": 3, "groups": 4}), &[6, 8, 8]);
        assert!(e.contains("must be divisible by groups"), "{e}");
        let e = error(json!({"kind": "conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3}), &[4, 8, 8]);
        assert!(e.contains("expected 3 input channels, got 4"), "{e}");
        let e = error(json!({"kind": "conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": "same"}), &[3, 8, 8]);
        assert!(e.contains("padding='same' is not supported for strided convolutions"), "{e}");
        let e = error(json!({"kind": "conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 9}), &[3, 8, 8]);
        assert!(e.contains("does not fit"), "{e}");
    }

    #[test]
    fn conv1d_whisper_downsampling() {
        // Whisper-tiny `conv2`: nn.Conv1d(384, 384, 3, stride=2, padding=1) on 384×3000 → 384×1500;
        // 384·384·3 + 384 = 442,752
        let c = one(json!({"kind": "conv1d", "in_channels": 384, "out_channels": 384, "kernel_size": 3, "stride": 2, "padding": 1}), &[384, 3000]);
        assert_eq!(c.shape, [384, 1500]);
        assert_eq!(c.params, 442_752);
    }

    #[test]
    fn conv_transpose2d_dcgan_and_output_padding() {
        // DCGAN generator: nn.ConvTranspose2d(512, 256, 4, 2, 1, bias=False) on 512×4×4:
        // (4 − 1)·2 − 2 + (4 − 1) + 1 = 8; weight [in, out, k, k]: 512·256·16 = 2,097,152
        let c = one(json!({"kind": "conv_transpose2d", "in_channels": 512, "out_channels": 256, "kernel_size": 4, "stride": 2, "padding": 1, "bias": false}), &[512, 4, 4]);
        assert_eq!(c.shape, [256, 8, 8]);
        assert_eq!(c.params, 2_097_152);
        // nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1, groups=2) on 16×7×7
        // → 8×14×14 (the inverse of a stride-2 "same" conv); weight 16·(8/2)·9 + 8 = 584
        let c = one(json!({"kind": "conv_transpose2d", "in_channels": 16, "out_channels": 8, "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1, "groups": 2}), &[16, 7, 7]);
        assert_eq!(c.shape, [8, 14, 14]);
        assert_eq!(c.params, 584);
    }
}
