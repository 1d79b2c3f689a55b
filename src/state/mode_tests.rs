//! The setup's mode in the state (issue 23): set by one action, read back from the settings and
//! the engine, covered by undo/redo and saved work like every setting.

use super::*;

fn reduce(s: State, a: Action) -> State {
    (*Rc::new(s).reduce(a)).clone()
}

fn gpt2() -> State {
    reduce(State::default(), Action::LoadPreset(Model::preset("gpt2").unwrap()))
}

#[test]
fn the_mode_switch_sets_the_setup_and_undo_walks_it_back() {
    let s = gpt2();
    assert_eq!(s.model.mode(), SetupMode::Train);
    let s = reduce(s, Action::SetMode(SetupMode::FineTune));
    assert_eq!((s.model.mode(), s.model.config.finetune.method), (SetupMode::FineTune, vramcalc_core::finetune::Method::Lora));
    let s = reduce(s, Action::SetMode(SetupMode::Serve));
    assert_eq!((s.model.mode(), s.model.engine, s.model.config.mode), (SetupMode::Serve, Engine::Vllm, vramcalc_core::Mode::Infer));
    let s = reduce(s, Action::SetMode(SetupMode::Generate));
    assert_eq!((s.model.mode(), s.model.engine), (SetupMode::Generate, Engine::Pytorch));
    let s = reduce(s, Action::Undo);
    assert_eq!(s.model.mode(), SetupMode::Serve);
    let s = reduce(s, Action::Undo);
    assert_eq!(s.model.mode(), SetupMode::FineTune);
    let s = reduce(s, Action::Redo);
    assert_eq!(s.model.mode(), SetupMode::Serve);
    // a LoRA what-if applied from full training is the fine-tune mode: one truth, no stale mode
    let s = reduce(s, Action::SetMode(SetupMode::Train));
    let lora = vramcalc_core::whatif::finetune::apply(vramcalc_core::whatif::finetune::FineTuneTrick::LoraR16, &s.model.spec, &s.model.config).unwrap();
    let s = reduce(s, Action::SetConfig(lora));
    assert_eq!(s.model.mode(), SetupMode::FineTune);
}

#[test]
fn a_mode_that_does_not_apply_to_the_model_is_ignored() {
    let s = State::default(); // ResNet-50
    let after = reduce(s.clone(), Action::SetMode(SetupMode::Serve));
    assert_eq!(after.model, s.model);
    assert!(!after.can_undo());
}

#[test]
fn saved_work_keeps_the_mode_and_the_measured_peak() {
    let s = reduce(gpt2(), Action::SetMode(SetupMode::Serve));
    let s = reduce(s, Action::SetMeasured(Some(1_234_567)));
    let json = serde_json::to_string(&s.saved()).unwrap();
    assert!(json.contains(r#""engine":"vllm""#) && json.contains(r#""measured_peak":1234567"#), "{json}");
    let back = State::from_saved(serde_json::from_str(&json).ok());
    assert_eq!((back.model.mode(), back.model.measured_peak), (SetupMode::Serve, Some(1_234_567)));
    // work saved before the mode existed opens in the mode its settings imply
    let old = reduce(gpt2(), Action::SetMode(SetupMode::Generate));
    let mut v = serde_json::to_value(old.saved()).unwrap();
    v["model"].as_object_mut().unwrap().remove("engine");
    let back = State::from_saved(serde_json::from_value(v).ok());
    assert_eq!(back.model.mode(), SetupMode::Generate);
    // zero is no measurement
    assert_eq!(reduce(back, Action::SetMeasured(Some(0))).model.measured_peak, None);
}

/// Generating, the input shape shows the prompt and typing there sets the prompt: one length,
/// one field (issue 23: no hidden field overriding a shown one).
#[test]
fn generating_the_input_shape_is_the_prompt() {
    let s = reduce(gpt2(), Action::SetMode(SetupMode::Generate));
    let mut c = s.model.config;
    c.generate.prompt_len = Some(128);
    let s = reduce(s, Action::SetConfig(c));
    assert_eq!(mode::running_len(&s.model.spec, &s.model.config), Some(128));
    let input = InputSpec { shape: vec![96], ..s.model.spec.input.clone() };
    let s = reduce(s, Action::SetInput(input));
    assert_eq!((s.model.config.generate.prompt_len, s.model.config.seq_len), (Some(96), c.seq_len));
    assert!(s.model.unedited);
}

/// A pasted config.json's torch_dtype sets the starting precision, as the CLI's --hf-config.
#[test]
fn a_pasted_configs_dtype_is_its_precision() {
    let mut v: serde_json::Value = serde_json::from_str(include_str!("../../crates/core/tests/data/tinyllama-1.1b.config.json")).unwrap();
    v["torch_dtype"] = "float16".into();
    let text = v.to_string();
    assert_eq!(crate::import::paste::dtype_of(&text).as_deref(), Some("float16"));
    let pasted = crate::test_util::block_on(crate::import::paste::read(&text)).unwrap();
    let s = reduce(State::default(), crate::import::pasted_action(pasted));
    assert_eq!(s.model.config.precision, vramcalc_core::Precision::Fp16);
    // `dtype`, transformers' newer name, reads the same
    v.as_object_mut().unwrap().remove("torch_dtype");
    v["dtype"] = "float16".into();
    let newer = v.to_string();
    assert_eq!(crate::import::paste::dtype_of(&newer).as_deref(), Some("float16"));
}
