//! Hugging Face module names of the linears a spec lowers, and peft's matching of
//! `target_modules` against them.
//!
//! A layer here does not carry a name; the lowering knows each projection's role (query, gate,
//! the output head, …) and the architecture's naming style, which together give the module name
//! transformers uses: `LlamaAttention.q_proj` (`modeling_llama.py`), `BertSelfAttention.query`,
//! `BertSelfOutput.dense` (`modeling_bert.py`), `GPT2Attention.c_attn` (`modeling_gpt2.py`).

use serde::{Deserialize, Serialize};

/// What a linear computes in its model, which fixes its module name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinearRole {
    Q,
    K,
    V,
    /// Attention output projection.
    O,
    /// A fused Q/K/V projection (GPT-2's `c_attn`).
    Qkv,
    Gate,
    Up,
    Down,
    /// A plain MLP's first projection (`intermediate.dense`, `c_fc`, `fc1`).
    FfnIn,
    /// A plain MLP's second projection (`output.dense`, `mlp.c_proj`, `fc2`).
    FfnOut,
    /// The model's last linear: `lm_head`, `classifier`, torchvision's `fc`.
    Head,
    /// Another top-level linear (BERT's `pooler.dense`).
    Other,
    /// Multi-head latent attention (DeepSeek-V2/V3, `DeepseekV3Attention`): the query's
    /// down-projection `q_a_proj`, its up-projection `q_b_proj`, the key/value latent
    /// `kv_a_proj_with_mqa` and its up-projection `kv_b_proj` (`o_proj` is [`LinearRole::O`], a
    /// full `q_proj` [`LinearRole::Q`]).
    QDown,
    QUp,
    KvDown,
    KvUp,
}

/// Whose naming a transformer layer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NameStyle {
    /// Llama, Mistral, Qwen, …: `self_attn.{q,k,v,o}_proj`, `mlp.{gate,up,down}_proj`.
    #[default]
    Llama,
    /// BERT, RoBERTa, ViT: `attention.self.{query,key,value}`, `attention.output.dense`,
    /// `intermediate.dense`, `output.dense`.
    Bert,
    /// GPT-2: `attn.c_attn`, `attn.c_proj`, `mlp.c_fc`, `mlp.c_proj`.
    Gpt2,
    /// diffusers' `Attention` (`attn1`, `attn2`, `attn`): `to_q`, `to_k`, `to_v`, `to_out.0`
    /// (and the joint blocks' `add_q_proj`, … `to_add_out`), `ff.net.0.proj`, `ff.net.2`.
    Diffusers,
}

impl NameStyle {
    /// A transformer layer's style: Llama's with a gated MLP or rotary embeddings, GPT-2's with
    /// a fused Q/K/V projection, else BERT's.
    pub fn of(llama_like: bool, fused_qkv: bool) -> NameStyle {
        match (llama_like, fused_qkv) {
            (true, _) => NameStyle::Llama,
            (false, true) => NameStyle::Gpt2,
            (false, false) => NameStyle::Bert,
        }
    }
}

/// The names a linear answers to, longest (most qualified) first.
pub fn module_names(role: LinearRole, style: NameStyle) -> &'static [&'static str] {
    use LinearRole::*;
    match (style, role) {
        (_, Head) => &["lm_head", "classifier", "fc", "score", "head"],
        (_, Other) => &["pooler.dense"],
        (_, QDown) => &["self_attn.q_a_proj"],
        (_, QUp) => &["self_attn.q_b_proj"],
        (_, KvDown) => &["self_attn.kv_a_proj_with_mqa"],
        (_, KvUp) => &["self_attn.kv_b_proj"],
        (NameStyle::Llama, Q) => &["self_attn.q_proj"],
        (NameStyle::Llama, K) => &["self_attn.k_proj"],
        (NameStyle::Llama, V) => &["self_attn.v_proj"],
        (NameStyle::Llama, O) => &["self_attn.o_proj"],
        (NameStyle::Llama, Qkv) => &["self_attn.qkv_proj"],
        (NameStyle::Llama, FfnIn) => &["mlp.fc1"],
        (NameStyle::Llama, FfnOut) => &["mlp.fc2"],
        (_, Gate) => &["mlp.gate_proj"],
        (_, Up) => &["mlp.up_proj"],
        (_, Down) => &["mlp.down_proj"],
        (NameStyle::Bert, Q) => &["attention.self.query"],
        (NameStyle::Bert, K) => &["attention.self.key"],
        (NameStyle::Bert, V) => &["attention.self.value"],
        (NameStyle::Bert, O) => &["attention.output.dense"],
        (NameStyle::Bert, Qkv) => &["attention.self.in_proj"],
        (NameStyle::Bert, FfnIn) => &["intermediate.dense"],
        (NameStyle::Bert, FfnOut) => &["output.dense"],
        (NameStyle::Gpt2, Qkv | Q | K | V) => &["attn.c_attn"],
        (NameStyle::Gpt2, O) => &["attn.c_proj"],
        (NameStyle::Gpt2, FfnIn) => &["mlp.c_fc"],
        (NameStyle::Gpt2, FfnOut) => &["mlp.c_proj"],
        (NameStyle::Diffusers, Q) => &["attn.to_q", "attn.add_q_proj"],
        (NameStyle::Diffusers, K) => &["attn.to_k", "attn.add_k_proj"],
        (NameStyle::Diffusers, V) => &["attn.to_v", "attn.add_v_proj"],
        (NameStyle::Diffusers, O) => &["attn.to_out.0", "attn.to_add_out"],
        (NameStyle::Diffusers, Qkv) => &["attn.to_qkv"],
        (NameStyle::Diffusers, FfnIn) => &["ff.net.0.proj"],
        (NameStyle::Diffusers, FfnOut) => &["ff.net.2"],
    }
}

/// peft's default `target_modules` for the architecture
/// (`utils/constants.py`, `TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING`: llama `q_proj`,
/// `v_proj`; bert `query`, `value`; gpt2 `c_attn`).
pub fn default_targets(style: NameStyle) -> &'static [&'static str] {
    match style {
        NameStyle::Llama => &["q_proj", "v_proj"],
        NameStyle::Bert => &["query", "value"],
        NameStyle::Gpt2 => &["c_attn"],
        // diffusers' `train_dreambooth_lora*.py`: `target_modules=["to_k", "to_q", "to_v", "to_out.0"]`
        NameStyle::Diffusers => &["to_k", "to_q", "to_v", "to_out.0"],
    }
}

/// The attention projections of Llama-style and latent-attention (DeepSeek) layers, for a LoRA
/// setup that must name its targets (a mixture-of-experts model: `resolve::needs_lora_targets`).
pub const ATTENTION_TARGETS: &str = "q_proj,k_proj,v_proj,o_proj,q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj";

/// peft's `check_target_module_exists`: `key == target` or `key.endswith("." + target)`.
pub fn matches(full: &str, target: &str) -> bool {
    full == target || (full.len() > target.len() && full.ends_with(target) && full.as_bytes()[full.len() - target.len() - 1] == b'.')
}

/// Whether a linear of `role` is a LoRA target. `all-linear` is every linear but the output
/// head (peft's `_maybe_include_all_linear_layers` drops `get_output_embeddings()`).
pub fn is_target(role: LinearRole, style: NameStyle, targets: &NameList) -> bool {
    if targets.iter().any(|t| t == "all-linear") {
        return role != LinearRole::Head;
    }
    let names = module_names(role, style);
    let hit = |t: &str| names.iter().any(|n| matches(n, t));
    if targets.is_empty() {
        default_targets(style).iter().any(|t| hit(t))
    } else {
        targets.iter().any(hit)
    }
}

/// Capacity of a [`NameList`] in bytes (its names joined by commas).
pub const NAME_LIST_CAPACITY: usize = 160;

/// A short comma-separated list of module names or paths, stored inline so that the setup stays
/// `Copy`. Serialises as a JSON list of strings.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NameList {
    len: u8,
    buf: [u8; NAME_LIST_CAPACITY],
}

impl NameList {
    pub const EMPTY: NameList = NameList { len: 0, buf: [0; NAME_LIST_CAPACITY] };

    /// From comma-separated names (spaces around them are dropped).
    pub fn parse(text: &str) -> Result<NameList, String> {
        let names: Vec<&str> = text.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        NameList::from_names(&names)
    }

    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<NameList, String> {
        let joined = names.iter().map(|s| s.as_ref().trim()).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(",");
        if joined.len() > NAME_LIST_CAPACITY {
            return Err(format!("the names `{joined}` are longer than {NAME_LIST_CAPACITY} characters together"));
        }
        if let Some(bad) = joined.split(',').find(|n| n.chars().any(|c| c.is_whitespace())) {
            return Err(format!("module name `{bad}` contains a space"));
        }
        let mut buf = [0u8; NAME_LIST_CAPACITY];
        buf[..joined.len()].copy_from_slice(joined.as_bytes());
        Ok(NameList { len: joined.len() as u8, buf })
    }

    /// The names joined by commas.
    pub fn as_str(&self) -> &str {
        // Built from a `&str` cut at a char boundary (the whole string), so always UTF-8.
        std::str::from_utf8(&self.buf[..self.len as usize]).unwrap_or("")
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.as_str().split(',').filter(|s| !s.is_empty())
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for NameList {
    fn default() -> Self {
        NameList::EMPTY
    }
}

impl std::fmt::Debug for NameList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl Serialize for NameList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for NameList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let names: Vec<String> = Vec::deserialize(d)?;
        NameList::from_names(&names).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peft_matching() {
        let l = |s| NameList::parse(s).unwrap();
        assert!(is_target(LinearRole::Q, NameStyle::Llama, &l("q_proj,v_proj")));
        assert!(!is_target(LinearRole::K, NameStyle::Llama, &l("q_proj,v_proj")));
        assert!(is_target(LinearRole::V, NameStyle::Llama, &NameList::EMPTY));
        assert!(is_target(LinearRole::Down, NameStyle::Llama, &l("all-linear")));
        assert!(!is_target(LinearRole::Head, NameStyle::Llama, &l("all-linear")));
        assert!(is_target(LinearRole::Q, NameStyle::Bert, &l("query,value")));
        // `dense` is every BERT `…dense`; `output.dense` also `attention.output.dense`
        assert!(is_target(LinearRole::O, NameStyle::Bert, &l("dense")));
        assert!(is_target(LinearRole::O, NameStyle::Bert, &l("output.dense")));
        assert!(!is_target(LinearRole::Q, NameStyle::Bert, &l("ery")));
        assert!(is_target(LinearRole::Head, NameStyle::Llama, &l("lm_head")));
    }

    #[test]
    fn name_list_round_trips_and_refuses_long_input() {
        let l = NameList::parse(" q_proj , v_proj,").unwrap();
        assert_eq!(l.as_str(), "q_proj,v_proj");
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(json, r#"["q_proj","v_proj"]"#);
        assert_eq!(serde_json::from_str::<NameList>(&json).unwrap(), l);
        assert!(NameList::parse(&"x,".repeat(100)).is_err());
    }
}
