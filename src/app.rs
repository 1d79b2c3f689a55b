//! The app: one reducer state, derived reports (`use_memo`), and the panels.

use crate::analysis::{row_reports, Report};
use crate::components::header::header;
use crate::components::llm::llm_panel;
use crate::components::panels::{use_module_panel, use_panel_events, EXPORT_HOST};
use crate::components::model::ModelPanel;
use crate::components::results::{summary, summary_bar, BarProps, Charts, SummaryProps};
use crate::components::settings::Settings;
use crate::components::whatif::{what_if_panel, WhatIfProps};
use crate::components::{Ctx, Shared};
use crate::components::share::{link_notice, ShareButtons};
use crate::hooks::{use_app_state, AppState, Boot, use_deferred_future, use_document_attributes, use_narrow, use_report, use_undo_shortcuts};
use crate::lazy;
use crate::state::Action;
use std::rc::Rc;
use vramcalc_core::spec::Layer;
use vramcalc_core::Error;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct AppProps {
    pub boot: Rc<Boot>,
}

/// The full app (the embed card is a separate page and bundle: `src/bin/embed.rs`).
#[function_component(App)]
pub fn app(p: &AppProps) -> Html {
    let AppState { state, notice, dismiss, saved, link } = use_app_state(&p.boot);
    use_undo_shortcuts(state.dispatcher());
    use_document_attributes(state.prefs.theme, state.prefs.lang);
    let model = &state.model;
    let capacity = model.gpu.capacity();

    // Derived, never stored: the estimate with its batch analysis, and the what-ifs. What the
    // app's build of the core leaves out (attention, recurrent, MoE/MLA layers) takes the lazy
    // route: the lazily loaded module computes it asynchronously, the newest request winning.
    let lazy_report = use_report(&model.spec, model.config, &model.llm, capacity);
    // What-ifs resolve the model once per trick: computed by the lazily loaded module (full core),
    // right after the main update is drawn, so the first chart never waits for that module.
    let what_ifs = use_deferred_future((model.spec.clone(), model.config, model.llm.clone()), 0, |(spec, config, llm)| async move {
        lazy::what_ifs(&spec, &config, &llm).await
    });
    // The last good report stays on screen while the input has an error, or while the lazy
    // route computes (shown as such).
    let last_good = use_mut_ref(|| None::<Rc<Report>>);
    let current = lazy_report.answer.clone();
    // A model without layers is a neutral start ("add a layer"), not an error beside old figures.
    let (shown, error): (Option<Rc<Report>>, Option<Error>) = match current {
        _ if model.spec.layers.is_empty() => (None, None),
        Some(Ok(r)) => {
            *last_good.borrow_mut() = Some(r.clone());
            (Some(r), None)
        }
        Some(Err(e)) => (last_good.borrow().clone(), Some(e)),
        None => (last_good.borrow().clone(), None),
    };
    let fix = error.as_ref().and_then(|e| crate::fix::suggest(&model.spec, e)).map(|f| {
        let d = state.dispatcher();
        let (field, value) = (f.field, f.value);
        let onclick = Callback::from(move |_| d.dispatch(Action::EditLayer { path: f.path.clone(), field: f.field.into(), layer: f.layer.clone() }));
        (field, value, onclick)
    });
    let rows = {
        let shown = shown.clone();
        use_memo(shown.as_ref().map(|r| Rc::as_ptr(r) as usize), move |_| {
            shown.map(|r| Rc::new(row_reports(&r.estimate)))
        })
    };
    let shown = shown.map(Shared);
    let rows = (*rows).clone().map(Shared);
    let config_error = match &error {
        Some(e @ (Error::Config(_) | Error::TooLarge(_))) => Some(e.to_string()),
        _ => None,
    };

    let has_relu = model.spec.layers.iter().any(|l| l.any(&|l| matches!(l, Layer::Relu(_))));
    // One truth for the sequence length: the input shape shows the length the model runs at.
    let panel_model = {
        let mut m = model.clone();
        if let (Some(l), Some(first)) = (model.spec.seq_len(model.config.seq_len), m.spec.input.shape.first_mut()) {
            *first = l;
        }
        m
    };
    let llm_error = use_module_panel("render_llm", crate::components::llm::request(&model.spec, &model.config, &model.llm, capacity, state.prefs.unit, state.prefs.lang.code()));
    use_panel_events(state.dispatcher());
    // (its buttons alert what goes wrong; the panel stays empty if the module cannot load)
    use_module_panel("render_exports", lazy::request(&model.spec, &model.config, &model.llm,
        &format!(r#","host":"{EXPORT_HOST}","lang":"{}""#, state.prefs.lang.code())));
    let applied = use_state(|| None);
    let narrow = use_narrow();
    let ctx = Ctx { dispatch: state.dispatcher(), lang: state.prefs.lang, unit: state.prefs.unit, narrow };
    html! {
        <ContextProvider<Ctx> context={ctx.clone()}>
            { header(&ctx, state.can_undo(), state.can_redo(), state.prefs.theme) }
            <div class="sharebar" role="region" aria-label={ctx.tr().share_region}>
                { for notice.map(|n| link_notice(&ctx, &n, saved, dismiss)) }
                <ShareButtons fragment={link.fragment.map(AttrValue::from)} fresh={link.fresh} />
            </div>
            { summary_bar(&ctx, &BarProps { report: shown.clone(), gpu: model.gpu.clone(), what_ifs: what_ifs.clone().map(Shared),
                stale: error.is_some(), applied: applied.clone() }) }
            <main class="layout">
                <div class="col left">
                    <Settings config={model.config} gpu={model.gpu.clone()} seq_len={model.spec.seq_len(model.config.seq_len)}
                        has_relu={has_relu} error={config_error} />
                    { llm_panel(&ctx, llm_error) }
                    <ModelPanel model={panel_model} collapsed={state.collapsed.clone()} selected={state.selected.clone()}
                        rows={rows} error={error.clone()} />
                </div>
                <div class="col right" aria-busy={lazy_report.computing.to_string()}>
                    if lazy_report.computing {
                        <p class="computing muted small" role="status" data-testid="computing">{ ctx.tr().computing }</p>
                    }
                    { summary(&ctx, SummaryProps { report: shown.clone(), error: error.clone(), fix, assumed_seq: state.assumed_seq }) }
                    if let (Some(r), Some(w)) = (&shown, what_ifs.clone()) {
                        { what_if_panel(&ctx, &WhatIfProps { items: Shared(w), base: r.estimate.peak_bytes, config: model.config,
                            applied: applied.clone(), stale: error.is_some() }) }
                    }
                    <Charts report={shown.clone()} />
                    // The downloads panel: drawn by the lazily loaded module once there are figures.
                    <section class="panel exports" aria-labelledby="exports-h" data-testid="exports" hidden={shown.is_none()}>
                        <h2 id="exports-h">{ ctx.tr().downloads }</h2>
                        <div id={EXPORT_HOST}></div>
                    </section>
                </div>
            </main>
            <footer class="foot muted small">
                { "vramcalc — estimates from a storage-level simulation of a PyTorch training step. " }
                { "Peak = torch.cuda.max_memory_allocated(); device total is approximate." }
            </footer>
        </ContextProvider<Ctx>>
    }
}
