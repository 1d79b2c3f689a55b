//! The app's worker (issue 23, load times): the code no PyTorch link needs — the importers,
//! llama.cpp's estimate (`llama`) and the image/video pipelines' (`pipeline`) — runs in a second
//! wasm module, `src/bin/worker.rs`, in a Web Worker the app starts on first use ([`call`]), so
//! the app's own bundle, which every link loads, leaves it out. The two talk in
//! typed requests and answers, the core's own types ([`Request`], [`Response`]), sent as JSON
//! text over `postMessage`, each request with an id its answer carries ([`Envelope`]).
//!
//! [`answer`] is the worker's side: one request's text → its answer's text. Natively (the app's
//! tests) [`call`] runs it in place, through the same JSON text, so the tests cover what crosses.

#[cfg(target_arch = "wasm32")]
mod client;
pub mod llama;
pub mod pipeline;

use crate::import::paste::{self, Pasted};
use crate::local::Answer;
use crate::pipeline::whatif::PipeWhatIf;
use crate::pipeline::Answer as PipeAnswer;
use crate::state::pipeline::PipelineState;
use crate::state::local::{GgufSource, LocalSettings};
use vramcalc_core::gguf::Header;
use vramcalc_core::solve::fits::{FitsOptions, Row, Workload};
use serde::{Deserialize, Serialize};
use vramcalc_core::hub::{HubError, HubRef};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::distributed::DistConfig;
use vramcalc_core::solve::{Answer as SolveAnswer, Variable};
use vramcalc_core::TrainConfig;

/// What the app asks the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// The paste box's text: a vramcalc spec or a Hugging Face `config.json`
    /// (`crate::import::paste::read_now`).
    ReadPaste { text: String },
    /// The hub's answer to `hub`'s `config.json` (the app fetched it: the token is the tab's,
    /// the worker never sees it): `vramcalc_core::hub::read_answer`.
    HubConfig { hub: HubRef, status: u16, body: String, with_token: bool },
    /// The llama.cpp panel's answer (`crate::local::answer`) for the header named `key`, sent
    /// along when the worker may not have it (`llama`).
    LlamaCpp { key: u64, header: Option<Header>, settings: LocalSettings, source: GgufSource },
    /// Whether built-in model `model` as `llama-quantize` type `quant` fits (`crate::local::quant_fit`).
    QuantFit { model: String, quant: String, settings: LocalSettings },
    /// One preset's rows of "what fits" (`crate::reverse::fits::rows_of`: its llama.cpp rows
    /// need llama.cpp's estimate).
    FitsRows { id: String, workload: Workload, capacity: u64, options: FitsOptions },
    /// The largest value of each variable in `of` that fits `capacity` (`crate::reverse::answer`,
    /// the CLI's `vramcalc max`): each search is several estimates, a new lowering of the model
    /// per sequence length, so on the page's thread one search was a long task (issue 23).
    /// (The spec boxed: the other requests are a few words.)
    Largest { spec: Box<ModelSpec>, config: TrainConfig, dist: DistConfig, capacity: u64, of: Vec<Variable> },
    /// The pipeline panel's answer (`crate::pipeline::answer`; `pipeline`).
    Pipeline { state: PipelineState },
    /// Its what-ifs against the GPU's `capacity` (`crate::pipeline::whatif::what_ifs`).
    PipeWhatIfs { state: PipelineState, capacity: Option<u64> },
    /// The largest value of each of its knobs that fits `capacity` (`crate::pipeline::whatif::largest`).
    PipeLargest { state: PipelineState, capacity: u64 },
}

/// The worker's answer to a [`Request`] of the same name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    ReadPaste(Result<Pasted, String>),
    HubConfig(Result<ModelSpec, HubError>),
    LlamaCpp(Result<Answer, String>),
    /// The worker does not have the header a [`Request::LlamaCpp`] names: ask again with it.
    NeedHeader,
    QuantFit(Option<bool>),
    FitsRows(Vec<Row>),
    Largest(Vec<(Variable, Result<SolveAnswer, String>)>),
    Pipeline(Result<PipeAnswer, String>),
    PipeWhatIfs(Result<Vec<PipeWhatIf>, String>),
    PipeLargest(Result<pipeline::Largest, String>),
    /// The request could not be read (a worker of another build, say): the message says what.
    Refused(String),
}

/// A request or an answer on the wire: the answer carries its request's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope<T> {
    pub id: u64,
    pub body: T,
}

/// Computes a request's answer (the worker's side; natively, the app's too).
pub fn handle(r: Request) -> Response {
    match r {
        Request::ReadPaste { text } => Response::ReadPaste(paste::read_now(&text)),
        Request::HubConfig { hub, status, body, with_token } => Response::HubConfig(vramcalc_core::hub::read_answer(&hub, status, &body, with_token)),
        Request::LlamaCpp { key, header, settings, source } => llama::handle(key, header, &settings, &source),
        Request::QuantFit { model, quant, settings } => Response::QuantFit(crate::local::quant_fit(&model, &quant, &settings)),
        Request::FitsRows { id, workload, capacity, options } => Response::FitsRows(crate::reverse::fits::rows_of(&id, workload, capacity, &options)),
        Request::Largest { spec, config, dist, capacity, of } => {
            Response::Largest(of.into_iter().map(|v| (v, crate::reverse::answer(&spec, &config, &dist, capacity, v))).collect())
        }
        r @ (Request::Pipeline { .. } | Request::PipeWhatIfs { .. } | Request::PipeLargest { .. }) => pipeline::handle(r),
    }
}

/// One request's JSON text ([`Envelope`] of a [`Request`]) → its answer's ([`Envelope`] of a
/// [`Response`]). A text that is no request is answered [`Response::Refused`] (id 0 when even
/// the id is unreadable), never a panic.
pub fn answer(text: &str) -> String {
    let out = match serde_json::from_str::<Envelope<Request>>(text) {
        Ok(e) => Envelope { id: e.id, body: handle(e.body) },
        Err(err) => {
            let id = serde_json::from_str::<serde_json::Value>(text).ok().and_then(|v| v.get("id")?.as_u64()).unwrap_or(0);
            Envelope { id, body: Response::Refused(format!("the worker could not read the request: {err}")) }
        }
    };
    // every answer is plain data (strings, numbers, the core's specs): it serialises
    serde_json::to_string(&out).unwrap_or_else(|e| format!(r#"{{"id":{},"body":{{"Refused":"{}"}}}}"#, out.id, e.to_string().replace('"', "'")))
}

/// Reads an answer's text (the app's side).
fn read_answer(text: &str) -> Result<Envelope<Response>, String> {
    serde_json::from_str(text).map_err(|e| format!("the worker's answer could not be read: {e}"))
}

/// Asks the worker (started on first use) and waits for its answer. The error is the transport's
/// (the worker failed to load or stopped): the caller shows it.
#[cfg(target_arch = "wasm32")]
pub async fn call(r: Request) -> Result<Response, String> {
    client::call(r).await
}

/// Natively there is no worker: the request runs here, through the same JSON text.
#[cfg(not(target_arch = "wasm32"))]
pub async fn call(r: Request) -> Result<Response, String> {
    let text = serde_json::to_string(&Envelope { id: 1, body: r }).map_err(|e| e.to_string())?;
    read_answer(&answer(&text)).map(|e| e.body)
}

/// One preset's rows of "what fits", by the worker (none when it fails: the table leaves the
/// model out, as it leaves out one that does not build).
pub async fn fits_rows(id: &str, workload: Workload, capacity: u64, options: FitsOptions) -> Vec<Row> {
    match call(Request::FitsRows { id: id.into(), workload, capacity, options }).await {
        Ok(Response::FitsRows(rows)) => rows,
        _ => Vec::new(),
    }
}

/// The largest value of each of `of` that fits, by the worker; where the worker fails (it did not
/// load), computed here, one search per task, so the page still shows every answer.
pub async fn largest(spec: &ModelSpec, config: &TrainConfig, dist: &DistConfig, capacity: u64, of: Vec<Variable>) -> Vec<(Variable, Result<SolveAnswer, String>)> {
    let request = Request::Largest { spec: Box::new(spec.clone()), config: *config, dist: *dist, capacity, of: of.clone() };
    if let Ok(Response::Largest(answers)) = call(request).await {
        return answers;
    }
    let mut out = Vec::new();
    for v in of {
        crate::dom::yield_to_page(crate::dom::Priority::UserVisible).await;
        out.push((v, crate::reverse::answer(spec, config, dist, capacity, v)));
    }
    out
}

/// The answer `what` expected was another kind: a worker of another build.
pub fn unexpected(what: &str, r: Response) -> String {
    match r {
        Response::Refused(m) => m,
        other => format!("the worker answered {what} with another kind of answer: {other:?}").chars().take(200).collect(),
    }
}

/// Starts the worker now (a page that will need it soon, such as a hub model's link): its wasm
/// loads while the page does other work. Natively nothing.
pub fn warm_up() {
    #[cfg(target_arch = "wasm32")]
    client::warm_up();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;

    #[test]
    fn a_request_crosses_as_text_and_its_answer_comes_back() {
        let spec = vramcalc_core::presets::build("vgg11").unwrap();
        let r = block_on(call(Request::ReadPaste { text: spec.to_json_pretty() })).unwrap();
        assert_eq!(r, Response::ReadPaste(Ok(Pasted::Spec(spec))));
        let hub = HubRef::parse("Qwen/Qwen2.5-0.5B").unwrap();
        let r = block_on(call(Request::HubConfig { hub: hub.clone(), status: 404, body: String::new(), with_token: false })).unwrap();
        assert_eq!(r, Response::HubConfig(Err(HubError::NotFound(hub.to_string()))));
    }

    /// The largest values cross as the core's own answers: the same as the page's thread computes
    /// (`crate::reverse::answer`, the CLI's `vramcalc max`), a refusal's message too.
    #[test]
    fn largest_values_are_the_cores() {
        use vramcalc_core::distributed::Strategy;
        let spec = vramcalc_core::presets::build("gpt2").unwrap();
        let c = TrainConfig { batch: 2, seq_len: Some(256), ..Default::default() };
        let d = DistConfig { gpus: 2, strategy: Strategy::Fsdp, ..Default::default() };
        let of = vec![Variable::Batch, Variable::SeqLen, Variable::Context, Variable::Concurrency];
        for cap in [24u64 << 30, 1 << 20] {
            let got = block_on(largest(&spec, &c, &d, cap, of.clone()));
            let want: Vec<_> = of.iter().map(|&v| (v, crate::reverse::answer(&spec, &c, &d, cap, v))).collect();
            assert_eq!(got, want);
        }
        assert!(block_on(largest(&spec, &c, &d, 24 << 30, of.clone())).iter().all(|(_, a)| a.is_ok()));
        assert!(block_on(largest(&spec, &c, &d, 1 << 20, of)).iter().any(|(_, a)| a.is_err()));
    }

    /// "What fits" rows cross as the core's own rows, the llama.cpp workload's too.
    #[test]
    fn fits_rows_are_the_cores() {
        use vramcalc_core::solve::fits::{FitsOptions, Workload};
        for w in [Workload::Qlora, Workload::LlamaCpp] {
            let (o, cap) = (FitsOptions::default(), 24 << 30);
            let rows = block_on(fits_rows("qwen2.5-0.5b", w, cap, o));
            assert!(!rows.is_empty(), "{w:?}");
            assert_eq!(rows, crate::reverse::fits::rows_of("qwen2.5-0.5b", w, cap, &o), "{w:?}");
        }
    }

    #[test]
    fn a_text_that_is_no_request_is_refused_by_id() {
        let a = read_answer(&answer(r#"{"id": 7, "body": {"NoSuchRequest": {}}}"#)).unwrap();
        assert_eq!(a.id, 7);
        assert!(matches!(a.body, Response::Refused(m) if m.contains("could not read")));
        assert!(matches!(read_answer(&answer("not json")).unwrap().body, Response::Refused(_)));
    }
}
