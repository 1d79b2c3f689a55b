//! Splits the app's wasm after wasm-bindgen into the main module and the files its lazily loaded
//! views fetch on first use (`src/split.rs`), optimises each with `wasm-opt`, and writes the
//! JavaScript that loads them next to wasm-bindgen's glue.
//!
//! ```text
//! vramcalc-wasm-split --original RUSTC.wasm --bindgened BINDGEN_bg.wasm --wasm DIST/app-HASH_bg.wasm \
//!     --glue DIST/app-HASH.js [--wasm-opt PATH] [-- WASM_OPT_ARGS…]
//! ```
//!
//! `--original` is rustc's output, linked with `--emit-relocs` (the splitter reads the call graph
//! from the relocations); `--bindgened` is wasm-bindgen's output of it, before `wasm-opt`.
//! `--wasm` is overwritten with the main module; each split-off file is named after it, the part's
//! name and a hash of its bytes (a changed file gets a new name, so a long-cached old one is never
//! fetched); the glue's `import … from "./__wasm_split.js"` is pointed at the loader written here.

use anyhow::{bail, Context, Result};
use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The module name the split points import their loaders from (`wasm-split-macro`'s
/// `#[link(wasm_import_module = …)]`), which wasm-bindgen's glue imports as an ES module.
const LOADER_MODULE: &str = "./__wasm_split.js";

struct Args {
    original: PathBuf,
    bindgened: PathBuf,
    wasm: PathBuf,
    glue: PathBuf,
    wasm_opt: PathBuf,
    wasm_opt_args: Vec<String>,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let (mut original, mut bindgened, mut wasm, mut glue) = (None, None, None, None);
    let mut wasm_opt = PathBuf::from("wasm-opt");
    let mut wasm_opt_args = Vec::new();
    while let Some(a) = it.next() {
        let mut value = || it.next().with_context(|| format!("{a} needs a value"));
        match a.as_str() {
            "--original" => original = Some(PathBuf::from(value()?)),
            "--bindgened" => bindgened = Some(PathBuf::from(value()?)),
            "--wasm" => wasm = Some(PathBuf::from(value()?)),
            "--glue" => glue = Some(PathBuf::from(value()?)),
            "--wasm-opt" => wasm_opt = PathBuf::from(value()?),
            "--" => {
                wasm_opt_args.extend(it.by_ref());
            }
            other => bail!("unknown argument {other:?} (see the doc comment of tools/wasm-split/src/main.rs)"),
        }
    }
    let need = |v: Option<PathBuf>, name: &str| v.with_context(|| format!("{name} is required"));
    Ok(Args {
        original: need(original, "--original")?,
        bindgened: need(bindgened, "--bindgened")?,
        wasm: need(wasm, "--wasm")?,
        glue: need(glue, "--glue")?,
        wasm_opt,
        wasm_opt_args,
    })
}

fn main() {
    if let Err(e) = run() {
        eprintln!("vramcalc-wasm-split: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let args = parse_args()?;
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let (original, bindgened) = (read(&args.original)?, read(&args.bindgened)?);
    let out = wasm_split_cli::Splitter::new(&original, &bindgened)
        .context("reading the split points (was the wasm linked with --emit-relocs?)")?
        .emit()
        .context("splitting")?;
    if out.modules.is_empty() {
        bail!("{} has no split points", args.bindgened.display());
    }
    let dir = args.wasm.parent().context("--wasm has no folder")?;
    let stem = file_name(&args.wasm)?.trim_end_matches(".wasm").trim_end_matches("_bg").to_string();
    let optimise = |bytes: &[u8]| wasm_opt(&args, bytes);

    std::fs::write(&args.wasm, optimise(&out.main.bytes)?).with_context(|| format!("writing {}", args.wasm.display()))?;
    println!("{:>9} B  {} (main)", std::fs::metadata(&args.wasm)?.len(), file_name(&args.wasm)?);

    // (the loader's export name, the file, the chunks it needs first)
    let mut loads = Vec::new();
    for (idx, chunk) in out.chunks.iter().enumerate() {
        let file = write_part(dir, &stem, &format!("chunk{idx}"), &optimise(&chunk.bytes)?)?;
        loads.push((format!("__wasm_split_load_chunk_{idx}"), file, Vec::new()));
    }
    for module in &out.modules {
        let name = module.component_name.as_deref().context("a split module without its function's name")?;
        let hash = module.hash_id.as_deref().context("a split module without its hash")?;
        let file = write_part(dir, &stem, name, &optimise(&module.bytes)?)?;
        let mut deps: Vec<usize> = module.relies_on_chunks.iter().copied().collect();
        deps.sort_unstable();
        let deps = deps.into_iter().map(|i| format!("__wasm_split_load_chunk_{i}")).collect();
        loads.push((format!("__wasm_split_load_{}_{hash}_{name}", module.module_name), file, deps));
    }

    let glue_name = file_name(&args.glue)?;
    let loader = loader_js(&glue_name, &loads);
    let loader_name = format!("{stem}_split-{:016x}.js", hash_of(loader.as_bytes()));
    std::fs::write(dir.join(&loader_name), &loader)?;
    let glue = std::fs::read_to_string(&args.glue).with_context(|| format!("reading {}", args.glue.display()))?;
    let (glue, n) = point_imports(&glue, &loader_name);
    if n == 0 {
        bail!("{} does not import {LOADER_MODULE}", args.glue.display());
    }
    std::fs::write(&args.glue, glue)?;
    Ok(())
}

fn file_name(p: &Path) -> Result<String> {
    Ok(p.file_name().and_then(|n| n.to_str()).with_context(|| format!("{} has no file name", p.display()))?.to_string())
}

fn hash_of(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Writes one split-off file as `{stem}_{part}-{hash}.wasm` and answers its name.
fn write_part(dir: &Path, stem: &str, part: &str, bytes: &[u8]) -> Result<String> {
    let name = format!("{stem}_{part}-{:016x}.wasm", hash_of(bytes));
    std::fs::write(dir.join(&name), bytes).with_context(|| format!("writing {name}"))?;
    println!("{:>9} B  {name}", bytes.len());
    Ok(name)
}

/// `bytes` through `wasm-opt` with the build's arguments.
fn wasm_opt(args: &Args, bytes: &[u8]) -> Result<Vec<u8>> {
    let tmp = std::env::temp_dir().join(format!("vramcalc-wasm-split-{}-{:016x}", std::process::id(), hash_of(bytes)));
    let (input, output) = (tmp.with_extension("in.wasm"), tmp.with_extension("out.wasm"));
    std::fs::write(&input, bytes)?;
    let status = Command::new(&args.wasm_opt)
        .args(&args.wasm_opt_args)
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .status()
        .with_context(|| format!("running {}", args.wasm_opt.display()))?;
    let result = std::fs::read(&output);
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
    if !status.success() {
        bail!("{} failed ({status})", args.wasm_opt.display());
    }
    Ok(result?)
}

/// The glue with its ES import of the loader module pointed at `loader` (the imports object's
/// key, the wasm's import module name, stays). Answers the text and how many imports it changed.
fn point_imports(glue: &str, loader: &str) -> (String, usize) {
    let mut out = String::with_capacity(glue.len());
    let mut n = 0;
    let mut rest = glue;
    while let Some(at) = rest.find(LOADER_MODULE) {
        let (before, after) = rest.split_at(at);
        let quote = before.chars().last();
        let is_import = matches!(quote, Some('"' | '\'')) && before[..before.len() - 1].trim_end().ends_with("from");
        out.push_str(before);
        if is_import {
            out.push_str("./");
            out.push_str(loader);
            n += 1;
        } else {
            out.push_str(LOADER_MODULE);
        }
        rest = &after[LOADER_MODULE.len()..];
    }
    out.push_str(rest);
    (out, n)
}

/// The loader module: one export per split point and shared chunk, each fetching its file once
/// (its chunks first) and instantiating it against the main module's memory, table and exports.
/// A split point's callback is told whether its file loaded, so a failed fetch is an answer, not
/// a wait forever.
fn loader_js(glue: &str, loads: &[(String, String, Vec<String>)]) -> String {
    let mut js = format!(
        r#"// Written by tools/wasm-split: loads the app's split-off wasm files (src/split.rs).
import {{ initSync }} from "./{glue}";
const fused = {{}};
const started = new Map();
function instantiate(file, deps) {{
  let p = started.get(file);
  if (!p) {{
    p = Promise.all(deps.map((d) => d())).then(async () => {{
      const main = initSync(undefined);
      const own = Object.assign({{}}, main, fused, {{ memory: main.memory }});
      const imports = {{ env: {{ memory: main.memory }}, __wasm_split: own }};
      const {{ instance }} = await WebAssembly.instantiateStreaming(fetch(new URL(file, import.meta.url)), imports);
      Object.assign(fused, instance.exports);
    }});
    started.set(file, p);
  }}
  return p;
}}
function load(file, deps) {{
  return (callback, data) => {{
    const done = instantiate(file, deps).then(() => true, (e) => {{ console.error("vramcalc: could not load " + file, e); return false; }});
    if (callback === undefined) return done;
    done.then((ok) => initSync(undefined).__indirect_function_table.get(callback)(data, ok));
  }};
}}
"#
    );
    for (export, file, deps) in loads {
        writeln!(js, "export const {export} = load(\"./{file}\", [{}]);", deps.join(", ")).unwrap();
    }
    js
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_es_import_is_repointed() {
        let glue = r#"import * as s from "./__wasm_split.js";imports["./__wasm_split.js"]=s;import*as t from'./__wasm_split.js';"#;
        let (out, n) = point_imports(glue, "app_split-1.js");
        assert_eq!(n, 2);
        assert_eq!(out, r#"import * as s from "./app_split-1.js";imports["./__wasm_split.js"]=s;import*as t from'./app_split-1.js';"#);
    }
}
