//! `generate()` of an image-text model whose spec embeds the prompt before the tower
//! (`token_input`, the embedding, `image_input`, the tower, `image_tokens`, the decoder: the order
//! of the model's own forward, `layer/vision.rs`). transformers 5.24's `generate()` runs another
//! order (`generation/utils.py`):
//!
//! * before the prefill, `_prepare_multimodal_encoder_kwargs_for_generation` runs the tower
//!   (`get_image_features(pixel_values, image_grid_thw)`) and keeps its output in
//!   `model_kwargs["mm_encoder_outputs"]` to the end of `generate()`; the prefill forward then
//!   embeds the prompt and writes the image rows from it. So the prefill lowers the tower first
//!   (nothing cached: its layers run as outside generation), then the prompt, then the rest;
//! * a decode step gets neither `pixel_values` nor `mm_encoder_outputs`
//!   (`MULTIMODAL_INPUTS_TO_DROP_OUTSIDE_PREFILL`): no tower, no image rows; the tower's weights
//!   stay resident (one parameter of their count, as `layer/tiled_vision.rs` holds Llama 3.2
//!   Vision's), and so do the outputs it kept (`keep`), held through the step.

use super::{List, Resolver};
use crate::error::{Error, Result};
use crate::graph::{Storage, StorageClass, ValueId};
use crate::lower::{Builder, LowerOptions};
use crate::path::LayerPath;
use crate::spec::Layer;
use crate::units::Shape;

impl Resolver {
    /// The lowering of `list` in a generation forward of an image-text model (`None`: not one).
    pub(super) fn image_text_generation(&mut self, list: &List, x: ValueId) -> Result<Option<ValueId>> {
        let Some(step) = self.b.opts.generation else { return Ok(None) };
        let Some(k) = list.layers.iter().position(|l| matches!(l, Layer::ImageInput(_))) else { return Ok(None) };
        let Some(t) = list.layers[k..].iter().position(|l| matches!(l, Layer::ImageTokens(_))).map(|n| k + n) else { return Ok(None) };
        let end = list.layers.len();
        if step.is_prefill() {
            self.b.opts.generation = None;
            let image = self.run(list, k + 1..t, x);
            self.b.opts.generation = Some(step);
            // `token_input` sets the image tokens aside as the memory: `image_tokens` reads them there
            let embeds = self.run(list, 0..k, image?)?;
            return self.run(list, t..end, embeds).map(Some);
        }
        let embeds = self.run(list, 0..k, x)?;
        self.tower_weights(&list.layers[k + 1..t])?;
        self.run(list, t + 1..end, embeds).map(Some)
    }

    /// A decode step: the tower's weights and kept outputs, no op (`layers` lowered aside on the
    /// image the `token_input` set aside, for their sizes only).
    fn tower_weights(&mut self, layers: &[Layer]) -> Result<()> {
        let image = self.b.memory.take().ok_or_else(|| Error::Config("image_input needs a `token_input` before it".into()))?;
        let mut aside = Resolver::new(Builder::new(LowerOptions { training: false, generation: None, sequence_parallel: 1, ..self.b.opts }));
        let input = aside.b.input(self.b.shape(image).clone(), self.b.dtype(image));
        let list = List { layers, parent: &LayerPath::default(), slot: &crate::path::Slot::Layers, repetition: None, depth: 0 };
        aside.run(&list, 0..layers.len(), input)?;
        self.b.param(Shape::new([aside.b.param_numel]));
        for v in std::mem::take(&mut aside.b.forward_locals) {
            let bytes = aside.b.g.values[v as usize].bytes();
            self.b.g.storages.push(Storage { bytes, class: StorageClass::Input });
        }
        self.b.prompt_aside = false;
        Ok(())
    }
}
