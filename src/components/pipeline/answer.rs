//! A pipeline's answer: the verdict against the GPU, the peak per stage (weights on the GPU,
//! activations, CPU RAM, what is resident) and the stage timeline as stacked bars in run order,
//! the peak stage marked; or a LoRA training step's figures.

use crate::charts::stacks;
use crate::components::charts::stacks_chart;
use crate::components::use_ctx;
use crate::pipeline::Answer;
use crate::state::pipeline::Trainer;
use std::rc::Rc;
use vramcalc_core::thousands;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct AnswerProps {
    pub answer: Rc<Answer>,
    pub capacity: Option<u64>,
}

pub fn verdict(ctx: &crate::components::Ctx, a: &Answer, capacity: Option<u64>) -> Html {
    let t = ctx.pipe();
    let fits = capacity.is_none_or(|c| a.device_total() <= c);
    html! {
        <p class={classes!("verdict", if fits { "ok" } else { "bad" })} data-testid="pipeline-verdict" data-fits={fits.to_string()}>
            <span data-testid="pipeline-peak" data-bytes={a.peak().to_string()}>{ format!("{} {}", t.peak, ctx.bytes(a.peak())) }</span>
            { " · " }
            <span data-testid="pipeline-total" data-bytes={a.device_total().to_string()}>{ format!("{} {}", t.device_total, ctx.bytes(a.device_total())) }</span>
            if let Some(c) = capacity {
                { format!(" / {} — {}", ctx.bytes(c), if fits { t.fits } else { t.over }) }
            }
            { " · " }
            <span data-testid="pipeline-cpu" data-bytes={a.cpu_ram().to_string()}>{ format!("{} {}", t.cpu_ram, ctx.bytes(a.cpu_ram())) }</span>
        </p>
    }
}

/// The stage timeline's bars: weights on the GPU and activations, per stage in run order.
pub fn stage_stacks(e: &vramcalc_core::diffusion::PipelineEstimate, capacity: Option<u64>) -> Vec<stacks::StackInput> {
    e.stages.iter().map(|st| stacks::StackInput { label: st.name.clone(), parts: vec![("weights", st.gpu_weights), ("acts", st.activations)], capacity }).collect()
}

/// The timeline's chart.
pub fn stage_chart(ctx: &crate::components::Ctx, e: &vramcalc_core::diffusion::PipelineEstimate, capacity: Option<u64>) -> Html {
    let t = ctx.pipe();
    stacks_chart(ctx, &stage_stacks(e, capacity), 170.0, t.timeline, "chart-stages", |k| if k == "weights" { t.gpu_weights } else { t.activations })
}

#[function_component(StagesAnswer)]
pub fn stages_answer(p: &AnswerProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.pipe();
    let Answer::Stages(e) = &*p.answer else { return html! {} };
    html! {
        <div class="pipeline-answer" data-testid="pipeline-answer" data-peak-stage={e.peak_stage.clone()}>
            { verdict(&ctx, &p.answer, p.capacity) }
            <p class="muted small">{ format!("{}: {} · {}×{}{} · guidance {} · offload {}", t.params, thousands(e.params), e.width, e.height,
                if e.frames > 1 { format!("×{}", e.frames) } else { String::new() }, e.guidance, e.offload) }</p>
            <h3>{ t.stages }</h3>
            <div class="table-wrap table-scroll">
                <table class="stages">
                    <thead><tr>
                        <th scope="col">{ t.stage }</th><th scope="col">{ t.peak }</th><th scope="col">{ t.gpu_weights }</th>
                        <th scope="col">{ t.activations }</th><th scope="col">{ t.cpu_ram }</th><th scope="col">{ t.resident }</th>
                    </tr></thead>
                    <tbody>
                        { for e.stages.iter().map(|st| html! {
                            <tr data-testid="stage-row" data-stage={st.name.clone()} data-bytes={st.peak.to_string()} class={classes!((st.name == e.peak_stage).then_some("peak"))}>
                                <th scope="row" title={st.note.clone()}>{ &st.name }</th>
                                <td class="num">{ ctx.bytes(st.peak) }</td>
                                <td class="num">{ ctx.bytes(st.gpu_weights) }</td>
                                <td class="num">{ ctx.bytes(st.activations) }</td>
                                <td class="num">{ ctx.bytes(st.cpu_weights) }</td>
                                <td>{ st.resident.join(", ") }</td>
                            </tr>
                        }) }
                    </tbody>
                </table>
            </div>
            { stage_chart(&ctx, e, p.capacity) }
            <h3>{ t.components }</h3>
            <ul class="components small">
                { for e.components.iter().map(|c| html! {
                    <li data-testid="component-row" data-name={c.name.clone()}>{ format!("{} ({}): {} {}, {}", c.name, c.class, thousands(c.params), c.dtype, ctx.bytes(c.weight_bytes)) }</li>
                }) }
            </ul>
        </div>
    }
}

#[function_component(TrainAnswerView)]
pub fn train_answer(p: &AnswerProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.pipe();
    let Answer::Train(tr) = &*p.answer else { return html! {} };
    let kohya = tr.trainer == Trainer::Kohya;
    let of = match (kohya, tr.full.is_some()) {
        (true, _) => t.kohya_of,
        (false, true) => t.full_of,
        (false, false) => t.train_of,
    };
    html! {
        <div class="pipeline-answer" data-testid="pipeline-answer" data-peak-stage="train" data-trainer={tr.trainer.name()}>
            { verdict(&ctx, &p.answer, p.capacity) }
            <p>{ format!("{} {} ({}), {}×{}{}", of, tr.component, tr.class, tr.width, tr.height, if tr.frames > 1 { format!("×{}", tr.frames) } else { String::new() }) }</p>
            if let Some(f) = &tr.full {
                <p data-testid="train-script" data-script={f.script.clone()}>{ format!("{}: {}", t.full_script, f.script) }</p>
                if f.ema_bytes > 0 {
                    <p data-testid="train-ema" data-bytes={f.ema_bytes.to_string()} data-where={if f.ema_on_gpu { "gpu" } else { "cpu" }}>
                        { format!("{}: {} {}", t.ema_copy, ctx.bytes(f.ema_bytes), if f.ema_on_gpu { t.ema_gpu } else { t.ema_cpu }) }
                    </p>
                }
            }
            if tr.frozen == 0 && tr.full.is_none() { <p class="muted small">{ if kohya { t.kohya_cached } else { t.train_note } }</p> }
            if !tr.resident.is_empty() {
                <h3>{ t.kohya_resident }</h3>
                <ul class="components small">
                    { for tr.resident.iter().map(|(name, b)| html! {
                        <li data-testid="train-resident" data-name={name.clone()} data-bytes={b.to_string()}>{ format!("{name}: {}", ctx.bytes(*b)) }</li>
                    }) }
                </ul>
            }
            <dl>
                <dt>{ t.params }</dt><dd data-testid="train-params" data-count={tr.params.to_string()}>{ thousands(tr.params) }</dd>
                <dt>{ t.trainable }</dt><dd data-testid="train-trainable" data-count={tr.trainable.to_string()}>{ thousands(tr.trainable) }</dd>
                if tr.frozen > 0 {
                    <dt>{ t.frozen }</dt><dd data-testid="train-frozen" data-bytes={tr.frozen.to_string()}>{ ctx.bytes(tr.frozen) }</dd>
                }
            </dl>
        </div>
    }
}
