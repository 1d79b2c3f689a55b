//! The core's regex engine for `-ot` patterns (regex-lite, `llama_cpp/placement.rs`) against
//! llama.cpp's (`std::regex`, ECMAScript, `std::regex_search` over each tensor name): the results
//! of `tools/llama_cpp/ot_patterns.cpp` (g++ 14, libstdc++) in `data/ot_patterns.tsv`, measured.
//! Where both compile a pattern they must match the same names; where only one does, the
//! pattern must be one of the differences named below.

use regex_lite::Regex;

/// ECMAScript syntax regex-lite refuses (lookahead, back-references): an `-ot` error here.
const ONLY_STD: &[&str] = &[r"blk\.(?=1)", r"blk\.(\d)\.\w+\.\1"];
/// Syntax std::regex refuses and regex-lite reads (inline flags, named groups).
const ONLY_LITE: &[&str] = &["(?i)EXPS", "(?P<n>exps)"];

#[test]
fn ot_patterns_match_as_in_llama_cpp() {
    let text = include_str!("data/ot_patterns.tsv");
    let mut lines = text.lines();
    let header = lines.next().expect("a # names line");
    let names: Vec<&str> = header.strip_prefix("# names\t").expect("a # names line").split('\t').collect();
    let (mut rows, mut agreed, mut wrong) = (0, 0, Vec::new());
    for line in lines {
        let (pattern, expected) = line.rsplit_once('\t').expect("pattern<TAB>result");
        rows += 1;
        match (Regex::new(pattern), expected) {
            (Err(_), "error") => agreed += 1,
            (Ok(_), "error") if ONLY_LITE.contains(&pattern) => {}
            (Err(_), _) if ONLY_STD.contains(&pattern) => {}
            (Ok(re), bits) => {
                let got: String = names.iter().map(|n| if re.is_match(n) { '1' } else { '0' }).collect();
                if got == bits {
                    agreed += 1;
                } else {
                    wrong.push(format!("{pattern:?}: std::regex {bits}, regex-lite {got}"));
                }
            }
            (Err(e), bits) => wrong.push(format!("{pattern:?}: std::regex {bits}, regex-lite refuses it: {e}")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert_eq!(agreed + ONLY_STD.len() + ONLY_LITE.len(), rows, "every listed difference is still one");
    assert!(rows >= 40, "{rows} patterns");
}
