//! The one setup panel (issue 23): its mode first (train, fine-tune, infer, generate, serve),
//! then the GPU, the batch and the mode's own length fields, then only the settings that apply
//! to the mode (the LLM settings among them, `components::llm`), then the advanced ones.

use super::inputs::{batch_slider, check_field, enum_options, select_field, CheckProps, number_field, NumberProps, SelectProps};
use super::use_ctx;
use crate::state::{Action, GpuChoice, Length, SetupMode};
use crate::capacity::{card_capacity, card_name, parse_capacity};
use vramcalc_core::{
    AttentionImpl, AutocastDevice, Device, OptimizerImpl, OptimizerKind, Precision, TrainConfig, GPUS,
};
use web_sys::HtmlInputElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct SettingsProps {
    pub config: TrainConfig,
    pub gpu: GpuChoice,
    /// The setup's mode (`Model::mode`).
    pub mode: SetupMode,
    /// The modes that apply to the model (serving and generating need a language model).
    pub modes: Vec<SetupMode>,
    /// The sequence length the model runs at (`None`: no sequence input).
    pub seq_len: Option<u64>,
    /// The model has a ReLU (the in-place choice applies to nothing else).
    pub has_relu: bool,
    /// A configuration problem the core reported.
    #[prop_or_default]
    pub error: Option<String>,
    /// The mode's LLM length fields (generation's prompt and new tokens), beside the batch.
    #[prop_or_default]
    pub lengths: Html,
    /// The rest of the mode's LLM settings (`components::llm::LlmSetup`).
    #[prop_or_default]
    pub llm: Html,
}

#[function_component(Settings)]
pub fn settings(p: &SettingsProps) -> Html {
    let ctx = use_ctx();
    let t = ctx.tr();
    let d = ctx.dispatch.clone();
    let c = p.config;
    let set = |f: fn(&mut TrainConfig, &str)| {
        let d = d.clone();
        Callback::from(move |v: String| {
            let mut n = c;
            f(&mut n, &v);
            d.dispatch(Action::SetConfig(n));
        })
    };
    // What each number field holds while its text is not a whole number (kept here: the fields
    // are plain view functions).
    let (batch_draft, seq_draft, accum_draft) = (use_state(|| None), use_state(|| None), use_state(|| None));
    let on_batch = { let d = d.clone(); Callback::from(move |v: u64| d.dispatch(Action::SetBatch(v))) };
    let on_seq = { let d = d.clone(); Callback::from(move |v: u64| d.dispatch(Action::SetSeqLen(Some(v)))) };
    let on_accum = { let d = d.clone(); Callback::from(move |v: u64| d.dispatch(Action::SetConfig(TrainConfig { grad_accum: v, ..c }))) };
    let on_ckpt = { let d = d.clone(); Callback::from(move |v: bool| d.dispatch(Action::SetConfig(TrainConfig { checkpointing: v, ..c }))) };

    // GPU: a listed card or a custom capacity.
    let custom = matches!(p.gpu, GpuChoice::Custom(_));
    let gpu_value = match &p.gpu {
        GpuChoice::Listed(id) => id.clone(),
        GpuChoice::Custom(_) => "custom".into(),
    };
    let mut gpu_options: Vec<(String, String)> =
        GPUS.iter().map(|g| (g.id.to_string(), format!("{} — {}", card_name(g), card_capacity(g.bytes, ctx.unit)))).collect();
    gpu_options.push(("custom".into(), t.custom_capacity.into()));
    let on_gpu = {
        let d = d.clone();
        let cap = p.gpu.capacity();
        Callback::from(move |v: String| {
            d.dispatch(Action::SetGpu(if v == "custom" { GpuChoice::Custom(cap) } else { GpuChoice::Listed(v) }))
        })
    };
    // While typing, the text stays as typed; `(text, valid)`.
    let cap_draft = use_state(|| None::<(String, bool)>);
    let on_capacity = {
        let (d, draft) = (d.clone(), cap_draft.clone());
        Callback::from(move |e: InputEvent| {
            let text = e.target_unchecked_into::<HtmlInputElement>().value();
            let parsed = parse_capacity(&text);
            draft.set(Some((text, parsed.is_some())));
            if let Some(b) = parsed {
                d.dispatch(Action::SetGpu(GpuChoice::Custom(b)));
            }
        })
    };
    let on_capacity_blur = {
        let draft = cap_draft.clone();
        Callback::from(move |_: FocusEvent| {
            if draft.as_ref().is_some_and(|(_, ok)| *ok) {
                draft.set(None);
            }
        })
    };
    let cap_invalid = cap_draft.as_ref().is_some_and(|(_, ok)| !*ok);
    let cap_text = cap_draft.as_ref().map(|(t, _)| t.clone()).unwrap_or_else(|| ctx.bytes(p.gpu.capacity()));

    let inplace_value = match c.inplace_relu {
        None => "model",
        Some(true) => "all",
        Some(false) => "none",
    };
    let inplace_options = vec![
        ("model".to_string(), t.inplace_model.to_string()),
        ("all".to_string(), t.inplace_all.to_string()),
        ("none".to_string(), t.inplace_none.to_string()),
    ];
    let m = ctx.modes();
    let mode_options: Vec<(String, String)> = p.modes.iter().map(|x| (x.name().to_string(), m.mode(*x).to_string())).collect();
    let on_mode = { let d = d.clone(); Callback::from(move |v: String| if let Some(x) = SetupMode::parse(&v) { d.dispatch(Action::SetMode(x)) }) };
    let train = p.mode.trains();
    let lengths = p.mode.lengths();
    let serve = p.mode == SetupMode::Serve;
    let (batch_label, seq_label) = if serve { (m.concurrency, m.context) } else { (t.batch, t.seq_len) };

    html! {
        <section class="panel settings" aria-labelledby="setup-h" data-testid="settings" data-mode={p.mode.name()}>
            <h2 id="setup-h">{ m.setup }</h2>
            { select_field(SelectProps { id: "mode".into(), label: m.mode.into(), options: mode_options, value: p.mode.name().into(), testid: "mode-select".into(), on_change: on_mode }) }
            <small class="help mode-help" data-testid="mode-help">{ m.mode_help(p.mode) }</small>
            { select_field(SelectProps { id: "gpu".into(), label: t.gpu.into(), options: gpu_options, value: gpu_value.into(), testid: "gpu-select".into(), on_change: on_gpu }) }
            if !custom { <small class="help gpu-source">{ t.gpu_source }</small> }
            if custom {
                <div class={classes!("field", cap_invalid.then_some("invalid"))}>
                    <label for="capacity">{ t.capacity }</label>
                    <input id="capacity" type="text" value={cap_text} oninput={on_capacity} onblur={on_capacity_blur}
                        data-testid="capacity-input" aria-invalid={cap_invalid.to_string()} />
                    <small class="help">{ t.capacity_help }</small>
                    if cap_invalid { <div class="error" role="alert" data-testid="capacity-input-error">{ t.capacity_help }</div> }
                </div>
            }
            <div class="batch">
                { number_field(NumberProps { id: "batch", label: batch_label, value: c.batch, testid: "batch-input", on_change: on_batch.clone(), invalid_text: t.must_be_whole, error: p.error.clone() }, &batch_draft) }
                { batch_slider(c.batch, batch_label, "batch-slider", on_batch.clone()) }
            </div>
            // the mode's own lengths: one field each, one value in the state each
            if let (Some(s), true) = (p.seq_len, lengths.contains(&Length::Seq) || lengths.contains(&Length::Context)) {
                { number_field(NumberProps { id: "seq", label: seq_label, value: s, testid: "seq-input", on_change: on_seq, invalid_text: t.must_be_whole, error: None }, &seq_draft) }
            }
            { p.lengths.clone() }
            <div class="grid2">
                { select_field(SelectProps { id: "precision".into(), label: t.precision.into(), options: enum_options(Precision::ALL, Precision::name), value: c.precision.name().into(), testid: "precision-select".into(), on_change: set(|c, v| if let Some(x) = Precision::parse(v) { c.precision = x }) }) }
                if train {
                    { select_field(SelectProps { id: "optimizer".into(), label: t.optimizer.into(), options: enum_options(OptimizerKind::ALL, OptimizerKind::name), value: c.optimizer.name().into(), testid: "optimizer-select".into(), on_change: set(|c, v| if let Some(x) = OptimizerKind::parse(v) { c.optimizer = x }) }) }
                    { select_field(SelectProps { id: "optimizer-impl".into(), label: t.optimizer_impl.into(), options: enum_options(OptimizerImpl::ALL, OptimizerImpl::name), value: c.optimizer_impl.name().into(), testid: "optimizer-impl-select".into(), on_change: set(|c, v| if let Some(x) = OptimizerImpl::parse(v) { c.optimizer_impl = x }) }) }
                    { number_field(NumberProps { id: "accum", label: t.grad_accum, value: c.grad_accum, testid: "accum-input", on_change: on_accum, invalid_text: t.must_be_whole, error: None }, &accum_draft) }
                }
                if !serve {
                    { select_field(SelectProps { id: "attention".into(), label: t.attention.into(), options: enum_options(AttentionImpl::ALL, AttentionImpl::name), value: c.attention.name().into(), testid: "attention-select".into(), on_change: set(|c, v| if let Some(x) = AttentionImpl::parse(v) { c.attention = x }) }) }
                }
                if p.has_relu && !serve {
                    { select_field(SelectProps { id: "inplace".into(), label: t.inplace_relu.into(), options: inplace_options, value: inplace_value.into(), testid: "inplace-select".into(), on_change: set(|c, v| c.inplace_relu = match v { "all" => Some(true), "none" => Some(false), _ => None }) }) }
                }
            </div>
            if train {
                { check_field(CheckProps { id: "ckpt".into(), label: t.checkpointing.into(), checked: c.checkpointing, testid: "checkpointing".into(), on_change: on_ckpt }) }
            }
            { p.llm.clone() }
            <details class="advanced">
                <summary>{ t.advanced }</summary>
                <div class="grid2">
                    { select_field(SelectProps { id: "device".into(), label: t.device.into(), options: enum_options(Device::ALL, Device::name), value: c.device.name().into(), testid: "device-select".into(), on_change: set(|c, v| if let Some(x) = Device::parse(v) { c.device = x }) }) }
                    { select_field(SelectProps { id: "autocast".into(), label: t.autocast_device.into(), options: enum_options(AutocastDevice::ALL, AutocastDevice::name), value: c.autocast_device.name().into(), testid: "autocast-select".into(), on_change: set(|c, v| if let Some(x) = AutocastDevice::parse(v) { c.autocast_device = x }) }) }
                </div>
            </details>
        </section>
    }
}
