//! The import panel's texts (`components::import`), English and 中文: one struct, so a missing
//! translation is a compile error.

pub struct ImportTr {
    pub hub_model: &'static str,
    pub hub_placeholder: &'static str,
    pub hub_load: &'static str,
    pub hub_token: &'static str,
    pub hub_retry: &'static str,
    pub hub_paste: &'static str,
    pub paste: &'static str,
    pub paste_help: &'static str,
    pub paste_load: &'static str,
    pub pasted_spec: &'static str,
    pub pasted_hf: &'static str,
    /// A hub model's checkpoint as stored (`crate::import::checkpoint`), beside the modelled weights.
    pub checkpoint_stored: &'static str,
    pub checkpoint_index: &'static str,
    pub checkpoint_header: &'static str,
    pub checkpoint_agree: &'static str,
    pub checkpoint_disagree: &'static str,
    pub checkpoint_failed: &'static str,
}

pub const IMPORT_EN: ImportTr = ImportTr {
    hub_model: "Hugging Face model",
    hub_placeholder: "Qwen/Qwen2.5-7B-Instruct, or the model page's URL",
    hub_load: "Load from Hugging Face",
    hub_token: "Access token (kept in this tab only, sent only to huggingface.co)",
    hub_retry: "Retry",
    hub_paste: "Paste its config.json or a JSON spec instead",
    paste: "Paste a spec or config.json",
    paste_help: "A vramcalc JSON spec, or a Hugging Face config.json (it has model_type).",
    paste_load: "Load pasted model",
    pasted_spec: "Loaded the pasted spec.",
    pasted_hf: "Imported the Hugging Face config.",
    checkpoint_stored: "Stored on the hub: {} ({})",
    checkpoint_index: "model.safetensors.index.json, {} files",
    checkpoint_header: "model.safetensors header",
    checkpoint_agree: "within 1 % of the modelled weights",
    checkpoint_disagree: "{} against the modelled weights ({}): check the weight format against the checkpoint's quantization_config",
    checkpoint_failed: "The checkpoint's stored size could not be read: {}",
};

pub const IMPORT_ZH: ImportTr = ImportTr {
    hub_model: "Hugging Face 模型",
    hub_placeholder: "Qwen/Qwen2.5-7B-Instruct，或模型页面的网址",
    hub_load: "从 Hugging Face 载入",
    hub_token: "访问令牌（仅保存在此标签页，仅发送给 huggingface.co）",
    hub_retry: "重试",
    hub_paste: "改为粘贴其 config.json 或 JSON 规格",
    paste: "粘贴规格或 config.json",
    paste_help: "vramcalc JSON 规格，或 Hugging Face 的 config.json（含 model_type）。",
    paste_load: "载入粘贴的模型",
    pasted_spec: "已载入粘贴的规格。",
    pasted_hf: "已导入 Hugging Face 配置。",
    checkpoint_stored: "Hub 上存储的检查点：{}（{}）",
    checkpoint_index: "model.safetensors.index.json，{} 个文件",
    checkpoint_header: "model.safetensors 头部",
    checkpoint_agree: "与建模的权重相差不到 1 %",
    checkpoint_disagree: "与建模的权重相差 {}（建模 {}）：请核对权重格式与检查点的 quantization_config",
    checkpoint_failed: "无法读取检查点的存储大小：{}",
};
