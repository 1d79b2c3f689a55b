//! Fine-tuning what-ifs: LoRA instead of full training, QLoRA instead of LoRA, and the loss
//! kernels against the fp32 loss over the vocabulary (which the reference data shows is a
//! median 35 % of a LoRA step's peak). Listed apart from [`super::Trick`] so that the app's
//! exhaustive match on `Trick` keeps compiling until its panel shows these.

use crate::config::{Mode, Precision, TrainConfig};
use crate::error::Result;
use crate::finetune::{BaseFormat, LossKernel, Method};
use crate::memory::Prepared;
use crate::spec::{Layer, Loss, ModelSpec};
use serde::Serialize;

/// One fine-tuning trick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FineTuneTrick {
    /// LoRA r=16 (alpha 32) on the setup's targets instead of training every parameter.
    LoraR16,
    /// The same LoRA on an NF4 (bitsandbytes) base.
    Qlora,
    /// A chunked, fused linear-cross-entropy loss (Liger-Kernel, Unsloth).
    ChunkedLoss,
    /// The loss on logits kept in their half dtype.
    Bf16Logits,
}

impl FineTuneTrick {
    pub const ALL: [FineTuneTrick; 4] = [FineTuneTrick::LoraR16, FineTuneTrick::Qlora, FineTuneTrick::ChunkedLoss, FineTuneTrick::Bf16Logits];

    pub fn id(self) -> &'static str {
        match self {
            FineTuneTrick::LoraR16 => "lora-r16",
            FineTuneTrick::Qlora => "qlora",
            FineTuneTrick::ChunkedLoss => "chunked-loss",
            FineTuneTrick::Bf16Logits => "bf16-logits",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            FineTuneTrick::LoraR16 => "LoRA r=16 instead of full fine-tuning",
            FineTuneTrick::Qlora => "QLoRA (NF4 base) instead of LoRA",
            FineTuneTrick::ChunkedLoss => "chunked linear-cross-entropy (Liger)",
            FineTuneTrick::Bf16Logits => "logits kept in half precision",
        }
    }
}

/// A fine-tuning trick applied to a setup, and the peak it gives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FineTuneWhatIf {
    pub trick: FineTuneTrick,
    pub config: TrainConfig,
    pub peak: u64,
    pub device_total: u64,
    /// Trainable parameters with the trick.
    pub trainable_params: u64,
}

/// The setup with `trick` applied, or `None` where it does not apply.
pub fn apply(trick: FineTuneTrick, spec: &ModelSpec, c: &TrainConfig) -> Option<TrainConfig> {
    if c.mode != Mode::Train {
        return None;
    }
    let mut n = *c;
    let ft = &mut n.finetune;
    let lm_head_last = matches!(spec.layers.last(), Some(Layer::Linear(_)));
    match trick {
        FineTuneTrick::LoraR16 => {
            if ft.has_adapters() {
                return None;
            }
            *ft = crate::finetune::FineTune { method: Method::Lora, lora_r: 16, lora_alpha: 32.0, loss: ft.loss, lora_targets: if ft.lora_targets.is_empty() { crate::resolve::proposed_lora_targets(spec) } else { ft.lora_targets }, ..Default::default() };
        }
        FineTuneTrick::Qlora => {
            if ft.method != Method::Lora || ft.quant_format().is_some_and(BaseFormat::is_quantised) {
                return None;
            }
            ft.method = Method::Qlora;
            ft.base_format = Some(BaseFormat::Nf4);
        }
        FineTuneTrick::ChunkedLoss => {
            if ft.loss == LossKernel::Chunked || !lm_head_last || !matches!(spec.loss, Loss::CausalLm | Loss::CrossEntropy) {
                return None;
            }
            ft.loss = LossKernel::Chunked;
        }
        FineTuneTrick::Bf16Logits => {
            if ft.loss != LossKernel::Standard || spec.loss != Loss::CausalLm || !matches!(c.precision, Precision::Bf16 | Precision::Fp16) {
                return None;
            }
            ft.loss = LossKernel::Bf16Logits;
        }
    }
    Some(n)
}

/// Every applicable fine-tuning trick with its result (a LoRA that wraps nothing is left out).
pub fn what_ifs(spec: &ModelSpec, config: &TrainConfig) -> Result<Vec<FineTuneWhatIf>> {
    let (base_peak, base_total) = Prepared::new(spec, config)?.peak_at(config.batch);
    Ok(FineTuneTrick::ALL
        .iter()
        .filter_map(|&trick| {
            let cfg = apply(trick, spec, config)?;
            let p = Prepared::new(spec, &cfg).ok()?;
            let e = p.estimate();
            if cfg.finetune.has_adapters() && e.breakdown.adapter_parameters == 0 {
                return None;
            }
            // a change that saves nothing is not offered as a saving
            (e.peak_bytes < base_peak || e.device_total_bytes < base_total)
                .then_some(FineTuneWhatIf { trick, config: cfg, peak: e.peak_bytes, device_total: e.device_total_bytes, trainable_params: e.trainable_params })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama() -> ModelSpec {
        let cfg = serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 512,
            "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 1376, "vocab_size": 32000});
        crate::import::hf::from_config(cfg.as_object().unwrap()).unwrap()
    }

    #[test]
    fn fine_tuning_tricks_save_memory() {
        let spec = llama();
        let full = TrainConfig { batch: 4, seq_len: Some(512), precision: Precision::Bf16, ..TrainConfig::default() };
        let base = crate::estimate(&spec, &full).unwrap().peak_bytes;
        let w = what_ifs(&spec, &full).unwrap();
        let ids: Vec<_> = w.iter().map(|w| w.trick).collect();
        assert_eq!(ids, [FineTuneTrick::LoraR16, FineTuneTrick::ChunkedLoss, FineTuneTrick::Bf16Logits]);
        for t in &w {
            assert!(t.peak < base, "{:?}: {} ≥ {base}", t.trick, t.peak);
        }
        // on the LoRA setup, QLoRA applies; here the fp32 hidden states of a model prepared by
        // `prepare_model_for_kbit_training` cost more than its small base saves: not offered
        let lora = w[0].config;
        let lora_peak = w[0].peak;
        let w = what_ifs(&spec, &lora).unwrap();
        assert!(apply(FineTuneTrick::Qlora, &spec, &lora).is_some());
        assert!(w.iter().all(|w| w.trick != FineTuneTrick::Qlora));
        // where the base dominates (deep, small vocabulary, one short sequence), it saves
        let deep = crate::import::hf::from_config(serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2816,
            "vocab_size": 1000}).as_object().unwrap()).unwrap();
        let short = TrainConfig { batch: 1, seq_len: Some(64), ..lora };
        let q = what_ifs(&deep, &short).unwrap().into_iter().find(|w| w.trick == FineTuneTrick::Qlora).unwrap();
        assert!(q.peak < crate::estimate(&deep, &short).unwrap().peak_bytes);
        assert_eq!(q.trainable_params, crate::estimate(&deep, &short).unwrap().trainable_params);
        // the chunked loss removes the b·s·V logits: more than the fp32 log-probabilities' size
        let c = w.iter().find(|w| w.trick == FineTuneTrick::ChunkedLoss).unwrap();
        assert!(lora_peak - c.peak > 4 * 512 * 32000 * 4, "{lora_peak} → {}", c.peak);
    }
}
