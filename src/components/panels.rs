//! Panels the lazily loaded module draws into the page and answers itself: the LLM setup
//! (`components::llm`) and the import panel (a Hugging Face model id, the paste box), so neither
//! their controls nor their rules are in the first-load bundle. The app gives each an empty host
//! element, asks the module to draw it whenever what it shows changes, and takes what the panels
//! report as events on the page: `vramcalc-llm` (the LLM settings, `Model::llm`) and
//! `vramcalc-import` (a model read from the hub, with its id, or from the paste box).

use crate::state::{Action, State};
use serde_json::Value;
use vramcalc_core::ModelSpec;
use yew::prelude::*;

/// The element the import panel is drawn into.
pub const IMPORT_HOST: &str = "import-host";
/// The element the downloads panel is drawn into.
pub const EXPORT_HOST: &str = "export-host";

/// Has the module draw a panel (`render`: its function, `render_llm` or `render_import`) whenever
/// `request` (JSON naming the host) changes. The error says why the module could not.
#[hook]
pub fn use_module_panel(render: &'static str, request: String) -> Option<String> {
    let error = use_state(|| None::<String>);
    {
        let error = error.clone();
        use_effect_with(request, move |r| {
            let r = r.clone();
            wasm_bindgen_futures::spawn_local(async move { error.set(crate::extras::render_panel(render, &r).await.err()) });
        });
    }
    (*error).clone()
}

/// Takes what the module's panels report (see the module's doc) into the app's state.
#[hook]
pub fn use_panel_events(dispatch: UseReducerDispatcher<State>) {
    use_effect_with((), move |_| {
        let listen = |name: &'static str, d: UseReducerDispatcher<State>| {
            let doc = web_sys::window().and_then(|w| w.document())?;
            Some(gloo::events::EventListener::new(&doc, name, move |e| {
                let detail = js_sys::Reflect::get(e, &"detail".into()).ok().and_then(|v| v.as_string()).unwrap_or_default();
                if let Some(action) = action(name, &detail) {
                    d.dispatch(action);
                }
            }))
        };
        let listeners = [listen("vramcalc-llm", dispatch.clone()), listen("vramcalc-import", dispatch)];
        move || drop(listeners)
    });
}

/// The action a panel's event asks for; `None` for a detail that is not what the module writes.
pub fn action(event: &str, detail: &str) -> Option<Action> {
    let v: Value = serde_json::from_str(detail).ok()?;
    match event {
        "vramcalc-llm" => Some(Action::SetLlm(v.as_object()?.clone())),
        "vramcalc-import" => {
            let spec = ModelSpec::from_json(&v["spec"].to_string()).ok()?;
            Some(match v["kind"].as_str()? {
                "hf" => Action::ImportHf(spec, v["context"].as_u64(), v["hub"].as_str().map(str::to_string)),
                _ => Action::LoadSpec(spec),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_panels_events_become_actions() {
        let spec = vramcalc_core::presets::build("vgg11").unwrap();
        let detail = format!(r#"{{"kind":"hf","context":512,"spec":{}}}"#, serde_json::to_string(&spec).unwrap());
        assert!(matches!(action("vramcalc-import", &detail), Some(Action::ImportHf(s, Some(512), None)) if s == spec));
        let detail = format!(r#"{{"kind":"hf","hub":"Qwen/Qwen2.5-0.5B@v2","context":null,"spec":{}}}"#, serde_json::to_string(&spec).unwrap());
        assert!(matches!(action("vramcalc-import", &detail), Some(Action::ImportHf(_, None, Some(h))) if h == "Qwen/Qwen2.5-0.5B@v2"));
        let detail = format!(r#"{{"kind":"spec","context":null,"spec":{}}}"#, serde_json::to_string(&spec).unwrap());
        assert!(matches!(action("vramcalc-import", &detail), Some(Action::LoadSpec(s)) if s == spec));
        assert!(matches!(action("vramcalc-llm", r#"{"dist":{"gpus":4}}"#), Some(Action::SetLlm(m)) if m["dist"]["gpus"] == 4));
        assert!(action("vramcalc-llm", "[1]").is_none() && action("vramcalc-import", r#"{"kind":"hf"}"#).is_none());
    }
}
