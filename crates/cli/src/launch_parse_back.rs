//! The `llama-server` line the core writes (`llama_cpp::fit::server_command`) parses back to the
//! settings it came from: split into words as a POSIX shell splits it, then read by the flag
//! parser of `vramcalc llama-cpp` itself (`normalize_args`, clap's `LlamaCppArgs`, `params`),
//! which takes llama.cpp's flag names.

use crate::llama_cpp::{normalize_args, LlamaCppArgs};
use clap::Parser;
use vramcalc_core::gguf::GgmlType;
use vramcalc_core::llama_cpp::{fit, FlashAttn, Override, Params, SplitMode, Target};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: LlamaCppArgs,
}

/// Words of a POSIX shell line: blanks separate, `'…'` is literal, `"…"` keeps blanks (with `\"`
/// and `\\` escapes), `\x` outside quotes is `x`.
fn shell_words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut any) = (Vec::new(), String::new(), false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            '\'' => {
                any = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                any = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => word.push(e),
                            Some(e) => {
                                word.push('\\');
                                word.push(e);
                            }
                            None => word.push('\\'),
                        },
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                any = true;
                if let Some(e) = chars.next() {
                    word.push(e);
                }
            }
            _ => {
                any = true;
                word.push(c);
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// `llama-server -m PATH …` read as `vramcalc llama-cpp --gguf PATH …`: the model path and the
/// settings.
fn parse_back(line: &str, n_gpus: usize) -> (String, Params) {
    let words = shell_words(line);
    assert_eq!(words[0], "llama-server", "{line}");
    let argv = ["vramcalc".to_string(), "llama-cpp".to_string()]
        .into_iter()
        .chain(words[1..].iter().map(|w| if w == "-m" { "--gguf".to_string() } else { w.clone() }));
    let normalized = normalize_args(argv.map(Into::into));
    // clap sees the words after the subcommand
    let cli = Cli::try_parse_from(std::iter::once("llama-cpp".into()).chain(normalized.into_iter().skip(2)))
        .unwrap_or_else(|e| panic!("{line}: {e}"));
    let path = cli.args.gguf.as_ref().unwrap().to_string_lossy().into_owned();
    (path, cli.args.params(n_gpus).unwrap())
}

#[test]
fn shell_words_unquote() {
    assert_eq!(shell_words(r#"a 'b c' "d \"e\"" f\ g 'it'\''s'"#), ["a", "b c", r#"d "e""#, "f g", "it's"]);
}

#[test]
fn llama_server_lines_parse_back_to_their_settings() {
    let ty = |n: &str| GgmlType::from_name(n).unwrap();
    let every = Params {
        n_ctx: 32768,
        n_batch: 1024,
        n_ubatch: 256,
        type_k: ty("q8_0"),
        type_v: ty("q4_0"),
        flash_attn: FlashAttn::On,
        n_parallel: 4,
        kv_unified: true,
        n_gpu_layers: Some(30),
        n_cpu_moe: 4,
        overrides: vec![
            Override { pattern: r"blk\.(1[0-9])\.ffn_.*_exps\.weight".into(), target: Target::Cpu },
            Override { pattern: "token_embd".into(), target: Target::Gpu(1) },
        ],
        tensor_split: vec![3.0, 1.5],
        split_mode: SplitMode::Row,
        swa_full: true,
        mmap: false,
        op_offload: false,
    };
    let cases = [
        Params::default(),
        Params { n_ctx: 8192, flash_attn: FlashAttn::Off, n_gpu_layers: Some(0), ..Params::default() },
        Params { split_mode: SplitMode::None, n_gpu_layers: None, ..every.clone() },
        every,
    ];
    for p in cases {
        let path = "models/Qwen3 30B A3B/Q4_K_M.gguf";
        let line = fit::server_command(path, &p, 48);
        let (back_path, back) = parse_back(&line, 2);
        assert_eq!(back_path, path, "{line}");
        assert_eq!(back, p, "{line}");
    }
}
