//! The fine-tuning flags (`--finetune`, `--lora-*`, `--train-only`, `--freeze-first`,
//! `--base-format`, `--double-quant`), validated into the core's `FineTune`.

use anyhow::{anyhow, Result};
use clap::Args;
use vramcalc_core::finetune::{BaseFormat, FineTune, LossKernel, Method, NameList};

#[derive(Args)]
pub struct FineTuneArgs {
    /// full | freeze | lora | qlora
    #[arg(long, default_value = "full")]
    pub finetune: String,
    /// LoRA rank r (peft's default 8; kohya's --network_dim).
    #[arg(long, default_value_t = 8, visible_alias = "network-dim")]
    pub lora_r: u32,
    /// LoRA alpha (peft's default 8; kohya's --network_alpha; changes the scaling only, not memory).
    #[arg(long, default_value_t = 8.0, visible_alias = "network-alpha")]
    pub lora_alpha: f64,
    /// Dropout on the adapter input (peft's lora_dropout, default 0).
    #[arg(long, default_value_t = 0.0)]
    pub lora_dropout: f64,
    /// Comma-separated module names (`q_proj,v_proj`) or `all-linear` (every linear but the output
    /// head); default: peft's for the architecture.
    #[arg(long)]
    pub lora_targets: Option<String>,
    /// Comma-separated module names that stay trainable (`classifier`, `fc`, `lm_head`); the rest
    /// is frozen. Implies --finetune freeze.
    #[arg(long)]
    pub train_only: Option<String>,
    /// Freeze the input embeddings and the first K blocks. Implies --finetune freeze.
    #[arg(long)]
    pub freeze_first: Option<u64>,
    /// Comma-separated layer paths (`layers[0]`) or module names to freeze. Implies --finetune freeze.
    #[arg(long)]
    pub freeze: Option<String>,
    /// Storage of the frozen base: nf4 | fp4 | int8 (bitsandbytes, modelled) | bf16 | fp16.
    #[arg(long)]
    pub base_format: Option<String>,
    /// bitsandbytes double quantisation of the 4-bit absmax constants.
    #[arg(long)]
    pub double_quant: bool,
    /// Loss over the vocabulary: standard (HF, fp32 logits) | bf16-logits | chunked (fused
    /// linear-cross-entropy, as Liger-Kernel).
    #[arg(long, default_value = "standard")]
    pub loss: String,
}

impl FineTuneArgs {
    pub fn setup(&self) -> Result<FineTune> {
        let names = |flag: &str, v: &Option<String>| -> Result<NameList> {
            v.as_deref().map_or(Ok(NameList::EMPTY), |s| NameList::parse(s).map_err(|e| anyhow!("--{flag}: {e}")))
        };
        let method = Method::parse(&self.finetune).ok_or_else(|| {
            let all: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
            anyhow!("--finetune {:?} is not one of {}", self.finetune, all.join(", "))
        })?;
        let freezing = self.train_only.is_some() || self.freeze_first.is_some() || self.freeze.is_some();
        let method = if method == Method::Full && freezing { Method::Freeze } else { method };
        let base_format = match &self.base_format {
            None => None,
            Some(s) => Some(BaseFormat::parse(s).ok_or_else(|| {
                let all: Vec<&str> = BaseFormat::ALL.iter().map(|f| f.name()).collect();
                anyhow!("--base-format {s:?} is not one of {}", all.join(", "))
            })?),
        };
        let setup = FineTune {
            method,
            lora_r: self.lora_r,
            lora_alpha: self.lora_alpha,
            lora_dropout: self.lora_dropout,
            lora_targets: names("lora-targets", &self.lora_targets)?,
            train_only: names("train-only", &self.train_only)?,
            freeze_first: self.freeze_first,
            freeze_paths: names("freeze", &self.freeze)?,
            base_format,
            double_quant: self.double_quant,
            loss: LossKernel::parse(&self.loss).ok_or_else(|| {
                let all: Vec<&str> = LossKernel::ALL.iter().map(|k| k.name()).collect();
                anyhow!("--loss {:?} is not one of {}", self.loss, all.join(", "))
            })?,
        };
        setup.validate().map_err(|e| anyhow!(e))?;
        Ok(setup)
    }
}
