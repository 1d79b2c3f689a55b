//! "Measure it yourself": a short PyTorch script that runs the estimated step on the user's GPU
//! and prints `torch.cuda.max_memory_allocated()` of a steady-state iteration beside the estimate,
//! the figure the estimate means (DESIGN.md: iteration 3 after `reset_peak_memory_stats()`, with
//! `zero_grad(set_to_none=True)`), and `memory_reserved()` beside the device total.
//!
//! Models: torchvision CNNs by their constructor, the rest by their Hugging Face id
//! (`AutoModelForCausalLM` for causal LMs; other heads are not written yet).

use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::error::{Error, Result};
use crate::finetune::Method;
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
    if c.finetune.method != Method::Full {
        return Err(Error::Config("the measurement script covers full training and inference; for LoRA use `vramcalc launch --for peft` and wrap trainer.train() with the same two calls".into()));
    }
    if c.mode == Mode::Generate {
        return Err(Error::Config("the measurement script for --mode generate is not written yet".into()));
    }
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
        Model::CausalLm(id) => {
            let seq = c.seq_len.unwrap_or(1024);
            let _ = writeln!(w, "from transformers import AutoModelForCausalLM");
            let _ = writeln!(w, "model = AutoModelForCausalLM.from_pretrained(\"{id}\", torch_dtype={dtype}, attn_implementation=\"sdpa\").to(device)");
            if c.checkpointing {
                let _ = writeln!(w, "model.gradient_checkpointing_enable()");
            }
            let _ = writeln!(w, "ids = torch.randint(0, model.config.vocab_size, ({micro}, {seq}), device=device)");
            let _ = writeln!(w, "def loss_of(out):");
            let _ = writeln!(w, "    return out.loss");
            let _ = writeln!(w, "def forward():");
            let _ = writeln!(w, "    return model(input_ids=ids, labels=ids)");
        }
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
