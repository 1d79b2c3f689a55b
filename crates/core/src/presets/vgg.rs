//! torchvision VGGs (`torchvision/models/vgg.py`): configurations A/B/D/E, optional BatchNorm,
//! `AdaptiveAvgPool2d((7, 7))`, and the 4096-4096-1000 classifier with dropout.

use super::parts::{image_model, layer};
use crate::spec::ModelSpec;
use serde_json::json;


/// `vgg11` … `vgg19`, `_bn` variants, 1000 classes at 3×224×224.
pub fn vgg(id: &str) -> Option<ModelSpec> {
    let (base, bn) = match id.strip_suffix("_bn") {
        Some(b) => (b, true),
        None => (id, false),
    };
    const M: u64 = 0;
    let cfg: &[u64] = match base {
        "vgg11" => &[64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M],
        "vgg13" => &[64, 64, M, 128, 128, M, 256, 256, M, 512, 512, M, 512, 512, M],
        "vgg16" => &[64, 64, M, 128, 128, M, 256, 256, 256, M, 512, 512, 512, M, 512, 512, 512, M],
        "vgg19" => &[64, 64, M, 128, 128, M, 256, 256, 256, 256, M, 512, 512, 512, 512, M, 512, 512, 512, 512, M],
        _ => return None,
    };
    let mut layers = Vec::new();
    // torchvision's module names: `features.<i>`, `avgpool`, `classifier.<i>` (`torch.flatten`
    // in `forward` is no module)
    let mut names = Vec::new();
    let mut c = 3;
    for &v in cfg {
        if v == M {
            layers.push(layer(json!({"kind": "max_pool2d", "kernel_size": 2, "stride": 2})));
        } else {
            layers.push(layer(json!({"kind": "conv2d", "in_channels": c, "out_channels": v, "kernel_size": 3, "padding": 1})));
            if bn {
                layers.push(layer(json!({"kind": "batch_norm2d", "num_features": v})));
            }
            layers.push(layer(json!({"kind": "relu", "inplace": true})));
            c = v;
        }
    }
    names.extend((0..layers.len()).map(|i| format!("features.{i}")));
    names.push("avgpool".into());
    layers.push(layer(json!({"kind": "adaptive_avg_pool2d", "output_size": 7})));
    layers.push(layer(json!({"kind": "flatten"})));
    let classifier = layers.len();
    for (i, o) in [(512 * 7 * 7, 4096), (4096, 4096)] {
        layers.push(layer(json!({"kind": "linear", "in_features": i, "out_features": o})));
        layers.push(layer(json!({"kind": "relu", "inplace": true})));
        layers.push(layer(json!({"kind": "dropout", "p": 0.5})));
    }
    layers.push(layer(json!({"kind": "linear", "in_features": 4096, "out_features": 1000})));
    let mut spec = image_model(id, vec![3, 224, 224], layers);
    for (i, n) in names.iter().enumerate() {
        crate::layer_names::name_top(&mut spec.names, i, n);
    }
    for i in classifier..spec.layers.len() {
        crate::layer_names::name_top(&mut spec.names, i, &format!("classifier.{}", i - classifier));
    }
    Some(spec)
}
