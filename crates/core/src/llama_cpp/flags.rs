//! llama.cpp's flag values as text, read as `common/arg.cpp` reads them, and written back: `-ot`,
//! `-ts`, `-sm`, `-fa`, `-ngl`. The CLI (`vramcalc llama-cpp`) and the app's llama.cpp panel both
//! parse with these, so a value means the same in either.

use super::error::LlamaError;
use super::params::{FlashAttn, Override, Params, SplitMode, Target};

fn bad(msg: String) -> LlamaError {
    LlamaError::Params(msg)
}

/// `-ot PATTERN=BUFFER[,PATTERN=BUFFER…]` (`parse_tensor_buffer_overrides`: split at `,`, each
/// item at its last `=`; the buffer is `CPU` or a GPU's `CUDA<i>`). Each pattern is compiled as
/// the estimate compiles it, so a pattern the estimate would refuse is refused here with the same
/// message. Empty text is no override.
pub fn parse_overrides(text: &str) -> Result<Vec<Override>, LlamaError> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (pattern, buf) = item.rsplit_once('=').ok_or_else(|| bad(format!("-ot {item}: expected PATTERN=BUFFER")))?;
        if pattern.is_empty() {
            return Err(bad(format!("-ot {item}: the pattern before = is empty")));
        }
        let target = if buf.eq_ignore_ascii_case("cpu") {
            Target::Cpu
        } else if let Some(i) = buf.strip_prefix("CUDA").and_then(|i| i.parse::<usize>().ok()) {
            Target::Gpu(i)
        } else {
            return Err(bad(format!("-ot {item}: unknown buffer type {buf:?} (CPU or CUDA<i>)")));
        };
        out.push(Override { pattern: pattern.to_string(), target });
    }
    // the estimate's own compilation of the patterns (`placement::overrides`)
    super::placement::overrides(&Params { overrides: out.clone(), n_cpu_moe: 0, ..Params::default() })?;
    Ok(out)
}

/// The `-ot` text of `overrides` (what [`parse_overrides`] reads back).
pub fn overrides_text(overrides: &[Override]) -> String {
    let item = |o: &Override| match o.target {
        Target::Cpu => format!("{}=CPU", o.pattern),
        Target::Gpu(i) => format!("{}=CUDA{i}", o.pattern),
    };
    overrides.iter().map(item).collect::<Vec<_>>().join(",")
}

/// `LLAMA_MAX_DEVICES` of a CUDA build (`ggml-cuda.h` `GGML_CUDA_MAX_DEVICES`): `common/arg.cpp`
/// refuses a `-ts` of this many values or more.
pub const MAX_DEVICES: usize = 16;

/// `-ts N0,N1,…` (`,` or `/` between the proportions, as `common/arg.cpp` splits them); empty
/// text is no split (by the GPUs' memory).
pub fn parse_tensor_split(text: &str) -> Result<Vec<f64>, LlamaError> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let split = text
        .split([',', '/'])
        .map(|x| match x.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(bad(format!("-ts {text}: {x:?} is not a non-negative number"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    if split.len() >= MAX_DEVICES {
        return Err(bad(format!("-ts {text}: {} values, llama.cpp takes at most {}", split.len(), MAX_DEVICES - 1)));
    }
    Ok(split)
}

/// The `-ts` text of a split.
pub fn tensor_split_text(split: &[f64]) -> String {
    split.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

impl SplitMode {
    pub const ALL: [SplitMode; 3] = [SplitMode::None, SplitMode::Layer, SplitMode::Row];

    /// `-sm`'s spelling.
    pub fn name(self) -> &'static str {
        match self {
            SplitMode::None => "none",
            SplitMode::Layer => "layer",
            SplitMode::Row => "row",
        }
    }

    pub fn from_name(s: &str) -> Result<SplitMode, LlamaError> {
        SplitMode::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| bad(format!("-sm {s}: expected none, layer or row")))
    }
}

impl FlashAttn {
    pub const ALL: [FlashAttn; 3] = [FlashAttn::Auto, FlashAttn::On, FlashAttn::Off];

    /// `-fa`'s spelling.
    pub fn name(self) -> &'static str {
        match self {
            FlashAttn::On => "on",
            FlashAttn::Off => "off",
            FlashAttn::Auto => "auto",
        }
    }

    /// `-fa on|off|auto` (also `1`/`0`, `true`/`false`, as `common/arg.cpp` takes them).
    pub fn from_name(s: &str) -> Result<FlashAttn, LlamaError> {
        match s {
            "on" | "1" | "true" => Ok(FlashAttn::On),
            "off" | "0" | "false" => Ok(FlashAttn::Off),
            "auto" => Ok(FlashAttn::Auto),
            x => Err(bad(format!("-fa {x}: expected on, off or auto"))),
        }
    }
}

/// `-ngl N|all|auto` (a negative number is all): `None` is every layer.
pub fn parse_gpu_layers(s: &str) -> Result<Option<u64>, LlamaError> {
    match s.trim() {
        "" | "all" | "auto" => Ok(None),
        n => match n.parse::<i64>() {
            Ok(n) if n < 0 => Ok(None),
            Ok(n) => Ok(Some(n as u64)),
            Err(_) => Err(bad(format!("-ngl {n}: expected a number, all or auto"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_read_back_and_bad_ones_name_the_item() {
        let text = r"blk\.(0|1)\.ffn_.*_exps=CPU,token_embd=CUDA1";
        let o = parse_overrides(text).unwrap();
        assert_eq!(o, [Override { pattern: r"blk\.(0|1)\.ffn_.*_exps".into(), target: Target::Cpu }, Override { pattern: "token_embd".into(), target: Target::Gpu(1) }]);
        assert_eq!(overrides_text(&o), text);
        assert_eq!(parse_overrides(" ").unwrap(), []);
        assert!(parse_overrides("exps").unwrap_err().to_string().contains("PATTERN=BUFFER"));
        assert!(parse_overrides("exps=GPU").unwrap_err().to_string().contains("unknown buffer type"));
        assert!(parse_overrides("=CPU").unwrap_err().to_string().contains("empty"));
        let e = parse_overrides("blk\\.(=CPU").unwrap_err().to_string();
        assert!(e.starts_with("-ot pattern \"blk\\\\.(\""), "the estimate's message: {e}");
    }

    #[test]
    fn split_and_modes_read_as_llama_cpp_reads_them() {
        assert_eq!(parse_tensor_split("3,1").unwrap(), [3.0, 1.0]);
        assert_eq!(parse_tensor_split("0.6/0.4").unwrap(), [0.6, 0.4]);
        assert_eq!(tensor_split_text(&[3.0, 1.5]), "3,1.5");
        assert_eq!(parse_tensor_split("").unwrap(), Vec::<f64>::new());
        assert!(parse_tensor_split("3,x").is_err() && parse_tensor_split("-1").is_err() && parse_tensor_split("inf").is_err());
        assert_eq!(parse_tensor_split(&["1"; 15].join(",")).unwrap().len(), 15);
        assert!(parse_tensor_split(&["1"; 16].join(",")).unwrap_err().to_string().contains("at most 15"));
        for m in SplitMode::ALL {
            assert_eq!(SplitMode::from_name(m.name()), Ok(m));
        }
        assert!(SplitMode::from_name("graph").is_err());
        for f in FlashAttn::ALL {
            assert_eq!(FlashAttn::from_name(f.name()), Ok(f));
        }
        assert_eq!(parse_gpu_layers("-1"), Ok(None));
        assert_eq!(parse_gpu_layers("20"), Ok(Some(20)));
        assert!(parse_gpu_layers("many").is_err());
    }
}
