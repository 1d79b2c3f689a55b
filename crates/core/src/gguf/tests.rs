use super::writer::Writer;
use super::*;

fn arr(elem: ValueType, items: Vec<Value>) -> Value {
    Value::Array(Array { elem, items })
}

/// A header with every value type, arrays of numbers and strings, and tensors of several types.
fn sample() -> Writer {
    Writer::new()
        .kv("general.architecture", Value::Str("llama".into()))
        .kv("general.alignment", Value::U32(64))
        .kv("llama.block_count", Value::U32(2))
        .kv("llama.context_length", Value::U64(4096))
        .kv("llama.embedding_length", Value::I32(256))
        .kv("llama.rope.freq_base", Value::F32(10000.0))
        .kv("x.f64", Value::F64(-1.5))
        .kv("x.u8", Value::U8(7))
        .kv("x.i8", Value::I8(-7))
        .kv("x.u16", Value::U16(700))
        .kv("x.i16", Value::I16(-700))
        .kv("x.i64", Value::I64(-70000))
        .kv("x.bool", Value::Bool(true))
        .kv("tokenizer.ggml.tokens", arr(ValueType::Str, vec![Value::Str("<s>".into()), Value::Str("ab".into())]))
        .kv("x.arr_i32", arr(ValueType::I32, vec![Value::I32(1), Value::I32(-2), Value::I32(3)]))
        .kv("x.arr_empty", arr(ValueType::F32, vec![]))
        .tensor("token_embd.weight", &[256, 32], GgmlType::Q8_0)
        .tensor("blk.0.attn_q.weight", &[256, 256], GgmlType::Q4_K)
        .tensor("blk.0.attn_norm.weight", &[256], GgmlType::F32)
        .tensor("blk.0.ffn_down.weight", &[512, 256], GgmlType::Q6_K)
        .tensor("output.weight", &[256, 32], GgmlType::F16)
}

#[test]
fn reads_every_value_type_and_tensor() {
    let w = sample();
    let bytes = w.header();
    let h = Header::parse(&bytes).unwrap();
    assert_eq!(h.version, 3);
    assert_eq!(h.metadata, w.kv);
    assert_eq!(h.alignment, 64);
    assert_eq!(h.architecture(), Some("llama"));
    assert_eq!(h.header_end, bytes.len() as u64);
    assert_eq!(h.data_offset, (bytes.len() as u64).div_ceil(64) * 64);
    let t = h.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(t.dims, vec![256, 256]);
    assert_eq!(t.ggml_type, GgmlType::Q4_K);
    assert_eq!(t.n_bytes(), 256 * 256 / 256 * 144);
    assert_eq!(h.tensor("token_embd.weight").unwrap().n_bytes(), 256 * 32 / 32 * 34);
    assert_eq!(h.tensor("blk.0.attn_norm.weight").unwrap().n_bytes(), 1024);
    // Offsets: each tensor's bytes padded to 64.
    assert_eq!(h.tensor("blk.0.attn_q.weight").unwrap().offset, 8704);
    assert_eq!(h.tensors.len(), 5);
    assert_eq!(h.get("llama.embedding_length").and_then(Value::as_u64), Some(256));
}

#[test]
fn type_table_matches_ggml_ids_and_names() {
    assert_eq!(GgmlType::ALL.len(), 35);
    for (i, t) in GgmlType::ALL.iter().enumerate() {
        assert_eq!(GgmlType::from_id(t.id), Some(*t));
        assert_eq!(GgmlType::from_name(&t.name.to_uppercase()), Some(*t));
        assert!(t.id < GGML_TYPE_COUNT);
        if i > 0 {
            assert!(GgmlType::ALL[i - 1].id < t.id);
        }
    }
    for removed in [4, 5, 31, 32, 33, 36, 37, 38, 43, 1000] {
        assert_eq!(GgmlType::from_id(removed), None);
    }
    assert_eq!(GgmlType::Q4_K.row_bytes(4096), 16 * 144);
}

#[test]
fn v2_reads_like_v3() {
    let mut w = sample();
    w.version = 2;
    assert_eq!(Header::parse(&w.header()).unwrap().version, 2);
}

#[test]
fn every_truncation_asks_for_more_and_growing_reaches_the_header() {
    let bytes = sample().header();
    let full = Header::parse(&bytes).unwrap();
    for cut in 0..bytes.len() {
        match Header::parse(&bytes[..cut]) {
            Err(GgufError::NeedMore { at_least, .. }) => {
                assert!(at_least as usize > cut && at_least as usize <= bytes.len(), "cut {cut}: at least {at_least}");
            }
            other => panic!("cut {cut}: {other:?}"),
        }
        // Known file size: a cut file is still only short, never invalid.
        assert!(matches!(Header::parse_with_size(&bytes[..cut], Some(1 << 20)), Err(GgufError::NeedMore { .. })));
    }
    // Growing the range by the answers reaches the header in a few steps.
    let mut len = 0;
    let mut steps = 0;
    let got = loop {
        steps += 1;
        match Header::parse(&bytes[..len]) {
            Ok(h) => break h,
            Err(GgufError::NeedMore { at_least, .. }) => len = at_least as usize,
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(got, full);
    assert!(steps < 80, "{steps} steps");
}

fn err_of(bytes: &[u8]) -> (u64, String, String) {
    match Header::parse(bytes) {
        Err(GgufError::Invalid { offset, field, reason }) => (offset, field, reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hostile_headers_name_offset_and_field() {
    assert_eq!(err_of(b"GGML\x03\0\0\0").1, "magic");
    assert!(err_of(b"GGUF\x01\0\0\0").2.contains("v1"));
    // A huge KV count: asks for bytes it cannot have, or with the file size known, is invalid.
    let mut b = b"GGUF\x03\0\0\0".to_vec();
    b.extend(0u64.to_le_bytes());
    b.extend((1u64 << 62).to_le_bytes());
    assert!(matches!(Header::parse(&b), Err(GgufError::Invalid { .. })), "2^62 × 14 overflows");
    let mut b = b"GGUF\x03\0\0\0".to_vec();
    b.extend(0u64.to_le_bytes());
    b.extend((1u64 << 40).to_le_bytes());
    assert!(matches!(Header::parse(&b), Err(GgufError::NeedMore { at_least, .. }) if at_least == 24 + (14 << 40)));
    match Header::parse_with_size(&b, Some(1000)) {
        Err(GgufError::Invalid { offset: 24, reason, .. }) => assert!(reason.contains("past the end")),
        other => panic!("{other:?}"),
    }
    // A negative tensor count.
    let mut b = b"GGUF\x03\0\0\0".to_vec();
    b.extend((-1i64).to_le_bytes());
    b.extend(0u64.to_le_bytes());
    assert_eq!(err_of(&b).0, 8);
    // A string array of 2^40 elements in a short file.
    let w = Writer::new().kv("a", arr(ValueType::Str, vec![]));
    let mut b = w.header();
    let n_at = b.len() - 8;
    b[n_at..].copy_from_slice(&(1u64 << 40).to_le_bytes());
    assert!(matches!(Header::parse(&b), Err(GgufError::NeedMore { at_least, .. }) if at_least == b.len() as u64 + (8 << 40)));
}

#[test]
fn bad_tensor_infos_are_refused_by_field() {
    let (_, field, reason) = err_of(&Writer::new().tensor("a", &[33, 2], GgmlType::Q4_0).header());
    assert!(field.contains("\"a\" type") && reason.contains("multiple"), "{field}: {reason}");
    let (_, field, _) = err_of(&Writer::new().tensor("a", &[1; 5], GgmlType::F32).header());
    assert!(field.contains("n_dims"));
    let (_, field, reason) = err_of(&Writer::new().tensor("a", &[1], GgmlType::F32).tensor("a", &[1], GgmlType::F32).header());
    assert!(reason.contains("duplicate") && field.starts_with("tensor[1]"));
    let long = "x".repeat(64);
    assert!(err_of(&Writer::new().tensor(&long, &[1], GgmlType::F32).header()).2.contains("64 bytes"));
    let (_, field, reason) = err_of(&Writer::new().tensor("a", &[1 << 32, 1 << 32], GgmlType::F32).header());
    assert!(reason.contains("overflows"), "{field}: {reason}");
    // A removed type id.
    let mut b = Writer::new().tensor("a", &[32], GgmlType::F32).header();
    let at = b.len() - 12;
    b[at..at + 4].copy_from_slice(&4u32.to_le_bytes());
    assert!(err_of(&b).2.contains("removed"));
    // An offset out of sequence.
    let mut b = Writer::new().tensor("a", &[32], GgmlType::F32).tensor("b", &[32], GgmlType::F32).header();
    let at = b.len() - 8;
    b[at..].copy_from_slice(&7u64.to_le_bytes());
    assert!(err_of(&b).2.contains("offset 7 where 128 was expected"));
    let (_, field, reason) = err_of(&Writer::new().kv("general.alignment", Value::U32(48)).header());
    assert!(field == "general.alignment" && reason.contains("power of 2"));
    let (_, _, reason) = err_of(&Writer::new().kv("general.alignment", Value::U64(64)).header());
    assert!(reason.contains("u32"));
}

/// xorshift64*: a seeded generator, so a failing input can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const INTERESTING: [u64; 10] = [0, 1, 2, 63, 64, 255, 1 << 31, u32::MAX as u64, 1 << 63, u64::MAX];

/// A mutation of a valid header: truncated, bytes flipped, a word overwritten with a boundary
/// value, bytes inserted or removed.
fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        match rng.below(5) {
            0 => b.truncate(rng.below(b.len() + 1)),
            1 => {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(b.len());
                    if let Some(x) = b.get_mut(i) {
                        *x ^= 1 << rng.below(8);
                    }
                }
            }
            2 => {
                let v = INTERESTING[rng.below(INTERESTING.len())].to_le_bytes();
                let w = [1, 2, 4, 8][rng.below(4)];
                let i = rng.below(b.len());
                for (k, x) in v[..w].iter().enumerate() {
                    if let Some(y) = b.get_mut(i + k) {
                        *y = *x;
                    }
                }
            }
            3 => {
                let i = rng.below(b.len() + 1);
                let n = rng.below(16);
                let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                b.splice(i..i, junk);
            }
            _ => {
                let i = rng.below(b.len() + 1);
                let j = (i + rng.below(16)).min(b.len());
                b.drain(i..j);
            }
        }
    }
    b
}

/// Parses `n` mutated headers; returns how many were read, asked for more, and refused. A panic
/// fails the test.
pub(crate) fn fuzz(n: u64, seed: u64) -> [u64; 3] {
    let mut w2 = sample();
    w2.version = 2;
    let bases = [sample().header(), w2.header(), Writer::new().header()];
    let mut rng = Rng(seed | 1);
    let mut counts = [0; 3];
    for _ in 0..n {
        let base = &bases[rng.below(bases.len())];
        let b = mutate(&mut rng, base);
        let size = if rng.below(2) == 0 { None } else { Some(b.len() as u64 + rng.below(64) as u64) };
        match Header::parse_with_size(&b, size) {
            Ok(h) => {
                assert!(h.header_end as usize <= b.len());
                counts[0] += 1;
            }
            Err(GgufError::NeedMore { at_least, .. }) => {
                assert!(at_least > b.len() as u64);
                assert!(size.is_none_or(|s| at_least <= s));
                counts[1] += 1;
            }
            Err(e @ GgufError::Invalid { .. }) => {
                assert!(!e.to_string().is_empty());
                counts[2] += 1;
            }
        }
    }
    counts
}

#[test]
fn fuzz_mutated_headers_never_panic() {
    let c = fuzz(20_000, 0x5eed);
    // Each outcome happens: the mutations reach past the magic and the counts.
    assert!(c.iter().all(|&k| k > 100), "{c:?}");
}

/// The full run (26 s in debug): `cargo test -p vramcalc-core --lib gguf -- --ignored`.
#[test]
#[ignore = "10^6 inputs; run explicitly"]
fn fuzz_a_million_mutated_headers() {
    let c = fuzz(1_000_000, 0x9e37_79b9_7f4a_7c15);
    assert_eq!(c.iter().sum::<u64>(), 1_000_000);
    eprintln!("read {} / need more {} / invalid {}", c[0], c[1], c[2]);
}
