//! Issue 25's closing table: for each model family it names, the measured agreement of every
//! record in `tests/data/` (each estimate computed as the test that owns the record computes it),
//! which workloads have no measured record, which test checks the parameter count exact, and each
//! `quantization_config` method with the test that checks its stored bytes.
//!
//! Targets (issue 25): training within 3 %, inference, generation and caches within 1 %. The tables are the generated
//! section of `docs/models.md`; `FAMILY_TABLE=docs/models.md cargo test -p vramcalc-core --test
//! family_agreement -- --nocapture` rewrites it, and the test fails while it is out of date.

#[path = "common/generate.rs"]
mod generate;
#[path = "common/hf.rs"]
mod hf;
#[path = "common/qwen_vl.rs"]
mod qwen_vl;
#[path = "common/vlm_generate.rs"]
mod vlm_generate;

use serde_json::Value;
use std::collections::BTreeMap;

/// The `model_type`s of issue 25, in its order.
const FAMILIES: &[&str] = &[
    "gpt_oss", "qwen3_next", "llama4_text", "glm4_moe", "glm4", "deepseek_v2", "gemma3", "qwen2_5_vl", "mllama", "llava", "paligemma", "mamba",
    "mamba2", "jamba", "falcon_h1", "bamba", "granite", "granitemoe", "olmo2", "olmoe", "cohere", "cohere2", "smollm3", "exaone4", "ernie4_5",
    "ernie4_5_moe", "hunyuan_v1_dense", "minimax", "phimoe", "nemotron", "stablelm", "gptj", "bloom", "mpt", "bart", "modernbert", "deberta-v2",
    "xlm-roberta", "electra", "dinov2", "convnext", "swin", "siglip", "wav2vec2",
];

/// The families whose class has no `generate()` (encoders, image and audio classifiers, SigLIP's
/// two towers): no generation or cache workload applies.
const NO_GENERATE: &[&str] = &["modernbert", "deberta-v2", "xlm-roberta", "electra", "dinov2", "convnext", "swin", "siglip", "wav2vec2"];

/// The workloads, in the table's order.
const WORKLOADS: &[&str] = &["train", "infer", "generate prefill", "generate peak", "generate decode", "cache"];

/// The target of a workload, in percent.
fn target(workload: &str) -> f64 {
    if workload == "train" {
        3.0
    } else {
        1.0
    }
}

/// The family of issue 25 a record's `model_type` belongs to: Gemma 3's text model
/// (`Gemma3ForCausalLM`, `gemma3_text`) is Gemma 3's.
fn family_of(model_type: &str) -> Option<&'static str> {
    let t = if model_type == "gemma3_text" { "gemma3" } else { model_type };
    FAMILIES.iter().copied().find(|f| *f == t)
}

/// One measured record: its family, the `model_type` recorded, the workload, its error in
/// percent, the data file and the test that owns it.
struct Row {
    family: &'static str,
    model_type: String,
    workload: &'static str,
    err: f64,
    file: &'static str,
}

/// The training traces (`tools/trace_hf.py`), estimated by `hf::trace_error` as
/// `import_hf.rs`, `import_hybrid.rs`, `import_more.rs`, `import_vlm.rs`, `import_encoders.rs` and
/// `import_mllama.rs` estimate them.
const TRACE_FILES: &[&str] =
    &["hf/traces.jsonl", "hf/traces_25.jsonl", "hf/hybrid_traces.jsonl", "hf/more_traces.jsonl", "hf/vlm_traces.jsonl", "hf/encoder_more_traces.jsonl", "hf/mllama_traces.jsonl"];

fn rows() -> Vec<Row> {
    let mut rows = Vec::new();
    for file in TRACE_FILES {
        for line in hf::data(file).lines() {
            let r: Value = serde_json::from_str(line).unwrap();
            let t = r["config"]["model_type"].as_str().unwrap().to_string();
            let Some(family) = family_of(&t) else { continue };
            rows.push(Row { family, model_type: t, workload: "train", err: hf::trace_error(&r), file });
        }
    }
    // Qwen2.5-VL (`qwen_vl_windows.rs`): a training step, an inference forward and a generate()
    // (its peak, and its phases and cache from `compare_generate`)
    let qwen = |workload, err: f64| Row { family: "qwen2_5_vl", model_type: "qwen2_5_vl".into(), workload, err: err * 100.0, file: "hf/qwen_vl_traces.jsonl" };
    for (label, _, _, err) in qwen_vl::compare() {
        let workload = match label.split(' ').next() {
            Some("train") => "train",
            Some("infer") => "infer",
            _ => "generate peak",
        };
        rows.push(qwen(workload, err));
    }
    for (_, errs) in qwen_vl::compare_generate() {
        let cache = errs.iter().filter(|(what, _)| what.starts_with("cache")).map(|(_, e)| e.abs()).fold(0.0, f64::max);
        rows.extend(errs.iter().filter(|(what, _)| !what.starts_with("cache")).map(|&(what, e)| qwen(if what == "prefill" { "generate prefill" } else { "generate decode" }, e)));
        rows.push(qwen("cache", cache));
    }
    // generate() of the families (`generate_families.rs`, `generate.rs`), as `generate::check` estimates them
    for file in ["generate_families.jsonl", "generate_hf.jsonl"] {
        rows.extend(generate_rows(file));
    }
    rows.extend(generate_moe2_rows());
    // Llama 3.2 Vision's cache (`import_mllama.rs::mllama_generate_caches_the_image_keys_once`)
    for line in hf::data("hf/mllama_cache.jsonl").lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let (after_prefill, end) = hf::generate_cache_bytes(&r);
        let rel = |est: u64, key: &str| generate::rel(est, r[key].as_u64().unwrap()) * 100.0;
        let err = rel(after_prefill, "kv_cache_bytes_after_prefill").abs().max(rel(end, "kv_cache_bytes_end").abs());
        rows.push(Row { family: "mllama", model_type: "mllama".into(), workload: "cache", err, file: "hf/mllama_cache.jsonl" });
    }
    rows.extend(dense2_rows());
    rows.extend(vlm_generate_rows());
    // an encoder–decoder's generate() (`generate_seq2seq.rs`)
    rows.extend(record_rows(vlm_generate::parse(&hf::data("generate_seq2seq.jsonl")), "generate_seq2seq.jsonl"));
    rows
}

/// `generate()` with an image of LLaVA, PaliGemma, Gemma 3 and Llama 3.2 Vision
/// (`generate_vlm2.rs`, as `generate::check` estimates them): the cache and the peaks against
/// the target.
fn vlm_generate_rows() -> Vec<Row> {
    record_rows(vlm_generate::records(), "generate_vlm2.jsonl")
}

/// The rows of `generate()` records (four: prefill, peak, decode, cache, each), as
/// `generate::check` estimates them.
fn record_rows(records: Vec<(String, generate::Record)>, file: &'static str) -> Vec<Row> {
    let mut rows = Vec::new();
    for (t, rec) in records {
        let Some(family) = family_of(&t) else { continue };
        let e = vramcalc_core::estimate(&rec.spec, &rec.config).unwrap();
        let g = e.generation.as_ref().unwrap();
        let rel = |est, meas| generate::rel(est, meas) * 100.0;
        let kv = rel(g.kv_cache_bytes, rec.kv_end).abs().max(rel(g.kv_cache_bytes_after_prefill, rec.kv_prefill).abs());
        for (workload, err) in [("generate prefill", rel(g.prefill_peak_bytes, rec.prefill)), ("generate peak", rel(e.peak_bytes, rec.peak)), ("generate decode", rel(g.decode_peak_bytes, rec.decode)), ("cache", kv)] {
            rows.push(Row { family, model_type: t.clone(), workload, err, file });
        }
    }
    rows
}

/// The dense decoders' records of `generate_dense2.rs`: training steps of five families
/// (`hf/traces_dense2.jsonl`) and a `generate()` of fourteen (`generate_dense2.jsonl`), each
/// estimated as that test estimates it.
fn dense2_rows() -> Vec<Row> {
    let mut rows = Vec::new();
    let file = "hf/traces_dense2.jsonl";
    for line in hf::data(file).lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        let t = r["config"]["model_type"].as_str().unwrap().to_string();
        let family = family_of(&t).expect("an issue-25 family");
        rows.push(Row { family, model_type: t, workload: "train", err: hf::trace_error(&r), file });
    }
    rows.extend(generate_rows("generate_dense2.jsonl"));
    rows
}

/// The rows of a generate() file, as `generate::check` estimates them: four (prefill, peak,
/// decode, cache) per record.
fn generate_rows(file: &'static str) -> Vec<Row> {
    let text = hf::data(file);
    let types = text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str::<Value>(l).unwrap()["hf_config_file"]["model_type"].as_str().unwrap().to_string());
    record_rows(types.zip(generate::records(&text)).collect(), file)
}

/// generate() of the SSM hybrids, linear-attention and MoE families (`generate_moe2.rs`).
fn generate_moe2_rows() -> Vec<Row> {
    generate_rows("generate_moe2.jsonl")
}

/// Every record of `generate_moe2.jsonl` is a family's: four rows each.
#[test]
fn every_generate_moe2_record_is_in_a_row() {
    let n = rows().iter().filter(|r| r.file == "generate_moe2.jsonl").count();
    assert_eq!(n, 4 * hf::data("generate_moe2.jsonl").lines().filter(|l| !l.trim().is_empty()).count());
}

/// The parameter-count files and the test that checks every entry exact.
const COUNT_FILES: &[(&str, &str)] = &[
    ("hf/full_dict_counts.json", "import_hf.rs::full_to_dict_configs_import_with_exact_counts"),
    ("hf/transformers_counts.json", "import_hf.rs::transformers_counts_match_exactly"),
    ("hf/hybrid_counts.json", "import_hybrid.rs::hybrid_decoders_have_pytorch_parameter_counts"),
    ("hf/dense_more_counts.json", "import_dense_more.rs::dense_decoders_have_pytorch_parameter_counts"),
    ("hf/more_counts.json", "import_more.rs::more_decoders_have_pytorch_parameter_counts"),
    ("hf/vlm_counts.json", "import_vlm.rs::vlm_classes_have_pytorch_parameter_counts"),
    ("hf/mllama_counts.json", "import_mllama.rs::mllama_has_pytorch_parameter_counts"),
    ("hf/encoder_counts.json", "import_encoders.rs::encoder_classes_have_pytorch_parameter_counts"),
    ("hf/encoder_more_counts.json", "import_encoders.rs::deberta_v2_swin_wav2vec2_classes_have_pytorch_parameter_counts"),
];

/// The tests that check `family`'s parameter count exact, with how many configs each holds.
fn count_tests(family: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (file, test) in COUNT_FILES {
        let all: Value = serde_json::from_str(&hf::data(file)).unwrap();
        // keys are `<model_type>-<default|base|N>`; a config's own `model_type` decides
        let n = all.as_object().unwrap().values().filter(|w| w["config"]["model_type"].as_str() == Some(family)).count();
        if n > 0 {
            out.push(format!("exact ({test}, {n} configs)"));
        }
    }
    out
}

/// `(method, how it is recognised in a measured case, the tests of its bytes, the source read where nothing was measured)`.
type Method = (&'static str, fn(&str, &str) -> bool, &'static str, &'static str);

const METHODS: &[Method] = &[
    ("`mxfp4` (gpt-oss experts)", |m, _| m == "mxfp4", "quant_layouts.rs::mxfp4_blocks_as_measured, formats.rs::gpt_oss_mxfp4_experts_are_stored_as_the_checkpoint", ""),
    ("`fp8`, block-wise scales (`weight_block_size` 128 × 128)", |m, f| m == "fp8" && f == "fp8-block128", "quant_layouts.rs::every_measured_layout_is_the_modelled_one, vlm_skip_lists_keep_what_the_quantiser_keeps", ""),
    ("`compressed-tensors` W4A16 (int4, group 128, symmetric and asymmetric)", |m, f| m == "compressed-tensors" && f.starts_with("ct-w4a16"), "quant_layouts.rs::every_measured_layout_is_the_modelled_one, vlm_skip_lists_keep_what_the_quantiser_keeps", ""),
    ("`compressed-tensors` W8A8 int8 (per channel)", |m, f| m == "compressed-tensors" && f.starts_with("ct-w8a8-int8"), "quant_layouts.rs::every_measured_layout_is_the_modelled_one", ""),
    ("`compressed-tensors` FP8 dynamic (per channel)", |m, f| m == "compressed-tensors" && f.starts_with("ct-fp8"), "quant_layouts.rs::every_measured_layout_is_the_modelled_one", ""),
    ("`compressed-tensors` NVFP4", |m, f| m == "compressed-tensors" && f.starts_with("nvfp4"), "quant_layouts.rs::every_measured_layout_is_the_modelled_one", ""),
    ("`bitsandbytes` 4-bit NF4", |m, f| m == "bitsandbytes" && f == "nf4", "quant_layouts.rs::every_measured_layout_is_the_modelled_one, vlm_skip_lists_keep_what_the_quantiser_keeps", ""),
    ("`bitsandbytes` 4-bit NF4, double quant", |m, f| m == "bitsandbytes" && f == "nf4-dq", "quant_layouts.rs::every_measured_layout_is_the_modelled_one, a_prequantised_double_quant_checkpoint_has_one_nested_code_per_weight", ""),
    ("`bitsandbytes` 8-bit (LLM.int8)", |m, f| m == "bitsandbytes" && f == "int8", "quant_layouts.rs::every_measured_layout_is_the_modelled_one", ""),
    ("`awq` (GEMM, 4-bit, group 128)", |m, _| m == "awq", "quant_skip.rs::awq_modules_to_not_convert, formats.rs::moe_experts_are_quantised_and_the_router_is_not",
        "AutoAWQ `WQLinear_GEMM`: qweight int32 `[in, out/8]`, qzeros int32 `[in/g, out/8]`, scales fp16 `[in/g, out]`"),
    ("`gptq` (4-bit, group 128, `desc_act`)", |m, _| m == "gptq", "quant_skip.rs::gptq_quantises_what_its_block_list_names",
        "gptqmodel `BaseQuantLinear`: qweight int32 `[in/8, out]`, qzeros int32 `[in/g, out/8]`, scales fp16 `[in/g, out]`, `g_idx` int32 `[in]`"),
];

/// `(quant_method, the modelled format's name, file)` of every measured quantiser case.
fn quant_cases() -> Vec<(String, String, &'static str)> {
    let mut out = Vec::new();
    for file in ["quant_layouts.json", "vlm_quant_layouts.json"] {
        let v: Value = serde_json::from_str(&hf::data(file)).unwrap();
        for case in v["cases"].as_array().unwrap() {
            let method = case["quantization_config"]["quant_method"].as_str().unwrap().to_string();
            let mut cfg = case["config"].clone();
            cfg["quantization_config"] = case["quantization_config"].clone();
            let format = if method == "mxfp4" {
                "mxfp4".into() // one module, not a model (`mxfp4_blocks_as_measured`)
            } else {
                vramcalc_core::formats::hf::weights_of_config_json(&cfg.to_string()).unwrap().expect("a format").name()
            };
            out.push((method, format, file));
        }
    }
    out
}

fn pct(x: f64) -> String {
    format!("{:.2} %", x.abs())
}

/// The generated tables, and the records beyond their bound.
fn tables() -> (String, Vec<String>) {
    let rows = rows();
    let mut failures = Vec::new();
    let mut out = String::new();
    out.push_str("| family (`model_type`) | workload | records | largest \\|error\\| | target | data |\n|---|---|---:|---:|---|---|\n");
    let mut measured: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for family in FAMILIES {
        for workload in WORKLOADS {
            let group: Vec<&Row> = rows.iter().filter(|r| r.family == *family && r.workload == *workload).collect();
            if group.is_empty() {
                continue;
            }
            measured.entry(family).or_default().push(workload);
            let worst = group.iter().map(|r| r.err.abs()).fold(0.0, f64::max);
            let bound = target(workload);
            for r in &group {
                if r.err.abs() > bound {
                    failures.push(format!("{family} {workload} ({}): {:+.2} % beyond {bound} %", r.file, r.err));
                }
            }
            let mut types: Vec<&str> = group.iter().map(|r| r.model_type.as_str()).collect();
            types.sort_unstable();
            types.dedup();
            let mut files: Vec<&str> = group.iter().map(|r| r.file).collect();
            files.sort_unstable();
            files.dedup();
            let name = if types == [*family] { format!("`{family}`") } else { format!("`{family}` ({})", types.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")) };
            let target = format!("{bound} %");
            out.push_str(&format!("| {name} | {workload} | {} | {} | {target} | {} |\n", group.len(), pct(worst), files.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")));
        }
    }
    out.push_str("\nEach family's parameter count and the workloads with no measured record:\n\n");
    out.push_str("| family (`model_type`) | parameter count | no measured record of |\n|---|---|---|\n");
    for family in FAMILIES {
        let counts = count_tests(family);
        if counts.is_empty() {
            failures.push(format!("{family}: no test checks its parameter count"));
        }
        let have = measured.get(family).cloned().unwrap_or_default();
        let applies = |w: &&str| !(NO_GENERATE.contains(family) && (w.starts_with("generate") || *w == "cache"));
        let missing: Vec<&str> = WORKLOADS.iter().copied().filter(|w| applies(w) && !have.contains(w)).collect();
        let missing = if have.is_empty() {
            "any workload (exact parameter counts only)".to_string()
        } else if NO_GENERATE.contains(family) {
            format!("{} (no `generate()`: generation and cache do not apply)", missing.join(", "))
        } else {
            missing.join(", ")
        };
        out.push_str(&format!("| `{family}` | {} | {missing} |\n", if counts.is_empty() { "not checked".into() } else { counts.join("; ") }));
    }
    out.push_str("\nEach `quantization_config` method modelled, the tests of its stored bytes, and where those bytes come from:\n\n");
    out.push_str("| method | tests of its bytes | bytes |\n|---|---|---|\n");
    let cases = quant_cases();
    for (label, is, tests, source) in METHODS {
        let mine: Vec<&(String, String, &str)> = cases.iter().filter(|(m, f, _)| is(m, f)).collect();
        let bytes = if mine.is_empty() {
            if source.is_empty() {
                failures.push(format!("{label}: neither measured nor read from source"));
            }
            format!("read from source: {source}")
        } else {
            let mut files: Vec<&str> = mine.iter().map(|c| c.2).collect();
            files.dedup();
            format!("measured: {} case{} of the real quantiser (`{}`)", mine.len(), if mine.len() == 1 { "" } else { "s" }, files.join("`, `"))
        };
        out.push_str(&format!("| {label} | {tests} | {bytes} |\n"));
    }
    for (m, f, file) in &cases {
        if !METHODS.iter().any(|(_, is, _, _)| is(m, f)) {
            failures.push(format!("{file}: a measured case of {m} ({f}) no row names"));
        }
    }
    (out, failures)
}

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/models.md");
const BEGIN: &str = "<!-- generated: FAMILY_TABLE=docs/models.md cargo test -p vramcalc-core --test family_agreement -- --nocapture -->\n";
const END: &str = "<!-- end generated -->";

/// Every family's records within their target (or their documented bound), every family's
/// count checked, and `docs/models.md` holding these tables.
#[test]
fn every_family_agrees_within_its_target_and_the_doc_is_current() {
    let (table, failures) = tables();
    println!("{table}");
    assert!(failures.is_empty(), "{} beyond their target:\n{}", failures.len(), failures.join("\n"));
    let doc = std::fs::read_to_string(DOC).unwrap_or_else(|e| panic!("{DOC}: {e}"));
    let start = doc.find(BEGIN).map(|i| i + BEGIN.len()).expect("docs/models.md: the generated section's marker");
    let end = start + doc[start..].find(END).expect("docs/models.md: the end marker");
    // `FAMILY_TABLE` set (to `docs/models.md`, the one file it writes): rewrite the section
    if std::env::var_os("FAMILY_TABLE").is_some() {
        std::fs::write(DOC, format!("{}{table}{}", &doc[..start], &doc[end..])).unwrap();
    } else {
        assert!(doc[start..end] == table, "docs/models.md is out of date: run FAMILY_TABLE=docs/models.md cargo test -p vramcalc-core --test family_agreement");
    }
}

/// The rows cover every record of the families: the counts of each file's records.
#[test]
fn every_record_of_the_families_is_in_a_row() {
    let rows = rows();
    let n = |file: &str| rows.iter().filter(|r| r.file == file).count();
    // six forwards, and four rows (prefill, peak, decode, cache) per generate()
    assert_eq!(n("hf/qwen_vl_traces.jsonl"), 6 + 4 * 2);
    assert_eq!(n("hf/mllama_cache.jsonl"), hf::data("hf/mllama_cache.jsonl").lines().count());
    // generate: four rows (prefill, peak, decode, cache) per record, every record a family's
    assert_eq!(n("generate_families.jsonl"), 4 * 9);
    assert_eq!(n("generate_hf.jsonl"), 4);
    assert_eq!(n("generate_vlm2.jsonl"), 4 * 8);
    assert_eq!(n("generate_seq2seq.jsonl"), 4 * 2);
    // the training traces of issue 25's types all (issue 12's families aside)
    assert_eq!(n("hf/hybrid_traces.jsonl") + n("hf/more_traces.jsonl") + n("hf/vlm_traces.jsonl"), 16 + 6 + 8);
    assert_eq!(n("hf/traces_25.jsonl") + n("hf/encoder_more_traces.jsonl") + n("hf/mllama_traces.jsonl"), 11 + 10 + 4);
}

/// The dense decoders' records all in rows: ten training steps, four rows per `generate()`.
#[test]
fn every_dense2_record_is_in_a_row() {
    let rows = dense2_rows();
    let n = |file: &str| rows.iter().filter(|r| r.file == file).count();
    assert_eq!(n("hf/traces_dense2.jsonl"), 10);
    assert_eq!(n("generate_dense2.jsonl"), 4 * 16);
}
