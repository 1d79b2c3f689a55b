//! The reducer's "one truth per setting" rules (issue 16): the sequence length and the input
//! shape are one value, and a Hugging Face import starts at a stated, sensible length.

use super::*;

fn reduce(s: State, a: Action) -> State {
    (*Rc::new(s).reduce(a)).clone()
}

#[test]
fn typing_the_input_shape_of_a_sequence_model_sets_its_sequence_length() {
    let s = reduce(State::default(), Action::LoadPreset(Model::preset("bert-base").unwrap()));
    let spec_len = s.model.spec.input.shape[0];
    let s = reduce(s, Action::SetSeqLen(Some(64)));
    assert_eq!(s.model.spec.seq_len(s.model.config.seq_len), Some(64));
    // the editor shows [64] and the user types 256 there: the length the model runs at is 256,
    // and the preset is still the preset
    let input = InputSpec { shape: vec![256], ..s.model.spec.input.clone() };
    let s = reduce(s, Action::SetInput(input));
    assert_eq!(s.model.config.seq_len, Some(256));
    assert_eq!(s.model.spec.input.shape[0], spec_len);
    assert!(s.model.unedited, "only the sequence length changed");
    assert_eq!(s.model.spec.seq_len(s.model.config.seq_len), Some(256));
    // undo goes back to 64
    let s = reduce(s, Action::Undo);
    assert_eq!(s.model.spec.seq_len(s.model.config.seq_len), Some(64));
}

#[test]
fn image_input_shapes_are_not_sequence_lengths() {
    let s = State::default();
    let input = InputSpec { shape: vec![3, 64, 64], ..s.model.spec.input.clone() };
    let s = reduce(s, Action::SetInput(input));
    assert_eq!(s.model.spec.input.shape, vec![3, 64, 64]);
    assert_eq!(s.model.config.seq_len, None);
    assert!(!s.model.unedited);
}

#[test]
fn an_import_starts_at_a_stated_sequence_length() {
    let mut spec = crate::presets::preset("gpt2").unwrap();
    spec.input.shape[0] = 2048;
    let s = reduce(State::default(), Action::ImportHf(spec.clone(), Some(2048), None, None));
    assert_eq!(s.model.config.seq_len, Some(IMPORT_SEQ_LEN));
    assert_eq!(s.assumed_seq, Some((IMPORT_SEQ_LEN, 2048)));
    // setting a length is no longer an assumption; neither is another model
    assert_eq!(reduce(s.clone(), Action::SetSeqLen(Some(1024))).assumed_seq, None);
    assert_eq!(reduce(s, Action::StartEmpty).assumed_seq, None);
    // a model shorter than the default runs at its own length
    spec.input.shape[0] = 128;
    let s = reduce(State::default(), Action::ImportHf(spec, Some(512), None, None));
    assert_eq!((s.model.config.seq_len, s.assumed_seq), (Some(128), Some((128, 512))));
}

#[test]
fn bytes_are_binary_by_default() {
    assert_eq!(State::default().prefs.unit, ByteUnit::Mib);
    let old: Prefs = serde_json::from_str(r#"{"lang":"en"}"#).unwrap();
    assert_eq!(old.unit, ByteUnit::Mib);
    let chosen: Prefs = serde_json::from_str(r#"{"unit":"MB"}"#).unwrap();
    assert_eq!(chosen.unit, ByteUnit::Mb);
}
