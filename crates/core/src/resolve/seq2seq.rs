//! `generate()` of an encoder–decoder (BART, T5, Whisper: the encoder's layers, a `token_input`,
//! the decoder's layers with `cross_attention`), as transformers 5.24's `generate()` runs it
//! (`generation/utils.py`):
//!
//! * before the first forward `_prepare_encoder_decoder_kwargs_for_generation` runs the encoder
//!   on the source and keeps its output in `model_kwargs["encoder_outputs"]` to the end of
//!   `generate()`; the decoder starts from `[[decoder_start_token_id]]`
//!   (`_prepare_decoder_input_ids_for_generation`) and every forward feeds it one token. So the
//!   prefill lowers the encoder as outside generation (nothing cached), then the decoder on one
//!   token, its cross-attention layers projecting the encoder output's keys and values into the
//!   `EncoderDecoderCache`'s cross-attention cache (`layer/kv_cache.rs::cross_cache`);
//! * a decode step runs the decoder alone (`encoder_outputs` given, the encoder skipped): the
//!   encoder's weights stay resident (one parameter of their count; its first embedding is the one
//!   the decoder and the head tie to), and so does its output, held through the step.

use super::{List, Resolver};
use crate::error::Result;
use crate::graph::ValueId;
use crate::layer::seq2seq::TokenInput;
use crate::lower::{Builder, LowerOptions};
use crate::path::LayerPath;
use crate::spec::Layer;
use crate::units::Shape;

impl Resolver {
    /// The lowering of `list` in a generation forward of an encoder–decoder (`None`: not one).
    pub(super) fn encoder_decoder_generation(&mut self, list: &List, x: ValueId) -> Result<Option<ValueId>> {
        let Some(step) = self.b.opts.generation else { return Ok(None) };
        if list.depth > 0 {
            return Ok(None);
        }
        let Some(k) = list.layers.iter().position(|l| matches!(l, Layer::TokenInput(t) if !t.prompt)) else { return Ok(None) };
        // (`ModelSpec::encoder_decoder`; the list here is the spec's layers up to the LM head)
        if !list.layers[k..].iter().any(|l| l.any(&|l| matches!(l, Layer::CrossAttention(_)))) {
            return Ok(None);
        }
        let memory = if step.is_prefill() {
            self.b.opts.generation = None;
            let first = self.b.g.ops.len();
            let encoded = self.encoder(list, k, x);
            self.b.opts.generation = Some(step);
            // `BartEncoder.forward`'s `inputs_embeds` and `embed_pos` (`T5Stack`'s
            // `inputs_embeds`): locals until it returns
            let embeds: Vec<ValueId> = self.b.g.ops[first..].iter().filter(|o| o.name == "embedding").flat_map(|o| o.outputs.clone()).collect();
            for v in embeds {
                self.b.hold(v);
            }
            encoded?
        } else {
            self.encoder_weights(&list.layers[..k], x)?
        };
        // `encoder_outputs`: referenced until `generate()` returns
        self.b.forward_locals.push(memory);
        let start = Layer::TokenInput(TokenInput { seq_len: 1, prompt: false, token_type_ids: false });
        let ids = self.layer(&start, memory, &list.parent.child_in_repetition(list.slot.clone(), list.repetition, k), list.depth)?;
        self.run(list, k + 1..list.layers.len(), ids).map(Some)
    }

    /// The encoder, `list.layers[..k]`, outside generation. Its stack is a loop
    /// (`for encoder_layer in self.layers: hidden_states = encoder_layer(hidden_states, ...)`),
    /// not a module: the stack's input lives through its first layer (the repetition's hold),
    /// not to the stack's end as a module's input would (`Resolver::layer`'s hold, dropped here).
    fn encoder(&mut self, list: &List, k: usize, mut x: ValueId) -> Result<ValueId> {
        for i in 0..k {
            let held = self.b.g.holds.len();
            let input = self.b.g.storage_of(x);
            x = self.run(list, i..i + 1, x)?;
            if matches!(list.layers[i], Layer::Repeat { .. }) {
                // the module's hold is the last one made of its input (after the repetitions')
                let last = self.b.g.ops.len().saturating_sub(1) as u32;
                if let Some(j) = self.b.g.holds[held..].iter().rposition(|&h| h == (input, last)) {
                    self.b.g.holds.remove(held + j);
                }
            }
        }
        Ok(x)
    }

    /// A decode step: the encoder's weights (`layers` lowered aside on `x`'s shape, for their
    /// sizes only) and its output, an input of the step.
    fn encoder_weights(&mut self, layers: &[Layer], x: ValueId) -> Result<ValueId> {
        let mut aside = Resolver::new(Builder::new(LowerOptions { training: false, generation: None, sequence_parallel: 1, ..self.b.opts }));
        let input = aside.b.input(self.b.shape(x).clone(), self.b.dtype(x));
        let list = List { layers, parent: &LayerPath::default(), slot: &crate::path::Slot::Layers, repetition: None, depth: 0 };
        let out = aside.run(&list, 0..layers.len(), input)?;
        let mut numel = aside.b.param_numel;
        // the shared embedding (BART's, T5's): the decoder's and the head's `tied_weight` read it
        if let Some(w) = aside.b.tied_embedding {
            let shape = aside.b.shape(w).clone();
            numel = numel.saturating_sub(shape.numel());
            self.b.tied_embedding = Some(self.b.param(shape));
        }
        self.b.param(Shape::new([numel]));
        Ok(self.b.input(aside.b.shape(out).clone(), aside.b.dtype(out)))
    }
}
