//! Checkpoint sizes as stored, read from real files (`tools/make_safetensors_headers.py`:
//! transformers' `save_pretrained(max_shard_size="1MB")` of a tiny bf16 Llama, and the same
//! model's compressed-tensors W4A16 state dict written by `safetensors.torch.save_file`; each
//! header kept with its file's size in `sizes.json`), against the index and the modelled weights.

use vramcalc_core::safetensors::{read_header, read_index};
use vramcalc_core::{Mode, Precision, TrainConfig};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/safetensors/");

fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap()
}

fn sizes() -> serde_json::Value {
    serde_json::from_slice(&read("sizes.json")).unwrap()
}

/// The inference estimate's weight bytes of a `config.json` (its `quantization_config`'s format).
fn modelled(config: &str) -> u64 {
    let weights = vramcalc_core::formats::hf::weights_of_config_json(config).unwrap();
    let spec = vramcalc_core::import::hf::from_config_json(config).unwrap();
    let c = TrainConfig { batch: 1, seq_len: Some(8), mode: Mode::Infer, precision: Precision::Bf16, weights, ..TrainConfig::default() };
    vramcalc_core::estimate(&spec, &c).unwrap().param_bytes
}

#[test]
fn the_shards_add_up_to_the_index_and_the_model() {
    let index = read_index(std::str::from_utf8(&read("llama-bf16.index.json")).unwrap()).unwrap();
    assert_eq!(index.files.len(), 5);
    let sizes = sizes();
    let mut data = 0;
    for f in &index.files {
        let name = format!("llama-bf16.{f}.header");
        let h = read_header(&read(&name)).unwrap();
        // the header alone sizes the whole file
        assert_eq!(Some(h.file_bytes()), sizes[&name].as_u64(), "{name}");
        data += h.data_bytes();
    }
    assert_eq!(data, index.total_size);
    assert_eq!(index.total_parameters, Some(1_889_536));
    // bf16: 2 bytes a parameter, as the importer counts them
    let config = String::from_utf8(read("llama-bf16.config.json")).unwrap();
    assert_eq!(modelled(&config), index.total_size);
}

/// The W4A16 checkpoint as stored is the modelled `ct-w4a16-g128` weights to the byte.
#[test]
fn a_compressed_tensors_file_is_the_modelled_format() {
    let name = "llama-ct-w4a16.model.safetensors.header";
    let h = read_header(&read(name)).unwrap();
    assert_eq!(Some(h.file_bytes()), sizes()[name].as_u64());
    let by = h.bytes_by_dtype();
    assert!(by.iter().any(|(d, _)| *d == "I32") && by.iter().any(|(d, _)| *d == "I64"), "{by:?}");
    let config = String::from_utf8(read("llama-ct-w4a16.config.json")).unwrap();
    assert_eq!(modelled(&config), h.data_bytes());
}

/// A prefix shorter than the header asks for the header's own extent.
#[test]
fn a_prefix_asks_for_the_rest_of_the_header() {
    let bytes = read("llama-ct-w4a16.model.safetensors.header");
    let e = read_header(&bytes[..100]).unwrap_err();
    assert_eq!(e, vramcalc_core::safetensors::SafetensorsError::NeedMore { at_least: bytes.len() as u64, got: 100, field: "the JSON header".into() });
}
