//! The core's modules import each other in one direction only (`memory` → `resolve` → `spec` →
//! `layer` → `lower` → `graph`/`config` → …), its files too, and no source file outgrows a reader.
//!
//! Read from the source text, outside comments and test-only modules:
//! - module level: every `crate::module` a file names is an edge from its top-level module;
//! - file level: every path a file names (`crate::a::b`, `super::x`, `self::x`, a child module
//!   `x::` it declares, each part of a `use` group) is an edge to the file that path lands in (the
//!   longest prefix that is a file of its own: `crate::layer::attention::NormKind` →
//!   `layer/attention.rs`, `super::positive` from `layer/linear.rs` → `layer/mod.rs`). A `mod x;`
//!   declaration alone is no edge; `lib.rs` (which declares and re-exports) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Files the size limit does not apply to yet (being split).
const LONG_FILES: &[&str] = &[];
const MAX_LINES: usize = 700;

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((path.to_string_lossy().into_owned(), std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// Top-level module → the top-level modules its files name.
fn edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let rel = Path::new(&path).strip_prefix(src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy().trim_end_matches(".rs").to_string();
        if top == "lib" {
            continue;
        }
        let code = code_of(&text);
        for line in code.lines() {
            for (i, _) in line.match_indices("crate::") {
                let name: String = line[i + 7..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != top {
                    edges.entry(top.clone()).or_default().insert(name);
                }
            }
        }
    }
    edges
}

/// The text before the first test-only module (`#[cfg(test)] mod tests`, shared test helpers):
/// what those import is not the module's dependency.
fn without_test_modules(text: &str) -> &str {
    let mut at = 0;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let next = lines.peek().map(|l| l.trim_start()).unwrap_or_default();
        if line.trim() == "#[cfg(test)]" && (next.starts_with("mod ") || next.starts_with("pub(crate) mod ") || next.starts_with("pub mod ")) {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

/// A file's code: test modules, line comments (`//`, `///`, `//!`) and string literals dropped.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in without_test_modules(text).lines() {
        let mut in_str = false;
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if in_str {
                if c == '"' && prev != '\\' {
                    in_str = false;
                }
                prev = if prev == '\\' && c == '\\' { ' ' } else { c };
                continue;
            }
            if c == '/' && chars.peek() == Some(&'/') {
                break;
            }
            if c == '"' {
                in_str = true;
                prev = ' ';
                continue;
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

/// The module path of each source file: `layer/attention.rs` → `["layer", "attention"]`,
/// `layer/mod.rs` → `["layer"]`, `lib.rs` → `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The paths a piece of code names, each as its written segments (`crate::a::{b, c::D}` gives
/// `crate::a::b` and `crate::a::c::D`).
fn paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if ident(chars[i]) && (i == 0 || !(ident(chars[i - 1]) || chars[i - 1] == ':')) {
            let mut prefix = Vec::new();
            i = path_at(&chars, i, &mut prefix, &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads `a::b::{…}` from `at` after `prefix`, pushing each complete path; returns where it ended.
fn path_at(chars: &[char], mut at: usize, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let skip_ws = |mut i: usize| {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        i
    };
    let depth = prefix.len();
    loop {
        at = skip_ws(at);
        if at < chars.len() && chars[at] == '{' {
            at += 1;
            loop {
                at = skip_ws(at);
                if at >= chars.len() || chars[at] == '}' {
                    at += 1;
                    break;
                }
                if chars[at] == ',' {
                    at += 1;
                    continue;
                }
                if ident(chars[at]) {
                    at = path_at(chars, at, prefix, out);
                } else {
                    at += 1;
                }
            }
            break;
        }
        let start = at;
        while at < chars.len() && ident(chars[at]) {
            at += 1;
        }
        if at == start {
            break;
        }
        prefix.push(chars[start..at].iter().collect());
        if at + 1 < chars.len() && chars[at] == ':' && chars[at + 1] == ':' {
            at += 2;
            continue;
        }
        out.push(prefix.clone());
        break;
    }
    if prefix.len() > depth && out.last() != Some(prefix) {
        out.push(prefix.clone());
    }
    prefix.truncate(depth);
    at
}

/// File → the files its code names (see the module docs), by paths relative to `src`.
fn file_edges(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let rels: Vec<(String, String)> =
        files.iter().map(|(p, t)| (Path::new(p).strip_prefix(src).unwrap().to_string_lossy().replace('\\', "/"), t.clone())).collect();
    let by_module: BTreeMap<Vec<String>, String> = rels.iter().map(|(r, _)| (module_of(r), r.clone())).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, text) in &rels {
        if rel == "lib.rs" {
            continue;
        }
        let me = module_of(rel);
        let code = code_of(text);
        // child modules this file declares (`mod x;`): a path starting `x::` is one into it
        let children: BTreeSet<String> = code
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let l = l.strip_prefix("pub(crate) ").or_else(|| l.strip_prefix("pub ")).unwrap_or(l);
                l.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')).map(|n| n.trim().to_string())
            })
            .collect();
        let uses: String = code.lines().filter(|l| !is_mod_declaration(l)).collect::<Vec<_>>().join("\n");
        // a lone `super` / `crate` is a visibility (`pub(super)`), not a path
        for path in paths(&uses).into_iter().filter(|p| p.len() > 1) {
            let mut full: Vec<String> = match path[0].as_str() {
                "crate" => Vec::new(),
                "self" => me.clone(),
                "super" => me[..me.len().saturating_sub(1)].to_vec(),
                first if children.contains(first) => me.clone(),
                _ => continue,
            };
            let mut rest = &path[..];
            if matches!(rest[0].as_str(), "crate" | "self" | "super") {
                rest = &rest[1..];
            }
            while rest.first().is_some_and(|s| s == "super") {
                full.pop();
                rest = &rest[1..];
            }
            full.extend(rest.iter().cloned());
            let target = (0..=full.len()).rev().find_map(|n| by_module.get(&full[..n]));
            if let Some(t) = target.filter(|t| *t != rel && t.as_str() != "lib.rs") {
                edges.entry(rel.clone()).or_default().insert(t.clone());
            }
        }
    }
    edges
}

/// `mod x;` / `pub mod x;`: a declaration, not a use.
fn is_mod_declaration(line: &str) -> bool {
    let l = line.trim();
    let l = l.strip_prefix("pub(crate) ").or_else(|| l.strip_prefix("pub ")).unwrap_or(l);
    l.starts_with("mod ") && l.ends_with(';')
}

/// Every cycle's members: the strongly connected components with more than one node (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, n: &'a str) {
        let i = t.index.len();
        t.index.insert(n, i);
        t.low.insert(n, i);
        t.stack.push(n);
        t.on.insert(n);
        let next: Vec<&'a str> = t.edges.get(n).into_iter().flatten().map(String::as_str).collect();
        for m in next {
            if !t.index.contains_key(m) {
                visit(t, m);
                let l = t.low[m].min(t.low[n]);
                t.low.insert(n, l);
            } else if t.on.contains(m) {
                let l = t.index[m].min(t.low[n]);
                t.low.insert(n, l);
            }
        }
        if t.low[n] == t.index[n] {
            let mut scc = Vec::new();
            while let Some(m) = t.stack.pop() {
                t.on.remove(m);
                scc.push(m.to_string());
                if m == n {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                t.out.push(scc);
            }
        }
    }
    let mut t = T { edges, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), out: Vec::new() };
    for n in edges.keys() {
        if !t.index.contains_key(n.as_str()) {
            visit(&mut t, n);
        }
    }
    t.out
}

#[test]
fn core_modules_import_in_one_direction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    assert!(edges["layer"].contains("lower") && edges["spec"].contains("layer"), "the scan finds imports: {edges:?}");
    assert_eq!(cycles(&edges), Vec::<Vec<String>>::new(), "{edges:#?}");
}

#[test]
fn core_files_import_in_one_direction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = file_edges(&src);
    // the scan sees `use super::…`, `crate::a::{b, c}` groups and declared children
    assert!(edges["layer/linear.rs"].contains("layer/mod.rs"), "{:?}", edges["layer/linear.rs"]);
    assert!(edges["spec.rs"].contains("layer/attention.rs"), "{:?}", edges["spec.rs"]);
    let found = cycles(&edges);
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            let inner: Vec<String> =
                c.iter().map(|f| format!("{f} -> {:?}", edges[f].iter().filter(|t| c.contains(t)).collect::<Vec<_>>())).collect();
            inner.join("\n  ")
        })
        .collect();
    assert!(found.is_empty(), "file-level import cycles:\n  {}", shown.join("\n\n  "));
}

#[test]
fn the_path_scan_reads_groups_and_relative_paths() {
    let p = paths("use crate::layer::{attention::{A, B}, linear::Linear};\nlet x = super::positive(1); dense::f();");
    let s: Vec<String> = p.iter().map(|v| v.join("::")).collect();
    for want in ["crate::layer::attention::A", "crate::layer::attention::B", "crate::layer::linear::Linear", "super::positive", "dense::f"] {
        assert!(s.contains(&want.to_string()), "{want} not in {s:?}");
    }
    assert_eq!(code_of("let a = \"crate::x\"; // crate::y\nb"), "let a = ; \nb\n");
}

#[test]
fn the_cycle_search_finds_cycles() {
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    e.entry("spec".into()).or_default().insert("layer".into());
    e.entry("layer".into()).or_default().insert("lower".into());
    assert!(cycles(&e).is_empty());
    e.entry("lower".into()).or_default().insert("spec".into());
    assert_eq!(cycles(&e), vec![vec!["layer".to_string(), "lower".into(), "spec".into()]]);
    e.entry("a".into()).or_default().insert("b".into());
    e.entry("b".into()).or_default().insert("a".into());
    assert_eq!(cycles(&e).len(), 2, "every cycle is reported");
}

#[test]
fn no_source_file_is_too_long() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for (path, text) in files {
        let rel = Path::new(&path).strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let lines = text.lines().count();
        assert!(lines <= MAX_LINES || LONG_FILES.contains(&rel.as_str()), "{rel} has {lines} lines (at most {MAX_LINES})");
    }
}
