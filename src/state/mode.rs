//! The setup's mode (issue 23): what the page answers — training, fine-tuning, inference,
//! generation or vLLM serving — and which settings and length fields apply to it.
//!
//! One source of truth: the mode is read from the typed state, never stored beside it. The core's
//! `TrainConfig` says the step (`mode`, `finetune.method`), and [`Engine`] says who runs it (the
//! one thing the config cannot say: PyTorch's step, or vLLM's server). So undo/redo, saved work
//! and share links carry the mode with the settings, and a link made before the mode existed
//! opens in the mode its settings imply (`m=generate` generates, a `finetune` key fine-tunes).
//!
//! Room for more: a mode is a row of [`SetupMode::ALL`] with its [`Engine`] and its
//! [`Length`]s. `local` (llama.cpp, GGUF) and `pipeline` (diffusers) join as an engine each.

use serde::{Deserialize, Serialize};
use vramcalc_core::finetune::{FineTune, Method};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::whatif::finetune::{self as ft, FineTuneTrick};
use vramcalc_core::{Mode, TrainConfig};

/// Who runs the setup. PyTorch's step is every mode's but serving's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// The simulated PyTorch step (training, `model.eval()` forward, `generate()`).
    #[default]
    Pytorch,
    /// vLLM's server (`serve::capacity`): its paged KV pool on what the weights leave.
    Vllm,
}

impl Engine {
    pub fn is_default(&self) -> bool {
        *self == Engine::Pytorch
    }
}

/// The setup panel's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetupMode {
    /// Full training (every parameter trains).
    Train,
    /// Fine-tuning: frozen parts, LoRA or QLoRA adapters.
    FineTune,
    /// One `model.eval()` forward under `torch.no_grad()`.
    Infer,
    /// `model.generate()`: prefill, then a decode step per new token.
    Generate,
    /// vLLM serving a language model.
    Serve,
}

/// A length (or count) the mode's setup is sized by, each with one field in the panel and one
/// home in the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// `TrainConfig::seq_len` (the model's own when unset).
    Seq,
    /// `generate.prompt_len` (the sequence length when unset: shown as such).
    Prompt,
    /// `generate.new_tokens`.
    NewTokens,
    /// vLLM's `max_model_len`: `TrainConfig::seq_len`, read as the context.
    Context,
    /// vLLM's sequences held at once: `TrainConfig::batch`, read as the concurrency.
    Concurrency,
}

impl SetupMode {
    pub const ALL: [SetupMode; 5] = [SetupMode::Train, SetupMode::FineTune, SetupMode::Infer, SetupMode::Generate, SetupMode::Serve];

    /// The select's value (and the test ids' spelling).
    pub fn name(self) -> &'static str {
        match self {
            SetupMode::Train => "train",
            SetupMode::FineTune => "finetune",
            SetupMode::Infer => "infer",
            SetupMode::Generate => "generate",
            SetupMode::Serve => "serve",
        }
    }

    pub fn parse(s: &str) -> Option<SetupMode> {
        SetupMode::ALL.into_iter().find(|m| m.name() == s)
    }

    /// The mode of a setup: vLLM's engine serves; PyTorch's step trains (fine-tunes when a
    /// method other than full training is chosen), infers or generates.
    pub fn of(config: &TrainConfig, engine: Engine) -> SetupMode {
        match (engine, config.mode) {
            (Engine::Vllm, _) => SetupMode::Serve,
            (Engine::Pytorch, Mode::Train) if config.finetune.method != Method::Full => SetupMode::FineTune,
            (Engine::Pytorch, Mode::Train) => SetupMode::Train,
            (Engine::Pytorch, Mode::Infer) => SetupMode::Infer,
            (Engine::Pytorch, Mode::Generate) => SetupMode::Generate,
        }
    }

    /// Whether the mode applies to the model: generation needs what the core can generate from
    /// (token ids in, or an image model with gated cross-attention text layers); serving needs
    /// a language model (token ids in).
    pub fn applies_to(self, spec: &ModelSpec) -> bool {
        match self {
            SetupMode::Generate => spec.can_generate(),
            SetupMode::Serve => spec.is_token_input(),
            _ => true,
        }
    }

    /// The engine the mode runs on.
    pub fn engine(self) -> Engine {
        match self {
            SetupMode::Serve => Engine::Vllm,
            _ => Engine::Pytorch,
        }
    }

    /// The length fields the mode shows, in order (the batch field is always shown; serving
    /// reads it as the concurrency).
    pub fn lengths(self) -> &'static [Length] {
        match self {
            SetupMode::Train | SetupMode::FineTune | SetupMode::Infer => &[Length::Seq],
            SetupMode::Generate => &[Length::Prompt, Length::NewTokens],
            SetupMode::Serve => &[Length::Context, Length::Concurrency],
        }
    }

    /// Whether the mode trains (optimizer, accumulation, checkpointing apply).
    pub fn trains(self) -> bool {
        matches!(self, SetupMode::Train | SetupMode::FineTune)
    }

    /// `c` switched to this mode: the step's mode, and for fine-tuning a method (LoRA r=16 on a
    /// model with linear layers, as the what-if sets it; freezing otherwise); full
    /// training clears the method (keeping the loss kernel, a full-training trick too). Every
    /// other setting stays, so switching back and forth loses nothing the mode does not own.
    pub fn apply(self, spec: &ModelSpec, c: &TrainConfig) -> TrainConfig {
        let mut n = *c;
        match self {
            SetupMode::Train => {
                n.mode = Mode::Train;
                if n.finetune.method != Method::Full {
                    n.finetune = FineTune { loss: c.finetune.loss, ..FineTune::default() };
                }
            }
            SetupMode::FineTune => {
                n.mode = Mode::Train;
                if n.finetune.method == Method::Full {
                    n.finetune = match ft::apply(FineTuneTrick::LoraR16, spec, &n) {
                        Some(lora) => lora.finetune,
                        None => FineTune { method: Method::Freeze, ..n.finetune },
                    };
                }
            }
            SetupMode::Infer | SetupMode::Serve => n.mode = Mode::Infer,
            SetupMode::Generate => n.mode = Mode::Generate,
        }
        n
    }
}

/// The length the model's forward runs at, as the input shape shows it: the prompt when
/// generating (its own field), else the sequence (`None`: the model takes no sequence).
pub fn running_len(spec: &ModelSpec, c: &TrainConfig) -> Option<u64> {
    let seq = spec.seq_len(c.seq_len);
    match c.mode {
        Mode::Generate => c.generate.prompt_len.or(seq),
        _ => seq,
    }
}

/// `c` with the running length set to `len`: the prompt when generating with a prompt of its
/// own, else the sequence length (so the field shown and the length used are one value).
pub fn with_running_len(c: &TrainConfig, len: u64) -> TrainConfig {
    let mut n = *c;
    if c.mode == Mode::Generate && c.generate.prompt_len.is_some() {
        n.generate.prompt_len = Some(len);
    } else {
        n.seq_len = Some(len);
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama() -> ModelSpec {
        vramcalc_core::presets::build("gpt2").unwrap()
    }

    #[test]
    fn every_mode_reads_back_from_the_state_it_sets() {
        let spec = llama();
        let base = TrainConfig::default();
        for m in SetupMode::ALL {
            let c = m.apply(&spec, &base);
            assert_eq!(SetupMode::of(&c, m.engine()), m, "{m:?}");
            assert_eq!(SetupMode::parse(m.name()), Some(m));
            // and from every other mode
            for from in SetupMode::ALL {
                let start = from.apply(&spec, &base);
                assert_eq!(SetupMode::of(&m.apply(&spec, &start), m.engine()), m, "{from:?} → {m:?}");
            }
        }
        assert_eq!(SetupMode::parse("local"), None);
    }

    #[test]
    fn fine_tuning_starts_with_lora_and_full_training_keeps_the_loss_kernel() {
        let spec = llama();
        let c = SetupMode::FineTune.apply(&spec, &TrainConfig::default());
        assert_eq!((c.finetune.method, c.finetune.lora_r), (Method::Lora, 16));
        // a QLoRA setup stays QLoRA when fine-tuning is picked again
        let q = TrainConfig { finetune: FineTune { method: Method::Qlora, ..c.finetune }, ..c };
        assert_eq!(SetupMode::FineTune.apply(&spec, &q).finetune.method, Method::Qlora);
        let chunked = TrainConfig { finetune: FineTune { loss: vramcalc_core::finetune::LossKernel::Chunked, ..q.finetune }, ..q };
        let full = SetupMode::Train.apply(&spec, &chunked);
        assert_eq!((full.finetune.method, full.finetune.loss), (Method::Full, vramcalc_core::finetune::LossKernel::Chunked));
        // a CNN fine-tunes too (LoRA on its classifier, as peft would)
        let cnn = vramcalc_core::presets::build("resnet18").unwrap();
        let c = SetupMode::FineTune.apply(&cnn, &TrainConfig::default());
        assert_eq!(SetupMode::of(&c, Engine::Pytorch), SetupMode::FineTune);
        assert!(!SetupMode::Serve.applies_to(&cnn) && SetupMode::Infer.applies_to(&cnn));
    }

    /// Llama 3.2 Vision takes an image in and generates text through its cross-attention
    /// layers: generate applies (the core simulates it), vLLM serving of it does not.
    #[test]
    fn an_image_model_with_cross_attention_generates_but_is_not_served() {
        let mllama = vramcalc_core::import::hf::from_config_json(r#"{"model_type": "mllama"}"#).unwrap();
        assert!(!mllama.is_token_input());
        assert!(SetupMode::Generate.applies_to(&mllama) && !SetupMode::Serve.applies_to(&mllama));
        let cnn = vramcalc_core::presets::build("resnet18").unwrap();
        assert!(!SetupMode::Generate.applies_to(&cnn));
    }

    #[test]
    fn each_mode_has_its_own_length_fields() {
        assert_eq!(SetupMode::Train.lengths(), [Length::Seq]);
        assert_eq!(SetupMode::Generate.lengths(), [Length::Prompt, Length::NewTokens]);
        assert_eq!(SetupMode::Serve.lengths(), [Length::Context, Length::Concurrency]);
        assert!(SetupMode::ALL.iter().all(|m| !(m.lengths().contains(&Length::Seq) && m.lengths().contains(&Length::Prompt))));
    }

    #[test]
    fn the_running_length_is_the_prompt_when_generating() {
        let spec = llama();
        let g = SetupMode::Generate.apply(&spec, &TrainConfig { seq_len: Some(512), ..TrainConfig::default() });
        assert_eq!(running_len(&spec, &g), Some(512), "no prompt of its own: the sequence");
        let set = with_running_len(&g, 300);
        assert_eq!((set.seq_len, set.generate.prompt_len), (Some(300), None));
        let own = TrainConfig { generate: vramcalc_core::GenerateConfig { prompt_len: Some(128), ..g.generate }, ..g };
        assert_eq!(running_len(&spec, &own), Some(128));
        let set = with_running_len(&own, 64);
        assert_eq!((set.seq_len, set.generate.prompt_len), (Some(512), Some(64)));
        assert_eq!(running_len(&spec, &set), Some(64));
    }
}
