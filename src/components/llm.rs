//! The LLM setup (issues 13–15): fine-tuning (full, freeze, LoRA, QLoRA), generate mode's settings,
//! the weights' format and GPUs × strategy, and what they give (trainable parameters, the
//! generation's peaks, rank 0's host memory, the fewest GPUs, serving capacity). The lazily
//! loaded module draws the controls into the panel and answers them
//! (`crates/web-extras/src/llm_form.rs`, `llm_panel.rs`: which fields apply, their labels,
//! options and checks), so the first-load bundle carries neither the settings' types nor their
//! rules nor their controls; the app keeps the settings as the module writes them (`Model::llm`).
//! Every such setting takes the lazy route (`crate::lazy::needs_full_core`): the figures are the
//! full core's, the CLI's.

use super::Ctx;
use serde_json::{Map, Value};
use vramcalc_core::{ByteUnit, ModelSpec, TrainConfig};
use yew::prelude::*;

/// The element the module draws the controls into.
pub const HOST: &str = "llm-host";

/// The module's request for the panel (`crates/web-extras/src/llm_form.rs`): the model, its
/// setup carrying the LLM settings (by the core's serde names), the job, the GPU's memory and how
/// the page shows bytes (for the answers below the fields: fewest GPUs, serving capacity).
pub fn request(spec: &ModelSpec, config: &TrainConfig, llm: &Map<String, Value>, capacity: u64, unit: ByteUnit, lang: &str) -> String {
    let unit = if unit == ByteUnit::Mib { "MiB" } else { "MB" };
    crate::lazy::request(spec, config, llm, &format!(r#","host":"{HOST}","lang":"{lang}","capacity":{capacity},"unit":"{unit}""#))
}

/// The LLM panel: its heading and the host the module fills.
pub fn llm_panel(ctx: &Ctx, error: Option<String>) -> Html {
    html! {
        <section class="panel llm" aria-labelledby="llm-h" data-testid="llm">
            <h2 id="llm-h">{ ctx.tr().llm_setup }</h2>
            <div id={HOST} class="grid2"></div>
            if let Some(e) = error { <p class="error small" role="alert" data-testid="llm-error">{ e }</p> }
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The panel's request is what the module reads: the settings join the config, the job
    /// stands beside it, and a change comes back as the module's settings.
    #[test]
    fn the_request_carries_the_settings_to_the_module() {
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let mut llm = Map::new();
        llm.insert("finetune".into(), serde_json::json!({ "method": "lora" }));
        llm.insert("dist".into(), serde_json::json!({ "gpus": 4 }));
        let mut r: Value = serde_json::from_str(&request(&spec, &TrainConfig::default(), &llm, 24 << 30, ByteUnit::Mib, "en")).unwrap();
        assert_eq!(r["host"], HOST);
        r["set"] = serde_json::json!({ "field": "lora-r", "value": "16" });
        let answer: Value = serde_json::from_str(&vramcalc_web_extras::llm_form(&r.to_string()).unwrap()).unwrap();
        assert!(answer["error"].is_null(), "{answer}");
        assert_eq!(answer["llm"]["finetune"]["lora_r"], 16);
        assert_eq!(answer["llm"]["finetune"]["method"], "lora");
        assert_eq!(answer["llm"]["dist"]["gpus"], 4);
        let ids: Vec<&str> = answer["fields"].as_array().unwrap().iter().map(|f| f["id"].as_str().unwrap()).collect();
        assert!(ids.contains(&"lora-targets") && ids.contains(&"gpus"), "{ids:?}");
    }
}
