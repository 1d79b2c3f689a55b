//! The llama.cpp panel's share links: `#gguf.hub=Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf,c=32768,…`
//! — the hub file (`hub=`, `rev=` when not `main`) or the built-in model and quant (`model=`,
//! `quant=`), never a local file (its settings only), then every setting that differs from its
//! default under its field id (`local::all_fields`; `%`, `,`, `=`, `#` and what a fragment may
//! not hold are `%XX`-escaped in values, as an `-ot` pattern or a `-ts` list has them). Reading a
//! link refuses an unknown key or a bad value by name; links written before mixed cards
//! (`gpu=ID,gpus=N`) open the same.

use super::{all_fields, with};
use crate::state::local::{GgufSource, HubFile, LocalSettings};

pub const PREFIX: &str = "gguf.";

/// A value as the link writes it.
fn escape(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_graphic() && !b"%,=#\"<>`".contains(&b) {
            out.push(b as char);
        } else {
            out += &format!("%{b:02X}");
        }
    }
    out
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
    for f in all_fields(s) {
        if base.iter().any(|d| d.id == f.id && d.value != f.value) {
            parts.push(format!("{}={}", f.id, escape(&f.value)));
        }
    }
    format!("{PREFIX}{}", parts.join(","))
}

/// Reads a fragment written by [`to_fragment`]: the source to load (if any) and the settings.
pub fn from_fragment(fragment: &str) -> Result<(Option<GgufSource>, LocalSettings), String> {
    let body = fragment.trim_start_matches('#').strip_prefix(PREFIX).ok_or("not a llama.cpp link")?;
    let (mut hub, mut rev, mut model, mut quant): (Option<String>, Option<String>, Option<String>, Option<String>) = (None, None, None, None);
    let mut s = LocalSettings::default();
    let ids: Vec<&'static str> = all_fields(&s).iter().map(|f| f.id).collect();
    for pair in body.split(',').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("link: {pair:?} is not key=value"))?;
        let v = &super::hub::decode(v).ok_or_else(|| format!("link {k}: {v:?} has a bad %-escape"))?;
        match k {
            "hub" => hub = Some(v.clone()),
            "rev" => rev = Some(v.clone()),
            "model" => model = Some(v.clone()),
            "quant" => quant = Some(v.clone()),
            _ if ids.contains(&k) || k == "gpus" => s = with(&s, k, v).map_err(|e| format!("link {k}: {e}"))?,
            _ => return Err(format!("link: unknown key {k:?}")),
        }
    }
    let src = match (hub, model, quant) {
        (Some(h), None, None) => {
            let mut f = HubFile::parse(&h).map_err(|e| format!("link hub: {e}"))?;
            if let Some(r) = rev {
                if !vramcalc_core::hub::is_valid_revision(&r) {
                    return Err(format!("link rev: {r:?} is not a revision"));
                }
                f.revision = r;
            }
            Some(GgufSource::Hub(f))
        }
        (None, Some(m), Some(q)) => Some(GgufSource::Quant { model: m, quant: q }),
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
        let s = LocalSettings { params, cards: vec![], host_ram: Some(96 << 30), ..LocalSettings::default() };
        // -ot patterns (with `=`, `,`, `|`, `\`), a -ts list, -sm and mixed cards
        let multi = LocalSettings {
            params: Params {
                overrides: vramcalc_core::llama_cpp::flags::parse_overrides(r"blk\.(0|1)\.ffn_.*_exps=CPU,token_embd=CUDA1").unwrap(),
                tensor_split: vec![3.0, 1.5],
                split_mode: vramcalc_core::llama_cpp::SplitMode::Row,
                ..Params::default()
            },
            cards: vec!["rtx-4090".into(), "rtx-3090".into(), "rtx-3090".into()],
            ..LocalSettings::default()
        };
        let ollama = LocalSettings {
            engine: crate::state::local::LocalEngine::Ollama,
            ollama: vramcalc_core::llama_cpp::ollama::Ollama {
                num_ctx: Some(8192),
                num_gpu: Some(20),
                num_batch: Some(256),
                num_parallel: Some(4),
                kv_cache_type: Some(GgmlType::Q8_0),
                flash_attention: Some(false),
                context_length: Some(16384),
            },
            ..LocalSettings::default()
        };
        for src in [Some(&hub), Some(&quant), None] {
            for set in [&s, &multi, &ollama, &LocalSettings::default()] {
                let f = to_fragment(src, set);
                assert!(f.starts_with(PREFIX) && !f.contains(' '), "{f}");
                assert_eq!(from_fragment(&f), Ok((src.cloned(), set.clone())), "{f}");
            }
        }
        assert_eq!(to_fragment(Some(&quant), &LocalSettings::default()), "gguf.model=qwen3-8b,quant=Q4_K_M");
        // a local file is never in a link: its settings are
        let file = GgufSource::File { name: "secret.gguf".into(), size: 9 };
        assert!(!to_fragment(Some(&file), &s).contains("secret"));
        let m = to_fragment(None, &multi);
        assert!(m.contains("gpu=rtx-4090+rtx-3090+rtx-3090") && m.contains("sm=row") && m.contains("ts=3%2C1.5"), "{m}");
        assert!(to_fragment(None, &ollama).contains("engine=ollama,") && to_fragment(None, &ollama).contains("OLLAMA_NUM_PARALLEL=4"));
    }

    /// Links written before mixed cards and Ollama (`gpu=ID,gpus=N`, `gpu=none`) open the same.
    #[test]
    fn old_links_open_the_same() {
        let (_, s) = from_fragment("gguf.model=qwen3-8b,quant=Q4_K_M,c=8192,gpu=a100-80gb,gpus=2").unwrap();
        assert_eq!(s.cards, ["a100-80gb", "a100-80gb"]);
        assert_eq!((s.params.n_ctx, s.engine), (8192, crate::state::local::LocalEngine::LlamaCpp));
        assert_eq!(from_fragment("gguf.gpus=3").unwrap().1.cards, ["rtx-4090"; 3]);
        assert_eq!(from_fragment("gguf.gpu=none,gpus=2").unwrap().1.cards, Vec::<String>::new());
        assert_eq!(from_fragment("gguf.c=8192,ctk=q8_0,ctv=q8_0,n-cpu-moe=4").unwrap().1.params.n_cpu_moe, 4);
        // one card stays as old links wrote it
        assert_eq!(to_fragment(None, &LocalSettings { cards: vec!["a100-80gb".into()], ..LocalSettings::default() }), "gguf.gpu=a100-80gb");
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
        assert!(from_fragment("gguf.ot=%ZZ").unwrap_err().contains("%-escape"));
        assert!(from_fragment("gguf.ot=blk%5C.(%3DCPU").unwrap_err().starts_with("link ot: -ot pattern"));
        assert!(from_fragment("gguf.gpu=rtx-4090+rtx-9999").unwrap_err().contains("unknown GPU"));
    }
}
