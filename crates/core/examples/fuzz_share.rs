//! Fuzzes the share-link decoder: random and mutated links through `share::decode`, which must
//! return (Ok or a `ShareError`) and never panic, hang or allocate without bound.
//!
//! ```text
//! cargo run --release -p vramcalc-core --example fuzz_share -- 1000000 [seed]
//! ```
//! Mutations work at three levels: the link text (flip, insert, delete, truncate, splice), the
//! bytes inside the `s=` blob (so the inflater sees corrupt streams), and the spec JSON before it
//! is re-deflated (so the JSON parser and the spec bounds see odd but well-formed input). Also
//! decompression bombs and huge repeat counts. `tests/share.rs` runs a short version.

use vramcalc_core::presets;
use vramcalc_core::share::{base64url_decode, base64url_encode, decode, encode, ModelSource, ShareState};
use vramcalc_core::TrainConfig;

/// xorshift64*: small, seedable, good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

/// What the mutations start from, prepared once.
pub struct Corpus {
    /// Valid links: presets with settings, custom and edited specs.
    pub links: Vec<String>,
    /// The spec JSON inside each `s=` link, with the text around the blob.
    pub jsons: Vec<(String, String, String)>,
    /// Decompression bombs and absurd but well-formed models.
    pub bombs: Vec<String>,
}

impl Default for Corpus {
    fn default() -> Corpus {
        Corpus::new()
    }
}

impl Corpus {
    pub fn new() -> Corpus {
        let links = links();
        let jsons = links
            .iter()
            .filter_map(|l| {
                let (pre, b64, post) = blob(l)?;
                let bytes = base64url_decode(&b64)?;
                let json = match bytes.split_first()? {
                    (1, rest) => inflate(rest),
                    (_, rest) => rest.to_vec(),
                };
                Some((pre, String::from_utf8(json).ok()?, post))
            })
            .collect();
        Corpus { links, jsons, bombs: bombs() }
    }
}

fn links() -> Vec<String> {
    let mut states = vec![ShareState::default()];
    let mut cfg = TrainConfig { batch: 8, seq_len: Some(512), checkpointing: true, ..TrainConfig::default() };
    cfg.precision = vramcalc_core::Precision::AmpBf16;
    states.push(ShareState {
        model: ModelSource::Preset { id: "gpt2".into() },
        config: cfg,
        gpu: Some("a100-80gb".into()),
        capacity_bytes: Some(80_000_000_000),
        unit: vramcalc_core::ByteUnit::Mib,
        lang: "de".into(),
        dist: Default::default(),
        ..ShareState::default()
    });
    for id in ["resnet18", "vgg16_bn", "bert-base", "lstm-ptb", "inception_v3"] {
        if let Ok(spec) = presets::build(id) {
            states.push(ShareState { model: ModelSource::Spec(spec), ..ShareState::default() });
        }
    }
    states.iter().filter_map(|s| encode(s).ok()).collect()
}

const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.,=%~#v1 \x7f";
const SNIPPETS: &[&str] = &[
    "1000000000", "18446744073709551616", "-1", "0", "1e308", "null", "[[[[[[[[", "]]]]", "{}", "\"kind\":\"repeat\"",
    "\"times\":1000000000", "\"layers\":[", "\"body\":[", "NaN", "\u{0}", "ü", "%FF", "%", ",s=", ",p=", "v2.", "=",
];

/// One mutated input.
pub fn mutate(rng: &mut Rng, corpus: &Corpus) -> String {
    let base = &corpus.links[rng.below(corpus.links.len())];
    match rng.below(10) {
        0 => {
            // random bytes from the link alphabet
            let len = rng.below(200);
            (0..len).map(|_| ALPHABET[rng.below(ALPHABET.len())] as char).collect()
        }
        1..=3 => text_mutation(rng, base, &corpus.links),
        4 | 5 => blob_mutation(rng, base),
        6..=8 => {
            let i = rng.below(corpus.jsons.len());
            json_mutation(rng, &corpus.jsons[i])
        }
        _ => {
            let bomb = &corpus.bombs[rng.below(corpus.bombs.len())];
            if rng.below(2) == 0 { bomb.clone() } else { blob_mutation(rng, bomb) }
        }
    }
}

fn text_mutation(rng: &mut Rng, base: &str, corpus: &[String]) -> String {
    let mut b: Vec<char> = base.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = ALPHABET[rng.below(ALPHABET.len())] as char;
            }
            1 => b.insert(at, ALPHABET[rng.below(ALPHABET.len())] as char),
            2 if at < b.len() => {
                b.remove(at);
            }
            3 => b.truncate(at),
            4 => {
                let s = SNIPPETS[rng.below(SNIPPETS.len())];
                for (i, c) in s.chars().enumerate() {
                    b.insert((at + i).min(b.len()), c);
                }
            }
            _ => {
                let other: Vec<char> = corpus[rng.below(corpus.len())].chars().collect();
                let from = rng.below(other.len());
                b.truncate(at);
                b.extend(&other[from..]);
            }
        }
    }
    b.into_iter().collect()
}

/// Splits `v1.…,s=BLOB,…` into (before, blob, after).
fn blob(link: &str) -> Option<(String, String, String)> {
    let start = link.find("s=")? + 2;
    let end = link[start..].find(',').map_or(link.len(), |e| start + e);
    Some((link[..start].to_string(), link[start..end].to_string(), link[end..].to_string()))
}

fn blob_mutation(rng: &mut Rng, base: &str) -> String {
    let Some((pre, b64, post)) = blob(base) else { return base.to_string() };
    let Some(mut bytes) = base64url_decode(&b64) else { return base.to_string() };
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(bytes.len());
        match rng.below(4) {
            0 if !bytes.is_empty() => bytes[at] ^= 1 << rng.below(8),
            1 if !bytes.is_empty() => bytes[at] = rng.next_u64() as u8,
            2 => bytes.truncate(at),
            _ => bytes.insert(at, rng.next_u64() as u8),
        }
    }
    format!("{pre}{}{post}", base64url_encode(&bytes))
}

fn json_mutation(rng: &mut Rng, (pre, json, post): &(String, String, String)) -> String {
    let mut text = json.clone();
    for _ in 0..1 + rng.below(3) {
        // replace a run of digits, or insert a snippet at a char boundary
        let positions: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        let at = positions[rng.below(positions.len())];
        if rng.below(2) == 0 {
            let end = text[at..].find(|c: char| !c.is_ascii_digit()).map_or(text.len(), |e| at + e);
            text.replace_range(at..end, SNIPPETS[rng.below(SNIPPETS.len())]);
        } else {
            text.insert_str(at, SNIPPETS[rng.below(SNIPPETS.len())]);
        }
    }
    let mut payload = vec![1u8];
    payload.extend(deflate(text.as_bytes()));
    format!("{pre}{}{post}", base64url_encode(&payload))
}

/// Decompression bombs and absurd models that are valid JSON.
fn bombs() -> Vec<String> {
    let mut rng = Rng::new(99);
    (0..24).map(|i| bomb(&mut rng, i % 4)).collect()
}

fn bomb(rng: &mut Rng, kind: usize) -> String {
    let json = match kind {
        0 => vec![b' '; 4 << 20],
        1 => format!(
            r#"{{"input":{{"shape":[3,8,8]}},"layers":[{{"kind":"repeat","times":{},"body":[{{"kind":"relu"}}]}}]}}"#,
            [1_000_000_000u64, u64::MAX, 200_001][rng.below(3)]
        )
        .into_bytes(),
        2 => {
            let depth = 20 + rng.below(200);
            let mut s = String::from(r#"{"input":{"shape":[4]},"layers":"#);
            for _ in 0..depth {
                s.push_str(r#"[{"kind":"sequential","layers":"#);
            }
            s.push_str("[]");
            for _ in 0..depth {
                s.push_str("}]");
            }
            s.push('}');
            s.into_bytes()
        }
        _ => {
            let n = 20_000 + rng.below(20_000);
            let layers = vec![r#"{"kind":"relu"}"#; n].join(",");
            format!(r#"{{"input":{{"shape":[4]}},"layers":[{layers}]}}"#).into_bytes()
        }
    };
    let mut payload = vec![1u8];
    payload.extend(deflate(&json));
    format!("v1.s={}", base64url_encode(&payload))
}

fn deflate(data: &[u8]) -> Vec<u8> {
    miniz_oxide::deflate::compress_to_vec(data, 1)
}

fn inflate(data: &[u8]) -> Vec<u8> {
    miniz_oxide::inflate::decompress_to_vec_with_limit(data, 1 << 20).unwrap_or_default()
}

/// Counts of what `decode` returned.
#[derive(Debug, Default)]
pub struct Stats {
    pub runs: u64,
    pub ok: u64,
    pub errors: u64,
}

/// Runs `n` inputs; panics (with the input) if `decode` panics.
pub fn fuzz(n: u64, seed: u64) -> Stats {
    let corpus = Corpus::new();
    let mut rng = Rng::new(seed);
    let mut stats = Stats::default();
    for _ in 0..n {
        let input = mutate(&mut rng, &corpus);
        match std::panic::catch_unwind(|| decode(&input)) {
            Ok(Ok(state)) => {
                stats.ok += 1;
                // what decodes also re-encodes to a link that decodes to the same state
                let again = encode(&state).map(|l| decode(&l));
                if !matches!(&again, Ok(Ok(s)) if *s == state) {
                    let shown: String = format!("{again:?}").chars().take(2000).collect();
                    panic!("re-encoding {input:?} does not give the same state: {shown}");
                }
            }
            Ok(Err(_)) => stats.errors += 1,
            Err(_) => panic!("decode panicked on {input:?}"),
        }
        stats.runs += 1;
    }
    stats
}

#[allow(dead_code)]
fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0x5EED);
    let start = std::time::Instant::now();
    let stats = fuzz(n, seed);
    println!(
        "fuzz_share: {} inputs ({} decoded, {} rejected with an error), 0 panics, seed {seed}, {:.1} s",
        stats.runs,
        stats.ok,
        stats.errors,
        start.elapsed().as_secs_f64()
    );
}
