//! A Hugging Face `config.json`'s `quantization_config` → [`WeightFormat`].
//!
//! | `quant_method` | read | format |
//! |---|---|---|
//! | `bitsandbytes` | `load_in_8bit`, `load_in_4bit`, `bnb_4bit_quant_type`, `bnb_4bit_use_double_quant` (`BitsAndBytesConfig`) | `int8`, `nf4`/`fp4` (`-dq`) |
//! | `gptq` | `bits` (4, 8), `group_size` (-1: one group) (`GPTQConfig`) | `gptq-int4`, `gptq-int8` |
//! | `awq` | `bits` 4, `group_size`, `version` `gemm` (`AwqConfig`) | `awq-int4` |
//! | `fp8` | `weight_block_size` (`FineGrainedFP8Config`; absent: per tensor, vLLM's `Fp8Config`) | `fp8-block128`, `fp8` |
//! | `mxfp4` | (`Mxfp4Config`: the experts only; GPT-OSS) | `mxfp4` |
//!
//! Anything else is an error naming the method.

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
        "fp8" => match q.get("weight_block_size").filter(|v| !v.is_null()) {
            None => Ok(WeightFormat::Fp8 { block: None }),
            Some(Value::Array(a)) if a.len() == 2 && a[0] == a[1] && a[0].as_u64().is_some_and(|b| b > 0) => {
                Ok(WeightFormat::Fp8 { block: a[0].as_u64() })
            }
            Some(v) => Err(err(format!("fp8 weight_block_size {v} is not a square block"))),
        },
        "mxfp4" => Ok(WeightFormat::Mxfp4),
        other => Err(err(format!(
            "quantization `{other}` is not modelled (bitsandbytes, gptq, awq, fp8, mxfp4 are); choose the weights with --weights"
        ))),
    }
}

/// The format of a `config.json` text: `None` without a `quantization_config`.
pub fn weights_of_config_json(text: &str) -> Result<Option<WeightFormat>> {
    let v: Value = serde_json::from_str(text).map_err(|e| Error::Import(format!("not valid JSON: {e}")))?;
    v.get("quantization_config").filter(|q| !q.is_null()).map(from_quantization_config).transpose()
}
