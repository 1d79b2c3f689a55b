//! The image/video pipeline panel's computation (issue 23, load times; issue 27): its answer
//! (`crate::pipeline::answer`: the stages or a training step), its what-ifs
//! (`crate::pipeline::whatif::what_ifs`) and the largest values that fit
//! (`crate::pipeline::whatif::largest`) are computed in the worker, so the app's bundle leaves
//! out the pipelines' lowering and simulation. The panel still reads its pipeline (the fields,
//! the defaults) on the page: `PipelineState` crosses as its share link and hub files
//! (`state::pipeline::SavedPipeline`), and the worker reads the pipeline from it again.

use super::{call, unexpected, Request, Response};
use crate::pipeline::whatif::{Biggest, PipeWhatIf};
use crate::pipeline::{spec_of, Answer};
use crate::state::pipeline::PipelineState;
use vramcalc_core::diffusion::reverse::Knob;

/// The largest value of each knob: `(knob, None when not even the smallest fits)`.
pub type Largest = Vec<(Knob, Result<Option<Biggest>, String>)>;

/// The panel's answer, by the worker; a worker that failed is the error shown.
pub async fn answer(s: &PipelineState) -> Result<Answer, String> {
    match call(Request::Pipeline { state: s.clone() }).await? {
        Response::Pipeline(a) => a,
        other => Err(unexpected("the pipeline's estimate", other)),
    }
}

/// The what-ifs, by the worker.
pub async fn what_ifs(s: &PipelineState, capacity: Option<u64>) -> Result<Vec<PipeWhatIf>, String> {
    match call(Request::PipeWhatIfs {
        state: s.clone(),
        capacity,
    })
    .await?
    {
        Response::PipeWhatIfs(w) => w,
        other => Err(unexpected("the pipeline's what-ifs", other)),
    }
}

/// The largest value of each of the pipeline's knobs that fits `capacity`, by the worker.
pub async fn largest(s: &PipelineState, capacity: u64) -> Result<Largest, String> {
    match call(Request::PipeLargest {
        state: s.clone(),
        capacity,
    })
    .await?
    {
        Response::PipeLargest(l) => l,
        other => Err(unexpected("the pipeline's largest values", other)),
    }
}

/// The worker's side of the three requests.
pub(super) fn handle(r: Request) -> Response {
    match r {
        Request::Pipeline { state } => {
            Response::Pipeline(spec_of(&state).and_then(|p| crate::pipeline::answer(&state, &p)))
        }
        Request::PipeWhatIfs { state, capacity } => Response::PipeWhatIfs(
            spec_of(&state).and_then(|p| crate::pipeline::whatif::what_ifs(&state, &p, capacity)),
        ),
        Request::PipeLargest { state, capacity } => {
            Response::PipeLargest(spec_of(&state).map(|p| {
                crate::pipeline::whatif::knobs(&p)
                    .into_iter()
                    .map(|k| (k, crate::pipeline::whatif::largest(&state, &p, k, capacity)))
                    .collect()
            }))
        }
        other => Response::Refused(
            format!("not a pipeline request: {other:?}")
                .chars()
                .take(200)
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::whatif;
    use crate::state::pipeline::{PipeMode, TrainMethod, Trainer};
    use crate::test_util::block_on;

    /// Every mode's answer, what-ifs and largest values cross as the panel computed them on the
    /// page: the same figures (the answer's, the CLI's: `crate::pipeline`'s tests).
    #[test]
    fn the_workers_answers_are_the_panels() {
        let base = PipelineState {
            preset: "sd-1.5".into(),
            ..PipelineState::default()
        };
        let states = [
            base.clone(),
            PipelineState {
                mode: PipeMode::Decode,
                vae_tiling: Some(0),
                ..base.clone()
            },
            PipelineState {
                mode: PipeMode::Train,
                ..base.clone()
            },
            PipelineState {
                mode: PipeMode::Train,
                trainer: Trainer::Kohya,
                ..base.clone()
            },
            PipelineState {
                mode: PipeMode::Train,
                method: TrainMethod::Full,
                ..base.clone()
            },
            PipelineState {
                preset: "wan2.1-t2v-1.3b".into(),
                frames: Some(17),
                ..PipelineState::default()
            },
        ];
        for s in states {
            // the state crosses exactly (as its link: `SavedPipeline`)
            assert_eq!(
                serde_json::from_str::<PipelineState>(&serde_json::to_string(&s).unwrap()).unwrap(),
                s
            );
            let p = spec_of(&s).unwrap();
            assert_eq!(
                block_on(answer(&s)),
                crate::pipeline::answer(&s, &p),
                "{s:?}"
            );
            assert_eq!(
                block_on(what_ifs(&s, Some(24 << 30))),
                whatif::what_ifs(&s, &p, Some(24 << 30)),
                "{s:?}"
            );
            let want: Largest = whatif::knobs(&p)
                .into_iter()
                .map(|k| (k, whatif::largest(&s, &p, k, 24 << 30)))
                .collect();
            assert_eq!(block_on(largest(&s, 24 << 30)).unwrap(), want, "{s:?}");
        }
    }
}
