//! Reading a GGUF header from the first bytes of a file, growing the read while the core's
//! reader answers [`GgufError::NeedMore`]: a local file through `File.slice`, a hub file through
//! HTTP `Range` requests (`super::fetch`). Only the header's bytes are read, never the weights.

use std::future::Future;
use vramcalc_core::gguf::{GgufError, Header};

/// The first read: most headers (a 150k-token vocabulary is about 8 MB) take a few doublings.
pub const FIRST_READ: u64 = 256 << 10;
/// A header longer than this is refused (the largest published vocabularies take about 20 MB).
pub const MAX_HEADER: u64 = 256 << 20;

/// Bytes `[start, start + bytes.len())` of a file, and its size when the source knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub bytes: Vec<u8>,
    pub size: Option<u64>,
}

/// What a read took: the header and how many bytes and reads it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub header: Header,
    pub bytes_read: u64,
    pub reads: u32,
}

/// Reads the header through `read(start, end)` (bytes `start..end`, fewer at the end of the
/// file). An error is the source's or the reader's (with its offset and field).
pub async fn read_header<F, Fut>(mut read: F, first: u64) -> Result<Read, String>
where
    F: FnMut(u64, u64) -> Fut,
    Fut: Future<Output = Result<Chunk, String>>,
{
    let mut buf: Vec<u8> = Vec::new();
    let mut size: Option<u64> = None;
    let mut want = first.max(64);
    let mut reads = 0u32;
    loop {
        let have = buf.len() as u64;
        if let Some(s) = size {
            want = want.min(s);
        }
        if want > have {
            let chunk = read(have, want).await?;
            reads += 1;
            size = chunk.size.or(size);
            let got = chunk.bytes.len() as u64;
            buf.extend_from_slice(&chunk.bytes[..got.min(want - have) as usize]);
            if got < want - have {
                // the file ends here
                size = Some(buf.len() as u64);
            }
        }
        match Header::parse_with_size(&buf, size) {
            Ok(header) => return Ok(Read { header, bytes_read: buf.len() as u64, reads }),
            Err(GgufError::NeedMore { at_least, .. }) => {
                if at_least > MAX_HEADER {
                    return Err(format!("the GGUF header would be over {} MiB: refused", MAX_HEADER >> 20));
                }
                if size.is_some_and(|s| buf.len() as u64 >= s) {
                    // cannot happen: with the size known the reader says Invalid; stop anyway
                    return Err(format!("the file ends at byte {} inside its GGUF header", buf.len()));
                }
                want = at_least.max(want.saturating_mul(2)).min(MAX_HEADER);
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::block_on;
    use std::cell::RefCell;

    pub(crate) const TINY: &[u8] = include_bytes!("../../tests/data/gguf/tiny-qwen3moe-Q8_0.gguf");

    fn from<'a>(data: &'a [u8], size_known: bool, log: &'a RefCell<Vec<(u64, u64)>>) -> impl FnMut(u64, u64) -> std::future::Ready<Result<Chunk, String>> + 'a {
        move |s, e| {
            log.borrow_mut().push((s, e));
            let end = (e as usize).min(data.len());
            let bytes = data.get(s as usize..end).unwrap_or(&[]).to_vec();
            std::future::ready(Ok(Chunk { bytes, size: size_known.then_some(data.len() as u64) }))
        }
    }

    #[test]
    fn the_read_grows_until_the_header_parses_and_reads_no_byte_twice() {
        let log = RefCell::new(Vec::new());
        let r = block_on(read_header(from(TINY, true, &log), 4096)).unwrap();
        assert_eq!(r.header, Header::parse(TINY).unwrap());
        let log = log.into_inner();
        assert!(log.len() >= 3, "{log:?}");
        for w in log.windows(2) {
            assert_eq!(w[0].1, w[1].0, "each read starts where the last ended");
        }
        assert_eq!(r.reads as usize, log.len());
        assert!(r.bytes_read <= TINY.len() as u64);
    }

    #[test]
    fn a_truncated_header_is_a_clear_error_with_or_without_a_known_size() {
        let cut = &TINY[..300_000];
        for known in [true, false] {
            let log = RefCell::new(Vec::new());
            let e = block_on(read_header(from(cut, known, &log), 4096)).unwrap_err();
            assert!(e.contains("GGUF header invalid at byte") && e.contains("past the end of the file (300000 bytes)"), "{e}");
        }
        let log = RefCell::new(Vec::new());
        let e = block_on(read_header(from(b"<!doctype html><html>", true, &log), 4096)).unwrap_err();
        assert!(e.contains("not a GGUF file"), "{e}");
    }

    #[test]
    fn a_source_error_stops_the_read() {
        let e = block_on(read_header(|_, _| std::future::ready(Err::<Chunk, _>("HTTP 404".to_string())), 4096)).unwrap_err();
        assert_eq!(e, "HTTP 404");
    }
}
