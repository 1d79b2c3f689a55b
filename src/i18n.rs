//! English and 中文 strings. One struct per language, so a missing translation is a compile error.
//! Technical names (layer kinds, `fp32`, `adamw`, paths) stay as the core writes them.
//! Placeholders are `{}` and are filled with [`fill`].

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    En,
    Zh,
}

impl Lang {
    pub const ALL: [Lang; 2] = [Lang::En, Lang::Zh];
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::Zh => "中文",
        }
    }
    pub fn parse(s: &str) -> Option<Lang> {
        Lang::ALL.into_iter().find(|l| l.code() == s)
    }
}

/// Replaces each `{}` in order.
pub fn fill(template: &str, args: &[&str]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    for a in args {
        match rest.find("{}") {
            Some(i) => {
                out.push_str(&rest[..i]);
                out.push_str(a);
                rest = &rest[i + 2..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

pub struct Tr {
    pub tagline: &'static str,
    pub undo: &'static str,
    pub redo: &'static str,
    pub units: &'static str,
    pub language: &'static str,
    pub theme: &'static str,
    pub theme_auto: &'static str,
    pub theme_light: &'static str,
    pub theme_dark: &'static str,

    pub model: &'static str,
    pub preset: &'static str,
    pub custom_model: &'static str,
    pub start_empty: &'static str,
    pub family_cnn: &'static str,
    pub family_transformer: &'static str,
    pub family_rnn: &'static str,
    pub input_shape: &'static str,
    pub input_shape_help: &'static str,
    pub input_dtype: &'static str,
    pub input_float: &'static str,
    pub input_tokens: &'static str,
    pub layers: &'static str,
    pub add_layer: &'static str,
    pub search_kinds: &'static str,
    pub no_match: &'static str,
    pub no_layers: &'static str,
    pub move_up: &'static str,
    pub move_down: &'static str,
    pub duplicate: &'static str,
    pub delete: &'static str,
    pub expand: &'static str,
    pub collapse: &'static str,
    pub ungroup: &'static str,
    pub select: &'static str,
    pub group_into: &'static str,
    pub group_hint: &'static str,
    pub add_shortcut: &'static str,
    pub add_branch: &'static str,
    pub branch: &'static str,
    pub output: &'static str,
    pub params: &'static str,
    pub saved: &'static str,
    pub share_of_activations: &'static str,
    pub reorder_hint: &'static str,

    pub paste: &'static str,
    pub paste_help: &'static str,
    pub paste_load: &'static str,
    pub pasted_spec: &'static str,
    pub pasted_hf: &'static str,

    pub setup: &'static str,
    pub gpu: &'static str,
    pub custom_capacity: &'static str,
    pub capacity: &'static str,
    pub capacity_help: &'static str,
    pub batch: &'static str,
    pub seq_len: &'static str,
    pub mode: &'static str,
    pub mode_train: &'static str,
    pub mode_infer: &'static str,
    pub precision: &'static str,
    pub optimizer: &'static str,
    pub optimizer_impl: &'static str,
    pub grad_accum: &'static str,
    pub checkpointing: &'static str,
    pub inplace_relu: &'static str,
    pub inplace_model: &'static str,
    pub inplace_all: &'static str,
    pub inplace_none: &'static str,
    pub attention: &'static str,
    pub advanced: &'static str,
    pub device: &'static str,
    pub autocast_device: &'static str,
    pub must_be_whole: &'static str,

    pub results: &'static str,
    pub peak: &'static str,
    /// Chart marker labels: `peak 3.2 GB`, `max 553`.
    pub chart_peak: &'static str,
    pub chart_max: &'static str,
    pub peak_help: &'static str,
    pub device_total: &'static str,
    pub device_total_help: &'static str,
    pub fits: &'static str,
    pub does_not_fit: &'static str,
    pub on_gpu: &'static str,
    pub parameters: &'static str,
    pub peak_at: &'static str,
    pub rule_of_thumb: &'static str,
    pub rule_of_thumb_help: &'static str,
    pub vs_rule: &'static str,
    pub breakdown: &'static str,
    pub cat_parameters: &'static str,
    pub cat_buffers: &'static str,
    pub cat_gradients: &'static str,
    pub cat_optimizer_state: &'static str,
    pub cat_activations: &'static str,
    pub cat_temporaries: &'static str,
    pub cat_input: &'static str,
    pub cat_overhead: &'static str,
    pub timeline: &'static str,
    pub phase_forward: &'static str,
    pub phase_backward: &'static str,
    pub phase_optimizer: &'static str,
    pub batch_chart: &'static str,
    pub max_batch: &'static str,
    pub no_batch_fits: &'static str,
    pub per_layer: &'static str,
    pub col_layer: &'static str,
    pub col_kind: &'static str,
    pub col_output: &'static str,
    pub col_params: &'static str,
    pub col_values: &'static str,
    pub col_saved: &'static str,
    pub show_all: &'static str,
    pub show_fewer: &'static str,
    pub what_if: &'static str,
    pub what_if_help: &'static str,
    pub trick_halve_batch: &'static str,
    pub trick_amp: &'static str,
    pub trick_checkpointing: &'static str,
    pub trick_inplace_relu: &'static str,
    pub trick_grad_accum: &'static str,
    pub trick_sgd: &'static str,
    pub trick_shorter_seq: &'static str,
    pub saves: &'static str,
    pub adds: &'static str,
    pub no_change: &'static str,
    pub stale: &'static str,
    pub no_result: &'static str,

    pub copy_link: &'static str,
    pub link_copied: &'static str,
    pub link_select: &'static str,
    pub link_chars: &'static str,
    pub link_too_large: &'static str,
    pub link_opened: &'static str,
    pub link_broken: &'static str,
    pub back_to_saved: &'static str,
    pub dismiss: &'static str,
    pub embed: &'static str,
    pub embed_title: &'static str,
    pub embed_help: &'static str,
    pub embed_controls: &'static str,
    pub embed_listener: &'static str,
    pub copy: &'static str,
    pub copied: &'static str,
    pub preview: &'static str,
    pub open_in_app: &'static str,
    pub downloads: &'static str,
    pub download_csv: &'static str,
    pub download_json: &'static str,
    pub download_svg: &'static str,
}

pub const EN: Tr = Tr {
    tagline: "GPU memory of a training step, simulated op by op",
    undo: "Undo",
    redo: "Redo",
    units: "Units",
    language: "Language",
    theme: "Theme",
    theme_auto: "Auto",
    theme_light: "Light",
    theme_dark: "Dark",

    model: "Model",
    preset: "Preset",
    custom_model: "Custom model",
    start_empty: "Start empty",
    family_cnn: "CNNs",
    family_transformer: "Transformers",
    family_rnn: "RNNs",
    input_shape: "Input shape per sample",
    input_shape_help: "without the batch, e.g. 3, 224, 224 or a sequence length",
    input_dtype: "Input type",
    input_float: "float32 (images, features)",
    input_tokens: "int64 (token ids)",
    layers: "Layers",
    add_layer: "Add layer",
    search_kinds: "Search layer kinds",
    no_match: "No kind matches",
    no_layers: "No layers yet: add one, pick a preset or paste a spec.",
    move_up: "Move up",
    move_down: "Move down",
    duplicate: "Duplicate",
    delete: "Delete",
    expand: "Expand",
    collapse: "Collapse",
    ungroup: "Ungroup",
    select: "Select for grouping",
    group_into: "Group selected into",
    group_hint: "Tick adjacent layers to group them into a block.",
    add_shortcut: "Add shortcut",
    add_branch: "Add branch",
    branch: "branch",
    output: "output",
    params: "params",
    saved: "saved",
    share_of_activations: "of saved activations",
    reorder_hint: "Alt+↑/↓ moves the focused layer.",

    paste: "Paste a spec or config.json",
    paste_help: "A vramcalc JSON spec, or a Hugging Face config.json (it has model_type).",
    paste_load: "Load pasted model",
    pasted_spec: "Loaded the pasted spec.",
    pasted_hf: "Imported the Hugging Face config.",

    setup: "Training setup",
    gpu: "GPU",
    custom_capacity: "Custom capacity…",
    capacity: "Capacity",
    capacity_help: "e.g. 24GB, 24 GiB, 16000MB",
    batch: "Batch size",
    seq_len: "Sequence length",
    mode: "Mode",
    mode_train: "Training",
    mode_infer: "Inference (no_grad)",
    precision: "Precision",
    optimizer: "Optimizer",
    optimizer_impl: "Optimizer implementation",
    grad_accum: "Gradient accumulation steps",
    checkpointing: "Activation checkpointing",
    inplace_relu: "In-place ReLU",
    inplace_model: "as the model says",
    inplace_all: "all in-place",
    inplace_none: "none in-place",
    attention: "Attention",
    advanced: "Advanced",
    device: "Kernels of",
    autocast_device: "Autocast op lists of",
    must_be_whole: "a whole number ≥ 1",

    results: "Estimate",
    peak: "Peak allocated",
    chart_peak: "peak {}",
    chart_max: "max {}",
    peak_help: "torch.cuda.max_memory_allocated() of one steady-state step",
    device_total: "Device total (approx.)",
    device_total_help: "what nvidia-smi shows: peak + allocator reserve + CUDA context + cuBLAS workspace",
    fits: "Fits, {} to spare",
    does_not_fit: "Does not fit: {} over",
    on_gpu: "on {} ({})",
    parameters: "Parameters",
    peak_at: "Peak at",
    rule_of_thumb: "Rule of thumb",
    rule_of_thumb_help: "params × 4 (Adam) + batch × layer outputs × 2 + input, for comparison",
    vs_rule: "the estimate is {} of it",
    breakdown: "Breakdown of the peak",
    cat_parameters: "Parameters",
    cat_buffers: "Buffers",
    cat_gradients: "Gradients",
    cat_optimizer_state: "Optimizer state",
    cat_activations: "Activations",
    cat_temporaries: "Temporaries",
    cat_input: "Input batch",
    cat_overhead: "Overhead (device)",
    timeline: "Memory over one training step",
    phase_forward: "forward",
    phase_backward: "backward",
    phase_optimizer: "optimizer",
    batch_chart: "Memory vs batch size",
    max_batch: "Largest batch that fits: {}",
    no_batch_fits: "Not even batch 1 fits",
    per_layer: "Per layer: activations saved for backward",
    col_layer: "Layer",
    col_kind: "Kind",
    col_output: "Output shape",
    col_params: "Params",
    col_values: "Outputs / sample",
    col_saved: "Saved",
    show_all: "Show all {} rows",
    show_fewer: "Show fewer",
    what_if: "What if…",
    what_if_help: "Each trick applied to the current setup; click to apply.",
    trick_halve_batch: "Halve the batch",
    trick_amp: "Mixed precision (AMP fp16)",
    trick_checkpointing: "Activation checkpointing",
    trick_inplace_relu: "In-place ReLU",
    trick_grad_accum: "Gradient accumulation ×4 (same effective batch)",
    trick_sgd: "SGD + momentum instead of Adam",
    trick_shorter_seq: "Halve the sequence length",
    saves: "saves {}",
    adds: "adds {}",
    no_change: "no change",
    stale: "Showing the last valid result. Problem:",
    no_result: "No estimate yet.",

    copy_link: "Copy link",
    link_copied: "Link copied to the clipboard.",
    link_select: "Copy this link:",
    link_chars: "{} characters",
    link_too_large: "This model is too large for a link.",
    link_opened: "You opened a shared link. Your saved model is kept until you edit this one.",
    link_broken: "This link could not be opened: {}. Showing the default model; your saved work is untouched.",
    back_to_saved: "Back to my saved model",
    dismiss: "Dismiss",
    embed: "Embed",
    embed_title: "Embed this estimate in a page",
    embed_help: "Paste this <iframe> into your page: a read-only card, at most 720 px wide, with a link back to the full calculator.",
    embed_controls: "Controls readers may change:",
    embed_listener: "So that the iframe always fits its content, paste this once per page (the card sends its height with postMessage):",
    copy: "Copy",
    copied: "Copied",
    preview: "Preview",
    open_in_app: "Open in vramcalc",
    downloads: "Download",
    download_csv: "Per-layer table (CSV)",
    download_json: "Estimate (JSON)",
    download_svg: "Charts (SVG):",
};

pub const ZH: Tr = Tr {
    tagline: "逐算子模拟一次训练迭代的显存占用",
    undo: "撤销",
    redo: "重做",
    units: "单位",
    language: "语言",
    theme: "主题",
    theme_auto: "自动",
    theme_light: "浅色",
    theme_dark: "深色",

    model: "模型",
    preset: "预设",
    custom_model: "自定义模型",
    start_empty: "从空模型开始",
    family_cnn: "卷积网络",
    family_transformer: "Transformer",
    family_rnn: "循环网络",
    input_shape: "单个样本的输入形状",
    input_shape_help: "不含批次维，例如 3, 224, 224 或序列长度",
    input_dtype: "输入类型",
    input_float: "float32（图像、特征）",
    input_tokens: "int64（token id）",
    layers: "层",
    add_layer: "添加层",
    search_kinds: "搜索层类型",
    no_match: "没有匹配的类型",
    no_layers: "还没有层：添加一层、选择预设或粘贴规格。",
    move_up: "上移",
    move_down: "下移",
    duplicate: "复制",
    delete: "删除",
    expand: "展开",
    collapse: "折叠",
    ungroup: "取消分组",
    select: "选中以分组",
    group_into: "将选中的层组合为",
    group_hint: "勾选相邻的层即可组合成块。",
    add_shortcut: "添加捷径",
    add_branch: "添加分支",
    branch: "分支",
    output: "输出",
    params: "参数",
    saved: "保存",
    share_of_activations: "占保存激活",
    reorder_hint: "Alt+↑/↓ 移动当前层。",

    paste: "粘贴规格或 config.json",
    paste_help: "vramcalc JSON 规格，或 Hugging Face 的 config.json（含 model_type）。",
    paste_load: "载入粘贴的模型",
    pasted_spec: "已载入粘贴的规格。",
    pasted_hf: "已导入 Hugging Face 配置。",

    setup: "训练设置",
    gpu: "GPU",
    custom_capacity: "自定义容量…",
    capacity: "容量",
    capacity_help: "例如 24GB、24 GiB、16000MB",
    batch: "批大小",
    seq_len: "序列长度",
    mode: "模式",
    mode_train: "训练",
    mode_infer: "推理（no_grad）",
    precision: "精度",
    optimizer: "优化器",
    optimizer_impl: "优化器实现",
    grad_accum: "梯度累积步数",
    checkpointing: "激活检查点",
    inplace_relu: "原地 ReLU",
    inplace_model: "按模型定义",
    inplace_all: "全部原地",
    inplace_none: "全部非原地",
    attention: "注意力实现",
    advanced: "高级",
    device: "内核来源",
    autocast_device: "autocast 算子表",
    must_be_whole: "需为 ≥ 1 的整数",

    results: "估算",
    peak: "峰值分配",
    chart_peak: "峰值 {}",
    chart_max: "最大 {}",
    peak_help: "一次稳定迭代的 torch.cuda.max_memory_allocated()",
    device_total: "设备总占用（近似）",
    device_total_help: "nvidia-smi 显示的值：峰值 + 分配器预留 + CUDA 上下文 + cuBLAS 工作区",
    fits: "放得下，剩余 {}",
    does_not_fit: "放不下：超出 {}",
    on_gpu: "在 {}（{}）上",
    parameters: "参数量",
    peak_at: "峰值位置",
    rule_of_thumb: "经验公式",
    rule_of_thumb_help: "参数 × 4（Adam）+ 批大小 × 各层输出 × 2 + 输入，仅供对比",
    vs_rule: "估算值为其 {}",
    breakdown: "峰值构成",
    cat_parameters: "参数",
    cat_buffers: "缓冲区",
    cat_gradients: "梯度",
    cat_optimizer_state: "优化器状态",
    cat_activations: "激活",
    cat_temporaries: "临时张量",
    cat_input: "输入批次",
    cat_overhead: "设备开销",
    timeline: "一次训练迭代中的显存变化",
    phase_forward: "前向",
    phase_backward: "反向",
    phase_optimizer: "优化器",
    batch_chart: "显存与批大小",
    max_batch: "可容纳的最大批大小：{}",
    no_batch_fits: "批大小为 1 也放不下",
    per_layer: "逐层：为反向保存的激活",
    col_layer: "层",
    col_kind: "类型",
    col_output: "输出形状",
    col_params: "参数",
    col_values: "每样本输出数",
    col_saved: "保存",
    show_all: "显示全部 {} 行",
    show_fewer: "收起",
    what_if: "如果……",
    what_if_help: "每个技巧应用于当前设置的效果；点击即可应用。",
    trick_halve_batch: "批大小减半",
    trick_amp: "混合精度（AMP fp16）",
    trick_checkpointing: "激活检查点",
    trick_inplace_relu: "原地 ReLU",
    trick_grad_accum: "梯度累积 ×4（等效批大小不变）",
    trick_sgd: "用 SGD + 动量代替 Adam",
    trick_shorter_seq: "序列长度减半",
    saves: "节省 {}",
    adds: "增加 {}",
    no_change: "无变化",
    stale: "显示的是上一次有效结果。问题：",
    no_result: "暂无估算。",

    copy_link: "复制链接",
    link_copied: "链接已复制到剪贴板。",
    link_select: "请复制此链接：",
    link_chars: "{} 个字符",
    link_too_large: "此模型过大，无法放入链接。",
    link_opened: "你打开了一个分享链接。在你编辑它之前，你保存的模型不会被覆盖。",
    link_broken: "无法打开此链接：{}。已显示默认模型；你保存的内容未被改动。",
    back_to_saved: "返回我保存的模型",
    dismiss: "关闭提示",
    embed: "嵌入",
    embed_title: "将此估算嵌入网页",
    embed_help: "把这段 <iframe> 代码粘贴到你的网页中：只读卡片，宽度不超过 720 像素，并附有返回完整计算器的链接。",
    embed_controls: "读者可调整的选项：",
    embed_listener: "为使 iframe 高度始终贴合内容，请在每个页面中粘贴一次以下代码（卡片通过 postMessage 发送其高度）：",
    copy: "复制",
    copied: "已复制",
    preview: "预览",
    open_in_app: "在 vramcalc 中打开",
    downloads: "下载",
    download_csv: "逐层表格（CSV）",
    download_json: "估算结果（JSON）",
    download_svg: "图表（SVG）：",
};

pub fn tr(lang: Lang) -> &'static Tr {
    match lang {
        Lang::En => &EN,
        Lang::Zh => &ZH,
    }
}

impl Tr {
    pub fn category(&self, c: vramcalc_core::Category) -> &'static str {
        use vramcalc_core::Category::*;
        match c {
            Parameters => self.cat_parameters,
            Buffers => self.cat_buffers,
            Gradients => self.cat_gradients,
            OptimizerState => self.cat_optimizer_state,
            Activations => self.cat_activations,
            Temporaries => self.cat_temporaries,
            Input => self.cat_input,
        }
    }

    /// A bar's label.
    pub fn part(&self, p: crate::charts::bars::Part) -> &'static str {
        use crate::charts::bars::Part;
        match p {
            Part::Category(c) => self.category(c),
            Part::Overhead => self.cat_overhead,
            Part::Peak => self.peak,
            Part::DeviceTotal => self.device_total,
        }
    }

    pub fn phase(&self, p: vramcalc_core::Phase) -> &'static str {
        match p {
            vramcalc_core::Phase::Forward => self.phase_forward,
            vramcalc_core::Phase::Backward => self.phase_backward,
            vramcalc_core::Phase::Optimizer => self.phase_optimizer,
        }
    }

    pub fn trick(&self, t: vramcalc_core::whatif::Trick) -> &'static str {
        use vramcalc_core::whatif::Trick::*;
        match t {
            HalveBatch => self.trick_halve_batch,
            Amp => self.trick_amp,
            Checkpointing => self.trick_checkpointing,
            InplaceRelu => self.trick_inplace_relu,
            GradAccum4 => self.trick_grad_accum,
            Sgd => self.trick_sgd,
            ShorterSeq => self.trick_shorter_seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_placeholders() {
        assert_eq!(fill("Fits, {} to spare", &["2 GB"]), "Fits, 2 GB to spare");
        assert_eq!(fill("on {} ({})", &["A", "B"]), "on A (B)");
        assert_eq!(fill("no args {}", &[]), "no args {}");
        assert_eq!(fill("{}", &["a", "b"]), "a");
    }

    #[test]
    fn languages_parse() {
        for l in Lang::ALL {
            assert_eq!(Lang::parse(l.code()), Some(l));
        }
        assert_ne!(tr(Lang::Zh).peak, tr(Lang::En).peak);
    }
}
