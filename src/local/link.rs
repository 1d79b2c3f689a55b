//! The llama.cpp panel's share links: `#gguf.hub=Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf,c=32768,…`
//! — the hub file (`hub=`, `rev=` when not `main`) or the built-in model and quant (`model=`,
//! `quant=`), never a local file (its settings only), then every setting that differs from its
//! default under its field id (`local::fields`; values never contain `,` or `=`). Reading a link
//! refuses an unknown key or a bad value by name.

use super::{fields, with, ModelTraits};
use crate::state::local::{GgufSource, HubFile, LocalSettings};

pub const PREFIX: &str = "gguf.";

/// Every field, whatever the model (MoE and sliding-window ones included).
fn all_fields(s: &LocalSettings) -> Vec<crate::form::Field> {
    fields(s, ModelTraits { n_layer: 0, moe: true, swa: true, n_ctx_train: 0 })
}

/// The link fragment (without `#`).
pub fn to_fragment(src: Option<&GgufSource>, s: &LocalSettings) -> String {
    let mut parts = Vec::new();
    match src {
        Some(GgufSource::Hub(f)) => {
            parts.push(format!("hub={}/{}", f.repo, f.path));
            if f.revision != "main" {
                parts.push(format!("rev={}", f.revision));
            }
        }
        Some(GgufSource::Quant { model, quant }) => parts.push(format!("model={model},quant={quant}")),
        Some(GgufSource::File { .. }) | None => {}
    }
    let base = all_fields(&LocalSettings::default());
    for (f, d) in all_fields(s).into_iter().zip(base) {
        if f.value != d.value {
            parts.push(format!("{}={}", f.id, f.value));
        }
    }
    format!("{PREFIX}{}", parts.join(","))
}

/// Reads a fragment written by [`to_fragment`]: the source to load (if any) and the settings.
pub fn from_fragment(fragment: &str) -> Result<(Option<GgufSource>, LocalSettings), String> {
    let body = fragment.trim_start_matches('#').strip_prefix(PREFIX).ok_or("not a llama.cpp link")?;
    let (mut hub, mut rev, mut model, mut quant) = (None, None, None, None);
    let mut s = LocalSettings::default();
    let ids: Vec<&'static str> = all_fields(&s).iter().map(|f| f.id).collect();
    for pair in body.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("link: {pair:?} is not key=value"))?;
        match k {
            "hub" => hub = Some(v),
            "rev" => rev = Some(v),
            "model" => model = Some(v),
            "quant" => quant = Some(v),
            _ if ids.contains(&k) => s = with(&s, k, v).map_err(|e| format!("link {k}: {e}"))?,
            _ => return Err(format!("link: unknown key {k:?}")),
        }
    }
    let src = match (hub, model, quant) {
        (Some(h), None, None) => {
            let mut f = HubFile::parse(h).map_err(|e| format!("link hub: {e}"))?;
            if let Some(r) = rev {
                if !vramcalc_core::hub::is_valid_revision(r) {
                    return Err(format!("link rev: {r:?} is not a revision"));
                }
                f.revision = r.to_string();
            }
            Some(GgufSource::Hub(f))
        }
        (None, Some(m), Some(q)) => Some(GgufSource::Quant { model: m.to_string(), quant: q.to_string() }),
        (None, None, None) => None,
        _ => return Err("link: give hub=, or model= with quant=".into()),
    };
    Ok((src, s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::gguf::GgmlType;
    use vramcalc_core::llama_cpp::Params;

    #[test]
    fn the_source_and_every_setting_travel_in_the_link() {
        let hub = GgufSource::Hub(HubFile { repo: "unsloth/Qwen3-30B-A3B-GGUF".into(), revision: "refs/pr/2".into(), path: "Q4_K_M/x.gguf".into() });
        let quant = GgufSource::Quant { model: "qwen3-8b".into(), quant: "Q4_K_M".into() };
        let params = Params { n_ctx: 32768, type_k: GgmlType::Q8_0, n_cpu_moe: 12, swa_full: true, mmap: false, n_gpu_layers: Some(30), ..Params::default() };
        let s = LocalSettings {
            params,
            gpu: None,
            n_gpus: 2,
            host_ram: Some(96 << 30),
        };
        for src in [Some(&hub), Some(&quant), None] {
            for set in [&s, &LocalSettings::default()] {
                let f = to_fragment(src, set);
                assert!(f.starts_with(PREFIX) && !f.contains(' '), "{f}");
                assert_eq!(from_fragment(&f), Ok((src.cloned(), set.clone())), "{f}");
            }
        }
        assert_eq!(to_fragment(Some(&quant), &LocalSettings::default()), "gguf.model=qwen3-8b,quant=Q4_K_M");
        // a local file is never in a link: its settings are
        let file = GgufSource::File { name: "secret.gguf".into(), size: 9 };
        assert!(!to_fragment(Some(&file), &s).contains("secret"));
    }

    #[test]
    fn a_link_opens_the_llama_cpp_workload_with_its_model() {
        use crate::share_link::start;
        use crate::state::local::{Load, Workload};
        let s = crate::test_util::block_on(start("#gguf.model=qwen3-8b,quant=Q4_K_M,c=8192", None)).state;
        assert_eq!(s.workload, Workload::LlamaCpp);
        assert_eq!(s.local.settings.params.n_ctx, 8192);
        assert_eq!(s.local.model.as_ref().map(|m| m.1.tensor_bytes()), Some(super::super::synth("qwen3-8b", "Q4_K_M").unwrap().tensor_bytes()));
        let h = crate::test_util::block_on(start("#gguf.hub=a/b/x.gguf", None)).state;
        assert!(matches!(h.local.load, Load::Loading(GgufSource::Hub(ref f)) if f.url() == "https://huggingface.co/a/b/resolve/main/x.gguf"));
        let bad = crate::test_util::block_on(start("#gguf.model=qwen3-8b,quant=Q9", None));
        assert!(bad.notice.is_some());
    }

    #[test]
    fn bad_links_name_the_problem() {
        assert!(from_fragment("gguf.c=abc").unwrap_err().starts_with("link c:"));
        assert!(from_fragment("gguf.zz=1").unwrap_err().contains("unknown key"));
        assert!(from_fragment("gguf.hub=a/b/config.json").unwrap_err().starts_with("link hub:"));
        assert!(from_fragment("gguf.model=qwen3-8b").unwrap_err().contains("quant="));
        assert!(from_fragment("gguf.c").unwrap_err().contains("key=value"));
    }
}
