//! The pipeline panel's what-ifs and reverse answer, in the PyTorch what-if panel's look (one
//! what-if system, issue 23): each change alone that lowers the device total, with what it saves
//! and whether it alone fits, a click applies it and an applied change keeps its place with an
//! undo; then the largest resolution, batch or frames that fits the GPU, each with "Use". The
//! logic is `crate::pipeline::whatif` (tested natively); both run after the page is drawn.

use crate::components::{percent, use_ctx, Ctx};
use crate::hooks::use_deferred_future;
use crate::i18n::fill;
use crate::pipeline::whatif::{self, Biggest, PipeWhatIf};
use crate::state::pipeline::PipelineState;
use crate::state::Action;
use std::rc::Rc;
use vramcalc_core::diffusion::reverse::Knob;
use vramcalc_core::diffusion::PipelineSpec;
use vramcalc_core::thousands;
use yew::prelude::*;

/// The change applied last: `(its label, state before, state after)`.
pub type Applied = UseStateHandle<Option<(String, PipelineState, PipelineState)>>;

#[derive(Properties, PartialEq)]
pub struct PipeWhatIfProps {
    pub state: PipelineState,
    pub capacity: Option<u64>,
    pub applied: Applied,
}

/// A change's label: each field it sets, `label: value`, in the page's language.
fn label(ctx: &Ctx, changes: &[(String, String)]) -> String {
    let t = ctx.pipe();
    let value = |id: &str, v: &str| -> String {
        match (id, v) {
            (_, "true") => t.on.into(),
            (_, "false") => t.off.into(),
            ("vae-tiling", "0") => t.own_tile.into(),
            _ => v.into(),
        }
    };
    changes.iter().map(|(id, v)| format!("{}: {}", t.label(id), value(id, v))).collect::<Vec<_>>().join(" · ")
}

fn set(ctx: &Ctx, s: PipelineState) -> Callback<MouseEvent> {
    let d = ctx.dispatch.clone();
    Callback::from(move |_| d.dispatch(Action::SetPipeline(s.clone())))
}

#[function_component(PipeWhatIfs)]
pub fn pipe_what_ifs(p: &PipeWhatIfProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.pipe();
    // by the app's worker (`crate::worker::pipeline`); a worker that failed is the list's error
    let list = use_deferred_future((p.state.clone(), p.capacity), 0, |(s, cap)| async move {
        let w = crate::worker::pipeline::what_ifs(&s, cap).await;
        Some((s, w))
    });
    let Some(list) = list else { return html! {} };
    let (of, items) = &*list;
    let stale = *of != p.state;
    let applied = (*p.applied).clone().filter(|(_, _, after)| *after == p.state);
    let item = |w: &PipeWhatIf| -> Html {
        let name = label(&ctx, &w.changes);
        let onclick = {
            let (applied, before, after, name, d) = (p.applied.clone(), p.state.clone(), w.state.clone(), name.clone(), ctx.dispatch.clone());
            Callback::from(move |_| {
                applied.set(Some((name.clone(), before.clone(), after.clone())));
                d.dispatch(Action::SetPipeline(after.clone()));
            })
        };
        let base = w.device_total + w.saves;
        html! {
            <li>
                <button class="trick" {onclick} disabled={stale} data-testid="pipe-whatif" data-changes={w.changes.iter().map(|(id, v)| format!("{id}={v}")).collect::<Vec<_>>().join(",")}
                    data-bytes={w.peak.to_string()} data-device-total={w.device_total.to_string()} data-fits={w.fits.map(|f| f.to_string())}>
                    <span class="trick-name">{ name }</span>
                    <span class="trick-effect saves">{ format!("{} ({})", fill(t.saves, &[&ctx.bytes(w.saves)]), percent(w.saves, base)) }</span>
                    <span class="muted">{ format!("→ {}", ctx.bytes(w.device_total)) }
                        if w.fits == Some(true) { { " · ✓ " }{ t.fits_alone } }</span>
                </button>
            </li>
        }
    };
    let undo = applied.map(|(name, before, _)| html! {
        <li class="applied" data-testid="pipe-whatif-applied">
            <span class="trick-name">{ "✓ " }{ name }</span>
            <span class="muted">{ t.applied }</span>
            <button onclick={set(&ctx, before)} data-testid="pipe-whatif-undo">{ t.undo }</button>
        </li>
    });
    html! {
        <section class={classes!("panel", "whatif", stale.then_some("is-stale"))} aria-labelledby="pipe-whatif-h" data-testid="pipe-whatifs" data-stale={stale.to_string()}>
            <h2 id="pipe-whatif-h">{ t.what_if }</h2>
            <p class="muted small">{ t.what_if_help }</p>
            { match items {
                Err(e) => html! { <p class="muted small">{ e }</p> },
                Ok(v) if v.is_empty() && undo.is_none() => html! { <p class="muted small" data-testid="pipe-whatif-none">{ t.no_what_if }</p> },
                Ok(v) => html! { <ul>{ for undo }{ for v.iter().map(item) }</ul> },
            } }
        </section>
    }
}

#[derive(Properties, PartialEq)]
pub struct PipeLargestProps {
    pub state: PipelineState,
    pub spec: Rc<PipelineSpec>,
    pub capacity: u64,
}

type Found = crate::worker::pipeline::Largest;

fn knob_name(ctx: &Ctx, k: Knob) -> &'static str {
    let t = ctx.pipe();
    match k {
        Knob::Batch => t.knobs[1],
        Knob::Frames => t.knobs[2],
        _ => t.knobs[0],
    }
}

#[function_component(PipeLargest)]
pub fn pipe_largest(p: &PipeLargestProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.pipe();
    // by the app's worker (`crate::worker::pipeline`); a worker that failed is the row's error
    let found = use_deferred_future((p.state.clone(), p.capacity), 150, |(s, cap)| async move {
        let out: Found = match crate::worker::pipeline::largest(&s, cap).await {
            Ok(l) => l,
            Err(e) => vec![(Knob::Resolution, Err(e))],
        };
        Some((s, out))
    });
    let row = |(k, r): &(Knob, Result<Option<Biggest>, String>)| -> Html {
        let id = format!("pipe-largest-{k}");
        let body = match r {
            Ok(Some(b)) => {
                let now = whatif::current(&p.state, &p.spec, *k);
                html! {
                    <>
                        <b data-testid={id.clone()} data-value={b.value.to_string()}>{ thousands(b.value) }</b>
                        <span class="muted small">{ format!(" · → {}", ctx.bytes(b.device_total)) }
                            if b.at_limit { { " " }{ t.at_limit } }</span>
                        if now != b.value {
                            { " " }<button class="fix" data-testid={format!("use-{id}")} onclick={set(&ctx, b.state.clone())}>{ t.use_it }{ " " }{ thousands(b.value) }</button>
                        }
                    </>
                }
            }
            Ok(None) => html! { <span class="muted" data-testid={id} data-value="">{ t.nothing_fits }</span> },
            Err(e) => html! { <span class="muted" data-testid={id} data-value="">{ e.trim_start_matches("config: ") }</span> },
        };
        html! { <li>{ knob_name(&ctx, *k) }{ ": " }{ body }</li> }
    };
    let stale = found.as_ref().is_none_or(|f| f.0 != p.state);
    html! {
        <section class="panel reverse" aria-labelledby="pipe-largest-h" data-testid="pipe-largest" data-stale={stale.to_string()}>
            <h2 id="pipe-largest-h">{ t.largest_h }</h2>
            { match &found {
                None => html! {},
                Some(f) => html! { <ul class="small">{ for f.1.iter().map(row) }</ul> },
            } }
        </section>
    }
}
