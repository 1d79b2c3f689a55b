//! A peft + bitsandbytes + transformers snippet for a fine-tuning setup: `BitsAndBytesConfig`
//! (a quantised base), `LoraConfig` (adapters) and `TrainingArguments` (batch, accumulation,
//! checkpointing, precision, optimizer, the loss kernel), with the names those libraries use
//! (`transformers/utils/quantization_config.py`, `peft/tuners/lora/config.py`,
//! `transformers/training_args.py`: `OptimizerNames`).

use crate::config::{OptimizerImpl, OptimizerKind, Precision, TrainConfig};
use crate::error::{Error, Result};
use crate::finetune::{BaseFormat, LossKernel, Method};
use std::fmt::Write;

/// `TrainingArguments.optim` for the setup's optimizer (`OptimizerNames`).
pub fn optim_name(c: &TrainConfig) -> Result<&'static str> {
    Ok(match (c.optimizer, c.optimizer_impl) {
        (OptimizerKind::Adamw | OptimizerKind::Adam, OptimizerImpl::Fused) => "adamw_torch_fused",
        (OptimizerKind::Adamw | OptimizerKind::Adam, _) => "adamw_torch",
        (OptimizerKind::Adam8bit, _) => "adamw_bnb_8bit",
        (OptimizerKind::PagedAdamw8bit, _) => "paged_adamw_8bit",
        (OptimizerKind::Adafactor, _) => "adafactor",
        (OptimizerKind::Sgd | OptimizerKind::SgdMomentum, _) => "sgd",
        (OptimizerKind::Adagrad, _) => "adagrad",
        (OptimizerKind::Rmsprop | OptimizerKind::RmspropCentered, _) => "rmsprop",
        (k, _) => return Err(Error::Config(format!("TrainingArguments has no optim for {k}"))),
    })
}

fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// The snippet for `model_id` under `c` (a training setup). Pure bf16/fp16 (`--precision bf16`)
/// loads the model in that dtype; AMP (`amp-bf16`) keeps fp32 weights and sets `bf16=True`.
pub fn peft_snippet(model_id: &str, c: &TrainConfig) -> Result<String> {
    if c.mode != crate::config::Mode::Train {
        return Err(Error::Config("the peft snippet is for training setups (--mode train)".into()));
    }
    let ft = &c.finetune;
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(w, "# vramcalc: the setup of this estimate, in peft / transformers terms");
    let _ = writeln!(w, "import torch");
    let _ = writeln!(w, "from transformers import AutoModelForCausalLM, BitsAndBytesConfig, TrainingArguments");
    if ft.has_adapters() {
        let _ = writeln!(w, "from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training");
    }
    let _ = writeln!(w);
    let dtype = match c.precision {
        Precision::Bf16 | Precision::AmpBf16 if ft.method == Method::Qlora => "torch.bfloat16",
        Precision::Bf16 => "torch.bfloat16",
        Precision::Fp16 => "torch.float16",
        _ => "torch.float32",
    };
    let quant = ft.quant_format().filter(|f| f.is_quantised());
    if let Some(f) = quant {
        let compute = if matches!(c.precision, Precision::Fp16 | Precision::AmpFp16) { "torch.float16" } else { "torch.bfloat16" };
        bnb_config_lines(w, f, ft.double_quant, compute);
    }
    let _ = writeln!(w, "model = AutoModelForCausalLM.from_pretrained(");
    let _ = writeln!(w, "    \"{model_id}\",");
    let _ = writeln!(w, "    torch_dtype={dtype},");
    if quant.is_some() {
        let _ = writeln!(w, "    quantization_config=bnb_config,");
    }
    let _ = writeln!(w, ")");
    if ft.has_adapters() {
        if quant.is_some() {
            let _ = writeln!(w, "model = prepare_model_for_kbit_training(model, use_gradient_checkpointing={})", py_bool(c.checkpointing));
        }
        lora_config_lines(w, ft);
        let _ = writeln!(w, "model = get_peft_model(model, lora_config)");
    }
    let micro = c.micro_batch();
    if let Some(s) = c.seq_len {
        let _ = writeln!(w, "# sequences of {s} tokens: tokenize with max_length={s}, truncation=True");
    }
    let _ = writeln!(w, "training_args = TrainingArguments(");
    let _ = writeln!(w, "    output_dir=\"out\",");
    let _ = writeln!(w, "    per_device_train_batch_size={micro},");
    let _ = writeln!(w, "    gradient_accumulation_steps={},", c.grad_accum.max(1));
    let _ = writeln!(w, "    gradient_checkpointing={},", py_bool(c.checkpointing));
    let _ = writeln!(w, "    bf16={},", py_bool(c.precision == Precision::AmpBf16 || (quant.is_some() && c.precision == Precision::Bf16)));
    let _ = writeln!(w, "    fp16={},", py_bool(c.precision == Precision::AmpFp16));
    let _ = writeln!(w, "    optim=\"{}\",", optim_name(c)?);
    let _ = writeln!(w, "    use_liger_kernel={},", py_bool(ft.loss == LossKernel::Chunked));
    let _ = writeln!(w, ")");
    Ok(o)
}

/// `bnb_config = BitsAndBytesConfig(…)` for a bitsandbytes base `f` computing in `compute`
/// (`torch.bfloat16`).
pub fn bnb_config_lines(w: &mut String, f: BaseFormat, double_quant: bool, compute: &str) {
    let _ = writeln!(w, "bnb_config = BitsAndBytesConfig(");
    match f {
        BaseFormat::Int8 => {
            let _ = writeln!(w, "    load_in_8bit=True,");
        }
        _ => {
            let _ = writeln!(w, "    load_in_4bit=True,");
            let _ = writeln!(w, "    bnb_4bit_quant_type=\"{}\",", if f == BaseFormat::Fp4 { "fp4" } else { "nf4" });
            let _ = writeln!(w, "    bnb_4bit_use_double_quant={},", py_bool(double_quant));
            let _ = writeln!(w, "    bnb_4bit_compute_dtype={compute},");
        }
    }
    let _ = writeln!(w, ")");
}

/// `lora_config = LoraConfig(…)` for the setup's adapters.
pub fn lora_config_lines(w: &mut String, ft: &crate::finetune::FineTune) {
    let _ = writeln!(w, "lora_config = LoraConfig(");
    let _ = writeln!(w, "    r={},", ft.lora_r);
    let _ = writeln!(w, "    lora_alpha={},", ft.lora_alpha);
    let _ = writeln!(w, "    lora_dropout={},", ft.lora_dropout);
    let targets: Vec<&str> = ft.lora_targets.iter().collect();
    match targets.as_slice() {
        [] => {
            let _ = writeln!(w, "    # target_modules: peft's default for the architecture");
        }
        ["all-linear"] => {
            let _ = writeln!(w, "    target_modules=\"all-linear\",");
        }
        t => {
            let list: Vec<String> = t.iter().map(|n| format!("\"{n}\"")).collect();
            let _ = writeln!(w, "    target_modules=[{}],", list.join(", "));
        }
    }
    let _ = writeln!(w, "    task_type=\"CAUSAL_LM\",");
    let _ = writeln!(w, ")");
}
