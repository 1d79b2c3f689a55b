//! The import panel in the page (issue 12): a Hugging Face model id or hub URL, whose
//! `config.json` this module fetches from huggingface.co (`hub.rs`), and the paste box for a
//! vramcalc JSON spec or a `config.json`. This module draws it into the app's host element and
//! answers it, so none of it is in the app's first-load bundle. A model read reaches the app as a
//! `vramcalc-import` event on the host, `detail` `{"kind": "spec" | "hf", "spec", "context",
//! "hub"?}` (`hub`: the model's id, `id@revision`, when it came from the hub: its link names it);
//! a failure is shown in the panel and says what to do next (a token field for a gated model, a
//! retry after a network failure, the paste box for a `model_type` the importer does not know).

use crate::llm_form::escape;
use crate::panel::{draw, element, emit, listen, target_with, value_of};
use serde_json::json;
use std::cell::Cell;
use vramcalc_core::hub::{HubError, HubErrorKind};
use wasm_bindgen::JsCast;

thread_local! {
    static ZH: Cell<bool> = const { Cell::new(false) };
}

/// The panel's strings in the app's language.
fn tr(key: &str) -> &'static str {
    let zh = ZH.with(Cell::get);
    let (en, cn) = match key {
        "hub_model" => ("Hugging Face model", "Hugging Face 模型"),
        "hub_placeholder" => ("Qwen/Qwen2.5-7B-Instruct, or the model page's URL", "Qwen/Qwen2.5-7B-Instruct，或模型页面的网址"),
        "hub_load" => ("Load from Hugging Face", "从 Hugging Face 载入"),
        "hub_token" => ("Access token (kept in this tab only, sent only to huggingface.co)", "访问令牌（仅保存在此标签页，仅发送给 huggingface.co）"),
        "hub_retry" => ("Retry", "重试"),
        "hub_paste" => ("Paste its config.json or a JSON spec instead", "改为粘贴其 config.json 或 JSON 规格"),
        "paste" => ("Paste a spec or config.json", "粘贴规格或 config.json"),
        "paste_help" => ("A vramcalc JSON spec, or a Hugging Face config.json (it has model_type).", "vramcalc JSON 规格，或 Hugging Face 的 config.json（含 model_type）。"),
        "paste_load" => ("Load pasted model", "载入粘贴的模型"),
        "pasted_spec" => ("Loaded the pasted spec.", "已载入粘贴的规格。"),
        "pasted_hf" => ("Imported the Hugging Face config.", "已导入 Hugging Face 配置。"),
        _ => ("", ""),
    };
    if zh { cn } else { en }
}

/// The panel's HTML (its status lines are filled in later).
fn html() -> String {
    let placeholder = r#"{"input": {"shape": [3, 32, 32]}, "layers": [...]}  |  config.json"#;
    format!(
        r#"<form class="hub" data-testid="hub"><label for="hub-id">{}</label><div class="hub-row"><input id="hub-id" type="text" placeholder="{}" spellcheck="false" autocomplete="off" data-testid="hub-id"><button type="submit" data-testid="hub-load">{}</button></div><div class="hub-status"></div></form><details class="paste" data-testid="paste"><summary>{}</summary><p class="muted small">{}</p><label for="paste-text" class="sr-only">{}</label><textarea id="paste-text" rows="6" data-testid="paste-text" spellcheck="false" placeholder="{}"></textarea><button type="button" data-testid="paste-load" data-act="paste">{}</button><div class="paste-status"></div></details>"#,
        tr("hub_model"),
        escape(tr("hub_placeholder")),
        tr("hub_load"),
        tr("paste"),
        tr("paste_help"),
        tr("paste"),
        escape(placeholder),
        tr("paste_load"),
    )
}

/// Draws the panel into the element `host_id` in language `lang`.
pub fn render(host_id: &str, lang: &str) -> Result<(), String> {
    ZH.with(|z| z.set(lang == "zh"));
    let host = element(host_id)?;
    draw(&host, &html());
    listen(&host, "submit", on_submit);
    listen(&host, "click", on_click);
    Ok(())
}

/// The host of the element that raised `e`.
fn host_of(e: &web_sys::Event) -> Option<web_sys::Element> {
    e.current_target()?.dyn_into::<web_sys::Element>().ok()
}

fn find(host: &web_sys::Element, selector: &str) -> Option<web_sys::Element> {
    host.query_selector(selector).ok().flatten()
}

/// Puts `html` into the status line `selector` of the panel.
fn status(host: &web_sys::Element, selector: &str, html: &str) {
    if let Some(s) = find(host, selector) {
        s.set_inner_html(html);
    }
}

fn on_submit(e: web_sys::Event) {
    e.prevent_default();
    if let Some(host) = host_of(&e) {
        load_hub(host);
    }
}

fn on_click(e: web_sys::Event) {
    let Some(host) = host_of(&e) else { return };
    match target_with(&e, "data-act").map(|(_, act)| act).as_deref() {
        Some("paste") => paste(&host),
        // the unsupported model's next step: the paste box, open
        Some("open-paste") => {
            if let Some(details) = find(&host, "[data-testid=paste]") {
                let _ = details.set_attribute("open", "");
            }
            if let Some(t) = find(&host, "#paste-text").and_then(|t| t.dyn_into::<web_sys::HtmlElement>().ok()) {
                let _ = t.focus();
            }
        }
        _ => {}
    }
}

/// Reads the paste box and sends what it read to the app.
fn paste(host: &web_sys::Element) {
    let text = find(host, "#paste-text").map(|t| value_of(&t)).unwrap_or_default();
    match crate::paste::read_paste(&text) {
        Ok(answer) => {
            let (kind, spec) = answer.split_once('\n').unwrap_or_default();
            let context = if kind == "hf" { crate::paste::context_of(&text) } else { None };
            emit(host, "vramcalc-import", &format!(r#"{{"kind":"{kind}","context":{},"spec":{spec}}}"#, json!(context)));
            let said = if kind == "hf" { tr("pasted_hf") } else { tr("pasted_spec") };
            status(host, ".paste-status", &format!(r#"<p class="ok" role="status" data-testid="paste-ok">{said}</p>"#));
        }
        Err(e) => status(host, ".paste-status", &format!(r#"<p class="error" role="alert" data-testid="paste-error">{}</p>"#, escape(&e))),
    }
}

/// Fetches the typed model's `config.json` and sends its spec to the app; a failure says what to
/// do next.
fn load_hub(host: web_sys::Element) {
    let input = find(&host, "#hub-id").map(|i| value_of(&i)).unwrap_or_default();
    let token = find(&host, "[data-testid=hub-token]").map(|t| value_of(&t)).unwrap_or_default();
    let button = find(&host, "[data-testid=hub-load]");
    let set_state = move |state: &str| {
        if let Some(b) = &button {
            let _ = b.set_attribute("data-status", state);
            let _ = if state == "loading" { b.set_attribute("disabled", "") } else { b.remove_attribute("disabled") };
        }
    };
    set_state("loading");
    wasm_bindgen_futures::spawn_local(async move {
        match crate::hub::load(&input, &token).await {
            Ok((hub, spec, context)) => {
                let detail = json!({"kind": "hf", "hub": hub.to_string(), "context": context, "spec": spec});
                emit(&host, "vramcalc-import", &detail.to_string());
                // a token the user typed stays in its field (this page only) for the next load
                if find(&host, "[data-testid=hub-token]").is_none() {
                    status(&host, ".hub-status", "");
                } else if let Some(e) = find(&host, "[data-testid=hub-error]") {
                    e.remove();
                }
                set_state("loaded");
            }
            Err(e) => {
                status(&host, ".hub-status", &failure(&e, find(&host, "[data-testid=hub-token]").map(|t| value_of(&t))));
                set_state("failed");
            }
        }
    });
}

/// A failure's message and its next step.
fn failure(e: &HubError, token: Option<String>) -> String {
    let kind = e.kind();
    let retry = format!(r#"<button type="submit" data-testid="hub-retry">{}</button>"#, tr("hub_retry"));
    let next = match kind {
        HubErrorKind::Gated => format!(
            r#"<label class="field token"><span>{}</span><input type="password" autocomplete="off" spellcheck="false" placeholder="hf_…" value="{}" data-testid="hub-token"></label>{retry}"#,
            tr("hub_token"),
            escape(&token.unwrap_or_default())
        ),
        HubErrorKind::Network => retry,
        HubErrorKind::Unsupported => format!(r#"<button type="button" data-act="open-paste" data-testid="hub-paste">{}</button>"#, tr("hub_paste")),
        _ => String::new(),
    };
    format!(
        r#"<div class="hub-failed"><p class="error" role="alert" data-testid="hub-error" data-kind="{}">{}</p>{next}</div>"#,
        kind.name(),
        escape(&e.to_string())
    )
}
