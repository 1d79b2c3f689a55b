//! The verifier against real candle training steps (CPU, exact allocator counts) and its
//! no-driver behaviour. Each run's measured peak must be within 5 % of the core's candle-profile
//! estimate; the binary itself computes both and exits non-zero beyond `--tolerance`.
//!
//! Build in release for speed: `cargo test --release -p vramcalc-verify` (about a minute on two
//! cores once built); debug builds of candle are roughly ten times slower.

use std::process::{Command, Output};
use std::sync::Mutex;

/// One training run at a time: VGG11 with AdamW alone peaks at 7.4 GiB, and each run uses every core.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn verify(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vramcalc-verify"))
        .args(args)
        // One compute thread: which pool threads get matmul work (and allocate their thread-local
        // packing buffers inside the measured step) otherwise varies from run to run.
        .env("RAYON_NUM_THREADS", "1")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the verifier binary runs")
}

/// Runs `run --device cpu --json` and checks the comparison it reports.
fn within_tolerance(model: &[&str], batch: &str, optimizer: &str) {
    let mut args = vec!["run", "--device", "cpu", "--batch", batch, "--optimizer", optimizer, "--steps", "2", "--tolerance", "5", "--json"];
    args.extend_from_slice(model);
    let out = {
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        verify(&args)
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    let measured = v["measured_peak_bytes"].as_u64().unwrap();
    let estimated = v["estimated_peak_bytes"].as_u64().unwrap();
    eprintln!("{model:?} batch {batch} {optimizer}: measured {measured} estimated {estimated} ({:+.2} %)", v["difference_percent"]);
    // the run really trained something and measured a step larger than its persistent memory
    assert!(measured > v["measured_persistent_bytes"].as_u64().unwrap(), "{stdout}");
    let diff = (measured as f64 - estimated as f64).abs() / estimated as f64;
    assert!(diff <= 0.05, "beyond 5 %: {stdout}");
    assert!(out.status.success(), "exit status {:?}: {stdout} {stderr}", out.status);
}

#[test]
fn small_mlp_sgd() {
    within_tolerance(&["--spec", "tests/specs/mlp.json"], "64", "sgd");
}

#[test]
fn small_mlp_adamw() {
    within_tolerance(&["--spec", "tests/specs/mlp.json"], "64", "adamw");
}

#[test]
fn small_cnn_with_batchnorm_and_inplace_relu_sgd() {
    within_tolerance(&["--spec", "tests/specs/cnn_bn.json"], "8", "sgd");
}

#[test]
fn small_cnn_with_batchnorm_and_inplace_relu_adamw() {
    within_tolerance(&["--spec", "tests/specs/cnn_bn.json"], "8", "adamw");
}

#[test]
fn bert_style_encoder_two_layers_sgd() {
    within_tolerance(&["--spec", "tests/specs/bert2.json"], "4", "sgd");
}

#[test]
fn bert_style_encoder_two_layers_adamw() {
    within_tolerance(&["--spec", "tests/specs/bert2.json"], "4", "adamw");
}

#[test]
fn resnet18_batch2_sgd() {
    within_tolerance(&["--preset", "resnet18"], "2", "sgd");
}

#[test]
fn resnet18_batch2_adamw() {
    within_tolerance(&["--preset", "resnet18"], "2", "adamw");
}

#[test]
fn vgg11_at_32px_sgd() {
    within_tolerance(&["--preset", "vgg11", "--input-size", "32"], "2", "sgd");
}

#[test]
fn vgg11_at_32px_adamw() {
    within_tolerance(&["--preset", "vgg11", "--input-size", "32"], "2", "adamw");
}

#[test]
fn tolerance_is_enforced() {
    // a tolerance no real run can meet makes the binary fail: the exit code carries the verdict
    let out = verify(&["run", "--spec", "tests/specs/mlp.json", "--batch", "64", "--optimizer", "sgd", "--steps", "1", "--tolerance", "-1"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAIL"));
}

#[test]
fn unsupported_layers_are_named() {
    let dir = std::env::temp_dir().join("vramcalc-verify-lstm.json");
    std::fs::write(&dir, r#"{"input":{"shape":[8,16]},"layers":[{"kind":"lstm","input_size":16,"hidden_size":8}]}"#).unwrap();
    let out = verify(&["run", "--spec", dir.to_str().unwrap(), "--batch", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("not supported by the verifier: lstm at layers[0]"), "{err}");
}

fn no_driver_here() -> bool {
    !["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/libcuda.so.1"].iter().any(|p| std::path::Path::new(p).exists())
}

fn expect_no_driver(args: &[&str]) {
    if !no_driver_here() {
        eprintln!("libcuda present: skipping the no-driver check for {args:?}");
        return;
    }
    let out = verify(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no NVIDIA driver found: libcuda.so.1 could not be loaded"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one clear line: {err}");
}

#[test]
fn gpus_without_driver_fails_cleanly() {
    expect_no_driver(&["gpus"]);
}

#[test]
fn probe_without_driver_fails_cleanly() {
    expect_no_driver(&["probe"]);
}

#[test]
fn run_on_cuda_without_driver_fails_cleanly() {
    expect_no_driver(&["run", "--preset", "resnet18", "--batch", "2", "--device", "cuda"]);
}
