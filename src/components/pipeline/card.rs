//! The embed card of a pipeline link (`embed.html?embed#pipe.…`): the pipeline's name and
//! setup, the verdict against the GPU, the peak stage and the stage timeline, and "Open in
//! vramcalc". A component on the pipeline state alone, so any embed page can draw it.

use vramcalc_core::diffusion::kohya::Fp8Base;
use super::answer::{stage_chart, verdict};
use crate::components::use_ctx;
use crate::dom;
use crate::pipeline::{self, Answer, TrainAnswer};
use vramcalc_core::diffusion::full_train::Ema;
use crate::state::pipeline::{PipelineState, Trainer};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct PipelineCardProps {
    pub state: PipelineState,
}

/// The card's setup line: mode, size, batch, offload, and the LoRA step's rank (kohya's: its
/// flags that are on, by their names; a full fine-tune's: the script and its flags).
pub fn setup_line(s: &PipelineState, a: &Answer) -> String {
    let size = |w: u64, h: u64, f: u64| if f > 1 { format!("{w}×{h}×{f}") } else { format!("{w}×{h}") };
    match a {
        Answer::Stages(e) => {
            let mut parts = vec![s.mode.name().to_string(), size(e.width, e.height, e.frames), format!("batch {}×{}", s.batch, s.images_per_prompt), format!("offload {}", e.offload)];
            if s.vae_tiling.is_some() {
                parts.push("VAE tiling".into());
            }
            parts.push(format!("peak at {}", e.peak_stage));
            parts.join(" · ")
        }
        Answer::Train(t) if t.trainer == Trainer::Kohya => {
            let mut parts = vec![format!("kohya LoRA network_dim={}", s.lora_r), t.component.clone(), size(t.width, t.height, t.frames), format!("batch {}", s.batch), s.optimizer.name().to_string()];
            for (on, flag) in [(s.checkpointing, "--gradient_checkpointing"), (s.kohya.cache_latents, "--cache_latents"), (s.kohya.cache_te, "--cache_text_encoder_outputs"), (s.kohya.unet_only, "--network_train_unet_only"), (s.kohya.full_half, "--full_bf16/fp16"), (s.kohya.fp8 == Fp8Base::All, "--fp8_base"), (s.kohya.fp8 == Fp8Base::Unet, "--fp8_base_unet")] {
                if on {
                    parts.push(flag.into());
                }
            }
            parts.join(" · ")
        }
        Answer::Train(t @ TrainAnswer { full: Some(f), .. }) => {
            let mut parts = vec![format!("full fine-tune · {}", f.script), t.component.clone(), size(t.width, t.height, t.frames), format!("batch {}", s.batch), s.optimizer.name().to_string()];
            for (on, flag) in [(s.checkpointing, "--gradient_checkpointing"), (s.full.ema != Ema::None, "--use_ema"), (s.full.ema == Ema::Cpu, "--offload_ema"), (s.full.set_grads_to_none, "--set_grads_to_none")] {
                if on {
                    parts.push(flag.into());
                }
            }
            parts.join(" · ")
        }
        Answer::Train(t) => format!("LoRA r={} · {} · {} · batch {} · {}", s.lora_r, t.component, size(t.width, t.height, t.frames), s.batch, s.optimizer.name()),
    }
}

#[function_component(PipelineCard)]
pub fn pipeline_card(p: &PipelineCardProps) -> Html {
    let ctx = use_ctx();
    let s = &p.state;
    let answer = use_memo(s.clone(), |s| pipeline::spec_of(s).and_then(|sp| Ok((sp.name.clone(), pipeline::answer(s, &sp)?))));
    let href = dom::app_link(&pipeline::link::to_fragment(s));
    let capacity = pipeline::capacity(s);
    let (title, body) = match &*answer {
        Ok((name, a)) => (
            name.clone(),
            html! {
                <>
                    { verdict(&ctx, a, capacity) }
                    if let Answer::Stages(e) = a { { stage_chart(&ctx, e, capacity) } }
                    <p class="small muted setup" data-testid="embed-setup">{ setup_line(s, a) }</p>
                </>
            },
        ),
        Err(e) => (s.preset.clone(), html! { <p class="stale" role="alert" data-testid="estimate-error">{ e }</p> }),
    };
    html! {
        <article class="embed-card" data-testid="embed-card" data-workload="pipeline">
            <header class="embed-head">
                <h1 data-testid="embed-title">{ title }</h1>
                <a href={href} target="_blank" rel="noopener" data-testid="open-full">{ ctx.tr().open_in_app }{ " ↗" }</a>
            </header>
            { body }
            <footer class="small muted">{ "vramcalc — " }{ ctx.tr().tagline }</footer>
        </article>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_line_says_what_was_sized() {
        let s = PipelineState { offload: vramcalc_core::diffusion::Offload::Model, width: Some(768), ..PipelineState::default() };
        let a = pipeline::answer(&s, &pipeline::spec_of(&s).unwrap()).unwrap();
        let line = setup_line(&s, &a);
        assert!(line.starts_with("infer · 768×1024 · batch 1×1 · offload model · peak at "), "{line}");
        let t = PipelineState { mode: crate::state::pipeline::PipeMode::Train, lora_r: 32, ..PipelineState::default() };
        let line = setup_line(&t, &pipeline::answer(&t, &pipeline::spec_of(&t).unwrap()).unwrap());
        assert!(line.starts_with("LoRA r=32 · transformer · 1024×1024"), "{line}");
        let k = PipelineState { preset: "sdxl".into(), trainer: Trainer::Kohya, kohya: crate::state::pipeline::KohyaOpts { cache_latents: true, ..Default::default() }, ..t };
        let line = setup_line(&k, &pipeline::answer(&k, &pipeline::spec_of(&k).unwrap()).unwrap());
        assert_eq!(line, "kohya LoRA network_dim=32 · unet · 1024×1024 · batch 1 · adamw · --gradient_checkpointing · --cache_latents");
        let f = PipelineState { preset: "sd-1.5".into(), trainer: Trainer::Diffusers, method: crate::state::pipeline::TrainMethod::Full, full: crate::state::pipeline::FullOpts { ema: Ema::Cpu, set_grads_to_none: false }, ..k };
        let line = setup_line(&f, &pipeline::answer(&f, &pipeline::spec_of(&f).unwrap()).unwrap());
        assert_eq!(line, "full fine-tune · train_text_to_image.py · unet · 512×512 · batch 1 · adamw · --gradient_checkpointing · --use_ema · --offload_ema");
    }
}
