//! A GGUF file on the Hugging Face hub, as the user types or pastes it:
//!
//! | input | repository | revision | file |
//! |---|---|---|---|
//! | `Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf` | `Qwen/Qwen3-8B-GGUF` | `main` | `Qwen3-8B-Q4_K_M.gguf` |
//! | `https://huggingface.co/<repo>/resolve/<rev>/<file>.gguf` (or `blob`, `hf.co`) | `<repo>` | `<rev>` (`%2F` decoded) | `<file>` (may have folders) |
//!
//! The repository is `owner/name` by the hub's rule (`vramcalc_core::hub::is_valid_id`); the
//! file's path is made of the same characters and `/`, ends in `.gguf` and has no `..`. Requests
//! go only to [`HubFile::url`], on huggingface.co.

use crate::state::local::HubFile;
use vramcalc_core::hub::{is_valid_id, is_valid_revision, HUB};

fn path_ok(p: &str) -> bool {
    p.to_ascii_lowercase().ends_with(".gguf")
        && p.len() <= 512
        && p.split('/').all(|seg| !seg.is_empty() && seg != "." && seg != ".." && seg.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'+')))
}

/// `%XX` decoded (`None`: a bad escape or not UTF-8).
pub(crate) fn decode(s: &str) -> Option<String> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(u8::from_str_radix(std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

impl HubFile {
    /// Reads what the user typed; the error says what is expected.
    pub fn parse(input: &str) -> Result<HubFile, String> {
        const EXPECTED: &str = "expected `owner/repo/file.gguf` or a huggingface.co file address (…/resolve/main/file.gguf)";
        let t = input.trim();
        if t.is_empty() || t.chars().any(char::is_whitespace) {
            return Err(EXPECTED.into());
        }
        let rest = t.strip_prefix("https://").or_else(|| t.strip_prefix("http://"));
        let (segs, revision): (Vec<&str>, String) = match rest {
            Some(r) => {
                let r = r.split(['?', '#']).next().unwrap_or("");
                let (host, path) = r.split_once('/').unwrap_or((r, ""));
                if !["huggingface.co", "www.huggingface.co", "hf.co"].contains(&host.to_ascii_lowercase().as_str()) {
                    return Err(format!("{t:?} is not an address on huggingface.co"));
                }
                let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
                match segs.get(2) {
                    Some(&("resolve" | "blob")) if segs.len() >= 5 => {
                        let rev = decode(segs[3]).ok_or_else(|| format!("{t:?}: bad %-escape in the revision"))?;
                        let mut s = segs[..2].to_vec();
                        s.extend(&segs[4..]);
                        (s, rev)
                    }
                    _ => return Err(EXPECTED.into()),
                }
            }
            None => (t.split('/').collect(), "main".into()),
        };
        if segs.len() < 3 {
            return Err(EXPECTED.into());
        }
        let repo = segs[..2].join("/");
        let path = segs[2..].join("/");
        if !is_valid_id(&repo) {
            return Err(format!("{repo:?} is not a hub repository id (owner/name)"));
        }
        if !is_valid_revision(&revision) {
            return Err(format!("{revision:?} is not a revision"));
        }
        if !path_ok(&path) {
            return Err(format!("{path:?} is not a .gguf file path"));
        }
        Ok(HubFile { repo, revision, path })
    }

    /// The file's download address.
    pub fn url(&self) -> String {
        format!("{HUB}/{}/resolve/{}/{}", self.repo, self.revision.replace('/', "%2F"), self.path)
    }

    /// `owner/repo/file.gguf` (with `@rev` when not `main`): what a share link carries.
    pub fn label(&self) -> String {
        match self.revision.as_str() {
            "main" => format!("{}/{}", self.repo, self.path),
            r => format!("{}/{} @{r}", self.repo, self.path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_addresses_name_one_file() {
        let f = HubFile::parse(" Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf ").unwrap();
        assert_eq!((f.repo.as_str(), f.revision.as_str(), f.path.as_str()), ("Qwen/Qwen3-8B-GGUF", "main", "Qwen3-8B-Q4_K_M.gguf"));
        assert_eq!(f.url(), "https://huggingface.co/Qwen/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-Q4_K_M.gguf");
        let g = HubFile::parse("https://huggingface.co/unsloth/Qwen3-30B-A3B-GGUF/blob/refs%2Fpr%2F3/Q4_K_M/x-00001-of-00002.gguf?download=true").unwrap();
        assert_eq!((g.repo.as_str(), g.revision.as_str(), g.path.as_str()), ("unsloth/Qwen3-30B-A3B-GGUF", "refs/pr/3", "Q4_K_M/x-00001-of-00002.gguf"));
        assert_eq!(g.url(), "https://huggingface.co/unsloth/Qwen3-30B-A3B-GGUF/resolve/refs%2Fpr%2F3/Q4_K_M/x-00001-of-00002.gguf");
        assert_eq!(HubFile::parse(&g.url()).unwrap(), g);
    }

    #[test]
    fn anything_else_is_refused_with_a_reason() {
        for bad in ["", "Qwen/Qwen3-8B-GGUF", "Qwen/Qwen3-8B-GGUF/config.json", "https://example.com/a/b/resolve/main/x.gguf",
            "a/b/../x.gguf", "a/b/x y.gguf", "-a/b/x.gguf", "https://huggingface.co/a/b/tree/main/x.gguf", "a/b/%2e%2e/x.gguf"] {
            assert!(HubFile::parse(bad).is_err(), "{bad}");
        }
    }
}
