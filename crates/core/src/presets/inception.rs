//! torchvision Inception v3 (`torchvision/models/inception.py`) at 3×299×299: `BasicConv2d` is
//! `Conv2d(bias=False) → BatchNorm2d(eps=0.001) → relu(inplace=True)`; the Inception A–E blocks
//! are `parallel` branches joined by `torch.cat`, their pooling branches `F.avg_pool2d(3, 1, 1)` /
//! `F.max_pool2d(3, 2)`.
//!
//! torchvision builds the auxiliary classifier (`aux_logits=True`) and runs it in training, on
//! the output of `Mixed_6e`. A spec has one output, so the aux head is the first branch of a
//! `parallel` block whose second branch is the rest of the network, joined by `add`: both heads'
//! activations are saved and both receive gradients, as with `loss + 0.4 * aux_loss`, and the
//! op order (aux first, then `Mixed_7a`…) is torchvision's. The only difference from the real step
//! is one `[N, 1000]` add and one log-softmax instead of two.

use super::parts::{image_model, layer};
use crate::layer::args::Pair;
use crate::spec::{Join, Layer, ModelSpec};
use serde_json::json;


/// `BasicConv2d(i, o, kernel_size=k, stride=s, padding=p)` as three layers.
fn basic(i: u64, o: u64, k: [u64; 2], s: u64, p: [u64; 2]) -> Vec<Layer> {
    vec![
        layer(json!({"kind": "conv2d", "in_channels": i, "out_channels": o, "kernel_size": Pair(k), "stride": s, "padding": Pair(p), "bias": false})),
        layer(json!({"kind": "batch_norm2d", "num_features": o, "eps": 0.001})),
        layer(json!({"kind": "relu", "inplace": true})),
    ]
}

/// A square `BasicConv2d`.
fn sq(i: u64, o: u64, k: u64, s: u64, p: u64) -> Vec<Layer> {
    basic(i, o, [k, k], s, [p, p])
}

/// Several `BasicConv2d`s in a row.
fn chain(convs: &[Vec<Layer>]) -> Vec<Layer> {
    convs.concat()
}

fn avg_pool_3x3() -> Layer {
    layer(json!({"kind": "avg_pool2d", "kernel_size": 3, "stride": 1, "padding": 1}))
}
fn max_pool_3x3_s2() -> Layer {
    layer(json!({"kind": "max_pool2d", "kernel_size": 3, "stride": 2}))
}

fn cat(branches: Vec<Vec<Layer>>) -> Layer {
    Layer::Parallel { branches, join: Join::Concat }
}

/// `InceptionA(in_channels, pool_features)`: 35×35, out `224 + pool_features` channels.
fn inception_a(c: u64, pool: u64) -> Layer {
    cat(vec![
        sq(c, 64, 1, 1, 0),
        chain(&[sq(c, 48, 1, 1, 0), sq(48, 64, 5, 1, 2)]),
        chain(&[sq(c, 64, 1, 1, 0), sq(64, 96, 3, 1, 1), sq(96, 96, 3, 1, 1)]),
        [vec![avg_pool_3x3()], sq(c, pool, 1, 1, 0)].concat(),
    ])
}

/// `InceptionB(in_channels)`: 35×35 → 17×17, out `480 + in_channels`.
fn inception_b(c: u64) -> Layer {
    cat(vec![
        sq(c, 384, 3, 2, 0),
        chain(&[sq(c, 64, 1, 1, 0), sq(64, 96, 3, 1, 1), sq(96, 96, 3, 2, 0)]),
        vec![max_pool_3x3_s2()],
    ])
}

/// `InceptionC(in_channels, channels_7x7)`: 17×17, out 768 channels.
fn inception_c(c: u64, c7: u64) -> Layer {
    let (r, col) = ([1, 7], [7, 1]);
    let (pr, pc) = ([0, 3], [3, 0]);
    cat(vec![
        sq(c, 192, 1, 1, 0),
        chain(&[sq(c, c7, 1, 1, 0), basic(c7, c7, r, 1, pr), basic(c7, 192, col, 1, pc)]),
        chain(&[
            sq(c, c7, 1, 1, 0),
            basic(c7, c7, col, 1, pc),
            basic(c7, c7, r, 1, pr),
            basic(c7, c7, col, 1, pc),
            basic(c7, 192, r, 1, pr),
        ]),
        [vec![avg_pool_3x3()], sq(c, 192, 1, 1, 0)].concat(),
    ])
}

/// `InceptionD(in_channels)`: 17×17 → 8×8, out `512 + in_channels`.
fn inception_d(c: u64) -> Layer {
    cat(vec![
        chain(&[sq(c, 192, 1, 1, 0), sq(192, 320, 3, 2, 0)]),
        chain(&[
            sq(c, 192, 1, 1, 0),
            basic(192, 192, [1, 7], 1, [0, 3]),
            basic(192, 192, [7, 1], 1, [3, 0]),
            sq(192, 192, 3, 2, 0),
        ]),
        vec![max_pool_3x3_s2()],
    ])
}

/// `InceptionE(in_channels)`: 8×8, out 2048 channels; the 3×3 branches split into 1×3 and 3×1.
fn inception_e(c: u64) -> Layer {
    let split = || cat(vec![basic(384, 384, [1, 3], 1, [0, 1]), basic(384, 384, [3, 1], 1, [1, 0])]);
    cat(vec![
        sq(c, 320, 1, 1, 0),
        [sq(c, 384, 1, 1, 0), vec![split()]].concat(),
        [sq(c, 448, 1, 1, 0), sq(448, 384, 3, 1, 1), vec![split()]].concat(),
        [vec![avg_pool_3x3()], sq(c, 192, 1, 1, 0)].concat(),
    ])
}

/// `InceptionAux(768, num_classes)` on the 17×17 output of `Mixed_6e`.
fn aux(c: u64, classes: u64) -> Vec<Layer> {
    [
        vec![layer(json!({"kind": "avg_pool2d", "kernel_size": 5, "stride": 3}))],
        sq(c, 128, 1, 1, 0),
        sq(128, 768, 5, 1, 0),
        vec![
            layer(json!({"kind": "adaptive_avg_pool2d", "output_size": 1})),
            layer(json!({"kind": "flatten"})),
            layer(json!({"kind": "linear", "in_features": 768, "out_features": classes})),
        ],
    ]
    .concat()
}

/// `inception_v3(aux_logits=aux_logits)` with 1000 classes at 3×299×299, `transform_input=False`.
/// Parameters: 27,161,264 with the auxiliary classifier, 23,834,568 without.
pub fn inception_v3(aux_logits: bool) -> ModelSpec {
    let classes = 1000;
    let mut layers = chain(&[sq(3, 32, 3, 2, 0), sq(32, 32, 3, 1, 0), sq(32, 64, 3, 1, 1)]);
    layers.push(max_pool_3x3_s2());
    layers.extend(chain(&[sq(64, 80, 1, 1, 0), sq(80, 192, 3, 1, 0)]));
    layers.push(max_pool_3x3_s2());
    layers.extend([
        inception_a(192, 32),
        inception_a(256, 64),
        inception_a(288, 64),
        inception_b(288),
        inception_c(768, 128),
        inception_c(768, 160),
        inception_c(768, 160),
        inception_c(768, 192),
    ]);
    let head = vec![
        inception_d(768),
        inception_e(1280),
        inception_e(2048),
        layer(json!({"kind": "adaptive_avg_pool2d", "output_size": 1})),
        layer(json!({"kind": "dropout", "p": 0.5})),
        layer(json!({"kind": "flatten"})),
        layer(json!({"kind": "linear", "in_features": 2048, "out_features": classes})),
    ];
    if aux_logits {
        layers.push(Layer::Parallel { branches: vec![aux(768, classes), head], join: Join::Add });
    } else {
        layers.extend(head);
    }
    let name = if aux_logits { "inception_v3" } else { "inception_v3 (no aux classifier)" };
    image_model(name, vec![3, 299, 299], layers)
}
