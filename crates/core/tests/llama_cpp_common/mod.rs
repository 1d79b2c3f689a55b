//! The measured llama.cpp records (`tests/data/llama_cpp/*.jsonl`, `tools/measure_llama_cpp.py`)
//! and their settings as `Params`, shared by the llama.cpp tests.
#![allow(dead_code)]

use serde_json::Value;
use vramcalc_core::gguf::{GgmlType, Header};
use vramcalc_core::llama_cpp::{FlashAttn, Params};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/llama_cpp");

pub struct Record {
    pub model: String,
    pub v: Value,
    pub header: Header,
}

pub fn records() -> Vec<Record> {
    records_of("measured.jsonl")
}

pub fn records_of(file: &str) -> Vec<Record> {
    let text = std::fs::read_to_string(format!("{DATA}/{file}")).unwrap();
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let model = v["model"].as_str().unwrap().to_string();
            let bytes = std::fs::read(format!("{DATA}/{model}.gguf-header")).unwrap();
            let size = v["file_size"].as_u64();
            let header = Header::parse_with_size(&bytes, size).unwrap();
            Record { model, v, header }
        })
        .collect()
}

pub fn params(v: &Value) -> Params {
    let p = &v["params"];
    let ty = |k: &str| GgmlType::from_name(p[k].as_str().unwrap()).unwrap();
    Params {
        n_ctx: p["n_ctx"].as_u64().unwrap(),
        n_batch: p["n_batch"].as_u64().unwrap(),
        n_ubatch: p["n_ubatch"].as_u64().unwrap(),
        type_k: ty("type_k"),
        type_v: ty("type_v"),
        flash_attn: match p["fa"].as_str().unwrap() {
            "on" => FlashAttn::On,
            "off" => FlashAttn::Off,
            _ => FlashAttn::Auto,
        },
        n_parallel: p["n_seq"].as_u64().unwrap(),
        kv_unified: p["kv_unified"].as_bool().unwrap(),
        swa_full: p["swa_full"].as_bool().unwrap(),
        mmap: p["mmap"].as_bool().unwrap(),
        ..Params::default()
    }
}

