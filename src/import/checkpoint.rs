//! A hub model's checkpoint as stored (issue 25): after its `config.json`, the app reads what the
//! weights really take on the hub, to show beside the modelled weights. Only metadata is read,
//! never a weight:
//!
//! 1. `model.safetensors.index.json` (a sharded checkpoint): its `metadata.total_size`;
//! 2. if there is none (HTTP 404), the single `model.safetensors`: its first 8 bytes by `Range`
//!    (the header's length), then the header itself (`Range: bytes=0-(7 + n)`), whose tensors'
//!    data bytes are the checkpoint (`vramcalc_core::safetensors`).
//!
//! [`Probe`] is that sequence as a pure state machine (an answer in, the next request or the
//! result out), so every branch is tested natively; [`stored`] drives it with the hub fetch.

use vramcalc_core::hub::HubRef;
use vramcalc_core::safetensors::{header_extent, read_header, read_index};

/// What the hub stores for a model, and where it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Every tensor's data bytes (headers not counted, as `total_size` counts them).
    pub bytes: u64,
    pub source: Source,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `model.safetensors.index.json`'s `metadata.total_size`, over this many shard files.
    Index { files: usize },
    /// The single `model.safetensors` file's header.
    Header,
}

/// A hub model's stored checkpoint, or why it could not be read; kept in the app's state for
/// the model it belongs to (`hub`, its `id@revision`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubCheckpoint {
    pub hub: String,
    pub stored: Result<Stored, String>,
}

/// One HTTP `GET`: the address and, for a safetensors file, the byte range `start..end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub url: String,
    pub range: Option<(u64, u64)>,
}

/// Where the probe is: which answer it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    Index,
    HeaderLength,
    Header { extent: u64 },
}

/// What to do after an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Fetch(Probe, Request),
    Done(Result<Stored, String>),
}

/// The first request: the sharded checkpoint's index.
pub fn start(hub: &HubRef) -> (Probe, Request) {
    (Probe::Index, Request { url: hub.safetensors_index_url(), range: None })
}

impl Probe {
    /// The next step after the hub answered `status` with `body` to this probe's request.
    pub fn answer(self, hub: &HubRef, status: u16, body: &[u8]) -> Next {
        let refused = |file: &str| match status {
            401 | 403 => Some(format!("the hub refused {file} (HTTP {status}): a gated model needs its terms accepted and a token")),
            200 | 206 | 404 => None,
            s => Some(format!("the hub answered HTTP {s} for {file}")),
        };
        match self {
            Probe::Index => {
                if status == 404 {
                    return Next::Fetch(Probe::HeaderLength, Request { url: hub.safetensors_url(), range: Some((0, 8)) });
                }
                if let Some(e) = refused("model.safetensors.index.json") {
                    return Next::Done(Err(e));
                }
                let text = String::from_utf8_lossy(body);
                Next::Done(
                    read_index(&text)
                        .map(|i| Stored { bytes: i.total_size, source: Source::Index { files: i.files.len() } })
                        .map_err(|e| format!("model.safetensors.index.json: {e}")),
                )
            }
            Probe::HeaderLength | Probe::Header { .. } if status == 404 => {
                Next::Done(Err("no safetensors checkpoint on the hub (neither model.safetensors.index.json nor model.safetensors)".into()))
            }
            Probe::HeaderLength => {
                if let Some(e) = refused("model.safetensors") {
                    return Next::Done(Err(e));
                }
                match header_extent(body) {
                    Ok(extent) => Next::Fetch(Probe::Header { extent }, Request { url: hub.safetensors_url(), range: Some((0, extent)) }),
                    Err(e) => Next::Done(Err(format!("model.safetensors: {e}"))),
                }
            }
            Probe::Header { extent } => {
                if let Some(e) = refused("model.safetensors") {
                    return Next::Done(Err(e));
                }
                // a server that ignores `Range` sends the whole file: the header is its start
                let head = &body[..body.len().min(extent as usize)];
                Next::Done(read_header(head).map(|h| Stored { bytes: h.data_bytes(), source: Source::Header }).map_err(|e| format!("model.safetensors: {e}")))
            }
        }
    }
}

/// Reads the stored checkpoint of `hub` (`token`: as the config's request sent it; empty: none).
pub async fn stored(hub: &HubRef, token: &str) -> Result<Stored, String> {
    let (mut probe, mut request) = start(hub);
    // at most three requests: index, then header length and header
    for _ in 0..3 {
        let (status, body) = super::hub::fetch_bytes(&request.url, token, request.range).await.map_err(|e| e.to_string())?;
        match probe.answer(hub, status, &body) {
            Next::Fetch(p, r) => (probe, request) = (p, r),
            Next::Done(result) => return result,
        }
    }
    Err("the hub's answers did not end".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub() -> HubRef {
        HubRef::parse("Qwen/Qwen2.5-0.5B").unwrap()
    }

    /// A safetensors file's first bytes: one BF16 tensor of 4 × 8.
    fn header() -> Vec<u8> {
        let json = br#"{"w":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,64]}}"#;
        let mut b = (json.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(json);
        b
    }

    #[test]
    fn a_sharded_checkpoint_is_read_from_its_index() {
        let (probe, req) = start(&hub());
        assert!(req.url.ends_with("/Qwen/Qwen2.5-0.5B/resolve/main/model.safetensors.index.json") && req.range.is_none());
        let index = br#"{"metadata": {"total_size": 16060522496}, "weight_map": {"a": "m-1.safetensors", "b": "m-2.safetensors", "c": "m-1.safetensors"}}"#;
        assert_eq!(probe.answer(&hub(), 200, index), Next::Done(Ok(Stored { bytes: 16_060_522_496, source: Source::Index { files: 2 } })));
    }

    #[test]
    fn a_single_file_is_read_from_its_header_by_two_ranges() {
        let h = header();
        let Next::Fetch(probe, req) = Probe::Index.answer(&hub(), 404, b"Entry not found") else { panic!("no second request") };
        assert_eq!((probe, req.range), (Probe::HeaderLength, Some((0, 8))));
        assert!(req.url.ends_with("/resolve/main/model.safetensors"));
        let Next::Fetch(probe, req) = probe.answer(&hub(), 206, &h[..8]) else { panic!("no third request") };
        assert_eq!((probe, req.range), (Probe::Header { extent: h.len() as u64 }, Some((0, h.len() as u64))));
        assert_eq!(probe.answer(&hub(), 206, &h), Next::Done(Ok(Stored { bytes: 64, source: Source::Header })));
        // a server that ignores `Range` sends the whole file (header, then data)
        let mut whole = h.clone();
        whole.extend(std::iter::repeat_n(0u8, 64));
        assert!(matches!(Probe::HeaderLength.answer(&hub(), 200, &whole), Next::Fetch(p, _) if p == probe));
        assert_eq!(probe.answer(&hub(), 200, &whole), Next::Done(Ok(Stored { bytes: 64, source: Source::Header })));
    }

    #[test]
    fn failures_say_what_was_missing_or_refused() {
        let no_file = Probe::HeaderLength.answer(&hub(), 404, b"");
        assert!(matches!(&no_file, Next::Done(Err(e)) if e.contains("no safetensors checkpoint")));
        assert!(matches!(Probe::Index.answer(&hub(), 403, b""), Next::Done(Err(e)) if e.contains("gated")));
        assert!(matches!(Probe::Index.answer(&hub(), 500, b""), Next::Done(Err(e)) if e.contains("HTTP 500")));
        assert!(matches!(Probe::Index.answer(&hub(), 200, b"{}"), Next::Done(Err(e)) if e.contains("metadata")));
        // a length over safetensors' limit, and a header cut short
        assert!(matches!(Probe::HeaderLength.answer(&hub(), 206, &u64::MAX.to_le_bytes()), Next::Done(Err(e)) if e.contains("limit")));
        assert!(matches!(Probe::Header { extent: 70 }.answer(&hub(), 206, &header()[..20]), Next::Done(Err(e)) if e.contains("incomplete")));
    }

    #[test]
    fn random_answers_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut body = header();
            let cut = (x % (body.len() as u64 + 1)) as usize;
            body.truncate(cut);
            if let Some(b) = body.get_mut((x >> 20) as usize % (cut.max(1))) {
                *b ^= (x >> 40) as u8;
            }
            let status = [200, 206, 404, 403, 416, 500][(x >> 8) as usize % 6];
            for probe in [Probe::Index, Probe::HeaderLength, Probe::Header { extent: (x >> 30) % 200 }] {
                let _ = probe.answer(&hub(), status, &body);
            }
        }
    }
}
