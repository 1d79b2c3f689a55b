//! Texts of the setup's modes (issue 23) and of the reverse views (issue 26: the largest value
//! that fits, the cheapest fixes, what fits a GPU, the launch command, measuring it yourself),
//! English and 中文: one struct, so a missing translation is a compile error.

use crate::state::SetupMode;
use vramcalc_core::solve::fix::{Change, Tier};
use vramcalc_core::solve::Variable;

pub struct ModesTr {
    pub setup: &'static str,
    pub mode: &'static str,
    pub train: &'static str,
    pub finetune: &'static str,
    pub infer: &'static str,
    pub generate: &'static str,
    pub serve: &'static str,
    pub mode_help_train: &'static str,
    pub mode_help_finetune: &'static str,
    pub mode_help_infer: &'static str,
    pub mode_help_generate: &'static str,
    pub mode_help_serve: &'static str,
    pub context: &'static str,
    pub concurrency: &'static str,
    /// `{}` sequences of `{}` tokens
    pub serve_fits: &'static str,
    pub serve_over: &'static str,
    pub serve_engine: &'static str,
    // the largest value that fits
    pub largest_h: &'static str,
    pub limited_by: &'static str,
    pub computing: &'static str,
    pub use_it: &'static str,
    // the cheapest fixes
    pub fixes_h: &'static str,
    pub fixes_help: &'static str,
    pub no_fix: &'static str,
    pub tier_same: &'static str,
    pub tier_training: &'static str,
    pub tier_gpus: &'static str,
    pub peak_margin: &'static str,
    pub apply: &'static str,
    // what fits my GPU
    pub fits_h: &'static str,
    pub fits_help: &'static str,
    pub workload: &'static str,
    pub model: &'static str,
    pub format: &'static str,
    pub fits: &'static str,
    pub margin: &'static str,
    pub yes: &'static str,
    pub no: &'static str,
    pub open: &'static str,
    pub rows_done: &'static str,
    // the command that runs it
    pub run_h: &'static str,
    pub copy: &'static str,
    pub copied: &'static str,
    pub no_command: &'static str,
    // measure it yourself
    pub measure_h: &'static str,
    pub measure_help: &'static str,
    pub measured: &'static str,
    pub measured_bad: &'static str,
    pub vs_measured: &'static str,
    pub clear: &'static str,
}

impl ModesTr {
    pub fn mode(&self, m: SetupMode) -> &'static str {
        match m {
            SetupMode::Train => self.train,
            SetupMode::FineTune => self.finetune,
            SetupMode::Infer => self.infer,
            SetupMode::Generate => self.generate,
            SetupMode::Serve => self.serve,
        }
    }

    pub fn mode_help(&self, m: SetupMode) -> &'static str {
        match m {
            SetupMode::Train => self.mode_help_train,
            SetupMode::FineTune => self.mode_help_finetune,
            SetupMode::Infer => self.mode_help_infer,
            SetupMode::Generate => self.mode_help_generate,
            SetupMode::Serve => self.mode_help_serve,
        }
    }

    pub fn tier(&self, t: Tier) -> &'static str {
        match t {
            Tier::SameResult => self.tier_same,
            Tier::ChangesTraining => self.tier_training,
            Tier::MoreGpus => self.tier_gpus,
        }
    }

    /// A reverse variable's name.
    pub fn variable(&self, v: Variable, lang_zh: bool) -> &'static str {
        match (v, lang_zh) {
            (Variable::Batch, false) => "batch",
            (Variable::Batch, true) => "批大小",
            (Variable::SeqLen, false) => "sequence length",
            (Variable::SeqLen, true) => "序列长度",
            (Variable::PromptLen, false) => "prompt length",
            (Variable::PromptLen, true) => "提示长度",
            (Variable::NewTokens, false) => "new tokens",
            (Variable::NewTokens, true) => "新生成 token 数",
            (Variable::Context, false) => "context (max-model-len)",
            (Variable::Context, true) => "上下文（max-model-len）",
            (Variable::Concurrency, false) => "concurrent sequences",
            (Variable::Concurrency, true) => "并发序列数",
            (Variable::GpuLayers, false) => "GPU layers",
            (Variable::GpuLayers, true) => "GPU 层数",
        }
    }

    /// A change of the cheapest-fix search.
    pub fn change(&self, c: Change, zh: bool) -> String {
        if !zh {
            return c.describe();
        }
        match c {
            Change::InplaceRelu => "原地 ReLU".into(),
            Change::ChunkedLoss => "分块线性交叉熵损失（Liger）".into(),
            Change::PagedKvCache => "分页 KV 缓存".into(),
            Change::AmpBf16 => "混合精度（AMP bf16）".into(),
            Change::Optimizer8bit => "8 位 AdamW（bitsandbytes）".into(),
            Change::Fp8KvCache => "fp8 KV 缓存".into(),
            Change::Checkpointing => "激活检查点".into(),
            Change::OffloadOptimizer => "优化器卸载到 CPU（DeepSpeed）".into(),
            Change::GradAccum(f) => format!("{f}× 梯度累积（有效批大小不变）"),
            Change::LoraR16 => "LoRA r=16 代替全量微调".into(),
            Change::Qlora => "QLoRA r=16（NF4 底座）".into(),
            Change::WeightsInt8 => "int8 权重（bitsandbytes）".into(),
            Change::WeightsNf4 => "NF4 权重（bitsandbytes）".into(),
            Change::HalveSeq => "序列减半".into(),
            Change::HalveBatch => "批大小减半".into(),
            Change::Gpus(n, s) => format!("{n} 块 GPU，{s}"),
        }
    }
}

pub const MODES_EN: ModesTr = ModesTr {
    setup: "Setup",
    mode: "Mode",
    train: "Train",
    finetune: "Fine-tune (LoRA, QLoRA, freeze)",
    infer: "Inference (no_grad)",
    generate: "Generate (KV cache)",
    serve: "Serve (vLLM)",
    mode_help_train: "One training step: every parameter trains.",
    mode_help_finetune: "One training step with frozen parts or adapters.",
    mode_help_infer: "One forward under torch.no_grad().",
    mode_help_generate: "model.generate(): the prefill, then one decode step per new token.",
    mode_help_serve: "vLLM's server: its KV pool on what the weights and the profile run leave.",
    context: "Context (max-model-len)",
    concurrency: "Concurrent sequences",
    serve_fits: "vLLM holds {} sequences of {} tokens",
    serve_over: "vLLM holds {} sequences of {} tokens, fewer than asked",
    serve_engine: "vLLM serving",
    largest_h: "Largest that fits",
    limited_by: "limited by {} in {} at {}",
    computing: "computing…",
    use_it: "Use",
    fixes_h: "Cheapest fixes",
    fixes_help: "The smallest sets of changes that make the setup fit, ranked by what they cost you; click Apply to take one.",
    no_fix: "No set of up to three changes (up to 8 GPUs) fits.",
    tier_same: "same result",
    tier_training: "changes the training",
    tier_gpus: "more GPUs",
    peak_margin: "peak {} · {} to spare",
    apply: "Apply",
    fits_h: "What fits my GPU",
    fits_help: "Every preset × six formats for this GPU and workload, computed a row at a time; each row opens its full estimate.",
    workload: "Workload",
    model: "Model",
    format: "Format",
    fits: "Fits",
    margin: "Margin",
    yes: "yes",
    no: "no",
    open: "open",
    rows_done: "{} of {} models",
    run_h: "Run it",
    copy: "Copy",
    copied: "Copied",
    no_command: "No launch line for this setup",
    measure_h: "Measure it yourself",
    measure_help: "Run this on your GPU and paste the peak it prints (bytes, or with a unit: 23.4 GiB). It travels in the share link.",
    measured: "Measured peak",
    measured_bad: "expected bytes, or a size such as 23.4 GiB",
    vs_measured: "estimate {} vs measured {}: {}",
    clear: "Clear",
};

pub const MODES_ZH: ModesTr = ModesTr {
    setup: "设置",
    mode: "模式",
    train: "训练",
    finetune: "微调（LoRA、QLoRA、冻结）",
    infer: "推理（no_grad）",
    generate: "生成（KV 缓存）",
    serve: "部署（vLLM）",
    mode_help_train: "一个训练步：所有参数都训练。",
    mode_help_finetune: "一个训练步：部分冻结或使用适配器。",
    mode_help_infer: "torch.no_grad() 下的一次前向。",
    mode_help_generate: "model.generate()：预填充，然后每个新 token 一个解码步。",
    mode_help_serve: "vLLM 服务：权重和性能探测之后剩下的显存用作 KV 池。",
    context: "上下文（max-model-len）",
    concurrency: "并发序列数",
    serve_fits: "vLLM 可容纳 {} 个 {} token 的序列",
    serve_over: "vLLM 可容纳 {} 个 {} token 的序列，少于所需",
    serve_engine: "vLLM 部署",
    largest_h: "可容纳的最大值",
    limited_by: "受限于 {}（{} 阶段，{} 时）",
    computing: "计算中…",
    use_it: "使用",
    fixes_h: "最省事的修改",
    fixes_help: "能让设置放下的最小修改组合，按代价排序；点击“应用”即可采用。",
    no_fix: "最多三项修改（最多 8 块 GPU）都放不下。",
    tier_same: "结果不变",
    tier_training: "改变训练",
    tier_gpus: "更多 GPU",
    peak_margin: "峰值 {} · 剩余 {}",
    apply: "应用",
    fits_h: "我的 GPU 能放下什么",
    fits_help: "此 GPU 与负载下每个预设 × 六种格式，逐行计算；每行可打开完整估算。",
    workload: "负载",
    model: "模型",
    format: "格式",
    fits: "放得下",
    margin: "余量",
    yes: "是",
    no: "否",
    open: "打开",
    rows_done: "{} / {} 个模型",
    run_h: "运行命令",
    copy: "复制",
    copied: "已复制",
    no_command: "此设置没有启动命令",
    measure_h: "自己测一测",
    measure_help: "在你的 GPU 上运行此脚本，把打印出的峰值粘贴到这里（字节数，或带单位：23.4 GiB）。它会保存在分享链接中。",
    measured: "实测峰值",
    measured_bad: "请输入字节数，或如 23.4 GiB 的大小",
    vs_measured: "估算 {}，实测 {}：{}",
    clear: "清除",
};
