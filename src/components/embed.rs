//! Embed mode (`embed.html?embed`, the state in the fragment; `src/bin/embed.rs`): a compact read-only card for a blog column —
//! title, the headline figures against the GPU, the breakdown chart, the controls the author
//! exposed, and "Open in vramcalc". It reads and writes no LocalStorage and leaves the address
//! bar alone; it reports its height to the parent page (`crate::dom::HeightReporter`).

use super::charts::breakdown_chart;
use super::inputs::batch_slider;
use super::{use_dispatch, Ctx};
use crate::capacity::{card_capacity, card_name, gpu_label};
use crate::dom;
use crate::hooks::{use_document_attributes, use_link, use_report};
use crate::i18n::fill;
use crate::share_link::{self, Control, Notice, Start};
use crate::state::card::CardState;
use crate::state::{Action, GpuChoice, Model};
use std::rc::Rc;
use vramcalc_core::presets;
use vramcalc_core::share::ModelSource;
use vramcalc_core::{Precision, TrainConfig, GPUS};
use web_sys::HtmlSelectElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct EmbedProps {
    pub controls: Vec<Control>,
    /// The state the link opens (decoded before the first render).
    pub start: Rc<Start>,
    /// Draws a pipeline link's card (issue 27). Given only by the full embed bundle, so the small
    /// PyTorch card's bundle (`src/bin/card.rs`) links no pipeline code (and no importer: the
    /// pipelines' text encoders are imported from their configs).
    #[prop_or_default]
    pub pipeline_card: Option<Callback<crate::state::pipeline::PipelineState, Html>>,
}

fn title(model: &Model) -> String {
    let share = share_link::to_share(model, &Default::default());
    match share.model {
        ModelSource::Preset { id } => presets::list().iter().find(|p| p.id == id).map_or(id, |p| p.title.to_string()),
        ModelSource::Spec(spec) => spec.display_name(),
        ModelSource::Hub(id) => id,
    }
}

#[function_component(EmbedApp)]
pub fn embed_app(p: &EmbedProps) -> Html {
    let start = &p.start;
    let state = {
        let initial = CardState::of(&start.state);
        use_reducer(move || initial)
    };
    use_document_attributes(state.prefs.theme, state.prefs.lang);
    use_effect_with((), |_| {
        if let Some(root) = web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element()) {
            let _ = root.class_list().add_1("embed");
        }
        let reporter = dom::HeightReporter::start();
        move || drop(reporter)
    });
    let model = &state.model;
    let capacity = model.gpu.capacity();
    // By the card's own core: every model and setup (rank 0's for a multi-GPU job).
    let spec = crate::hooks::use_shared_spec(&model.spec);
    let report = Some(use_report(spec, model.config, model.dist, capacity));
    let fragment = use_link(model, state.prefs, 0).fragment;
    let dispatch = use_dispatch(state.dispatcher());
    let ctx = Ctx { dispatch, lang: state.prefs.lang, unit: state.prefs.unit, narrow: true };
    let t = ctx.tr();
    let d = state.dispatcher();
    let c = model.config;

    let broken = match &start.notice {
        Some(n @ (Notice::Broken(e) | Notice::Unfetched(e, _))) => Some(html! {
            <p class="stale small" role="alert" data-testid="link-notice" data-kind="broken">
                { fill(t.link_broken, &[e]) }
                { for if let Notice::Unfetched(_, link) = n { Some(crate::components::share::retry_button(t.retry, link)) } else { None } }
            </p>
        }),
        _ => None,
    };
    let body = match &report {
        None => html! { <p class="computing muted small" role="status" data-testid="computing">{ t.computing }</p> },
        Some(Ok(r)) => {
            let e = &r.estimate;
            let fits = e.device_total_bytes <= r.capacity;
            let (gpu_name, cap) = gpu_label(&model.gpu, r.capacity, ctx.unit, t.custom_capacity);
            let fit_text = if fits {
                fill(t.fits, &[&ctx.bytes(r.capacity - e.device_total_bytes)])
            } else {
                fill(t.does_not_fit, &[&ctx.bytes(e.device_total_bytes - r.capacity)])
            };
            html! {
                <>
                    <div class="headline">
                        <div class="figure main">
                            <span class="label">{ t.peak }</span>
                            <b data-testid="peak" data-bytes={e.peak_bytes.to_string()}>{ ctx.bytes(e.peak_bytes) }</b>
                        </div>
                        <div class="figure">
                            <span class="label">{ t.device_total }</span>
                            <b data-testid="device-total" data-bytes={e.device_total_bytes.to_string()}>{ ctx.bytes(e.device_total_bytes) }</b>
                        </div>
                    </div>
                    <p class={classes!("fit", if fits { "ok" } else { "over" })} data-testid="fit-status" data-fits={fits.to_string()}>
                        <span aria-hidden="true">{ if fits { "✓ " } else { "✗ " } }</span>
                        { fit_text }{ " " }<span class="muted">{ fill(t.on_gpu, &[&gpu_name, &cap]) }</span>
                    </p>
                    { breakdown_chart(&ctx, r) }
                    <p class="small muted setup" data-testid="embed-setup" data-params={e.params.to_string()}>
                        { embed_setup(t, &c, &model.dist, model.spec.seq_len(c.seq_len), e.params) }
                    </p>
                </>
            }
        }
        Some(Err(e)) => html! { <p class="stale" role="alert" data-testid="estimate-error">{ e.to_string() }</p> },
    };

    let controls = p.controls.iter().map(|control| match control {
        Control::Batch => {
            let d = d.clone();
            html! {
                <label class="control">
                    <span>{ t.batch }{ " " }<b data-testid="embed-batch-value">{ c.batch }</b></span>
                    { batch_slider(c.batch, t.batch, "embed-batch", Callback::from(move |v| d.dispatch(Action::SetBatch(v)))) }
                </label>
            }
        }
        Control::Gpu => {
            let d = d.clone();
            let onchange = Callback::from(move |e: Event| {
                d.dispatch(Action::SetGpu(GpuChoice::Listed(e.target_unchecked_into::<HtmlSelectElement>().value())));
            });
            let current = match &model.gpu {
                GpuChoice::Listed(id) => id.as_str(),
                GpuChoice::Custom(_) => "",
            };
            html! {
                <label class="control">
                    <span>{ t.gpu }</span>
                    <select {onchange} data-testid="embed-gpu" aria-label={t.gpu}>
                        if current.is_empty() { <option value="" selected=true>{ t.custom_capacity }</option> }
                        { for GPUS.iter().map(|g| html! {
                            <option value={g.id} selected={g.id == current}>{ format!("{} — {}", card_name(g), card_capacity(g.bytes, ctx.unit)) }</option>
                        }) }
                    </select>
                </label>
            }
        }
        Control::Precision => {
            let d = d.clone();
            let onchange = Callback::from(move |e: Event| {
                if let Some(x) = Precision::parse(&e.target_unchecked_into::<HtmlSelectElement>().value()) {
                    d.dispatch(Action::SetConfig(TrainConfig { precision: x, ..c }));
                }
            });
            html! {
                <label class="control">
                    <span>{ t.precision }</span>
                    <select {onchange} data-testid="embed-precision" aria-label={t.precision}>
                        { for Precision::ALL.iter().map(|x| html! {
                            <option value={x.name()} selected={*x == c.precision}>{ x.name() }</option>
                        }) }
                    </select>
                </label>
            }
        }
    });
    let href = fragment.as_ref().map(|f| dom::app_link(f));
    html! {
        <ContextProvider<Ctx> context={ctx.clone()}>
            // issue 27: a pipeline link's card
            if let (crate::state::local::Workload::Pipeline, Some(card)) = (state.workload, &p.pipeline_card) {
                <main>{ card.emit(model.pipeline.clone()) }</main>
            } else {
            <main><article class="embed-card" data-testid="embed-card">
                <header class="embed-head">
                    <h1 data-testid="embed-title">{ title(model) }</h1>
                    <a href={href} target="_blank" rel="noopener" data-testid="open-full">{ t.open_in_app }{ " ↗" }</a>
                </header>
                { for broken }
                { body }
                if !p.controls.is_empty() {
                    <div class="embed-controls" data-testid="embed-controls">{ for controls }</div>
                }
                <footer class="small muted">{ "vramcalc — " }{ t.tagline }</footer>
            </article></main>
            }
        </ContextProvider<Ctx>>
    }
}

/// The embed card's setup line: what was estimated (training with its method, generation or
/// inference), the batch, sequence length, precision, optimizer, checkpointing and GPUs, so a
/// reader of a QLoRA card never takes it for full fine-tuning (issue 22 item 6).
pub fn embed_setup(t: &crate::i18n::Tr, c: &vramcalc_core::TrainConfig, d: &vramcalc_core::distributed::DistConfig, seq: Option<u64>, params: u64) -> String {
    use vramcalc_core::Mode;
    let what = match c.mode {
        Mode::Train if c.finetune.is_default() => format!("{} ({})", c.mode.name(), c.finetune.method.name()),
        Mode::Train if c.finetune.has_adapters() => format!("{} {} r={}", c.mode.name(), c.finetune.method.name(), c.finetune.lora_r),
        Mode::Train => format!("{} {}", c.mode.name(), c.finetune.method.name()),
        Mode::Generate => format!("{} +{} tokens", c.mode.name(), c.generate.new_tokens),
        Mode::Infer => c.mode.name().to_string(),
    };
    let mut parts = vec![what, format!("{} {}", t.batch, c.batch)];
    if let Some(s) = seq {
        parts.push(format!("seq {s}"));
    }
    parts.push(c.precision.to_string());
    if c.mode == Mode::Train {
        parts.push(c.optimizer.to_string());
        if c.checkpointing {
            parts.push("checkpointing".into());
        }
    }
    if !d.is_single() {
        parts.push(format!("{} × GPU ({}, rank 0)", d.gpus, d.strategy.name()));
    }
    parts.push(format!("{} {}", vramcalc_core::thousands(params), t.params));
    parts.join(" · ")
}

#[cfg(test)]
mod tests {
    use super::embed_setup;
    use vramcalc_core::distributed::{DistConfig, Strategy};
    use vramcalc_core::{finetune::Method, Mode, TrainConfig};

    /// A QLoRA card says QLoRA, its sequence, checkpointing and GPUs (issue 22 item 6); a generate
    /// card says generate and no optimizer.
    #[test]
    fn the_cards_setup_line_names_the_method_sequence_checkpointing_and_gpus() {
        let t = crate::i18n::tr(crate::i18n::Lang::En);
        let mut c = TrainConfig { batch: 1, checkpointing: true, ..Default::default() };
        (c.finetune.method, c.finetune.lora_r) = (Method::Qlora, 16);
        let d = DistConfig { gpus: 8, strategy: Strategy::Fsdp, ..Default::default() };
        let line = embed_setup(t, &c, &d, Some(2048), 8_030_261_248);
        for part in ["qlora r=16", "seq 2048", "checkpointing", "8 × GPU (fsdp"] {
            assert!(line.contains(part), "{part}: {line}");
        }
        let g = TrainConfig { mode: Mode::Generate, ..Default::default() };
        let line = embed_setup(t, &g, &DistConfig::default(), Some(128), 1);
        assert!(line.starts_with("generate +256 tokens") && !line.contains("adamw"), "{line}");
    }
}
