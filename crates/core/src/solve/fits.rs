//! What fits my GPU: for one card and a workload, every model × weight format (× fine-tuning
//! method): whether it fits, the margin, and the reverse figure that matters for the workload
//! (the largest batch for training and inference, the most concurrent sequences for vLLM, the
//! longest context for llama.cpp).
//!
//! Several cards, mixed allowed ([`table_on`]): llama.cpp splits the layers over them by their
//! memory (`fits_llama.rs`); vLLM runs tensor parallel over all of them, each rank held to the
//! smallest card (vLLM sizes every rank's KV pool alike); a training row runs DDP over them, an
//! inference or generation row one model per card, so the smallest card decides.
//!
//! One row is one prepared model: the device total at the batch, then the largest batch read from
//! the same preparation (the envelope; no re-simulation), so the table stays interactive.

pub use super::fits_row::{FitsOptions, Row};
use super::{largest, Variable};
use crate::config::{Mode, OptimizerKind, Precision, TrainConfig};
use crate::distributed::{DistConfig, DistPrepared};
use crate::error::{Error, Result};
use crate::finetune::{BaseFormat, FineTune, Method};
use crate::formats::WeightFormat;
use crate::memory::MAX_BATCH;
use crate::serve::{self, ServeConfig};
use crate::spec::ModelSpec;
use serde::Serialize;

/// What the GPU is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    Qlora,
    Lora,
    Full,
    Infer,
    Generate,
    Serve,
    /// llama.cpp (`llama-server`) with a `llama-quantize` type: `fits_llama.rs`.
    LlamaCpp,
}

impl Workload {
    pub const ALL: [Workload; 7] =
        [Workload::Qlora, Workload::Lora, Workload::Full, Workload::Infer, Workload::Generate, Workload::Serve, Workload::LlamaCpp];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Qlora => "qlora",
            Workload::Lora => "lora",
            Workload::Full => "full",
            Workload::Infer => "infer",
            Workload::Generate => "generate",
            Workload::Serve => "serve",
            Workload::LlamaCpp => "llama-cpp",
        }
    }

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// Whether the workload needs a causal language model.
    pub fn needs_lm(self) -> bool {
        !matches!(self, Workload::Full | Workload::Infer)
    }

    /// The reverse figure of its rows.
    pub fn reverse(self) -> Variable {
        match self {
            Workload::Serve => Variable::Concurrency,
            Workload::LlamaCpp => Variable::Context,
            _ => Variable::Batch,
        }
    }

    /// The six formats (weight storage, or base and memory tricks for training) its rows try.
    pub fn formats(self) -> [&'static str; 6] {
        match self {
            Workload::Qlora => ["nf4", "nf4+ckpt", "nf4-dq+ckpt", "fp4+ckpt", "int8", "int8+ckpt"],
            Workload::Lora => ["bf16", "fp16", "bf16+ckpt", "fp16+ckpt", "bf16+ckpt+chunked", "fp16+ckpt+chunked"],
            Workload::Full => ["fp32", "amp-bf16", "bf16", "bf16+adam8bit", "amp-bf16+ckpt", "bf16+adam8bit+ckpt"],
            Workload::Infer | Workload::Generate => ["bf16", "fp8", "int8", "nf4", "gptq-int4", "gguf-q4_k_m"],
            Workload::Serve => ["bf16", "fp8", "int8", "nf4", "gptq-int4", "awq-int4"],
            Workload::LlamaCpp => super::fits_llama::QUANTS,
        }
    }
}

/// The training or inference setup of one row (`None` for vLLM rows).
pub fn config_of(workload: Workload, format: &str, o: &FitsOptions) -> Result<TrainConfig> {
    let mut parts = format.split('+');
    let head = parts.next().unwrap_or_default();
    let extras: Vec<&str> = parts.collect();
    let mut c = TrainConfig { batch: o.batch.max(1), seq_len: o.seq_len, ..TrainConfig::default() };
    let lora = FineTune { method: Method::Lora, lora_r: 16, lora_alpha: 32.0, ..FineTune::default() };
    match workload {
        Workload::Qlora => {
            let (base, dq) = match head {
                "nf4" => (BaseFormat::Nf4, false),
                "nf4-dq" => (BaseFormat::Nf4, true),
                "fp4" => (BaseFormat::Fp4, false),
                _ => (BaseFormat::Int8, false),
            };
            c.precision = Precision::Bf16;
            c.finetune = FineTune { method: Method::Qlora, base_format: Some(base), double_quant: dq, ..lora };
        }
        Workload::Lora => {
            c.precision = if head == "fp16" { Precision::Fp16 } else { Precision::Bf16 };
            c.finetune = lora;
        }
        Workload::Full => {
            c.precision = Precision::parse(head).ok_or_else(|| Error::Config(format!("format {head}")))?;
        }
        Workload::Infer | Workload::Generate => {
            c.mode = if workload == Workload::Infer { Mode::Infer } else { Mode::Generate };
            c.precision = Precision::Bf16;
            c.weights = Some(WeightFormat::parse(head)?);
            c.generate.prompt_len = o.seq_len;
            c.generate.new_tokens = o.new_tokens.max(1);
        }
        Workload::Serve | Workload::LlamaCpp => return Err(Error::Config(format!("{} rows have no step setup", workload.name()))),
    }
    for e in extras {
        match e {
            "ckpt" => c.checkpointing = true,
            "chunked" => c.finetune.loss = crate::finetune::LossKernel::Chunked,
            "adam8bit" => c.optimizer = OptimizerKind::Adam8bit,
            other => return Err(Error::Config(format!("format part {other}"))),
        }
    }
    Ok(c)
}

/// The rows of `models` (id, spec) for `workload` on a GPU of `capacity` bytes; model × format
/// pairs the core refuses (a format a model cannot take) are left out.
pub fn table(models: &[(&str, &ModelSpec)], workload: Workload, capacity: u64, o: &FitsOptions) -> Vec<Row> {
    table_on(models, workload, &[capacity], o)
}

/// [`table`] on several cards (`gpus`: the bytes of each, mixed allowed; see the module's text).
/// llama.cpp rows take a preset's own `config.json` (`presets::hf_config`); other models have
/// none here (`fits_llama::rows` takes any).
pub fn table_on(models: &[(&str, &ModelSpec)], workload: Workload, gpus: &[u64], o: &FitsOptions) -> Vec<Row> {
    let mut rows = Vec::new();
    for &(id, spec) in models {
        for format in workload.formats() {
            if let Ok(r) = row_on(id, spec, workload, format, gpus, o) {
                rows.push(r);
            }
        }
    }
    rows
}

/// One row.
pub fn row(id: &str, spec: &ModelSpec, workload: Workload, format: &str, capacity: u64, o: &FitsOptions) -> Result<Row> {
    row_on(id, spec, workload, format, &[capacity], o)
}

/// One row on several cards.
pub fn row_on(id: &str, spec: &ModelSpec, workload: Workload, format: &str, gpus: &[u64], o: &FitsOptions) -> Result<Row> {
    let capacity = gpus.iter().copied().min().ok_or_else(|| Error::Config("what fits: no GPU given".into()))?;
    let n = gpus.len() as u64;
    let (c, p) = match workload {
        Workload::LlamaCpp => return llama_row(id, format, gpus, o),
        Workload::Serve => return serve_row(id, spec, format, capacity, n, o),
        _ => prepare(spec, workload, format, n, o)?,
    };
    let (peak, total) = p.peak_at(c.batch);
    let lo = c.grad_accum.max(1);
    let reverse = largest(lo, MAX_BATCH, c.batch, |b| Ok(p.peak_at(b).1 <= capacity))?;
    Ok(Row {
        model: id.to_string(),
        format: format.to_string(),
        method: method_name(workload, &c),
        fits: total <= capacity,
        device_total_bytes: total,
        peak_bytes: peak,
        margin_bytes: capacity as i64 - total.min(i64::MAX as u64) as i64,
        reverse_of: Variable::Batch,
        reverse_value: reverse,
    })
}

fn llama_row(id: &str, format: &str, gpus: &[u64], o: &FitsOptions) -> Result<Row> {
    let text = crate::presets::hf_config(id).ok_or_else(|| Error::Config(format!("{id}: no config.json for llama.cpp")))?;
    let config = serde_json::from_str(text).map_err(|e| Error::Config(format!("{id}: config.json: {e}")))?;
    super::fits_llama::row(id, &config, format, gpus, o)
}

/// A training or inference row's setup on `n` cards and its rank 0, resolved and planned.
fn prepare(spec: &ModelSpec, workload: Workload, format: &str, n: u64, o: &FitsOptions) -> Result<(TrainConfig, DistPrepared)> {
    let mut c = config_of(workload, format, o)?;
    if c.finetune.has_adapters() && c.finetune.lora_targets.is_empty() {
        c.finetune.lora_targets = crate::resolve::proposed_lora_targets(spec);
    }
    // training: DDP over the cards (rank 0 on the smallest); inference: one model per card
    let training = matches!(workload, Workload::Qlora | Workload::Lora | Workload::Full);
    let dist = DistConfig { gpus: if training { n } else { 1 }, ..DistConfig::default() };
    let p = DistPrepared::new(spec, &c, &dist)?;
    Ok((c, p))
}

fn method_name(workload: Workload, c: &TrainConfig) -> String {
    match workload {
        Workload::Qlora | Workload::Lora => c.finetune.method.name().to_string(),
        Workload::Full => "full".into(),
        w => w.name().into(),
    }
}

fn serve_row(id: &str, spec: &ModelSpec, format: &str, capacity: u64, tensor_parallel: u64, o: &FitsOptions) -> Result<Row> {
    let weights = WeightFormat::parse(format)?;
    let cfg = ServeConfig { weights: Some(weights), tensor_parallel, ..ServeConfig::new(capacity, o.seq_len.unwrap_or(4096)) };
    let c = serve::capacity(spec, &cfg)?;
    let one = serve::request_bytes(spec, &cfg, cfg.context);
    let usable = c.num_blocks.saturating_mul(c.page_bytes);
    // what vLLM holds before the KV cache, and the pool it leaves
    let before = c.weights_bytes.saturating_add(c.activation_peak_bytes).saturating_add(c.non_torch_bytes);
    Ok(Row {
        model: id.to_string(),
        format: format.to_string(),
        method: "serve".into(),
        fits: c.max_concurrency >= 1,
        device_total_bytes: before.saturating_add(one),
        peak_bytes: before,
        margin_bytes: usable as i64 - one.min(i64::MAX as u64) as i64,
        reverse_of: Variable::Concurrency,
        reverse_value: (c.max_concurrency >= 1).then_some(c.max_concurrency),
    })
}
