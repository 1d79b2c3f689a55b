//! What the decoder importers share (`hf.rs`'s LLaMA, `hf/dense.rs`, `hf_moe.rs`): transformers'
//! module names of a decoder and the default sequence length.

/// Default sequence length of imported decoders: their context, at most this.
pub const MAX_DEFAULT_SEQ_LEN: u64 = 4096;

/// The transformers module names of a decoder's embedding, layers, final norm and head (of the
/// `…ForCausalLM` class; a base model's are the same without the first part).
#[derive(Clone, Copy)]
pub(crate) struct DecoderModules {
    pub embed: &'static str,
    pub layers: &'static str,
    pub norm: &'static str,
    pub head: &'static str,
}

/// LLaMA's and the families built like it (`modeling_llama.py`: `model.embed_tokens`, …).
pub(crate) const LLAMA_MODULES: DecoderModules =
    DecoderModules { embed: "model.embed_tokens", layers: "model.layers", norm: "model.norm", head: "lm_head" };

impl DecoderModules {
    /// Names a decoder laid out as its embedding at 0, its layers' `ModuleList` in the `repeat`s
    /// at `runs` (each repetition one layer), its final norm at `norm` and its head at `head`.
    /// Without a head it is the base model, the causal LM's inner module: its names lose the first
    /// part (`model.`).
    pub(crate) fn names(self, runs: std::ops::Range<usize>, norm: Option<usize>, head: Option<usize>) -> crate::layer_names::LayerNames {
        use crate::layer_names::{name_module_list, name_top};
        let own = |n: &'static str| if head.is_some() { n } else { n.split_once('.').map_or(n, |(_, rest)| rest) };
        let mut names = Default::default();
        name_top(&mut names, 0, own(self.embed));
        for i in runs {
            name_module_list(&mut names, i, own(self.layers));
        }
        if let Some(i) = norm {
            name_top(&mut names, i, own(self.norm));
        }
        if let Some(i) = head {
            name_top(&mut names, i, self.head);
        }
        names
    }
}
