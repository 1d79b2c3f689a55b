//! torchvision ResNets (`torchvision/models/resnet.py`): BasicBlock for 18/34, Bottleneck for
//! 50/101/152; `out += identity` and `ReLU(inplace=True)` as torchvision writes them.
//! Each stage is one activation-checkpointing unit.

use super::parts::{image_model, layer};
use crate::spec::LayerNames;
use crate::spec::{Layer, ModelSpec};
use serde_json::json;


fn conv(i: u64, o: u64, k: u64, s: u64, p: u64) -> Layer {
    layer(json!({"kind": "conv2d", "in_channels": i, "out_channels": o, "kernel_size": k, "stride": s, "padding": p, "bias": false}))
}
fn bn(c: u64) -> Layer {
    layer(json!({"kind": "batch_norm2d", "num_features": c}))
}
fn relu() -> Layer {
    layer(json!({"kind": "relu", "inplace": true}))
}

fn block(inp: u64, planes: u64, stride: u64, bottleneck: bool) -> Layer {
    let exp = if bottleneck { 4 } else { 1 };
    let out = planes * exp;
    let body = if bottleneck {
        vec![conv(inp, planes, 1, 1, 0), bn(planes), relu(), conv(planes, planes, 3, stride, 1), bn(planes), relu(), conv(planes, out, 1, 1, 0), bn(out)]
    } else {
        vec![conv(inp, planes, 3, stride, 1), bn(planes), relu(), conv(planes, planes, 3, 1, 1), bn(planes)]
    };
    let shortcut = (stride != 1 || inp != out).then(|| vec![conv(inp, out, 1, stride, 0), bn(out)]);
    Layer::Sequential {
        layers: vec![Layer::Residual { body, shortcut, inplace: true }, relu()],
        checkpoint: false,
    }
}

/// `resnet18` … `resnet152` with 1000 classes at 3×224×224.
pub fn resnet(id: &str) -> Option<ModelSpec> {
    let (blocks, bottleneck): ([u64; 4], bool) = match id {
        "resnet18" => ([2, 2, 2, 2], false),
        "resnet34" => ([3, 4, 6, 3], false),
        "resnet50" => ([3, 4, 6, 3], true),
        "resnet101" => ([3, 4, 23, 3], true),
        "resnet152" => ([3, 8, 36, 3], true),
        _ => return None,
    };
    let exp = if bottleneck { 4 } else { 1 };
    let mut layers = vec![
        conv(3, 64, 7, 2, 3),
        bn(64),
        relu(),
        layer(json!({"kind": "max_pool2d", "kernel_size": 3, "stride": 2, "padding": 1})),
    ];
    let mut inp = 64;
    for (stage, &n) in blocks.iter().enumerate() {
        let planes = 64u64 << stage;
        let stride = if stage == 0 { 1 } else { 2 };
        let mut stage_layers = vec![block(inp, planes, stride, bottleneck)];
        inp = planes * exp;
        for _ in 1..n {
            stage_layers.push(block(inp, planes, 1, bottleneck));
        }
        layers.push(Layer::Sequential { layers: stage_layers, checkpoint: true });
    }
    layers.push(layer(json!({"kind": "adaptive_avg_pool2d", "output_size": 1})));
    layers.push(layer(json!({"kind": "flatten"})));
    layers.push(layer(json!({"kind": "linear", "in_features": inp, "out_features": 1000})));
    let mut spec = image_model(id, vec![3, 224, 224], layers);
    spec.names = module_names(&blocks, bottleneck);
    Some(spec)
}

/// torchvision's module names (`conv1`, …, `layer1.0.conv1`, `layer1.0.downsample.0`, `fc`; the
/// residual inside a block is its `forward`, not a module, and `torch.flatten` is no module).
fn module_names(blocks: &[u64; 4], bottleneck: bool) -> LayerNames {
    let mut names = LayerNames::new();
    for (i, n) in ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "", "fc"].into_iter().enumerate() {
        if !n.is_empty() {
            names.insert(format!("layers[{i}]"), n.into());
        }
    }
    // inside block `layers[4 + stage].layers[b]`: its residual (transparent), the residual's
    // body and shortcut, the ReLU after the sum
    let body: &[&str] = if bottleneck { &["conv1", "bn1", "relu", "conv2", "bn2", "relu", "conv3", "bn3"] } else { &["conv1", "bn1", "relu", "conv2", "bn2"] };
    let parts = body.iter().enumerate().map(|(j, n)| (format!(".layers[0].body[{j}]"), *n));
    let parts: Vec<(String, &str)> = parts.chain([(".layers[0]".into(), ""), (".layers[1]".into(), "relu")]).collect();
    for (stage, &n) in blocks.iter().enumerate() {
        for b in 0..n {
            let block = format!("layers[{}].layers[{b}]", 4 + stage);
            for (suffix, name) in &parts {
                names.insert(format!("{block}{suffix}"), (*name).into());
            }
            // the first block of a stage that changes the width or the stride (see `block`)
            if b == 0 && (stage > 0 || bottleneck) {
                for j in 0..2 {
                    names.insert(format!("{block}.layers[0].shortcut[{j}]"), format!("downsample.{j}").into());
                }
            }
        }
    }
    names
}
