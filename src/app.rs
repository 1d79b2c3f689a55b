//! The app: one reducer state, derived reports (`use_memo`), and the panels.

use crate::analysis::{row_reports, Report};
use crate::components::header::header;
use crate::components::llm::LlmSetup;
use crate::components::llm_answers::LlmAnswers;
use crate::components::downloads::Downloads;
use crate::components::model::ModelPanel;
use crate::components::results::{summary, summary_bar, BarProps, Charts, SummaryProps};
use crate::components::settings::Settings;
use crate::components::whatif::{what_if_panel, WhatIfProps};
use crate::components::{Ctx, Shared};
use crate::components::share::{link_notice, ShareButtons};
use crate::hooks::{use_app_state, AppState, Boot, use_deferred_future, use_document_attributes, use_narrow, use_report, use_undo_shortcuts};
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

    // Derived, never stored: the estimate with its batch analysis (rank 0's for a multi-GPU
    // job), and the what-ifs of the whole job, computed after the main update is drawn.
    let report = use_report(&model.spec, model.config, model.dist, capacity);
    let what_ifs = use_deferred_future((model.spec.clone(), model.config, model.dist, capacity), 0, |(spec, config, dist, cap)| async move {
        // one change per task, after any step of the multi-GPU sizing (issue 23: no long task)
        crate::analysis::job_what_ifs(&spec, &config, &dist, Some(cap), || crate::dom::yield_to_page(crate::dom::Priority::Background)).await
    });
    // The last good report stays on screen while the input has an error.
    let last_good = use_mut_ref(|| None::<Rc<Report>>);
    // A model without layers is a neutral start ("add a layer"), not an error beside old figures.
    let (shown, error): (Option<Rc<Report>>, Option<Error>) = match report {
        _ if model.spec.layers.is_empty() => (None, None),
        Ok(r) => {
            *last_good.borrow_mut() = Some(r.clone());
            (Some(r), None)
        }
        Err(e) => (last_good.borrow().clone(), Some(e)),
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
    let llm_fields = use_memo((model.spec.clone(), model.config, model.dist), |(spec, c, d)| crate::llm::setup::fields(spec, c, d));
    let spec_shared = {
        let spec = model.spec.clone();
        use_memo(spec, |spec| Rc::new(spec.clone()))
    };
    let job = (model.config, model.dist);
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
                job, stale: error.is_some(), applied: applied.clone() }) }
            <main class="layout">
                <div class="col left">
                    // read top-down (issue 23): the model first, then its setup, then the answers
                    <ModelPanel model={panel_model} collapsed={state.collapsed.clone()} selected={state.selected.clone()}
                        rows={rows} error={error.clone()} />
                    <Settings config={model.config} gpu={model.gpu.clone()} seq_len={model.spec.seq_len(model.config.seq_len)}
                        has_relu={has_relu} error={config_error} />
                    <LlmSetup fields={(*llm_fields).clone()} config={model.config} dist={model.dist} />
                </div>
                <div class="col right">
                    { summary(&ctx, SummaryProps { report: shown.clone(), error: error.clone(), fix, assumed_seq: state.assumed_seq }) }
                    if let Some(r) = &shown {
                        <LlmAnswers report={r.clone()} spec={Shared((*spec_shared).clone())} config={model.config} dist={model.dist} {capacity} />
                    }
                    if let (Some(_), Some(w)) = (&shown, what_ifs.clone()) {
                        { what_if_panel(&ctx, &WhatIfProps { items: Shared(w), job, applied: applied.clone(), stale: error.is_some() }) }
                    }
                    <Charts report={shown.clone()} />
                    if shown.is_some() {
                        <section class="panel exports" aria-labelledby="exports-h" data-testid="exports">
                            <h2 id="exports-h">{ ctx.tr().downloads }</h2>
                            <Downloads spec={Shared((*spec_shared).clone())} config={model.config} dist={model.dist} />
                        </section>
                    }
                </div>
            </main>
            <footer class="foot muted small">
                { "vramcalc — estimates from a storage-level simulation of a PyTorch training step. " }
                { "Peak = torch.cuda.max_memory_allocated(); device total is approximate." }
            </footer>
        </ContextProvider<Ctx>>
    }
}
