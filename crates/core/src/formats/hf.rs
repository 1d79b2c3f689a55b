//! A Hugging Face `config.json`'s `quantization_config` → [`WeightFormat`].
//!
//! | `quant_method` | read | format |
//! |---|---|---|
//! | `bitsandbytes` | `load_in_8bit`, `load_in_4bit`, `bnb_4bit_quant_type`, `bnb_4bit_use_double_quant` (`BitsAndBytesConfig`) | `int8`, `nf4`/`fp4` (`-dq`) |
//! | `gptq` | `bits` (4, 8), `group_size` (-1: one group) (`GPTQConfig`) | `gptq-int4`, `gptq-int8` |
//! | `awq` | `bits` 4, `group_size`, `version` `gemm` (`AwqConfig`) | `awq-int4` |
//! | `fp8` | `weight_block_size` (`FineGrainedFP8Config`; absent: per tensor, vLLM's `Fp8Config`) | `fp8-block128`, `fp8` |
//! | `mxfp4` | (`Mxfp4Config`: the experts only; GPT-OSS) | `mxfp4` |
//! | `compressed-tensors` | `format`, each of `config_groups`' `targets` (`Linear`) and `weights` (`num_bits`, `type`, `symmetric`, `strategy`, `group_size`), `input_activations` (NVFP4) | `ct-w4a16-g128`, `ct-w8a8-int8`, `ct-fp8`, `nvfp4`, … ([`super::ct`]) |
//!
//! The skip lists (`modules_to_not_convert`, `llm_int8_skip_modules`, `ignore`) are read by
//! [`super::skip`].
//!
//! Anything else is an error naming the method.

use super::ct::CtScheme;
use super::WeightFormat;
use crate::error::{Error, Result};
use serde_json::Value;

/// The format a `quantization_config` object describes.
pub fn from_quantization_config(q: &Value) -> Result<WeightFormat> {
    let err = |m: String| Error::Import(format!("field `quantization_config`: {m}"));
    let method = q.get("quant_method").and_then(Value::as_str).unwrap_or("unnamed");
    let int = |k: &str| q.get(k).and_then(Value::as_i64);
    let flag = |k: &str| q.get(k).and_then(Value::as_bool).unwrap_or(false);
    let group = || match int("group_size") {
        None => Ok(super::DEFAULT_GROUP_SIZE),
        Some(-1) => Ok(0),
        Some(g) if g > 0 => Ok(g as u64),
        Some(g) => Err(err(format!("group_size {g} is not valid"))),
    };
    match method {
        "bitsandbytes" => {
            if flag("load_in_8bit") {
                Ok(WeightFormat::BnbInt8)
            } else if flag("load_in_4bit") {
                let nf4 = match q.get("bnb_4bit_quant_type").and_then(Value::as_str).unwrap_or("fp4") {
                    "nf4" => true,
                    "fp4" => false,
                    other => return Err(err(format!("bnb_4bit_quant_type `{other}` is not nf4 or fp4"))),
                };
                Ok(WeightFormat::Bnb4 { nf4, double_quant: flag("bnb_4bit_use_double_quant") })
            } else {
                Err(err("bitsandbytes without load_in_8bit or load_in_4bit".into()))
            }
        }
        "gptq" => match int("bits").unwrap_or(4) {
            b @ (4 | 8) => Ok(WeightFormat::Gptq { bits: b as u64, group_size: group()? }),
            b => Err(err(format!("gptq with {b} bits is not modelled (4, 8)"))),
        },
        "awq" => {
            let version = q.get("version").and_then(Value::as_str).unwrap_or("gemm").to_ascii_lowercase();
            if int("bits").unwrap_or(4) != 4 || version != "gemm" {
                return Err(err(format!("awq `{version}` with {} bits is not modelled (4-bit GEMM)", int("bits").unwrap_or(4))));
            }
            match group()? {
                0 => Err(err("awq needs a positive group_size".into())),
                g => Ok(WeightFormat::Awq { group_size: g }),
            }
        }
        // `FineGrainedFP8Config.expert_dtype: "fp4"` (DeepSeek-V4-style) packs the experts two
        // values a byte with per-32 scales (`FP8Experts`): not the fp8 layout below
        "fp8" if q.get("expert_dtype").and_then(Value::as_str).is_some_and(|d| d != "fp8") => {
            Err(err(format!("fp8 with expert_dtype {} is not modelled (fp8 experts are)", q["expert_dtype"])))
        }
        "fp8" => match q.get("weight_block_size").filter(|v| !v.is_null()) {
            None => Ok(WeightFormat::Fp8 { block: None }),
            Some(Value::Array(a)) if a.len() == 2 && a[0] == a[1] && a[0].as_u64().is_some_and(|b| b > 0) => {
                Ok(WeightFormat::Fp8 { block: a[0].as_u64() })
            }
            Some(v) => Err(err(format!("fp8 weight_block_size {v} is not a square block"))),
        },
        "mxfp4" => Ok(WeightFormat::Mxfp4),
        "compressed-tensors" => compressed_tensors(q).map(WeightFormat::Ct).map_err(err),
        other => Err(err(format!(
            "quantization `{other}` is not modelled (bitsandbytes, gptq, awq, fp8, mxfp4, compressed-tensors are); choose the weights with --weights"
        ))),
    }
}

/// The one weight scheme of a compressed-tensors config (every group alike).
fn compressed_tensors(q: &Value) -> std::result::Result<CtScheme, String> {
    let groups = q.get("config_groups").and_then(Value::as_object).filter(|g| !g.is_empty());
    let groups = groups.ok_or("compressed-tensors without `config_groups`")?;
    let top_format = q.get("format").and_then(Value::as_str).unwrap_or("dense");
    let mut scheme: Option<CtScheme> = None;
    for (name, g) in groups {
        let at = |m: String| format!("compressed-tensors `config_groups.{name}`: {m}");
        let targets: Vec<&str> = g.get("targets").and_then(Value::as_array).map_or_else(Vec::new, |t| t.iter().filter_map(Value::as_str).collect());
        if !targets.contains(&"Linear") {
            return Err(at(format!("targets {targets:?} are not modelled (`Linear` is)")));
        }
        let w = g.get("weights").filter(|w| !w.is_null()).ok_or_else(|| at("no `weights` scheme (activations only) is not modelled".into()))?;
        let fmt = g.get("format").and_then(Value::as_str).unwrap_or(top_format);
        let bits = w.get("num_bits").and_then(Value::as_u64).unwrap_or(8);
        let kind = w.get("type").and_then(Value::as_str).unwrap_or("int");
        let symmetric = w.get("symmetric").and_then(Value::as_bool).unwrap_or(true);
        let strategy = w.get("strategy").and_then(Value::as_str).unwrap_or("tensor");
        let group_size = w.get("group_size").and_then(Value::as_u64).unwrap_or(0);
        let acts = g.get("input_activations").filter(|a| !a.is_null());
        let fp4_acts = acts.is_some_and(|a| a.get("type").and_then(Value::as_str) == Some("float") && a.get("num_bits").and_then(Value::as_u64) == Some(4));
        let s = match (fmt, kind, bits, strategy) {
            ("pack-quantized", "int", 1..=8, "group") if group_size > 0 => CtScheme::Packed { bits, group_size, asym: !symmetric },
            ("pack-quantized", "int", 1..=8, "channel") => CtScheme::Packed { bits, group_size: 0, asym: !symmetric },
            ("int-quantized" | "naive-quantized", "int", 8, "channel" | "tensor") if symmetric => {
                CtScheme::Byte { float: false, channel: strategy == "channel" }
            }
            ("float-quantized" | "naive-quantized", "float", 8, "channel" | "tensor") => CtScheme::Byte { float: true, channel: strategy == "channel" },
            ("nvfp4-pack-quantized", "float", 4, "tensor_group") if group_size == 16 => CtScheme::Nvfp4 { w4a4: fp4_acts },
            _ => {
                return Err(at(format!(
                    "format `{fmt}` with {bits}-bit {kind} weights ({}, strategy `{strategy}`, group_size {group_size}) is not modelled",
                    if symmetric { "symmetric" } else { "asymmetric" }
                )))
            }
        };
        if scheme.is_some_and(|o| o != s) {
            return Err(at(format!("a second scheme ({}) beside {} is not modelled", s.name(), scheme.map_or(String::new(), |o| o.name()))));
        }
        scheme = Some(s);
    }
    scheme.ok_or_else(|| "compressed-tensors without a weight scheme".into())
}

/// The format of a `config.json` text: `None` without a `quantization_config`.
pub fn weights_of_config_json(text: &str) -> Result<Option<WeightFormat>> {
    let v: Value = serde_json::from_str(text).map_err(|e| Error::Import(format!("not valid JSON: {e}")))?;
    v.get("quantization_config").filter(|q| !q.is_null()).map(from_quantization_config).transpose()
}
