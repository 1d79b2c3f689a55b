//! "Measure it yourself": a short PyTorch script that runs the estimated step on the user's GPU
//! and prints `torch.cuda.max_memory_allocated()` of a steady-state iteration beside the estimate,
//! the figure the estimate means (DESIGN.md: iteration 3 after `reset_peak_memory_stats()`, with
//! `zero_grad(set_to_none=True)`), and `memory_reserved()` beside the device total.
//!
//! Models: torchvision CNNs by their constructor, the rest by their Hugging Face id
//! (`AutoModelForCausalLM` for causal LMs; other heads are not written yet). A causal LM is built
//! from its `config.json` alone (`AutoModelForCausalLM.from_config` under `torch.device("cuda")`:
//! random weights of the same shapes, nothing downloaded but the config), with the setup's LoRA
//! adapters (`peft.LoraConfig`, the same targets, rank, alpha and dropout). bitsandbytes quantises
//! while a checkpoint loads, so a quantised base (QLoRA, or `--weights nf4|int8`) loads the hub
//! checkpoint with the same `BitsAndBytesConfig` instead. `--mode generate` measures `generate()`
//! with the same prompt, new tokens (greedy, `min_new_tokens` = `max_new_tokens`) and cache.

use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::error::{Error, Result};
use crate::finetune::BaseFormat;
use crate::formats::WeightFormat;
use crate::generation::KvCacheKind;
use std::fmt::Write;

/// What the script loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model<'a> {
    /// `torchvision.models.<name>()` on 224×224 images (299 for Inception v3).
    Torchvision(&'a str),
    /// A causal LM from the hub.
    CausalLm(&'a str),
}

fn optimizer_line(c: &TrainConfig) -> Result<String> {
    Ok(match c.optimizer {
        OptimizerKind::Adamw => format!("torch.optim.AdamW(params, lr=1e-4{})", impl_kw(c)),
        OptimizerKind::Adam => format!("torch.optim.Adam(params, lr=1e-4{})", impl_kw(c)),
        OptimizerKind::Sgd => "torch.optim.SGD(params, lr=1e-2)".into(),
        OptimizerKind::SgdMomentum => "torch.optim.SGD(params, lr=1e-2, momentum=0.9)".into(),
        OptimizerKind::Adam8bit => "bnb.optim.AdamW8bit(params, lr=1e-4)".into(),
        OptimizerKind::PagedAdamw8bit => "bnb.optim.PagedAdamW8bit(params, lr=1e-4)".into(),
        k => return Err(Error::Config(format!("the measurement script has no line for optimizer {k} yet"))),
    })
}

fn impl_kw(c: &TrainConfig) -> &'static str {
    match c.optimizer_impl {
        crate::config::OptimizerImpl::Forloop => ", foreach=False",
        crate::config::OptimizerImpl::Foreach => ", foreach=True",
        crate::config::OptimizerImpl::Fused => ", fused=True",
    }
}

/// The script for `model` under `c`, printing the measured peak beside `estimate_bytes` (the
/// estimate's peak allocated) and `device_total_bytes`.
pub fn script(model: Model, c: &TrainConfig, estimate_bytes: u64, device_total_bytes: u64) -> Result<String> {
    if c.finetune.method == crate::finetune::Method::Freeze {
        return Err(Error::Config("the measurement script does not freeze parts of the model yet (--finetune freeze)".into()));
    }
    if matches!(model, Model::Torchvision(_)) && (!c.finetune.is_default() || c.mode == Mode::Generate) {
        return Err(Error::Config("the measurement script fine-tunes and generates with causal language models only".into()));
    }
    let base = bnb_base(c)?;
    let train = c.mode == Mode::Train;
    let (dtype, amp) = match c.precision {
        Precision::Fp32 => ("torch.float32", None),
        Precision::Fp16 => ("torch.float16", None),
        Precision::Bf16 => ("torch.bfloat16", None),
        Precision::AmpFp16 => ("torch.float32", Some("torch.float16")),
        Precision::AmpBf16 => ("torch.float32", Some("torch.bfloat16")),
    };
    let micro = c.micro_batch();
    let mut o = String::new();
    let w = &mut o;
    let _ = writeln!(w, "# Measures the step vramcalc estimated, on this machine's GPU.");
    let _ = writeln!(w, "import torch");
    if matches!(c.optimizer, OptimizerKind::Adam8bit | OptimizerKind::PagedAdamw8bit) {
        let _ = writeln!(w, "import bitsandbytes as bnb");
    }
    let _ = writeln!(w, "torch.manual_seed(0)");
    let _ = writeln!(w, "device = \"cuda\"");
    match model {
        Model::Torchvision(name) => {
            let side = if name == "inception_v3" { 299 } else { 224 };
            let _ = writeln!(w, "import torchvision");
            let _ = writeln!(w, "model = torchvision.models.{name}().to(device=device, dtype={dtype})");
            let _ = writeln!(w, "batch = torch.randn({micro}, 3, {side}, {side}, device=device, dtype={dtype})");
            let _ = writeln!(w, "labels = torch.randint(0, 1000, ({micro},), device=device)");
            let _ = writeln!(w, "def loss_of(out):");
            let _ = writeln!(w, "    out = out.logits if hasattr(out, \"logits\") else out");
            let _ = writeln!(w, "    return torch.nn.functional.cross_entropy(out, labels)");
            let _ = writeln!(w, "def forward():");
            let _ = writeln!(w, "    return model(batch)");
        }
        Model::CausalLm(id) => causal_lm(w, id, c, dtype, base)?,
    }
    if train {
        let _ = writeln!(w, "model.train()");
        let _ = writeln!(w, "params = [p for p in model.parameters() if p.requires_grad]");
        let _ = writeln!(w, "optimizer = {}", optimizer_line(c)?);
    } else {
        let _ = writeln!(w, "model.eval()");
    }
    let _ = writeln!(w, "for step in range(3):");
    let _ = writeln!(w, "    if step == 2:");
    let _ = writeln!(w, "        torch.cuda.synchronize()");
    let _ = writeln!(w, "        torch.cuda.reset_peak_memory_stats()");
    let autocast = match amp {
        Some(t) => format!("torch.autocast(\"cuda\", dtype={t})"),
        None => "torch.autocast(\"cuda\", enabled=False)".into(),
    };
    if train {
        let _ = writeln!(w, "    optimizer.zero_grad(set_to_none=True)");
        let _ = writeln!(w, "    for _ in range({}):", c.grad_accum.max(1));
        let _ = writeln!(w, "        with {autocast}:");
        let _ = writeln!(w, "            loss = loss_of(forward())");
        let _ = writeln!(w, "        loss.backward()");
        let _ = writeln!(w, "    optimizer.step()");
    } else if c.mode == Mode::Generate {
        let _ = writeln!(w, "    with torch.no_grad(), {autocast}:");
        let _ = writeln!(w, "        out = generate()");
        let _ = writeln!(w, "    assert out.shape[1] == ids.shape[1] + {}, out.shape", c.generate.new_tokens);
    } else {
        let _ = writeln!(w, "    with torch.no_grad(), {autocast}:");
        let _ = writeln!(w, "        forward()");
    }
    let _ = writeln!(w, "torch.cuda.synchronize()");
    let _ = writeln!(w, "peak = torch.cuda.max_memory_allocated()");
    let _ = writeln!(w, "estimate = {estimate_bytes}");
    let _ = writeln!(w, "print(f\"measured peak allocated {{peak}} B, vramcalc estimate {{estimate}} B ({{(estimate - peak) / peak:+.1%}})\")");
    let _ = writeln!(w, "print(f\"measured reserved {{torch.cuda.max_memory_reserved()}} B; vramcalc device total {device_total_bytes} B includes the CUDA context too\")");
    Ok(o)
}

/// The bitsandbytes format the base loads in: QLoRA's (or LoRA on `--base-format int8|nf4|fp4`),
/// or inference's `--weights nf4|nf4-dq|fp4|int8`; other weight formats have no script yet.
fn bnb_base(c: &TrainConfig) -> Result<Option<(BaseFormat, bool)>> {
    if let Some(f) = c.finetune.quant_format().filter(|f| f.is_quantised()).filter(|_| c.mode == Mode::Train) {
        return Ok(Some((f, c.finetune.double_quant)));
    }
    Ok(match c.weights {
        None => None,
        Some(WeightFormat::BnbInt8) => Some((BaseFormat::Int8, false)),
        Some(WeightFormat::Bnb4 { nf4, double_quant }) => Some((if nf4 { BaseFormat::Nf4 } else { BaseFormat::Fp4 }, double_quant)),
        Some(w) => return Err(Error::Config(format!("the measurement script loads bitsandbytes weights only, not {}", w.name()))),
    })
}

/// A causal LM from its config (or, quantised, its checkpoint), its adapters, and the step's
/// `forward()` (training, inference) or `generate()`.
fn causal_lm(w: &mut String, id: &str, c: &TrainConfig, dtype: &str, base: Option<(BaseFormat, bool)>) -> Result<()> {
    let ft = &c.finetune;
    let micro = c.micro_batch();
    let _ = writeln!(w, "from transformers import AutoConfig, AutoModelForCausalLM, BitsAndBytesConfig");
    if ft.has_adapters() {
        let _ = writeln!(w, "from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training");
    }
    let _ = writeln!(w, "config = AutoConfig.from_pretrained(\"{id}\")");
    match base {
        Some((f, dq)) => {
            let compute = if matches!(c.precision, Precision::Fp16 | Precision::AmpFp16) { "torch.float16" } else { "torch.bfloat16" };
            super::python::bnb_config_lines(w, f, dq, compute);
            let _ = writeln!(w, "# bitsandbytes quantises while loading: this reads the checkpoint");
            let _ = writeln!(w, "model = AutoModelForCausalLM.from_pretrained(\"{id}\", quantization_config=bnb_config, dtype={compute}, attn_implementation=\"sdpa\", device_map={{\"\": 0}})");
        }
        None => {
            let _ = writeln!(w, "# random weights of the checkpoint's shapes, built on the GPU: nothing but the config is downloaded");
            let _ = writeln!(w, "with torch.device(device):");
            let _ = writeln!(w, "    model = AutoModelForCausalLM.from_config(config, dtype={dtype}, attn_implementation=\"sdpa\")");
        }
    }
    if ft.has_adapters() {
        if base.is_some() && c.mode == Mode::Train {
            let _ = writeln!(w, "model = prepare_model_for_kbit_training(model, use_gradient_checkpointing={})", if c.checkpointing { "True" } else { "False" });
        } else if c.checkpointing {
            let _ = writeln!(w, "model.gradient_checkpointing_enable()");
            let _ = writeln!(w, "model.enable_input_require_grads()");
        }
        super::python::lora_config_lines(w, ft);
        let _ = writeln!(w, "model = get_peft_model(model, lora_config)");
    } else if c.checkpointing && c.mode == Mode::Train {
        let _ = writeln!(w, "model.gradient_checkpointing_enable()");
    }
    if c.mode == Mode::Generate {
        let g = &c.generate;
        let prompt = g.prompt_len.or(c.seq_len).ok_or_else(|| Error::Config("the measurement script needs the prompt length (--prompt-len)".into()))?;
        if g.kv_dtype.is_some() || g.logits_to_keep != 1 {
            return Err(Error::Config("the measurement script generates with generate()'s own cache dtype and logits (no --kv-dtype, --logits-to-keep 1)".into()));
        }
        let cache = match g.cache {
            KvCacheKind::Dynamic => "",
            KvCacheKind::Static => ", cache_implementation=\"static\"",
            KvCacheKind::Paged => return Err(Error::Config("the measurement script has no generate() counterpart of the paged cache".into())),
        };
        let n = g.new_tokens;
        let _ = writeln!(w, "ids = torch.randint(0, config.vocab_size, ({micro}, {prompt}), device=device)");
        let _ = writeln!(w, "def generate():");
        let _ = writeln!(w, "    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens={n}, min_new_tokens={n}, do_sample=False{cache})");
    } else {
        let seq = c.seq_len.unwrap_or(1024);
        let _ = writeln!(w, "ids = torch.randint(0, config.vocab_size, ({micro}, {seq}), device=device)");
        let _ = writeln!(w, "def loss_of(out):");
        let _ = writeln!(w, "    return out.loss");
        let _ = writeln!(w, "def forward():");
        let _ = writeln!(w, "    return model(input_ids=ids, labels=ids)");
    }
    Ok(())
}
