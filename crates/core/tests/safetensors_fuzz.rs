//! A million random and mutated safetensors headers (and index files): the reader never
//! panics, and no input makes it allocate more than a small multiple of its own length.
//!
//! The only test of this binary, so the counting allocator sees this thread alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use vramcalc_core::safetensors::{read_header, read_index};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size(), Relaxed) + l.size();
        PEAK.fetch_max(now, Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            let now = LIVE.fetch_add(new - l.size(), Relaxed) + (new - l.size());
            PEAK.fetch_max(now, Relaxed);
        } else {
            LIVE.fetch_sub(l.size() - new, Relaxed);
        }
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// xorshift64*: a fixed sequence, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

fn file(json: &str) -> Vec<u8> {
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend_from_slice(json.as_bytes());
    b
}

const SEEDS: &[&str] = &[
    r#"{"__metadata__":{"format":"pt"},"model.embed_tokens.weight":{"dtype":"BF16","shape":[1000,256],"data_offsets":[0,512000]},"model.layers.0.mlp.down_proj.weight_packed":{"dtype":"I32","shape":[256,80],"data_offsets":[512000,593920]},"model.layers.0.mlp.down_proj.weight_scale":{"dtype":"F8_E4M3","shape":[256,5],"data_offsets":[593920,595200]}}"#,
    r#"{"a":{"dtype":"F4","shape":[2,8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[],"data_offsets":[8,9]}}"#,
    r#"{}"#,
];

const TOKENS: &[&str] = &[
    "{", "}", "[", "]", ",", ":", "\"", "\\u0000", "\\", "1e999", "-1", "18446744073709551616", "null", "true", "\"dtype\"",
    "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "\"F32\"", "\"F4\"", "[[[[[[[[", "0", "4294967296", "\u{fffd}",
];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..=rng.below(4) {
        let len = b.len() as u64;
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len) as usize;
                b[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => b.truncate(rng.below(len) as usize),
            2 => {
                let i = rng.below(len + 1) as usize;
                let t = TOKENS[rng.below(TOKENS.len() as u64) as usize].as_bytes();
                b.splice(i..i, t.iter().copied());
            }
            3 if len > 8 => {
                // the length field: another plausible value
                let n = match rng.below(3) {
                    0 => rng.below(len),
                    1 => len - 8 + rng.below(3),
                    _ => rng.next(),
                };
                b[..8].copy_from_slice(&n.to_le_bytes());
            }
            4 if len > 9 => {
                let i = 8 + rng.below(len - 8) as usize;
                let j = (i + rng.below(16) as usize).min(b.len());
                b.drain(i..j);
            }
            5 => b = (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
            _ => {
                // keep the length field consistent with the bytes after it
                let n = (b.len().saturating_sub(8)) as u64;
                if b.len() >= 8 {
                    b[..8].copy_from_slice(&n.to_le_bytes());
                }
            }
        }
    }
    b
}

#[test]
fn a_million_hostile_headers() {
    let seeds: Vec<Vec<u8>> = SEEDS.iter().map(|s| file(s)).collect();
    for s in &seeds {
        assert!(read_header(s).is_ok(), "a seed must read: {}", String::from_utf8_lossy(&s[8..]));
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut ok, mut worst) = (0u64, 0usize);
    for _ in 0..1_000_000 {
        let seed = &seeds[rng.below(seeds.len() as u64) as usize];
        let input = mutate(&mut rng, seed);
        let before = LIVE.load(Relaxed);
        PEAK.store(before, Relaxed);
        let r = read_header(&input);
        let text = String::from_utf8_lossy(input.get(8..).unwrap_or_default()).into_owned();
        let r2 = read_index(&text);
        let used = PEAK.load(Relaxed).saturating_sub(before);
        // the header's values, the error text, the index's copy of the input: a few times the input
        let bound = 64 * input.len() + 16 * 1024;
        assert!(used <= bound, "{used} bytes allocated for {} input bytes: {input:?}", input.len());
        worst = worst.max(used.saturating_sub(input.len()));
        ok += r.is_ok() as u64 + r2.is_ok() as u64;
        drop((r, r2));
    }
    // the mutations must reach both sides: some inputs still read
    assert!(ok > 1000, "only {ok} of the mutated inputs read: the mutations are too coarse");
    eprintln!("{ok} reads succeeded; worst extra allocation {worst} bytes");
}
