//! The training setup an estimate is made for.

use crate::generation::GenerateConfig;
use serde::{Deserialize, Serialize};

/// Numeric precision of the training step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    #[default]
    Fp32,
    /// `model.half()`: parameters, gradients, optimizer state and activations in fp16.
    Fp16,
    /// `model.bfloat16()`.
    Bf16,
    /// `torch.autocast(dtype=float16)` with fp32 master parameters (and a GradScaler).
    AmpFp16,
    /// `torch.autocast(dtype=bfloat16)` with fp32 master parameters.
    AmpBf16,
}

/// Which device's kernels are simulated: CUDA's dropout keeps a 1-byte mask, CPU eager a
/// float one; CUDA's SDPA uses the flash / memory-efficient kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    #[default]
    Cuda,
    Cpu,
}

/// Whose autocast op lists apply (they differ: CUDA runs softmax and layer_norm in fp32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AutocastDevice {
    #[default]
    Cuda,
    Cpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OptimizerKind {
    Sgd,
    SgdMomentum,
    Adam,
    #[default]
    Adamw,
    /// Adam/AdamW with `amsgrad=True` (a third state tensor).
    AdamwAmsgrad,
    Adagrad,
    Rmsprop,
    /// RMSprop with momentum and `centered=True`.
    RmspropCentered,
    Adafactor,
    /// bitsandbytes 8-bit Adam (blockwise-quantised state).
    Adam8bit,
    /// bitsandbytes `PagedAdamW8bit` (QLoRA's optimizer): 8-bit state in CUDA unified memory.
    PagedAdamw8bit,
}

/// How the optimizer step is implemented (changes its temporaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerImpl {
    /// One parameter at a time (PyTorch's default for CPU tensors).
    Forloop,
    /// Multi-tensor `_foreach_*` ops: PyTorch's default on CUDA.
    #[default]
    Foreach,
    /// One fused kernel, no temporaries.
    Fused,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Train,
    /// `model.eval()` + `torch.no_grad()` forward.
    Infer,
    /// Greedy `model.generate()`: the prefill forward, then one decode forward per new token
    /// against a KV cache (settings in [`TrainConfig::generate`]).
    Generate,
}

/// Attention kernel: eager materialises B×H×S×S scores; SDPA (flash / memory-efficient) does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AttentionImpl {
    Eager,
    #[default]
    Sdpa,
}

/// Whose memory behaviour is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    /// PyTorch eager: saved tensors follow autograd formulas and die in backward.
    #[default]
    PytorchEager,
    /// candle: every op keeps its inputs until backward ends; gradients collect in a store.
    Candle,
}

/// Everything besides the model that decides the memory of a step.
///
/// `remote = "Self"` makes the derives inherent functions, wrapped by the trait impls below.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, remote = "Self")]
pub struct TrainConfig {
    /// Samples per optimizer step (the micro-batch is `batch / grad_accum`).
    pub batch: u64,
    /// Overrides the sequence length of token/sequence inputs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<u64>,
    pub optimizer: OptimizerKind,
    pub optimizer_impl: OptimizerImpl,
    pub precision: Precision,
    pub autocast_device: AutocastDevice,
    pub device: Device,
    pub mode: Mode,
    pub checkpointing: bool,
    /// `torch.autocast(cache_enabled=…)` (default on, as PyTorch's): the half copies of the
    /// weights stay cached until the forward ends. Left out of JSON when on, as saved before it.
    #[serde(skip_serializing_if = "crate::serde_util::is_true")]
    pub autocast_cache: bool,
    pub grad_accum: u64,
    pub attention: AttentionImpl,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inplace_relu: Option<bool>,
    pub framework: Framework,
    /// Fine-tuning: frozen parts, LoRA adapters, a quantised base (`finetune/`).
    #[serde(skip_serializing_if = "crate::finetune::FineTune::is_default")]
    pub finetune: crate::finetune::FineTune,
    /// Prompt, new tokens and KV cache of `Mode::Generate` (ignored by the other modes).
    #[serde(skip_serializing_if = "GenerateConfig::is_default")]
    pub generate: GenerateConfig,
    /// How the weights are stored for inference (`--weights`); `None`: the precision's dtype.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weights: Option<crate::formats::WeightFormat>,
}

impl Serialize for TrainConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TrainConfig::serialize(self, s)
    }
}

/// Read through a buffered `serde_json::Value` (LocalStorage's JSON, share links), so the
/// config and its enums are deserialized by one instance each (see `serde_util::via_value`).
impl<'de> Deserialize<'de> for TrainConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::serde_util::via_value(d, TrainConfig::deserialize)
    }
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            batch: 32,
            seq_len: None,
            optimizer: OptimizerKind::Adamw,
            optimizer_impl: OptimizerImpl::Foreach,
            precision: Precision::Fp32,
            autocast_device: AutocastDevice::Cuda,
            device: Device::Cuda,
            mode: Mode::Train,
            checkpointing: false,
            autocast_cache: true,
            grad_accum: 1,
            attention: AttentionImpl::Sdpa,
            inplace_relu: None,
            framework: Framework::PytorchEager,
            finetune: crate::finetune::FineTune::default(),
            generate: GenerateConfig::default(),
            weights: None,
        }
    }
}

impl TrainConfig {
    /// Whose allocation the estimate simulates, as views name it beside every figure (a vLLM
    /// serving figure is `serve::ENGINE`'s).
    pub fn engine(&self) -> &'static str {
        match (self.framework, self.mode) {
            (Framework::Candle, _) => "candle",
            (_, Mode::Train) => "PyTorch training step",
            (_, Mode::Infer) => "PyTorch forward (torch.no_grad)",
            (_, Mode::Generate) => "Hugging Face generate() (PyTorch)",
        }
    }

    /// Samples in one forward/backward pass.
    pub fn micro_batch(&self) -> u64 {
        (self.batch / self.grad_accum.max(1)).max(1)
    }
}

macro_rules! names {
    ($t:ty { $($v:ident = $s:literal),* $(,)? }) => {
        impl $t {
            pub const ALL: &'static [$t] = &[$(<$t>::$v),*];
            pub fn name(self) -> &'static str { match self { $(<$t>::$v => $s),* } }
            pub fn parse(s: &str) -> Option<$t> { match s { $($s => Some(<$t>::$v),)* _ => None } }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(self.name()) }
        }
    };
}
pub(crate) use names;

names!(Precision { Fp32 = "fp32", Fp16 = "fp16", Bf16 = "bf16", AmpFp16 = "amp-fp16", AmpBf16 = "amp-bf16" });
names!(AutocastDevice { Cuda = "cuda", Cpu = "cpu" });
names!(Device { Cuda = "cuda", Cpu = "cpu" });
names!(OptimizerKind {
    Sgd = "sgd", SgdMomentum = "sgd-momentum", Adam = "adam", Adamw = "adamw", AdamwAmsgrad = "adamw-amsgrad",
    Adagrad = "adagrad", Rmsprop = "rmsprop", RmspropCentered = "rmsprop-centered", Adafactor = "adafactor",
    Adam8bit = "adam8bit", PagedAdamw8bit = "paged-adamw8bit",
});
names!(OptimizerImpl { Forloop = "forloop", Foreach = "foreach", Fused = "fused" });
names!(Mode { Train = "train", Infer = "infer", Generate = "generate" });
names!(AttentionImpl { Eager = "eager", Sdpa = "sdpa" });
names!(Framework { PytorchEager = "pytorch-eager", Candle = "candle" });
