//! An Ollama `Modelfile` for a llama.cpp setup, and its reader (the launch tests parse it back).
//!
//! Syntax from ollama/ollama `parser/parser.go` (commit fb30760, as `llama_cpp/ollama.rs`): one
//! instruction per line, `FROM <model>` and `PARAMETER <name> <value>` among them, `#` starts a
//! comment. `PARAMETER` takes any field of `api.Options` by its JSON name (`api/types.go`:
//! `num_ctx`, `num_batch`, `num_gpu` in `Runner`). `OLLAMA_NUM_PARALLEL`, `OLLAMA_KV_CACHE_TYPE`,
//! `OLLAMA_FLASH_ATTENTION` and `OLLAMA_CONTEXT_LENGTH` belong to the server (`envconfig/config.go`),
//! not the Modelfile: they are written as a comment naming the `ollama serve` environment.

use crate::error::{Error, Result};
use crate::llama_cpp::ollama::Ollama;

/// The comment line that carries the server's environment.
const ENV_PREFIX: &str = "# ollama serve environment:";

/// The Modelfile of `from` (a GGUF path or an Ollama model name) with Ollama's settings `o`, its
/// `num_ctx` and `num_gpu` set to the values the estimate used (`num_gpu` `None`: left to
/// Ollama, which places as many layers as fit).
pub fn modelfile(from: &str, o: &Ollama, num_ctx: u64, num_gpu: Option<u64>) -> String {
    let set = Ollama { num_ctx: Some(num_ctx), num_gpu, ..o.clone() };
    let (env, params) = set.config_lines();
    let mut text = String::from("# made by vramcalc from the llama.cpp estimate of this setup\n");
    if !env.is_empty() {
        text += &format!("{ENV_PREFIX} {}\n", env.join(" "));
    }
    text += &format!("FROM {from}\n");
    for p in params {
        text += &p;
        text.push('\n');
    }
    text
}

/// A Modelfile read back: `FROM`, the `PARAMETER`s and the server environment comment.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Parsed {
    pub from: String,
    pub parameters: Vec<(String, String)>,
    pub environment: Vec<(String, String)>,
}

impl Parsed {
    pub fn parameter(&self, name: &str) -> Option<&str> {
        self.parameters.iter().rev().find(|p| p.0 == name).map(|p| p.1.as_str())
    }

    /// The Ollama settings the Modelfile and its environment set (numbers and the known names).
    pub fn ollama(&self) -> Result<Ollama> {
        let num = |v: Option<&str>, what: &str| -> Result<Option<u64>> {
            v.map(|s| s.parse::<u64>().map_err(|_| Error::Config(format!("Modelfile: {what} {s:?} is not a whole number")))).transpose()
        };
        let env = |k: &str| self.environment.iter().rev().find(|e| e.0 == k).map(|e| e.1.as_str());
        let kv = env("OLLAMA_KV_CACHE_TYPE")
            .map(|t| crate::gguf::GgmlType::from_name(t).ok_or_else(|| Error::Config(format!("OLLAMA_KV_CACHE_TYPE {t:?}"))))
            .transpose()?;
        Ok(Ollama {
            num_ctx: num(self.parameter("num_ctx"), "num_ctx")?,
            num_gpu: num(self.parameter("num_gpu"), "num_gpu")?,
            num_batch: num(self.parameter("num_batch"), "num_batch")?,
            num_parallel: num(env("OLLAMA_NUM_PARALLEL"), "OLLAMA_NUM_PARALLEL")?,
            kv_cache_type: kv,
            flash_attention: env("OLLAMA_FLASH_ATTENTION").map(|f| f == "1" || f.eq_ignore_ascii_case("true")),
            context_length: num(env("OLLAMA_CONTEXT_LENGTH"), "OLLAMA_CONTEXT_LENGTH")?,
        })
    }
}

/// Reads a Modelfile's `FROM` and `PARAMETER` lines (instructions are case-insensitive, as
/// Ollama's parser takes them) and the environment comment [`modelfile`] writes; other
/// instructions are skipped. An error names the line.
pub fn parse(text: &str) -> Result<Parsed> {
    let mut out = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(env) = line.strip_prefix(ENV_PREFIX) {
            for kv in env.split_whitespace() {
                let (k, v) = kv.split_once('=').ok_or_else(|| Error::Config(format!("Modelfile line {}: {kv:?} is not NAME=VALUE", i + 1)))?;
                out.environment.push((k.to_string(), v.to_string()));
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (cmd, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        match cmd.to_ascii_uppercase().as_str() {
            "FROM" => out.from = rest.to_string(),
            "PARAMETER" => {
                let (k, v) = rest.split_once(char::is_whitespace).ok_or_else(|| Error::Config(format!("Modelfile line {}: PARAMETER needs a name and a value", i + 1)))?;
                out.parameters.push((k.to_string(), v.trim().to_string()));
            }
            _ => {}
        }
    }
    if out.from.is_empty() {
        return Err(Error::Config("Modelfile: no FROM line".into()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::GgmlType;

    /// Every setting reads back, and the llama.cpp run Ollama launches from the parsed file is the
    /// one the Modelfile was written for.
    #[test]
    fn a_modelfile_parses_back_to_its_settings() {
        let o = Ollama { num_batch: Some(256), num_parallel: Some(2), kv_cache_type: Some(GgmlType::Q8_0), flash_attention: Some(true), ..Ollama::default() };
        let text = modelfile("./llama-3.1-8b-Q4_K_M.gguf", &o, 16_384, Some(33));
        let p = parse(&text).unwrap();
        assert_eq!(p.from, "./llama-3.1-8b-Q4_K_M.gguf");
        assert_eq!((p.parameter("num_ctx"), p.parameter("num_gpu"), p.parameter("num_batch")), (Some("16384"), Some("33"), Some("256")));
        let back = p.ollama().unwrap();
        let want = Ollama { num_ctx: Some(16_384), num_gpu: Some(33), ..o };
        let (a, b) = (back.params(24 << 30, 131_072), want.params(24 << 30, 131_072));
        assert_eq!((a.n_ctx, a.n_parallel, a.n_batch, a.n_ubatch, a.type_k, a.type_v, a.flash_attn), (b.n_ctx, b.n_parallel, b.n_batch, b.n_ubatch, b.type_k, b.type_v, b.flash_attn));
        assert_eq!((a.n_ctx, a.n_gpu_layers), (32_768, Some(33)));
        // without num_gpu, Ollama places the layers itself
        assert_eq!(parse(&modelfile("m", &Ollama::default(), 4096, None)).unwrap().parameter("num_gpu"), None);
    }

    #[test]
    fn a_bad_modelfile_names_the_line() {
        assert!(parse("PARAMETER num_ctx 10\n").unwrap_err().to_string().contains("FROM"));
        assert!(parse("FROM x\nPARAMETER num_ctx\n").unwrap_err().to_string().contains("line 2"));
        assert!(parse("FROM x\nPARAMETER num_ctx lots\n").unwrap().ollama().is_err());
        assert_eq!(parse("from x\nparameter num_ctx 8\nTEMPLATE {{ .Prompt }}\n").unwrap().parameter("num_ctx"), Some("8"));
    }
}
