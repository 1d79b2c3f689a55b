//! The core's modules import each other in one direction only (`memory` → `resolve` → `spec` →
//! `layer` → `lower` → `graph`/`config` → …), and no source file outgrows a reader.
//! Read from the source text: every `crate::module` a file names outside its unit tests is an edge
//! from its top-level module.

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
        let code = without_test_modules(&text);
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
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

/// A cycle among the modules, if any (depth-first search).
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(n: &str, edges: &BTreeMap<String, BTreeSet<String>>, done: &mut BTreeSet<String>, stack: &mut Vec<String>) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == n) {
            let mut c = stack[at..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|n| visit(n, edges, &mut done, &mut Vec::new()))
}

#[test]
fn core_modules_import_in_one_direction() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    assert!(edges["layer"].contains("lower") && edges["spec"].contains("layer"), "the scan finds imports: {edges:?}");
    assert_eq!(cycle(&edges), None, "{edges:#?}");
}

#[test]
fn the_cycle_search_finds_cycles() {
    let mut e: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    e.entry("spec".into()).or_default().insert("layer".into());
    e.entry("layer".into()).or_default().insert("lower".into());
    assert_eq!(cycle(&e), None);
    e.entry("lower".into()).or_default().insert("spec".into());
    assert!(cycle(&e).is_some());
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
