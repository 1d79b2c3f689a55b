//! The app's state ↔ a share link, and the embed page's parameters. Pure (no web-sys), so the
//! mapping is tested natively; `crate::dom` reads the address bar and `app` wires it up.
//!
//! The link itself is `vramcalc_core::share`'s versioned codec: this module only maps [`Model`] +
//! [`Prefs`] to a [`ShareState`] and back. An unedited preset travels by id (`v1.p=vgg16,…`), an
//! edited or custom model as its spec. The GPU is always written (`g=`), so a later change of the
//! app's default GPU does not change what old links mean.
//!
//! On load, a link in the fragment wins over LocalStorage for what is displayed, but the saved work
//! is only overwritten once the user edits ([`Start::guard`]).

use crate::i18n::Lang;
use crate::state::{Engine, GpuChoice, Model, Prefs, Saved, State};
use vramcalc_core::share::{self, ModelSource, ShareError, ShareState};
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{presets, TrainConfig};

/// The link's name of the serve mode's engine (`e=vllm`).
const VLLM: &str = "vllm";

/// The share state of what the app shows (its mode is the config's and the engine's: a link
/// made before the serve mode opens in the mode its settings imply).
pub fn to_share(model: &Model, prefs: &Prefs) -> ShareState {
    // Tracked by the reducer (every spec edit clears it): the preset is not rebuilt to compare.
    let source = match (&model.hub, &model.preset) {
        (Some(id), _) if model.unedited => ModelSource::Hub(id.clone()),
        (_, Some(id)) if model.unedited => ModelSource::Preset { id: id.clone() },
        _ => ModelSource::Spec((*model.spec).clone()),
    };
    let (gpu, capacity_bytes) = match &model.gpu {
        GpuChoice::Listed(id) => (Some(id.clone()), None),
        GpuChoice::Custom(b) => (None, Some(*b)),
    };
    let engine = match model.engine {
        Engine::Pytorch => None,
        Engine::Vllm => Some(VLLM.to_string()),
    };
    ShareState {
        model: source,
        config: model.config,
        dist: model.dist,
        gpu,
        capacity_bytes,
        unit: prefs.unit,
        lang: prefs.lang.code().to_string(),
        engine,
        measured_peak_bytes: model.measured_peak,
    }
}

/// The link fragment (without `#`) of what the app shows; `None` when the model exceeds what a
/// link may carry (the address bar then keeps its last link).
pub async fn fragment(model: &Model, prefs: &Prefs) -> Option<String> {
    share::encode(&to_share(model, prefs)).ok()
}

/// Decodes a link (every field, the LLM settings and the job included: the core's codec).
pub async fn decode(fragment: &str) -> Result<ShareState, String> {
    share::decode(fragment).map_err(|e| e.to_string())
}

/// What a link opens: the model and the display preferences it carries (the theme stays the
/// user's).
#[derive(Debug, Clone, PartialEq)]
pub struct Linked {
    pub model: Model,
    pub prefs: Prefs,
}

fn field(key: &str, message: String) -> String {
    ShareError::Field { key: key.into(), message }.to_string()
}

/// Maps a decoded link to the app's model; the error names the field that is wrong. A preset
/// is built by the core; a hub model's config is fetched again (`crate::import::hub`).
pub async fn from_share(s: ShareState, base: Prefs) -> Result<Linked, String> {
    // the hub's config, fetched again by the module (a failure offers a retry: `Notice`)
    let hub = match &s.model {
        ModelSource::Hub(id) => Some(crate::import::hub::load(id, "").await.map_err(|e| field("h", e.to_string()))?.1),
        _ => None,
    };
    link_model(s, base, hub, crate::presets::preset)
}

/// [`from_share`] once a hub model's spec is fetched (`hub`), with `preset` building a preset
/// (`crate::presets::preset` in the app and the cards: the importer's specs, imported at compile
/// time). The embed card's small bundle (`src/bin/card.rs`) reads no user's config and so links
/// no importer: a hub model's link there (no `hub`) is an error. Not async, and the builder a plain argument, so that bundle links only what it calls.
fn link_model(s: ShareState, base: Prefs, hub: Option<ModelSpec>, preset: fn(&str) -> vramcalc_core::error::Result<ModelSpec>) -> Result<Linked, String> {
    let mut model = match s.model {
        ModelSource::Preset { id } => {
            if presets::info(&id).is_none() {
                return Err(field("p", format!("unknown preset `{id}`")));
            }
            Model::of_preset(&id, preset(&id).map_err(|e| e.to_string())?)
        }
        ModelSource::Hub(id) => match hub {
            Some(spec) => Model { spec: spec.into(), preset: None, unedited: true, hub: Some(id), config: TrainConfig::default(), ..Model::empty() },
            None => return Err(field("h", format!("a Hugging Face model opens in the full card (`{EMBED_PAGE}`)"))),
        },
        ModelSource::Spec(spec) => {
            // An edited preset keeps its name: show which preset it started from (by the
            // presets' table: nothing is built).
            let preset = spec.name.as_deref().and_then(presets::named).map(|p| p.id.to_string());
            Model { spec: spec.into(), preset, unedited: false, hub: None, config: TrainConfig::default(), ..Model::empty() }
        }
    };
    model.config = s.config;
    model.dist = s.dist;
    model.engine = match s.engine.as_deref() {
        None => Engine::Pytorch,
        Some(VLLM) => Engine::Vllm,
        Some(other) => return Err(field("e", format!("unknown engine `{other}` (this version serves with vllm)"))),
    };
    model.measured_peak = s.measured_peak_bytes.filter(|&b| b > 0);
    model.gpu = match (s.capacity_bytes, s.gpu) {
        (Some(0), _) => return Err(field("k", "the capacity must be more than 0 bytes".into())),
        (Some(b), _) => GpuChoice::Custom(b),
        (None, Some(id)) if vramcalc_core::memory::device::gpu(&id).is_some() => GpuChoice::Listed(id),
        (None, Some(id)) => return Err(field("g", format!("unknown GPU `{id}`"))),
        (None, None) => GpuChoice::default(),
    };
    // A language this version lacks falls back to English rather than rejecting the link.
    let prefs = Prefs { lang: Lang::parse(&s.lang).unwrap_or_default(), unit: s.unit, theme: base.theme };
    Ok(Linked { model, prefs })
}

/// Decodes a fragment (`#v1.…` or `v1.…`) into what it opens.
pub async fn open(fragment: &str, base: Prefs) -> Result<Linked, String> {
    let state = decode(fragment).await?;
    from_share(state, base).await
}

/// Why the page shows something other than the saved work.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// A shared link was opened; the saved work is kept until an edit.
    Opened,
    /// The link could not be read (the decoder's message); the default model is shown.
    Broken(String),
    /// The link (second field) names a Hugging Face model whose config could not be fetched
    /// (the message); the default model is shown and the notice offers to open the link again.
    Unfetched(String, String),
}

/// The state a page load starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub state: State,
    pub notice: Option<Notice>,
    /// While the state still equals this, it is not persisted (a link opened, saved work kept).
    pub guard: Option<Saved>,
}

/// Chooses the initial state from the fragment (`location.hash`) and LocalStorage.
pub async fn start(hash: &str, saved: Option<Saved>) -> Start {
    let hash = hash.trim().trim_start_matches('#');
    if hash.is_empty() {
        return Start { state: State::from_saved(saved), notice: None, guard: None };
    }
    // issue 24: a llama.cpp link opens that workload: a hub file is read by the panel, a model
    // and quant is built here
    if hash.starts_with(crate::local::link::PREFIX) {
        let mut state = State::from_saved(saved);
        return match crate::state::local::LocalState::open(hash) {
            Ok(local) => {
                state.workload = crate::state::local::Workload::LlamaCpp;
                state.local = local;
                Start { state, notice: None, guard: None }
            }
            Err(e) => Start { state, notice: Some(Notice::Broken(e)), guard: None },
        };
    }
    // issue 27: a pipeline link opens the pipeline workload over the saved work (not saved itself)
    if hash.starts_with(crate::pipeline::link::PREFIX) {
        let mut state = State::from_saved(saved);
        return match crate::pipeline::link::open(hash).await {
            Ok(p) => {
                (state.workload, state.model.pipeline) = (crate::state::local::Workload::Pipeline, p);
                Start { state, notice: None, guard: None }
            }
            Err(e) => Start { state, notice: Some(Notice::Broken(e)), guard: None },
        };
    }
    // a PyTorch link brings its own model: only the saved preferences carry over
    let prefs = State::saved_prefs(saved.as_ref());
    let linked = open(hash, prefs).await;
    opened(hash, prefs, linked)
}

/// The embed card's start (`src/bin/card.rs`): a PyTorch link (`#v1.…`) of a preset or a spec,
/// nothing saved. The page's loader (`static/embed.html`) sends every other link — a hub
/// model's, a llama.cpp or pipeline link — and the snippet builder to the full bundle
/// (`src/bin/embed.rs`, [`start`]); one that still arrives here is a broken link, named.
pub async fn start_card(hash: &str) -> Start {
    let hash = hash.trim().trim_start_matches('#');
    if hash.is_empty() {
        return Start { state: State::from_saved(None), notice: None, guard: None };
    }
    let prefs = Prefs::default();
    let linked = share::decode(hash).map_err(|e| e.to_string()).and_then(|s| link_model(s, prefs, None, crate::presets::preset));
    opened(hash, prefs, linked)
}

/// The start of a PyTorch link that opened as `linked` (or failed), over the preferences `base`.
fn opened(hash: &str, base: Prefs, linked: Result<Linked, String>) -> Start {
    let (state, notice) = match linked {
        Ok(l) => (State::new(l.model, l.prefs), Notice::Opened),
        Err(e) if share::names_hub_model(hash) => (State::new(Model::default(), base), Notice::Unfetched(e, hash.to_string())),
        Err(e) => (State::new(Model::default(), base), Notice::Broken(e)),
    };
    let guard = Some(state.saved());
    Start { state, notice: Some(notice), guard }
}

/// Whether the embed page shows the snippet builder (`embed.html?builder#v1.…`) instead of a card.
pub fn is_embed_builder(search: &str) -> bool {
    search.trim_start_matches('?').split('&').any(|pair| pair.split_once('=').map_or(pair, |(k, _)| k) == "builder")
}

/// The embed card's page, beside `index.html` (`static/embed.html`, bundle `src/bin/embed.rs`).
pub const EMBED_PAGE: &str = "embed.html";

/// A control the embed's author exposes (`?embed&controls=batch,gpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Batch,
    Gpu,
    Precision,
}

impl Control {
    pub const ALL: [Control; 3] = [Control::Batch, Control::Gpu, Control::Precision];
    pub fn id(self) -> &'static str {
        match self {
            Control::Batch => "batch",
            Control::Gpu => "gpu",
            Control::Precision => "precision",
        }
    }
}

/// The embed page's parameters: `None` for the full app.
pub fn embed_controls(search: &str) -> Option<Vec<Control>> {
    let query = search.trim_start_matches('?');
    let mut embed = false;
    let mut wanted = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "embed" => embed = true,
            "controls" => {
                wanted.extend(value.split([',', '+', ' ']).flat_map(|v| v.split("%2C")));
            }
            _ => {}
        }
    }
    // In `Control::ALL`'s order, once each, whatever the link's order.
    embed.then(|| Control::ALL.into_iter().filter(|c| wanted.contains(&c.id())).collect())
}

/// `?embed` or `?embed&controls=batch,gpu`.
pub fn embed_query(controls: &[Control]) -> String {
    let mut q = String::from("?embed");
    for (i, c) in Control::ALL.into_iter().filter(|c| controls.contains(c)).enumerate() {
        q.push_str(if i == 0 { "&controls=" } else { "," });
        q.push_str(c.id());
    }
    q
}

/// The embed card's height in CSS px with these controls (what the snippet starts with; the card
/// then reports its exact height).
pub fn embed_height(controls: &[Control]) -> u32 {
    let rows = controls.len() as u32;
    330 + 56 * rows
}

/// The `<iframe>` an author pastes. `base` is the app's address without query or fragment.
pub fn iframe_snippet(base: &str, controls: &[Control], fragment: &str) -> String {
    let src = format!("{base}{EMBED_PAGE}{}#{fragment}", embed_query(controls)).replace('&', "&amp;").replace('"', "&quot;");
    format!(
        "<iframe src=\"{src}\" title=\"vramcalc\" width=\"720\" height=\"{}\" style=\"width:100%;max-width:720px;border:0\" loading=\"lazy\"></iframe>",
        embed_height(controls)
    )
}

/// The listener an author pastes once per page: sizes each vramcalc iframe to its content.
pub const LISTENER_JS: &str = r#"<script>
addEventListener("message", (e) => {
  if (!e.data || e.data.type !== "vramcalc:height") return;
  for (const f of document.querySelectorAll("iframe"))
    if (f.contentWindow === e.source) f.style.height = e.data.height + "px";
});
</script>"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Action;
    use std::rc::Rc;
    use vramcalc_core::{ByteUnit, Precision};
    use yew::Reducible;

    use crate::test_util::block_on;

    fn fragment_now(model: &Model, prefs: &Prefs) -> Option<String> {
        block_on(fragment(model, prefs))
    }
    fn open_now(link: &str, base: Prefs) -> Result<Linked, String> {
        block_on(open(link, base))
    }
    fn start_now(hash: &str, saved: Option<Saved>) -> Start {
        block_on(start(hash, saved))
    }

    fn reduce(s: State, a: Action) -> State {
        (*Rc::new(s).reduce(a)).clone()
    }

    fn round_trip(model: &Model, prefs: Prefs) -> String {
        let link = fragment_now(model, &prefs).unwrap();
        let back = open_now(&format!("#{link}"), Prefs::default()).unwrap();
        assert_eq!(back.model.spec, model.spec, "{link}");
        assert_eq!(back.model.config, model.config);
        assert_eq!(back.model.gpu, model.gpu);
        assert_eq!(back.model.dist, model.dist, "{link}");
        assert_eq!((back.prefs.lang, back.prefs.unit), (prefs.lang, prefs.unit));
        link
    }

    /// Fine-tuning, generate mode's settings and GPUs × strategy (`Model::llm`, as the module's
    /// LLM panel writes them) travel in the link, on a preset's link and on a custom spec's.
    #[test]
    fn llm_settings_travel_in_the_link() {
        use vramcalc_core::distributed::{DistConfig, Offload, Strategy};
        use vramcalc_core::finetune::{BaseFormat, Method, NameList};
        let s = reduce(State::default(), Action::LoadPreset(Model::preset("gpt2").unwrap()));
        let mut c = s.model.config;
        let ft = &mut c.finetune;
        (ft.method, ft.lora_r, ft.lora_alpha, ft.lora_dropout) = (Method::Qlora, 16, 32.0, 0.05);
        (ft.lora_targets, ft.base_format, ft.double_quant) = (NameList::parse("all-linear").unwrap(), Some(BaseFormat::Nf4), true);
        let d = DistConfig { gpus: 4, strategy: Strategy::Zero3, offload: Offload::Optimizer, ..Default::default() };
        let s = reduce(s, Action::SetJob(c, d));
        let link = round_trip(&s.model, s.prefs);
        assert!(link.starts_with("v1.p=gpt2") && link.contains("st=zero3") && link.contains("double_quant"), "{link}");
        let mut c = s.model.config;
        c.mode = vramcalc_core::Mode::Generate;
        (c.generate.prompt_len, c.generate.new_tokens) = (Some(128), 64);
        c.generate.cache = vramcalc_core::KvCacheKind::Static;
        c.generate.kv_dtype = vramcalc_core::KvDType::parse("fp8");
        let mut s = reduce(s, Action::SetJob(c, DistConfig::default()));
        s.model.unedited = false;
        let link = round_trip(&s.model, s.prefs);
        assert!(link.starts_with("v1.s=") && link.contains("gk=fp8"), "{link}");
    }

    /// The serve mode and a measured peak travel in the link (`e=vllm`, `mp=`); a link without
    /// them (every saved one) opens in the mode its settings imply.
    #[test]
    fn the_mode_and_a_measured_peak_travel_in_the_link() {
        use crate::state::SetupMode;
        let s = reduce(State::default(), Action::LoadPreset(Model::preset("gpt2").unwrap()));
        let s = reduce(s, Action::SetMode(SetupMode::Serve));
        let s = reduce(s, Action::SetMeasured(Some(5_000_000)));
        let link = round_trip(&s.model, s.prefs);
        assert!(link.contains("e=vllm") && link.contains("mp=5000000"), "{link}");
        let back = open_now(&link, Prefs::default()).unwrap();
        assert_eq!((back.model.mode(), back.model.measured_peak), (SetupMode::Serve, Some(5_000_000)));
        for m in SetupMode::ALL {
            let s = reduce(s.clone(), Action::SetMode(m));
            let back = open_now(&fragment_now(&s.model, &s.prefs).unwrap(), Prefs::default()).unwrap();
            assert_eq!(back.model.mode(), m, "{m:?}");
        }
        let implied: Vec<(&str, SetupMode)> = include_str!("../crates/core/tests/data/share_links.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.contains("h="))
            .filter_map(|l| l.split_once(' '))
            .map(|(name, link)| (name, open_now(link, Prefs::default()).unwrap().model.mode()))
            .collect();
        assert!(implied.contains(&("gpt2-generate", SetupMode::Generate)) && implied.contains(&("default", SetupMode::Train)), "{implied:?}");
        assert!(implied.contains(&("llama-serve-measured", SetupMode::Serve)), "{implied:?}");
        assert!(open_now("v1.p=gpt2,e=llama", Prefs::default()).unwrap_err().contains("unknown engine"));
    }

    /// The links the load-time benchmark opens (`tests/data/bench_links.txt`, read by
    /// `tests/loadtime.mjs`) are the setups their names say, as today's encoder writes them.
    #[test]
    fn the_benchmarks_links_are_the_setups_they_name() {
        use vramcalc_core::distributed::{DistConfig, Strategy};
        use vramcalc_core::finetune::Method;
        use vramcalc_core::{Mode, Precision};
        let llm = |id: &str, f: &dyn Fn(&mut TrainConfig, &mut DistConfig, &mut GpuChoice)| {
            let mut m = Model::preset(id).unwrap();
            m.config = TrainConfig { batch: 1, seq_len: Some(2048), precision: Precision::Bf16, ..Default::default() };
            f(&mut m.config, &mut m.dist, &mut m.gpu);
            fragment_now(&m, &Prefs::default()).unwrap()
        };
        let h100 = || GpuChoice::Listed("h100-80gb".into());
        let want = [
            ("llama-8b-qlora", llm("llama-3.1-8b", &|c, _, _| (c.finetune.method, c.finetune.lora_r, c.finetune.lora_alpha) = (Method::Qlora, 16, 32.0))),
            ("llama-8b-generate", llm("llama-3.1-8b", &|c, _, g| {
                (c.mode, c.generate.prompt_len, c.generate.new_tokens, *g) = (Mode::Generate, Some(2048), 512, h100());
            })),
            ("llama-8b-serve", llm("llama-3.1-8b", &|c, _, g| (c.mode, c.batch, c.seq_len, *g) = (Mode::Infer, 16, Some(4096), h100()))),
            ("llama-70b-fsdp8", llm("llama-3.1-70b", &|c, d, g| {
                c.checkpointing = true;
                (*d, *g) = (DistConfig { gpus: 8, strategy: Strategy::Fsdp, ..Default::default() }, h100());
            })),
            // does not fit one H100: the cheapest fixes are searched
            ("llama-70b-fixes", llm("llama-3.1-70b", &|_, _, g| *g = h100())),
        ];
        let text: String = want.iter().map(|(n, l)| format!("{n} {l}\n")).collect();
        let file = include_str!("../tests/data/bench_links.txt");
        assert_eq!(file.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect::<String>(), text, "new lines:\n{text}");
    }

    /// Every saved link of `crates/core/tests/data/share_links.txt` opens in the app to the state
    /// the core's decoder reads (the hub's needs a fetch: its decoded state is checked).
    #[test]
    fn every_saved_link_opens_to_the_same_state() {
        let text = include_str!("../crates/core/tests/data/share_links.txt");
        let mut opened = 0;
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (name, link) = line.split_once(' ').unwrap();
            let mut want = share::decode(link).unwrap();
            if want.gpu.is_none() && want.capacity_bytes.is_none() {
                // a link without a GPU opens on the app's default GPU, and its link then names it
                want.gpu = match GpuChoice::default() {
                    GpuChoice::Listed(id) => Some(id),
                    GpuChoice::Custom(_) => None,
                };
            }
            if Lang::parse(&want.lang).is_none() {
                want.lang = "en".into(); // a language this version lacks opens in English
            }
            if matches!(want.model, ModelSource::Hub(_)) {
                assert_eq!(block_on(decode(link)).unwrap(), want, "{name}");
                continue;
            }
            let back = open_now(link, Prefs::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut again = to_share(&back.model, &back.prefs);
            if let (ModelSource::Spec(_), ModelSource::Preset { id }) = (&want.model, &again.model) {
                panic!("{name}: a spec link reopened as preset {id}");
            }
            if let (ModelSource::Preset { id }, ModelSource::Spec(spec)) = (&want.model, &again.model) {
                assert_eq!(*spec, vramcalc_core::import::preset(id).unwrap(), "{name}");
                again.model = want.model.clone();
            }
            assert_eq!(again, want, "{name}");
            opened += 1;
        }
        assert!(opened >= 5, "{opened}");
    }

    /// The embed card's small bundle (`start_card`, presets as built at compile time, no
    /// importer) opens every saved PyTorch link, and the benchmark's, to the state the full
    /// start opens; a hub model's link there is a named error, not a fetch.
    #[test]
    fn the_cards_start_opens_every_pytorch_link_as_the_full_start_does() {
        let saved = include_str!("../crates/core/tests/data/share_links.txt");
        let bench = include_str!("../tests/data/bench_links.txt");
        let mut opened = 0;
        for line in saved.lines().chain(bench.lines()).filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (name, link) = line.split_once(' ').unwrap();
            let card = block_on(start_card(&format!("#{link}")));
            if share::names_hub_model(link) {
                assert!(matches!(&card.notice, Some(Notice::Unfetched(e, _)) if e.contains("full card")), "{name}: {:?}", card.notice);
                continue;
            }
            let full = start_now(&format!("#{link}"), None);
            assert_eq!(card, full, "{name}");
            opened += usize::from(card.notice == Some(Notice::Opened));
        }
        assert!(opened >= 9, "{opened}");
    }

    #[test]
    fn unedited_preset_travels_by_id() {
        let s = reduce(State::default(), Action::LoadPreset(Model::preset("gpt2").unwrap()));
        let s = reduce(s, Action::SetBatch(8));
        let s = reduce(s, Action::SetSeqLen(Some(512)));
        let mut c = s.model.config;
        c.precision = Precision::AmpBf16;
        c.checkpointing = true;
        let s = reduce(s, Action::SetConfig(c));
        let s = reduce(s, Action::SetGpu(GpuChoice::Listed("a100-80gb".into())));
        let s = reduce(s, Action::SetUnit(ByteUnit::Mib));
        let s = reduce(s, Action::SetLang(Lang::Zh));
        let link = round_trip(&s.model, s.prefs);
        println!("preset with changed settings: {} characters: {link}", link.len());
        assert!(link.starts_with("v1.p=gpt2,"), "{link}");
        assert!(link.len() <= 120);
        assert_eq!(open_now(&link, Prefs::default()).unwrap().model.preset.as_deref(), Some("gpt2"));
    }

    #[test]
    fn edited_preset_and_custom_capacity_travel_as_spec() {
        let s = reduce(State::default(), Action::LoadPreset(Model::preset("gpt2").unwrap()));
        let s = reduce(s, Action::SetBatch(3));
        let link = fragment_now(&s.model, &s.prefs).unwrap();
        assert!(link.starts_with("v1.p=gpt2,"), "{link}");
        let s = reduce(s, Action::DeleteLayer(crate::tree::NodePath::top(0)));
        assert_eq!(open_now(&fragment_now(&s.model, &s.prefs).unwrap(), Prefs::default()).unwrap().model.preset.as_deref(), Some("gpt2"));
        let s = reduce(State::default(), Action::LoadPreset(Model::preset("vgg16").unwrap()));
        let s = reduce(s, Action::DeleteLayer(crate::tree::NodePath::top(0)));
        let s = reduce(s, Action::SetGpu(GpuChoice::Custom(12 << 30)));
        let link = round_trip(&s.model, s.prefs);
        assert!(link.starts_with("v1.s="), "{link}");
        assert!(link.contains(",k=12884901888"), "{link}");
        // still shows which preset it started from
        assert_eq!(open_now(&link, Prefs::default()).unwrap().model.preset.as_deref(), Some("vgg16"));
        let empty = reduce(State::default(), Action::StartEmpty);
        let back = open_now(&fragment_now(&empty.model, &empty.prefs).unwrap(), Prefs::default()).unwrap();
        assert_eq!(back.model.spec, empty.model.spec);
        assert_eq!(back.model.preset, None);
    }

    #[test]
    fn bad_links_name_the_problem() {
        let p = Prefs::default();
        assert!(open_now("v1.p=no-such-net", p).unwrap_err().contains("unknown preset `no-such-net`"));
        assert!(open_now("v1.p=vgg16,g=gtx-9999", p).unwrap_err().contains("unknown GPU"));
        assert!(open_now("v1.p=vgg16,k=0", p).unwrap_err().contains("`k`"));
        assert!(open_now("v2.p=vgg16", p).unwrap_err().contains("v1"));
        assert!(open_now("v1.p=vgg16,b=abc", p).unwrap_err().contains("`b`"));
        let good = fragment_now(&Model::preset("resnet18").unwrap(), &p).unwrap();
        let custom = fragment_now(&reduce(State::default(), Action::DeleteLayer(crate::tree::NodePath::top(0))).model, &p).unwrap();
        assert!(open_now(&custom[..custom.len() / 2], p).is_err(), "truncated");
        // a language this version lacks falls back to English
        assert_eq!(open_now(&format!("{good},l=de"), p).unwrap().prefs.lang, Lang::En);
    }

    #[test]
    fn start_prefers_the_link_but_guards_saved_work() {
        let mine = reduce(State::default(), Action::LoadPreset(Model::preset("vgg11").unwrap()));
        let mine = reduce(mine, Action::SetTheme(crate::state::Theme::Dark));
        let saved = Some(mine.saved());
        // no link: the saved work
        let s = start_now("", saved.clone());
        assert_eq!((s.state.model.preset.as_deref(), s.notice, s.guard), (Some("vgg11"), None, None));
        // a link: its model, the user's theme, nothing persisted while unchanged
        let s = start_now("#v1.p=gpt2,b=4", saved.clone());
        assert_eq!(s.state.model.preset.as_deref(), Some("gpt2"));
        assert_eq!(s.state.model.config.batch, 4);
        assert_eq!(s.state.prefs.theme, crate::state::Theme::Dark);
        assert_eq!(s.notice, Some(Notice::Opened));
        assert_eq!(s.guard, Some(s.state.saved()));
        // a link starts from the preferences that restoring the saved work gives (none, or of
        // another version: the defaults) without building its model
        let mut other_version = saved.clone().unwrap();
        other_version.version += 1;
        for saved in [None, saved.clone(), Some(other_version)] {
            assert_eq!(State::saved_prefs(saved.as_ref()), State::from_saved(saved).prefs);
        }
        // a broken link: the default model, the decoder's message, the saved work guarded
        let s = start_now("#v1.s=AAAA", saved);
        assert_eq!(s.state.model, Model::default());
        assert!(matches!(&s.notice, Some(Notice::Broken(m)) if m.contains("`s`")), "{:?}", s.notice);
        assert_eq!(s.guard, Some(s.state.saved()));
    }

    /// A model read from the hub is linked by its id while unedited; an edit makes the link
    /// carry the spec. Reopening fetches again: natively there is no network, so the notice
    /// says why and offers a retry (the browser tests serve recorded configs).
    #[test]
    fn a_hub_model_is_linked_by_id_and_fetched_again() {
        let spec = presets::build("bert-base").unwrap();
        let s = reduce(State::default(), Action::ImportHf(spec.clone(), Some(512), Some("Qwen/Qwen2.5-0.5B@v2".into()), None));
        let link = fragment_now(&s.model, &s.prefs).unwrap();
        assert!(link.starts_with("v1.h=Qwen%2FQwen2.5-0.5B%40v2,"), "{link}");
        // a pasted config has no id: its link carries the spec
        let pasted = reduce(State::default(), Action::ImportHf(spec, Some(512), None, None));
        assert!(share::carries_spec(&fragment_now(&pasted.model, &pasted.prefs).unwrap()));
        // an edit of the spec: the link carries the spec; undo brings the id back
        let edited = reduce(s.clone(), Action::DeleteLayer(crate::tree::NodePath::top(0)));
        assert!(share::carries_spec(&fragment_now(&edited.model, &edited.prefs).unwrap()));
        let undone = reduce(edited, Action::Undo);
        assert_eq!(fragment_now(&undone.model, &undone.prefs).unwrap(), link);
        // a setting is not an edit of the spec
        let batch = reduce(s, Action::SetBatch(3));
        assert!(fragment_now(&batch.model, &batch.prefs).unwrap().starts_with("v1.h="));
        // reopened without a network: the fetch's message, the default model, a retry
        let start = start_now(&format!("#{link}"), None);
        assert_eq!(start.state.model, Model::default());
        assert!(matches!(&start.notice, Some(Notice::Unfetched(m, l)) if m.contains("`h`") && m.contains("huggingface.co") && *l == link), "{:?}", start.notice);
        // an invalid id is refused before any request, naming the field
        assert!(matches!(open_now("#v1.h=not%20an%20id", Prefs::default()), Err(m) if m.contains("`h`") && m.contains("not a Hugging Face model id")));
    }

    #[test]
    fn the_documented_listener_is_the_dialogs() {
        assert!(include_str!("../docs/embed.md").contains(LISTENER_JS));
    }

    #[test]
    fn embed_parameters() {
        assert_eq!(embed_controls(""), None);
        assert_eq!(embed_controls("?lang=zh"), None);
        assert_eq!(embed_controls("?embed"), Some(vec![]));
        assert_eq!(embed_controls("?embed=1&controls=gpu,batch,nope,gpu"), Some(vec![Control::Batch, Control::Gpu]));
        assert_eq!(embed_controls("?controls=precision%2Cbatch&embed"), Some(vec![Control::Batch, Control::Precision]));
        assert_eq!(embed_query(&[]), "?embed");
        assert!(is_embed_builder("?builder") && is_embed_builder("?lang=zh&builder=1"));
        assert!(!is_embed_builder("?embed") && !is_embed_builder("?builders"));
        assert_eq!(embed_query(&[Control::Gpu, Control::Batch]), "?embed&controls=batch,gpu");
        let s = iframe_snippet("https://x.org/vramcalc/", &[Control::Batch], "v1.p=vgg16");
        assert!(s.starts_with("<iframe src=\"https://x.org/vramcalc/embed.html?embed&amp;controls=batch#v1.p=vgg16\""), "{s}");
        assert!(s.contains(&format!("height=\"{}\"", embed_height(&[Control::Batch]))));
    }
}
