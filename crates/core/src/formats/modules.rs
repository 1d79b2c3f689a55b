//! The Hugging Face module name of each matrix weight of a resolved graph, for the skip lists of
//! a quantised checkpoint ([`super::skip`]): the row's own name (`model.layers.3.self_attn`,
//! `crate::layer_names`) and, inside a layer that lowers several linears, the linear's name by
//! the order the layer lowers them — LLaMA's names (`modeling_llama.py`: `self_attn.q_proj`, …,
//! `mlp.down_proj`), DeepSeek's latent attention (`modeling_deepseek_v3.py`: `q_a_proj`, …),
//! transformers 5's fused experts (`mlp.experts`, one module holding `gate_up_proj` and
//! `down_proj`), the shared experts (`shared_expert` in Qwen2-MoE, `shared_experts` in DeepSeek:
//! both names answer).
//!
//! A linear whose layer's names are not known here (a vision block's) is inside its row: a
//! pattern that matches the row as a module prefix matches it.

use super::skip::Matcher;
use crate::graph::{Graph, ValueId};

/// Where a matrix weight sits, by name.
#[derive(Debug, Clone, PartialEq)]
pub enum Module {
    /// Its own module's full name (or each of the names it answers to).
    Named(Vec<String>),
    /// Somewhere inside this module.
    Within(String),
}

impl Module {
    /// Whether `m` keeps this weight unquantised.
    pub fn kept_by(&self, m: &Matcher) -> bool {
        match self {
            Module::Named(names) => names.iter().any(|n| m.keeps(n)),
            Module::Within(parent) => m.keeps_within(parent),
        }
    }
}

/// The module of each matrix weight (`linear` and `grouped_mm` operands) in a named row, in
/// forward order. `layers[i]` is row `i`'s kind and depth, `names[i]` its module name.
pub fn of_weights(g: &Graph, layers: &[(&str, u32)], names: &[Option<&str>]) -> Vec<(ValueId, Module)> {
    let mut param = vec![false; g.values.len()];
    for &p in &g.params {
        if let Some(x) = param.get_mut(p as usize) {
            *x = true;
        }
    }
    // (row, [(weight, grouped)]) in forward order
    let mut rows: Vec<(u32, Vec<(ValueId, bool)>)> = Vec::new();
    for o in &g.ops {
        let is_mat = (o.name == "linear" || o.name == "grouped_mm") && o.inputs.len() >= 2;
        if !is_mat || !param.get(o.inputs[1] as usize).copied().unwrap_or(false) {
            continue;
        }
        let w = (o.inputs[1], o.name == "grouped_mm");
        match rows.last_mut() {
            Some((l, ws)) if *l == o.layer => ws.push(w),
            _ => rows.push((o.layer, vec![w])),
        }
    }
    let mut out = Vec::new();
    for (row, ws) in rows {
        let (Some(&(kind, _)), Some(Some(name))) = (layers.get(row as usize), names.get(row as usize)) else { continue };
        let join = |leaf: &str| if leaf.is_empty() { name.to_string() } else { format!("{name}.{leaf}") };
        if kind == "sparse_moe" {
            let experts = ws.iter().find(|w| w.1).map_or(0, |w| g.value(w.0).shape.0[0]);
            let mut shared = ["gate_proj", "up_proj", "down_proj"].into_iter();
            for &(w, grouped) in &ws {
                let rows_out = g.value(w).shape.0.first().copied().unwrap_or(0);
                let names = if grouped {
                    vec![join("experts")]
                } else if rows_out == experts {
                    vec![join("gate"), join("router")]
                } else if rows_out == 1 {
                    vec![join("shared_expert_gate")]
                } else {
                    let leaf = shared.next().unwrap_or("down_proj");
                    vec![join(&format!("shared_expert.{leaf}")), join(&format!("shared_experts.{leaf}"))]
                };
                out.push((w, Module::Named(names)));
            }
            continue;
        }
        // Qwen2.5-VL's vision blocks (`modeling_qwen2_5_vl.py`, `Qwen2_5_VLVisionBlock`): a fused
        // `attn.qkv` and `attn.proj`, then the gated MLP
        let qwen_vision = name.contains("visual.blocks.") && kind.starts_with("transformer_") && ws.len() == 5;
        let list = if qwen_vision { Some(&["attn.qkv", "attn.proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"][..]) } else { leaves(kind, ws.len()) };
        match list {
            Some(list) => out.extend(ws.iter().zip(list).map(|(w, leaf)| (w.0, Module::Named(vec![join(leaf)])))),
            None => out.extend(ws.iter().map(|w| (w.0, Module::Within(name.to_string())))),
        }
    }
    out
}

/// The linears' names inside a layer of `kind` that lowers `n` of them, in lowering order.
fn leaves(kind: &str, n: usize) -> Option<&'static [&'static str]> {
    let list: &[&str] = match (kind, n) {
        ("linear", 1) => &[""],
        (k, 7) if k.starts_with("transformer_") => {
            &["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
        }
        (k, 5) if k.starts_with("transformer_") => &["self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"],
        ("multihead_attention", 4) => &["q_proj", "k_proj", "v_proj", "o_proj"],
        ("multihead_attention", 2) => &["qkv_proj", "o_proj"],
        ("gated_mlp", 3) => &["gate_proj", "up_proj", "down_proj"],
        ("multi_head_latent_attention", 5) => &["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
        ("multi_head_latent_attention", 4) => &["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"],
        _ => return None,
    };
    Some(list)
}
