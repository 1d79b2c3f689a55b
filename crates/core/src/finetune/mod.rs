//! The fine-tuning setup: which parameters train (full, frozen parts, LoRA adapters) and how the
//! frozen base is stored (half precision or a bitsandbytes format). Plain data, `Copy` so that it
//! rides in [`crate::config::TrainConfig`]; the memory model lives in `layer/lora.rs`
//! (adapters), `layer/bnb.rs` (quantised storage) and the resolver (which parameters freeze).
//!
//! Module names follow the Hugging Face modules (`q_proj`, `query`, `lm_head`, …; see
//! [`names`]), matched the way peft matches `target_modules` (`tuners/tuners_utils.py`,
//! `check_target_module_exists`: the full name equals the key or ends with `.key`).

pub mod kohya;
pub mod names;

pub use names::{LinearRole, NameList, NameStyle};
use serde::{Deserialize, Serialize};

/// What trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// Every parameter trains (apart from layers the spec marks `"trainable": false`).
    #[default]
    Full,
    /// Part of the model is frozen (`requires_grad=False`): see `train_only`, `freeze_first`,
    /// `freeze_paths`.
    Freeze,
    /// peft LoRA adapters on the targeted linears; the whole base is frozen.
    Lora,
    /// LoRA on a bitsandbytes-quantised base (NF4 unless `base_format` says otherwise).
    Qlora,
}

/// How the frozen base's linear weights are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseFormat {
    Bf16,
    Fp16,
    /// bitsandbytes LLM.int8 (`Linear8bitLt`): int8 weights and one fp32 scale per row.
    Int8,
    /// bitsandbytes 4-bit NormalFloat (`Linear4bit`, `quant_type="nf4"`).
    Nf4,
    /// bitsandbytes 4-bit float (`quant_type="fp4"`).
    Fp4,
}

impl BaseFormat {
    pub const ALL: &'static [BaseFormat] = &[BaseFormat::Nf4, BaseFormat::Fp4, BaseFormat::Int8, BaseFormat::Bf16, BaseFormat::Fp16];
    pub fn name(self) -> &'static str {
        match self {
            BaseFormat::Bf16 => "bf16",
            BaseFormat::Fp16 => "fp16",
            BaseFormat::Int8 => "int8",
            BaseFormat::Nf4 => "nf4",
            BaseFormat::Fp4 => "fp4",
        }
    }
    pub fn parse(s: &str) -> Option<BaseFormat> {
        BaseFormat::ALL.iter().copied().find(|f| f.name() == s)
    }
    /// A bitsandbytes format (its figures are modelled from the source, not measured).
    pub fn is_quantised(self) -> bool {
        matches!(self, BaseFormat::Int8 | BaseFormat::Nf4 | BaseFormat::Fp4)
    }
}

impl Method {
    pub const ALL: &'static [Method] = &[Method::Full, Method::Freeze, Method::Lora, Method::Qlora];
    pub fn name(self) -> &'static str {
        match self {
            Method::Full => "full",
            Method::Freeze => "freeze",
            Method::Lora => "lora",
            Method::Qlora => "qlora",
        }
    }
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL.iter().copied().find(|m| m.name() == s)
    }
}

/// How the loss over the vocabulary is computed (the what-ifs against its memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LossKernel {
    /// Hugging Face's loss: logits upcast to fp32, `log_softmax` saved, its gradient.
    #[default]
    Standard,
    /// The same loss on logits kept in their half dtype (no `logits.float()`).
    Bf16Logits,
    /// A chunked, fused linear + cross-entropy (Liger-Kernel's `LigerFusedLinearCrossEntropyLoss`,
    /// Unsloth's): no `batch × seq × vocab` logits; gradients computed in the forward, chunk by chunk.
    Chunked,
}

impl LossKernel {
    pub const ALL: &'static [LossKernel] = &[LossKernel::Standard, LossKernel::Bf16Logits, LossKernel::Chunked];
    pub fn name(self) -> &'static str {
        match self {
            LossKernel::Standard => "standard",
            LossKernel::Bf16Logits => "bf16-logits",
            LossKernel::Chunked => "chunked",
        }
    }
    pub fn parse(s: &str) -> Option<LossKernel> {
        LossKernel::ALL.iter().copied().find(|k| k.name() == s)
    }
}

/// The fine-tuning setup. The default is full training (nothing changes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FineTune {
    #[serde(skip_serializing_if = "is_full")]
    pub method: Method,
    /// LoRA rank (`LoraConfig.r`, peft's default 8).
    #[serde(skip_serializing_if = "is_default_r")]
    pub lora_r: u32,
    /// `lora_alpha` (peft's default 8); only the scaling `alpha / r` depends on it, no memory.
    #[serde(skip_serializing_if = "is_default_alpha")]
    pub lora_alpha: f64,
    /// `lora_dropout` on the adapter input (peft's default 0: `nn.Identity`).
    #[serde(skip_serializing_if = "is_zero")]
    pub lora_dropout: f64,
    /// `target_modules`: module names, or `all-linear`; empty means peft's default for the
    /// architecture (`q_proj`, `v_proj` for Llama; `query`, `value` for BERT; `c_attn` for GPT-2).
    #[serde(skip_serializing_if = "NameList::is_empty")]
    pub lora_targets: NameList,
    /// Module names that stay trainable; everything else freezes (`classifier`, `fc`, `lm_head`).
    #[serde(skip_serializing_if = "NameList::is_empty")]
    pub train_only: NameList,
    /// The input embeddings and the first K blocks freeze; the rest trains.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freeze_first: Option<u64>,
    /// Layers whose spec path starts with one of these (`layers[0]`, `layers[5].body[0]`) or whose
    /// module name matches freeze.
    #[serde(skip_serializing_if = "NameList::is_empty")]
    pub freeze_paths: NameList,
    /// Storage of the frozen base's linear weights; `None`: the `--precision` dtype (QLoRA: nf4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_format: Option<BaseFormat>,
    /// bitsandbytes `bnb_4bit_use_double_quant`: the 4-bit absmax constants quantised again.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub double_quant: bool,
    /// The loss kernel over the vocabulary.
    #[serde(skip_serializing_if = "is_standard")]
    pub loss: LossKernel,
}

fn is_full(m: &Method) -> bool {
    *m == Method::Full
}
fn is_default_r(r: &u32) -> bool {
    *r == 8
}
fn is_default_alpha(a: &f64) -> bool {
    *a == 8.0
}
fn is_zero(p: &f64) -> bool {
    *p == 0.0
}
fn is_standard(k: &LossKernel) -> bool {
    *k == LossKernel::Standard
}

impl Default for FineTune {
    fn default() -> Self {
        FineTune {
            method: Method::Full,
            lora_r: 8,
            lora_alpha: 8.0,
            lora_dropout: 0.0,
            lora_targets: NameList::EMPTY,
            train_only: NameList::EMPTY,
            freeze_first: None,
            freeze_paths: NameList::EMPTY,
            base_format: None,
            double_quant: false,
            loss: LossKernel::Standard,
        }
    }
}

impl FineTune {
    /// Full training with nothing frozen: the setup every estimate had before fine-tuning.
    pub fn is_default(&self) -> bool {
        *self == FineTune::default()
    }

    /// LoRA adapters are attached (LoRA or QLoRA).
    pub fn has_adapters(&self) -> bool {
        matches!(self.method, Method::Lora | Method::Qlora)
    }

    /// The base format in effect for the frozen linears (`None`: the parameter dtype).
    pub fn quant_format(&self) -> Option<BaseFormat> {
        match (self.method, self.base_format) {
            (Method::Qlora, None) => Some(BaseFormat::Nf4),
            (Method::Full, _) => None,
            (_, f) => f,
        }
    }

    /// Checks the numbers; the error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        if self.has_adapters() && self.lora_r == 0 {
            return Err("--lora-r (LoRA rank) must be at least 1".into());
        }
        if !(0.0..1.0).contains(&self.lora_dropout) {
            return Err(format!("--lora-dropout must be in [0, 1), got {}", self.lora_dropout));
        }
        if !self.lora_alpha.is_finite() || self.lora_alpha <= 0.0 {
            return Err(format!("--lora-alpha must be a positive number, got {}", self.lora_alpha));
        }
        if self.double_quant && !matches!(self.quant_format(), Some(BaseFormat::Nf4 | BaseFormat::Fp4)) {
            return Err("--double-quant applies to a 4-bit base (--base-format nf4 or fp4)".into());
        }
        if self.method == Method::Full && (!self.train_only.is_empty() || self.freeze_first.is_some() || !self.freeze_paths.is_empty()) {
            return Err("--train-only / --freeze-first / freeze paths need --finetune freeze".into());
        }
        if self.has_adapters() && (!self.train_only.is_empty() || self.freeze_first.is_some() || !self.freeze_paths.is_empty()) {
            return Err("--train-only / --freeze-first / freeze paths with LoRA (peft's modules_to_save) are not modelled: LoRA freezes the whole base".into());
        }
        if self.method == Method::Full && self.base_format.is_some() {
            return Err("--base-format needs --finetune freeze, lora or qlora (the base is what is frozen)".into());
        }
        if self.method == Method::Freeze && self.train_only.is_empty() && self.freeze_first.is_none() && self.freeze_paths.is_empty() {
            return Err("--finetune freeze needs --train-only NAMES, --freeze-first K or freeze paths".into());
        }
        Ok(())
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_setting() {
        let err = |ft: FineTune| ft.validate().unwrap_err();
        assert!(err(FineTune { method: Method::Lora, lora_r: 0, ..FineTune::default() }).contains("--lora-r"));
        assert!(err(FineTune { lora_dropout: 1.0, ..FineTune::default() }).contains("--lora-dropout"));
        assert!(err(FineTune { lora_alpha: f64::NAN, ..FineTune::default() }).contains("--lora-alpha"));
        assert!(err(FineTune { base_format: Some(BaseFormat::Nf4), ..FineTune::default() }).contains("--base-format"));
        let only = NameList::parse("lm_head").unwrap();
        assert!(err(FineTune { method: Method::Lora, train_only: only, ..FineTune::default() }).contains("modules_to_save"));
        assert!(err(FineTune { method: Method::Freeze, ..FineTune::default() }).contains("--freeze-first"));
        assert!(FineTune { method: Method::Qlora, double_quant: true, ..FineTune::default() }.validate().is_ok());
        assert_eq!(FineTune { method: Method::Qlora, ..FineTune::default() }.quant_format(), Some(BaseFormat::Nf4));
        // the default serialises to nothing (share links and saved state stay as they were)
        assert_eq!(serde_json::to_string(&FineTune::default()).unwrap(), "{}");
    }
}
