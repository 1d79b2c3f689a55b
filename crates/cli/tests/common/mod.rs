//! Running the `vramcalc` binary from integration tests.

use std::process::Command;

/// Exit code, standard output and standard error of `vramcalc ARGS`.
pub fn vramcalc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vramcalc")).args(args).output().expect("run vramcalc");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// The JSON `vramcalc ARGS` prints (it must exit 0).
pub fn json(args: &[&str]) -> serde_json::Value {
    let (code, out, err) = vramcalc(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}
