//! The downloads' files: the per-layer table as CSV and the estimate as JSON (the schema of
//! `vramcalc estimate --json`), from the model and job the app shows. Pure: tested natively;
//! `components::downloads` offers them (and the charts as SVG).

use serde_json::Value;
use vramcalc_core::spec::ModelSpec;
use vramcalc_core::{Estimate, TrainConfig};

/// The file of `format` (`csv`, `json`) for the model and job shown: rank 0's estimate for a
/// multi-GPU job, as the CLI's `--gpus --strategy` gives it.
pub fn export_file(spec: &ModelSpec, config: &TrainConfig, dist: &vramcalc_core::distributed::DistConfig, format: &str) -> Result<String, String> {
    let est = vramcalc_core::distributed::estimate(spec, config, dist).map(|d| d.estimate).map_err(|e| e.to_string())?;
    match format {
        "csv" => Ok(layers_csv(&est)),
        "json" => Ok(estimate_json(spec, &est)),
        other => Err(format!("export format must be \"csv\" or \"json\", got {other:?}")),
    }
}

/// The estimate as `vramcalc estimate --json` writes it: the core's `Estimate` plus `"model"`
/// and `"engine"` (whose allocation it simulates).
pub fn estimate_json(spec: &ModelSpec, est: &Estimate) -> String {
    let mut v = serde_json::to_value(est).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("model".into(), Value::String(spec.display_name()));
        o.insert("engine".into(), Value::String(est.config.engine().into()));
    }
    let mut out = serde_json::to_string_pretty(&v).unwrap_or_default();
    out.push('\n');
    out
}

/// A download's file name from the model's name: ASCII letters, digits, `-`, `_` and `.` kept,
/// anything else a `-`, at most 60 characters; `model` when nothing is left.
pub fn file_stem(display_name: &str) -> String {
    let stem: String = display_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '-' })
        .take(60)
        .collect();
    if stem.trim_matches('-').is_empty() {
        "model".into()
    } else {
        stem
    }
}

/// Header of [`layers_csv`].
pub const CSV_HEADER: &str = "path,kind,depth,output_shape,params,activation_values,saved_bytes";

fn csv_field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

/// The per-layer table (the rows the app's table shows), one row per layer, bytes in bytes.
pub fn layers_csv(est: &Estimate) -> String {
    let mut out = String::with_capacity(64 * (est.layers.len() + 1));
    out.push_str(CSV_HEADER);
    out.push_str("\r\n");
    for l in &est.layers {
        let i = &l.info;
        csv_field(&mut out, &i.path);
        out.push(',');
        csv_field(&mut out, &i.kind);
        out.push(',');
        out.push_str(&i.depth.to_string());
        out.push(',');
        let shape: Vec<String> = i.output_shape.0.iter().map(|d| d.to_string()).collect();
        out.push_str(&shape.join("x"));
        for n in [i.params, i.activation_values, l.saved_bytes] {
            out.push(',');
            out.push_str(&n.to_string());
        }
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramcalc_core::presets;

    #[test]
    fn file_names() {
        assert_eq!(file_stem("GPT2LMHeadModel"), "GPT2LMHeadModel");
        assert_eq!(file_stem("my net/v2 ✓"), "my-net-v2--");
        assert_eq!(file_stem("custom model"), "custom-model");
        assert_eq!(file_stem("✓✓"), "model");
    }

    #[test]
    fn vgg16_csv_and_json() {
        let spec = presets::build("vgg16").unwrap();
        let est = vramcalc_core::estimate(&spec, &TrainConfig::default()).unwrap();
        let csv = layers_csv(&est);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], CSV_HEADER);
        assert_eq!(lines.len(), est.layers.len() + 1);
        // cs231n's first conv: 3·3·3·64 + 64 parameters, 224·224·64 values
        assert!(lines.iter().any(|l| l.contains(",conv2d,") && l.contains(",64x224x224,1792,3211264,")), "{}", lines[1]);
        let total: u64 = lines[1..].iter().filter(|l| l.split(',').nth(2) == Some("0")).map(|l| l.split(',').nth(4).unwrap().parse::<u64>().unwrap()).sum();
        assert_eq!(total, 138_357_544);

        let json: Value = serde_json::from_str(&estimate_json(&spec, &est)).unwrap();
        assert_eq!(json["model"], "vgg16");
        assert_eq!(json["engine"], "PyTorch training step");
        assert_eq!(json["params"], 138_357_544u64);
        assert_eq!(json["peak_bytes"], est.peak_bytes);
        // the same keys as the core's Estimate (what the CLI writes)
        let core = serde_json::to_value(&est).unwrap();
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let mut expected = keys(&core);
        expected.push("model".into());
        expected.push("engine".into());
        expected.sort();
        let mut got = keys(&json);
        got.sort();
        assert_eq!(got, expected);
    }

    #[test]
    fn files_name_their_format_and_errors_say_what_is_wrong() {
        let spec = presets::build("vgg11").unwrap();
        let one = vramcalc_core::distributed::DistConfig::default();
        let c = TrainConfig::default();
        assert!(export_file(&spec, &c, &one, "csv").unwrap().starts_with(CSV_HEADER));
        assert!(export_file(&spec, &c, &one, "json").unwrap().contains("\"model\": \"vgg11\""));
        assert!(export_file(&spec, &c, &one, "xml").unwrap_err().contains("\"csv\" or \"json\""));
        let bad = TrainConfig { batch: 0, ..Default::default() };
        assert!(export_file(&spec, &bad, &one, "csv").unwrap_err().contains("batch"));
    }

    #[test]
    fn csv_quotes_fields() {
        let mut out = String::new();
        csv_field(&mut out, "a,\"b\"");
        assert_eq!(out, "\"a,\"\"b\"\"\"");
    }
}
