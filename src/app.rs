//! The app: one reducer state, derived reports (`use_memo`), and the panels.

use crate::analysis::{row_reports, Report};
use crate::components::header::header;
use crate::components::llm::LlmSetup;
use crate::components::llm_answers::LlmAnswers;
use crate::components::downloads::DownloadsProps;
use crate::components::model::ModelPanel;
use crate::components::results::{summary, summary_bar, BarProps, ChartsProps, SummaryProps};
use crate::components::reverse::{fits::FitsProps, fixes::FixesProps, largest::LargestProps, use_fixes, Launch, Measure};
use crate::components::settings::Settings;
use crate::components::whatif::{what_if_panel, WhatIfProps};
// issues 24, 27: the workload switch and the llama.cpp and pipeline workloads' panels
use crate::components::local::LocalProps;
use crate::components::pipeline::PipelineProps;
use crate::split::{self, Lazy};
use crate::components::workload::workload_switch;
use crate::state::local::Workload;
use crate::components::{use_dispatch, Ctx, Shared};
use crate::components::share::{link_notice, ShareButtons};
use crate::hooks::{use_app_state, AppState, Boot, use_deferred_future, use_document_attributes, use_narrow, use_report, use_shared_spec, use_undo_shortcuts};
use crate::state::{Action, SetupMode};
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
    let spec_shared = use_shared_spec(&model.spec);
    let report = use_report(spec_shared.clone(), model.config, model.dist, capacity);
    let job = report.as_ref().ok().map(|r| (r.estimate.peak_bytes, r.estimate.device_total_bytes));
    let what_ifs = use_deferred_future((spec_shared.clone(), model.config, model.dist, capacity, job), 0, |(spec, config, dist, cap, job)| async move {
        // one change per task, after any step of the multi-GPU sizing (issue 23: no long task);
        // none for a rejected job
        crate::analysis::job_what_ifs(&spec, &config, &dist, Some(cap), job?, || crate::dom::yield_to_page(crate::dom::Priority::Background)).await
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
    // One truth for each length: the input shape shows the length the model runs at (the
    // prompt when generating).
    let panel_model = {
        let len = crate::state::mode::running_len(&model.spec, &model.config);
        // a copy only when the length differs, kept while neither changes (cheap props)
        let spec = use_memo((model.spec.clone(), len), |(spec, len)| {
            let mut spec = spec.clone();
            if let Some(l) = len.filter(|l| spec.input.shape.first().is_some_and(|first| first != l)) {
                spec.make_mut().input.shape[0] = l;
            }
            spec
        });
        crate::state::Model { spec: (*spec).clone(), ..model.clone() }
    };
    let mode = model.mode();
    let modes: Vec<SetupMode> = SetupMode::ALL.into_iter().filter(|m| *m == mode || m.applies_to(&model.spec)).collect();
    let llm_fields = use_memo((spec_shared.clone(), model.config, model.dist, mode), |(spec, c, d, mode)| {
        let all = crate::llm::setup::fields(spec, c, d, *mode);
        let (lengths, rest): (Vec<_>, Vec<_>) = all.into_iter().partition(|f| matches!(f.id, "prompt-len" | "new-tokens"));
        (lengths, rest)
    });
    // vLLM's answer for a language model served (or run for inference: what serving it would hold)
    let lm = model.spec.is_token_input();
    let serving = {
        let (spec, c, d) = (spec_shared.clone(), model.config, model.dist);
        use_memo((spec, c, d, capacity, mode), move |(spec, c, d, cap, mode)| {
            (matches!(mode, SetupMode::Serve | SetupMode::Infer) && lm && *cap > 0)
                .then(|| Rc::new(vramcalc_core::serve::capacity(spec, &crate::llm::answers::serve_config(spec, c, d, *cap))))
        })
    };
    let serve_verdict = (*serving).clone().filter(|_| mode == SetupMode::Serve).map(|s| {
        (s, model.config.batch, crate::llm::answers::serve_context(&model.spec, &model.config))
    });
    let job = (model.config, model.dist);
    // the cheapest fixes when the setup does not fit: the what-if panel's first list, and the
    // sticky verdict's offer when no single change fits
    let over = matches!(&shown, Some(r) if r.estimate.device_total_bytes > capacity) && mode != SetupMode::Serve && error.is_none();
    let fixes = use_fixes(spec_shared.clone(), model.config, model.dist, capacity, over).map(Shared);
    // the command that runs the setup and the script that measures it (issue 26)
    let commands = use_memo((model.clone(), capacity), |(m, cap)| crate::reverse::launch::commands(m, *cap));
    let measure_script = |e: &vramcalc_core::Estimate| crate::reverse::measure::script(model, e.peak_bytes, e.device_total_bytes);
    let applied = use_state(|| None);
    let narrow = use_narrow();
    // issue 27: on the pipeline workload the link is the pipeline's (`#pipe.…`)
    let share_fragment = match state.workload {
        Workload::Pipeline => Some(crate::pipeline::link::to_fragment(&state.model.pipeline)),
        Workload::LlamaCpp => Some(crate::local::link::to_fragment(state.local.model.as_ref().map(|m| &m.0), &state.local.settings)),
        _ => link.fragment.clone(),
    };
    let dispatch = use_dispatch(state.dispatcher());
    let ctx = Ctx { dispatch, lang: state.prefs.lang, unit: state.prefs.unit, narrow };
    html! {
        <ContextProvider<Ctx> context={ctx.clone()}>
            { header(&ctx, state.can_undo(), state.can_redo(), state.prefs.theme) }
            <div class="sharebar" role="region" aria-label={ctx.tr().share_region}>
                { for notice.map(|n| link_notice(&ctx, &n, saved, dismiss)) }
                <ShareButtons fragment={share_fragment.map(AttrValue::from)} fresh={link.fresh || state.workload != Workload::PyTorch} />
            </div>
            // issues 24, 27: which engine's workload the page sizes (each has its own model panel)
            { workload_switch(&ctx, state.workload) }
            if state.workload == Workload::LlamaCpp {
                <main class="layout single"><Lazy<LocalProps> view={&split::LOCAL} props={LocalProps { state: state.local.clone() }} /></main>
            } else if state.workload == Workload::Pipeline {
                <main class="layout single"><Lazy<PipelineProps> view={&split::PIPELINE} props={PipelineProps { state: state.model.pipeline.clone() }} /></main>
            } else {
            { summary_bar(&ctx, &BarProps { report: shown.clone(), gpu: model.gpu.clone(), what_ifs: what_ifs.clone().map(Shared),
                job, stale: error.is_some(), applied: applied.clone(), serving: serve_verdict, fix_set: fixes.as_ref().and_then(|f| f.first().cloned()) }) }
            <main class="layout">
                <div class="col left">
                    // read top-down (issue 23): the model first, then its setup, then the answers
                    <ModelPanel model={panel_model} collapsed={state.collapsed.clone()} selected={state.selected.clone()}
                        rows={rows} error={error.clone()} />
                    <Settings config={model.config} gpu={model.gpu.clone()} seq_len={model.spec.seq_len(model.config.seq_len)}
                        {mode} {modes} has_relu={has_relu} error={config_error}
                        lengths={html! { <LlmSetup fields={llm_fields.0.clone()} config={model.config} dist={model.dist} testid="llm-lengths" /> }}
                        llm={html! { <LlmSetup fields={llm_fields.1.clone()} config={model.config} dist={model.dist} testid="llm" /> }} />
                </div>
                <div class="col right">
                    { summary(&ctx, SummaryProps { report: shown.clone(), error: error.clone(), fix, assumed_seq: state.assumed_seq, checkpoint: state.checkpoint().cloned() }) }
                    if let Some(r) = &shown {
                        <LlmAnswers report={r.clone()} spec={spec_shared.clone()} config={model.config} dist={model.dist} {capacity}
                            serving={(*serving).clone().map(Shared)} />
                    }
                    if let Some(r) = &shown {
                        <section class="panel reverse" aria-labelledby="reverse-h" data-testid="reverse">
                            <h2 id="reverse-h" class="sr-only">{ ctx.modes().largest_h }</h2>
                            <Lazy<LargestProps> view={&split::LARGEST} props={LargestProps { spec: spec_shared.clone(), config: model.config, dist: model.dist, capacity, mode }} />
                            <Launch commands={(*commands).clone()} />
                            <Measure script={measure_script(&r.estimate)} estimate={r.estimate.peak_bytes} measured={model.measured_peak} />
                        </section>
                    }
                    if let (Some(_), Some(w)) = (&shown, what_ifs.clone()) {
                        { what_if_panel(&ctx, &WhatIfProps { items: Shared(w), job, applied: applied.clone(), stale: error.is_some(),
                            fixes: if over { html! { <Lazy<FixesProps> view={&split::FIXES} props={FixesProps { list: fixes.clone() }} /> } } else { html! {} } }) }
                    }
                    <Lazy<ChartsProps> view={&split::CHARTS} props={ChartsProps { report: shown.clone() }} />
                    if shown.is_some() {
                        <Lazy<FitsProps> view={&split::FITS} props={FitsProps { gpu: model.gpu.clone(), workload: crate::reverse::fits::workload_of(mode, &model.config),
                            options: crate::reverse::fits::options(mode, &model.spec, &model.config) }} />
                    }
                    if shown.is_some() {
                        <section class="panel exports" aria-labelledby="exports-h" data-testid="exports">
                            <h2 id="exports-h">{ ctx.tr().downloads }</h2>
                            <Lazy<DownloadsProps> view={&split::DOWNLOADS} props={DownloadsProps { spec: spec_shared.clone(), config: model.config, dist: model.dist }} />
                        </section>
                    }
                </div>
            </main>
            }
            <footer class="foot muted small">
                { "vramcalc — estimates from a storage-level simulation of a PyTorch training step. " }
                { "Peak = torch.cuda.max_memory_allocated(); device total is approximate." }
            </footer>
        </ContextProvider<Ctx>>
    }
}
