//! A model's own names for its layers, as PyTorch's `model.named_modules()` prints them
//! (`model.layers.3`, `lm_head`, torchvision's `features.0`, `layer1.0.conv1`), so the editor and
//! the per-layer reports can show them instead of spec paths. The importers and presets write
//! them in [`ModelSpec::names`](crate::spec::ModelSpec) by spec path; the layer editor drops
//! them at the first structural edit (a name must never show on another layer).
//!
//! Each entry is the layer's name inside its parent: the dotted name of a row is its ancestors'
//! names, then its own. An empty name is transparent (a block that is not a module of its own,
//! such as the residual inside a ResNet block, or a `repeat` body's one layer that *is* the
//! repetition). A repetition of a named `repeat` adds its number, as a `ModuleList` numbers its
//! items; an unnamed layer inside a named block is its index, as in an `nn.Sequential`.

use crate::path::{LayerPath, Step};
pub use crate::spec::LayerNames;
use crate::spec::{Layer, ModelSpec};

/// The dotted name of the layer at `path` in `spec` (a spec path, or a resolved row's with
/// repetitions), or `None` where neither it nor a block around it is named. Consecutive runs of
/// a `ModuleList` (the importers write one `repeat` per run of identical layers, all named
/// alike) number on from the runs before them.
pub fn full_name(spec: &ModelSpec, path: &LayerPath) -> Option<String> {
    if spec.names.is_empty() {
        return None;
    }
    // the spec path so far (repetitions left out: the key into `names`), the dotted name so far
    let (mut key, mut full, mut named) = (String::new(), String::new(), false);
    for (depth, step) in path.0.iter().enumerate() {
        let _ = crate::path::write_step(&mut key, step, depth == 0, false);
        if let (Some(r), true) = (step.repetition, named) {
            push_part(&mut full, &earlier_runs(spec, &path.0[..depth]).saturating_add(r).to_string());
        }
        match spec.names.get(&key).and_then(|v| v.as_str()) {
            Some(own) => {
                push_part(&mut full, own);
                named = true;
            }
            None if named => push_part(&mut full, &step.index.to_string()),
            None => {}
        }
    }
    (named && !full.is_empty()).then_some(full)
}

/// `part` after a dot (nothing for an empty, transparent name).
fn push_part(full: &mut String, part: &str) {
    if part.is_empty() {
        return;
    }
    if !full.is_empty() {
        full.push('.');
    }
    full.push_str(part);
}

/// How many repetitions the runs before the `repeat` at `block` (a path to it) have: the
/// `repeat`s directly before it in its list with the same name (one `ModuleList` in runs).
fn earlier_runs(spec: &ModelSpec, block: &[Step]) -> u64 {
    let Some((last, parent)) = block.split_last() else { return 0 };
    let list = match parent.is_empty() {
        true => Some(spec.layers.as_slice()),
        false => list_at(&spec.layers, parent, &last.slot),
    };
    let Some(list) = list else { return 0 };
    let key = |i: usize| {
        let mut steps = block.to_vec();
        steps[block.len() - 1].index = i;
        LayerPath(steps.into_iter().map(|s| Step { repetition: None, ..s }).collect()).to_string()
    };
    let own = spec.names.get(&key(last.index));
    (0..last.index)
        .rev()
        .map_while(|j| match list.get(j) {
            Some(Layer::Repeat { times, .. }) if spec.names.get(&key(j)) == own => Some(*times),
            _ => None,
        })
        .fold(0, u64::saturating_add)
}

/// The child list `slot` of the layer at `parent` (repetitions ignored).
fn list_at<'a>(layers: &'a [Layer], parent: &[Step], slot: &crate::path::Slot) -> Option<&'a [Layer]> {
    let (first, rest) = parent.split_first()?;
    let mut layer = layers.get(first.index)?;
    for step in rest {
        layer = layer.children().into_iter().find(|(s, _)| *s == step.slot)?.1.get(step.index)?;
    }
    layer.children().into_iter().find(|(s, _)| s == slot).map(|(_, l)| l.as_slice())
}

/// Names the layer at `path` (importers and presets).
pub fn set(names: &mut LayerNames, path: &LayerPath, name: &str) {
    names.insert(path.to_string(), name.into());
}

/// Names the top-level layer `index`.
pub fn name_top(names: &mut LayerNames, index: usize, name: &str) {
    set(names, &LayerPath::top(index), name);
}

/// Names the top-level `repeat` at `index` as the `ModuleList` `name` whose items are its body's
/// one layer (`model.layers`: each repetition is `model.layers.<i>`).
pub fn name_module_list(names: &mut LayerNames, index: usize, name: &str) {
    name_top(names, index, name);
    set(names, &LayerPath::top(index).child(crate::path::Slot::Body, 0), "");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(pairs: &[(&str, &str)]) -> LayerNames {
        pairs.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect()
    }

    /// A spec of `layers` (JSON) with `pairs` as its names.
    fn spec(layers: serde_json::Value, pairs: &[(&str, &str)]) -> ModelSpec {
        let mut s = ModelSpec::from_json(&serde_json::json!({"input": {"shape": [8]}, "layers": layers}).to_string()).unwrap();
        s.names = names(pairs);
        s
    }

    /// The layer at spec path `path`.
    fn layer_at<'a>(layers: &'a [Layer], path: &LayerPath) -> Option<&'a Layer> {
        let (first, rest) = path.0.split_first()?;
        let mut layer = layers.get(first.index)?;
        for step in rest {
            let (_, list) = layer.children().into_iter().find(|(slot, _)| *slot == step.slot)?;
            layer = list.get(step.index)?;
        }
        Some(layer)
    }

    /// Every name a preset (or an importer behind one) writes is on a layer it has, and the
    /// named presets name their first and last rows.
    #[test]
    fn preset_names_are_on_real_layers() {
        for p in crate::presets::list() {
            let s = crate::import::preset(p.id).unwrap();
            for key in s.names.keys() {
                let path: LayerPath = key.parse().unwrap_or_else(|_| panic!("{}: {key}", p.id));
                assert!(layer_at(&s.layers, &path).is_some(), "{}: no layer at {key}", p.id);
            }
        }
        let name = |id: &str, path: &str| full_name(&crate::import::preset(id).unwrap(), &path.parse().unwrap());
        assert_eq!(name("resnet50", "layers[5].layers[0].layers[0].shortcut[1]").as_deref(), Some("layer2.0.downsample.1"));
        assert_eq!(name("resnet18", "layers[4].layers[1].layers[0].body[3]").as_deref(), Some("layer1.1.conv2"));
        assert_eq!(name("vgg16", "layers[39]").as_deref(), Some("classifier.6"));
        assert_eq!(name("gpt2", "layers[3].body#11[0]").as_deref(), Some("transformer.h.11"));
        assert_eq!(name("bert-base", "layers[5].body#2[0]").as_deref(), Some("encoder.layer.2"));
        assert_eq!(name("llama-3.1-8b", "layers[1].body#31[0]").as_deref(), Some("model.layers.31"));
        assert_eq!(name("mixtral-8x7b", "layers[1].body#4[1].body[1]").as_deref(), Some("model.layers.4.mlp"));
        assert_eq!(name("vit-b-16", "layers[6].body#11[0]").as_deref(), Some("vit.encoder.layer.11"));
        assert_eq!(name("vit-b-16", "layers[9]").as_deref(), Some("classifier"));
        assert_eq!(name("roberta-base", "layers[0]").as_deref(), Some("embeddings.word_embeddings"));
        // an import: DistilBertForSequenceClassification, its encoder under `distilbert.`
        let text = include_str!("../tests/data/hf/distilbert.config.json");
        let d = crate::import::hf::from_config_json(text).unwrap();
        for key in d.names.keys() {
            assert!(layer_at(&d.layers, &key.parse().unwrap()).is_some(), "distilbert: {key}");
        }
        let named = |p: &str| full_name(&d, &p.parse().unwrap());
        assert_eq!(named("layers[4].body#5[0]").as_deref(), Some("distilbert.transformer.layer.5"));
        assert_eq!((named("layers[6]").as_deref(), named("layers[9]").as_deref()), (Some("pre_classifier"), Some("classifier")));
        assert_eq!(named("layers[7]"), None, "the ReLU is the forward's");
    }

    /// The resolved rows carry their names.
    #[test]
    fn resolved_rows_carry_their_names() {
        for id in ["resnet50", "gpt2", "mixtral-8x7b", "deepseek-v3"] {
            let s = crate::import::preset(id).unwrap();
            let r = crate::resolve::resolve(&s, Some(16), crate::lower::LowerOptions::default()).unwrap();
            assert!(r.layers.iter().filter(|l| l.name.is_some()).count() > 3, "{id}");
            for l in &r.layers {
                assert_eq!(l.name, full_name(&s, &l.path.parse().unwrap()), "{id} {}", l.path);
            }
        }
    }

    fn full(s: &ModelSpec, path: &str) -> Option<String> {
        full_name(s, &path.parse().unwrap())
    }

    #[test]
    fn rows_read_as_named_modules() {
        let relu = serde_json::json!({"kind": "relu"});
        // a ModuleList in two runs (identical layers merged into repeats), its layers numbered on
        let llama = spec(
            serde_json::json!([relu, {"kind": "repeat", "times": 5, "body": [relu]}, {"kind": "repeat", "times": 2, "body": [relu]}, relu, relu]),
            &[("layers[0]", "model.embed_tokens"), ("layers[1]", "model.layers"), ("layers[1].body[0]", ""), ("layers[2]", "model.layers"), ("layers[2].body[0]", ""), ("layers[3]", "model.norm"), ("layers[4]", "lm_head")],
        );
        assert_eq!(full(&llama, "layers[1].body#3[0]").as_deref(), Some("model.layers.3"));
        assert_eq!(full(&llama, "layers[2].body#1[0]").as_deref(), Some("model.layers.6"), "after the first run's 5");
        assert_eq!(full(&llama, "layers[1]").as_deref(), Some("model.layers"));
        assert_eq!(full(&llama, "layers[4]").as_deref(), Some("lm_head"));
        // torchvision ResNet: a stage's blocks are numbered, the residual is transparent
        let block = serde_json::json!({"kind": "sequential", "layers": [{"kind": "residual", "body": [relu], "shortcut": [relu, relu]}, relu]});
        let resnet = spec(
            serde_json::json!([{"kind": "sequential", "layers": [block, block]}, relu]),
            &[("layers[0]", "layer1"), ("layers[0].layers[0].layers[0]", ""), ("layers[0].layers[0].layers[0].body[0]", "conv1"), ("layers[0].layers[0].layers[0].shortcut[1]", "downsample.1"), ("layers[0].layers[0].layers[1]", "relu")],
        );
        assert_eq!(full(&resnet, "layers[0].layers[1].layers[0].body[0]").as_deref(), Some("layer1.1.0.0"), "unnamed: indices");
        assert_eq!(full(&resnet, "layers[0].layers[0].layers[0].body[0]").as_deref(), Some("layer1.0.conv1"));
        assert_eq!(full(&resnet, "layers[0].layers[0].layers[0].shortcut[1]").as_deref(), Some("layer1.0.downsample.1"));
        assert_eq!(full(&resnet, "layers[0].layers[0].layers[1]").as_deref(), Some("layer1.0.relu"));
        // nothing named above: the path stays; a path outside the spec is harmless
        assert_eq!(full(&resnet, "layers[1]"), None);
        assert_eq!(full(&resnet, "layers[7].body#2[3]"), None);
        assert_eq!(full(&spec(serde_json::json!([relu]), &[]), "layers[0]"), None);
    }
}
