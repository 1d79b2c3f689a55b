//! Command-line arguments: parsed by clap, then validated into core types.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use vramcalc_core::memory::device::gpu;
use vramcalc_core::units::parse_bytes;
use vramcalc_core::{
    AttentionImpl, AutocastDevice, ByteUnit, Device, Estimate, Framework, GenerateConfig, KvCacheKind, KvDType, Mode, ModelSpec,
    OptimizerImpl, OptimizerKind, Precision, TrainConfig,
};

#[derive(Parser)]
#[command(
    name = "vramcalc",
    version,
    about = "GPU memory of a PyTorch training step, before you run it",
    // a flag given twice takes its last value (a fix's flags appended to a command line win)
    args_override_self = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// List the built-in models.
    Presets {
        #[arg(long)]
        json: bool,
        /// A Markdown table with each preset's parameters, fp16 weights and training peak
        /// (batch 1 at its default sequence length, AMP bf16, AdamW, SDPA).
        #[arg(long, conflicts_with = "json")]
        table: bool,
    },
    /// List the GPUs `--gpu` knows, with their memory.
    Gpus {
        #[arg(long)]
        json: bool,
    },
    /// Print the model as a JSON spec (export a preset or a converted config.json to edit).
    Spec {
        #[command(flatten)]
        model: ModelArgs,
    },
    /// The per-layer table: path, kind, output shape, parameters, activation values.
    Show {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        json: bool,
    },
    /// Peak memory of one training (or inference) step.
    Estimate {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        settings: Settings,
        #[command(flatten)]
        dist: crate::dist::DistArgs,
        /// Print the estimate as JSON (schema in README).
        #[arg(long)]
        json: bool,
        /// Also show each memory trick applied alone (batch, AMP, checkpointing, …) and its
        /// peak; with `--json`, as `what_ifs`.
        #[arg(long)]
        what_if: bool,
        /// Exit 0 when the device total fits this GPU (`vramcalc gpus`), 1 when not (2: bad input).
        #[arg(long)]
        fits: Option<String>,
        #[command(flatten)]
        diffusion: crate::diffusion::DiffusionArgs,
        #[command(flatten)]
        checkpoint: crate::checkpoint::CheckpointArgs,
    },
    /// A Markdown table of the diffusion presets on 8, 12, 16 and 24 GB cards: whether each
    /// fits, with the least offloading and the dtype that make it fit (docs/diffusion.md).
    DiffusionTable {
        /// Card sizes in GB (10^9 bytes), comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "8,12,16,24")]
        cards: Vec<u64>,
    },
    /// The largest value of one setting that fits a GPU: `--of batch|seq-len|prompt-len|new-tokens|context|concurrency`.
    Max(Box<crate::reverse::MaxArgs>),
    /// When a setup does not fit a GPU: the cheapest sets of changes that make it fit (`--apply N` takes one).
    Fix(Box<crate::reverse::FixArgs>),
    /// What fits a GPU: every preset × six formats for a workload, with the margin and the largest batch (or users).
    Fits(crate::reverse::FitsArgs),
    /// The command or config that runs the setup (vllm, torchrun, peft, deepspeed, accelerate), or a script that measures it.
    Launch(Box<crate::launch::LaunchArgs>),
    /// Serving capacity under vLLM: the KV cache left after weights, profile run and overheads,
    /// in tokens, concurrent sequences and context.
    Serve(crate::serve::ServeArgs),
    /// What llama.cpp allocates for a GGUF model per device (model, KV cache, compute and output
    /// buffers), under llama.cpp's flags: -c -b -ub -ctk -ctv -fa -np --kv-unified -ngl --n-cpu-moe
    /// -ot -ts -sm --swa-full --no-mmap; the largest context and the most GPU layers that fit.
    LlamaCpp(crate::llama_cpp::LlamaCppArgs),
    /// Ollama's run of a GGUF model (num_ctx, num_gpu, OLLAMA_NUM_PARALLEL, OLLAMA_KV_CACHE_TYPE,
    /// OLLAMA_FLASH_ATTENTION) as the llama.cpp run it launches.
    Ollama(crate::ollama::OllamaArgs),
    /// Largest batch whose device total fits a capacity or a GPU.
    MaxBatch {
        #[command(flatten)]
        fit: Fit,
    },
    /// A Markdown table of rank 0's peak per strategy and world size (the README's table).
    Strategies {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        settings: Settings,
        /// World sizes, comma-separated.
        #[arg(long, value_delimiter = ',', default_value = "8,64")]
        world_sizes: Vec<u64>,
        /// The card for the "fewest GPUs" column (`vramcalc gpus`).
        #[arg(long, default_value = "h100-80gb")]
        gpu: String,
    },
    /// Fewest GPUs of a card (powers of two) on which rank 0 fits, with the largest batch per GPU there.
    FewestGpus {
        #[command(flatten)]
        fit: Fit,
        /// Largest job to try.
        #[arg(long, default_value_t = 4096)]
        max_gpus: u64,
    },
}

/// What `max-batch` and `fewest-gpus` read: a model, its settings, a capacity and the job.
#[derive(Args)]
pub struct Fit {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub settings: Settings,
    #[command(flatten)]
    pub capacity: Capacity,
    #[command(flatten)]
    pub dist: crate::dist::DistArgs,
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct ModelArgs {
    /// A built-in model (`vramcalc presets`).
    #[arg(long)]
    pub preset: Option<String>,
    /// A JSON model spec (docs/spec-format.md).
    #[arg(long)]
    pub spec: Option<PathBuf>,
    /// A Hugging Face `config.json`.
    #[arg(long)]
    pub hf_config: Option<PathBuf>,
    /// A built-in diffusers pipeline (`sd-1.5`, `sdxl`, `sd3.5-medium`, `sd3.5-large`,
    /// `flux.1-dev`, `flux.1-schnell`, `wan2.1-t2v-1.3b`, `wan2.1-t2v-14b`): `vramcalc estimate` only.
    #[arg(long)]
    pub pipeline: Option<String>,
    /// A diffusers `model_index.json`, its components' `config.json` in folders beside it.
    #[arg(long)]
    pub model_index: Option<PathBuf>,
    /// One diffusers component's `config.json` (`_class_name`), or a transformers text encoder's.
    #[arg(long)]
    pub diffusers_config: Option<PathBuf>,
}

impl ModelArgs {
    pub fn load(&self) -> Result<ModelSpec> {
        if let Some(id) = &self.preset {
            return Ok(vramcalc_core::import::preset(id)?);
        }
        if let Some(path) = &self.spec {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            return ModelSpec::from_json(&text).with_context(|| format!("in {}", path.display()));
        }
        if let Some(path) = &self.hf_config {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            return vramcalc_core::import::hf::from_config_json(&text)
                .with_context(|| format!("in {}", path.display()));
        }
        if self.is_diffusion() {
            bail!("--pipeline, --model-index and --diffusers-config are estimated by `vramcalc estimate`");
        }
        bail!("give one of --preset, --spec or --hf-config")
    }

    /// Whether a diffusion pipeline or component was given.
    pub fn is_diffusion(&self) -> bool {
        self.pipeline.is_some() || self.model_index.is_some() || self.diffusers_config.is_some()
    }

    pub fn estimate(&self, spec: &ModelSpec, settings: &Settings) -> Result<Estimate> {
        Ok(vramcalc_core::estimate(spec, &self.config(spec, settings)?)?)
    }

    /// The settings' config; for inference without `--weights`, the weights a `--hf-config`'s
    /// `quantization_config` names.
    pub fn config(&self, spec: &ModelSpec, settings: &Settings) -> Result<TrainConfig> {
        let mut config = settings.config(spec)?;
        // what a language model starts with, for what the flags leave out
        if let Some(start) = vramcalc_core::defaults::starting_setup(spec, self.torch_dtype()?.as_deref(), &config) {
            if settings.batch.is_none() {
                config.batch = start.batch.max(config.grad_accum);
            }
            if settings.seq_len.is_none() {
                config.seq_len = start.seq_len;
            }
            if settings.precision.is_none() {
                config.precision = start.precision;
            }
        }
        if config.weights.is_none() && config.mode == Mode::Infer {
            config.weights = self.quantization()?;
        }
        Ok(config)
    }

    /// The checkpoint's `torch_dtype` (or `dtype`): a `--hf-config`'s, a Hugging Face preset's.
    pub fn torch_dtype(&self) -> Result<Option<String>> {
        let text = match (&self.hf_config, &self.preset) {
            (Some(path), _) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
            (None, Some(id)) => match vramcalc_core::presets::hf_config(id) {
                Some(t) => t.to_string(),
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        Ok(["torch_dtype", "dtype"].iter().find_map(|k| v.get(*k).and_then(|d| d.as_str()).map(str::to_string)))
    }

    /// The weight format a `--hf-config`'s `quantization_config` names (`None` without one), or
    /// the one a preset's checkpoint is published with (gpt-oss: mxfp4, DeepSeek-V3: fp8 blocks).
    pub fn quantization(&self) -> Result<Option<vramcalc_core::formats::WeightFormat>> {
        let Some(path) = &self.hf_config else { return Ok(self.preset.as_deref().and_then(vramcalc_core::presets::published_weights)) };
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        vramcalc_core::formats::hf::weights_of_config_json(&text).with_context(|| format!("in {}", path.display()))
    }

    /// The estimate at default settings (for `show`, which needs shapes and parameters only).
    pub fn estimate_default(&self, spec: &ModelSpec) -> Result<Estimate> {
        Ok(vramcalc_core::estimate(
            spec,
            &TrainConfig {
                batch: 1,
                ..TrainConfig::default()
            },
        )?)
    }
}

#[derive(Args)]
pub struct Settings {
    /// Samples per optimizer step (default 32; a causal language model starts at 1, a diffusion
    /// pipeline at 1 prompt).
    #[arg(long)]
    pub batch: Option<u64>,
    /// Sequence length of token models (default: the preset's).
    #[arg(long)]
    pub seq_len: Option<u64>,
    /// sgd | sgd-momentum | adam | adamw | adamw-amsgrad | adagrad | rmsprop | rmsprop-centered | adafactor | adam8bit | paged-adamw8bit
    #[arg(long, default_value = "adamw")]
    pub optimizer: String,
    /// forloop | foreach | fused (foreach is PyTorch's default on CUDA)
    #[arg(long, default_value = "foreach")]
    pub optimizer_impl: String,
    /// fp32 | fp16 | bf16 | amp-fp16 | amp-bf16 (default fp32; a causal language model starts in
    /// its config's torch_dtype, bf16 when it names none; a diffusion pipeline in its published
    /// dtype, fp16 for SD/SDXL, bf16 for the others)
    #[arg(long)]
    pub precision: Option<String>,
    /// Whose autocast op lists apply: cuda | cpu
    #[arg(long, default_value = "cuda")]
    pub autocast_device: String,
    /// Whose kernels are simulated (dropout masks, SDPA): cuda | cpu
    #[arg(long, default_value = "cuda")]
    pub device: String,
    /// train | infer | generate (default train); diffusion: infer | decode | train (default infer)
    #[arg(long)]
    pub mode: Option<String>,
    #[command(flatten)]
    pub generate: GenerateArgs,
    /// Activation checkpointing per block (transformer layers, ResNet stages).
    #[arg(long)]
    pub checkpointing: bool,
    /// `torch.autocast(cache_enabled=…)`: on (PyTorch's default) keeps the half copies of the
    /// weights until the forward ends; off casts them at each use.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    pub autocast_cache: String,
    /// Gradient accumulation steps (micro-batch = batch / steps).
    #[arg(long, default_value_t = 1)]
    pub grad_accum: u64,
    /// eager | sdpa
    #[arg(long, default_value = "sdpa")]
    pub attention: String,
    /// Make every ReLU in place.
    #[arg(long)]
    pub inplace_relu: bool,
    /// pytorch-eager | candle
    #[arg(long, default_value = "pytorch-eager")]
    pub framework: String,
    /// MB (10^6) or MiB (2^20)
    #[arg(long, default_value = "MB")]
    pub units: String,
    #[command(flatten)]
    pub finetune: crate::finetune_args::FineTuneArgs,
    /// Weights' storage for inference: fp16 | bf16 | int8 | nf4 | fp4 | gptq-int4 | awq-int4 | fp8 | gguf-q4_k_m | …
    /// (default: the precision's dtype, or the --hf-config's quantization_config)
    #[arg(long)]
    pub weights: Option<String>,
}

/// `--mode generate`: greedy `model.generate()` with a KV cache.
#[derive(Args)]
pub struct GenerateArgs {
    /// Prompt tokens per sequence (default: --seq-len or the model's sequence length).
    #[arg(long)]
    pub prompt_len: Option<u64>,
    /// Tokens generated per sequence (the prefill gives the first).
    #[arg(long, default_value_t = 256)]
    pub new_tokens: u64,
    /// dynamic | static | paged
    #[arg(long, default_value = "dynamic")]
    pub kv_cache: String,
    /// 1 (generate()'s default: the prefill's logits for the last position only) | 0 (all positions)
    #[arg(long, default_value_t = 1)]
    pub logits_to_keep: u64,
    /// The KV cache's element type: fp16 | bf16 | fp8 | int8 (default: the weights' dtype)
    #[arg(long)]
    pub kv_dtype: Option<String>,
}

impl GenerateArgs {
    fn config(&self) -> Result<GenerateConfig> {
        let kv_dtype = match &self.kv_dtype {
            Some(k) => Some(pick(k, "kv-dtype", KvDType::parse, KvDType::ALL, |v| v.name())?),
            None => None,
        };
        if self.logits_to_keep > 1 {
            bail!("--logits-to-keep {} is not one of 1, 0", self.logits_to_keep);
        }
        Ok(GenerateConfig {
            prompt_len: self.prompt_len,
            new_tokens: self.new_tokens,
            cache: pick(&self.kv_cache, "kv-cache", KvCacheKind::parse, KvCacheKind::ALL, |v| v.name())?,
            logits_to_keep: self.logits_to_keep,
            kv_dtype,
        })
    }
}

fn pick<T>(
    value: &str,
    flag: &str,
    parse: fn(&str) -> Option<T>,
    all: &[T],
    name: fn(&T) -> &'static str,
) -> Result<T> {
    parse(value).ok_or_else(|| {
        let options: Vec<&str> = all.iter().map(name).collect();
        anyhow!("--{flag} {value:?} is not one of {}", options.join(", "))
    })
}

impl Settings {
    pub fn config(&self, spec: &ModelSpec) -> Result<TrainConfig> {
        let _ = spec;
        Ok(TrainConfig {
            batch: self.batch.unwrap_or(32),
            seq_len: self.seq_len,
            optimizer: pick(
                &self.optimizer,
                "optimizer",
                OptimizerKind::parse,
                OptimizerKind::ALL,
                |v| v.name(),
            )?,
            optimizer_impl: pick(
                &self.optimizer_impl,
                "optimizer-impl",
                OptimizerImpl::parse,
                OptimizerImpl::ALL,
                |v| v.name(),
            )?,
            precision: pick(
                self.precision.as_deref().unwrap_or("fp32"),
                "precision",
                Precision::parse,
                Precision::ALL,
                |v| v.name(),
            )?,
            autocast_device: pick(
                &self.autocast_device,
                "autocast-device",
                AutocastDevice::parse,
                AutocastDevice::ALL,
                |v| v.name(),
            )?,
            device: pick(&self.device, "device", Device::parse, Device::ALL, |v| {
                v.name()
            })?,
            mode: pick(self.mode.as_deref().unwrap_or("train"), "mode", Mode::parse, Mode::ALL, |v| v.name())?,
            checkpointing: self.checkpointing,
            autocast_cache: self.autocast_cache == "on",
            grad_accum: self.grad_accum,
            attention: pick(
                &self.attention,
                "attention",
                AttentionImpl::parse,
                AttentionImpl::ALL,
                |v| v.name(),
            )?,
            inplace_relu: self.inplace_relu.then_some(true),
            framework: pick(
                &self.framework,
                "framework",
                Framework::parse,
                Framework::ALL,
                |v| v.name(),
            )?,
            finetune: self.finetune.setup()?,
            generate: self.generate.config()?,
            weights: self.weights.as_deref().map(vramcalc_core::formats::WeightFormat::parse).transpose()?,
        })
    }

    pub fn unit(&self) -> ByteUnit {
        if self.units.eq_ignore_ascii_case("mib") {
            ByteUnit::Mib
        } else {
            ByteUnit::Mb
        }
    }
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub struct Capacity {
    /// Memory to fit in: `24GB`, `24GiB`, `11000MB`.
    #[arg(long)]
    pub capacity: Option<String>,
    /// A GPU id from `vramcalc gpus` (e.g. `rtx-4090`).
    #[arg(long)]
    pub gpu: Option<String>,
}

impl Capacity {
    pub fn bytes(&self) -> Result<u64> {
        if let Some(c) = &self.capacity {
            return parse_bytes(c).ok_or_else(|| {
                anyhow!("--capacity {c:?} is not a size like 24GB, 24GiB or 11000MB")
            });
        }
        let id = self.gpu.as_deref().unwrap_or_default();
        gpu(id)
            .map(|g| g.bytes)
            .ok_or_else(|| anyhow!("unknown GPU {id:?} (run `vramcalc gpus`)"))
    }
}

impl Fit {
    /// The model, its training setup and the capacity to fit.
    pub fn load(&self) -> Result<(ModelSpec, TrainConfig, u64)> {
        let spec = self.model.load()?;
        let config = self.model.config(&spec, &self.settings)?;
        Ok((spec, config, self.capacity.bytes()?))
    }
}
