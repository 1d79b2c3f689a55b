//! The two byte sources of [`super::read::read_header`] in the browser:
//!
//! - a local file: `File.slice(start, end)` and `Blob.arrayBuffer()` — the file never leaves the
//!   computer, and only the slices the header needs are read;
//! - a hub file: `GET` with `Range: bytes=start-(end-1)` to [`HubFile::url`] (no cookies, no
//!   referrer); `206` with `Content-Range: bytes a-b/size` gives the size, a `200` (a server
//!   that ignores `Range`) is cut to the bytes asked, `416` is the end of the file, and other
//!   statuses are clear errors (404: no such file; 401/403: a gated or private repository).

use super::read::Chunk;
use crate::state::local::HubFile;

/// The error of an HTTP status, or `None` for 200, 206 and 416.
pub fn status_error(f: &HubFile, status: u16) -> Option<String> {
    Some(match status {
        200 | 206 | 416 => return None,
        404 => format!("{}: not found on the hub (HTTP 404) — check the repository, revision and file name", f.label()),
        401 | 403 => format!("{}: the hub refused the request (HTTP {status}) — a gated or private repository needs you to accept its terms on huggingface.co", f.label()),
        s => format!("{}: the hub answered HTTP {s}", f.label()),
    })
}

/// The file size of a `Content-Range: bytes a-b/size` header (`*`: unknown).
pub fn content_range_size(v: &str) -> Option<u64> {
    v.trim().strip_prefix("bytes")?.rsplit_once('/')?.1.trim().parse().ok()
}

/// The bytes asked of a `200` body that is the whole file.
pub fn cut(body: &[u8], start: u64, end: u64) -> Vec<u8> {
    let len = body.len() as u64;
    body[start.min(len) as usize..end.min(len) as usize].to_vec()
}

#[cfg(target_arch = "wasm32")]
mod web {
    use super::*;
    use wasm_bindgen::{JsCast, JsValue};
    use wasm_bindgen_futures::JsFuture;

    fn js_err(e: JsValue) -> String {
        js_sys::Reflect::get(&e, &"message".into()).ok().and_then(|m| m.as_string()).or_else(|| e.as_string()).unwrap_or_else(|| "the request failed".into())
    }

    /// Bytes `start..end` of a local file.
    pub async fn file_range(file: &web_sys::File, start: u64, end: u64) -> Result<Chunk, String> {
        let blob = file.slice_with_f64_and_f64(start as f64, end as f64).map_err(js_err)?;
        let buf = JsFuture::from(blob.array_buffer()).await.map_err(js_err)?;
        Ok(Chunk { bytes: js_sys::Uint8Array::new(&buf).to_vec(), size: Some(file.size() as u64) })
    }

    /// Bytes `start..end` of a hub file, by `Range`.
    pub async fn hub_range(f: &HubFile, start: u64, end: u64) -> Result<Chunk, String> {
        use web_sys::{Headers, ReferrerPolicy, RequestCredentials, RequestInit, RequestMode, Response};
        let window = web_sys::window().ok_or("no window")?;
        let init = RequestInit::new();
        init.set_method("GET");
        init.set_mode(RequestMode::Cors);
        init.set_credentials(RequestCredentials::Omit);
        init.set_referrer_policy(ReferrerPolicy::NoReferrer);
        let headers = Headers::new().map_err(js_err)?;
        headers.set("Range", &format!("bytes={start}-{}", end.saturating_sub(1))).map_err(js_err)?;
        init.set_headers(&headers);
        let response: Response = JsFuture::from(window.fetch_with_str_and_init(&f.url(), &init))
            .await
            .map_err(|e| format!("{}: {} (network)", f.label(), js_err(e)))?
            .unchecked_into();
        let status = response.status();
        if let Some(e) = status_error(f, status) {
            return Err(e);
        }
        if status == 416 {
            return Ok(Chunk { bytes: Vec::new(), size: None });
        }
        let size = response.headers().get("content-range").ok().flatten().and_then(|v| content_range_size(&v));
        let buf = JsFuture::from(response.array_buffer().map_err(js_err)?).await.map_err(js_err)?;
        let body = js_sys::Uint8Array::new(&buf).to_vec();
        Ok(match status {
            200 => Chunk { size: Some(body.len() as u64), bytes: cut(&body, start, end) },
            _ => Chunk { bytes: body, size },
        })
    }
}

#[cfg(target_arch = "wasm32")]
pub use web::{file_range, hub_range};

/// Outside the browser there is no file or network: the native tests get an error.
#[cfg(not(target_arch = "wasm32"))]
pub async fn file_range(_file: &web_sys::File, _start: u64, _end: u64) -> Result<Chunk, String> {
    Err("no files outside the browser".into())
}

#[cfg(not(target_arch = "wasm32"))]
pub async fn hub_range(_f: &HubFile, _start: u64, _end: u64) -> Result<Chunk, String> {
    Err("no network outside the browser".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_ranges_read_as_the_hub_sends_them() {
        let f = HubFile { repo: "a/b".into(), revision: "main".into(), path: "x.gguf".into() };
        assert!(status_error(&f, 206).is_none() && status_error(&f, 200).is_none());
        assert!(status_error(&f, 404).unwrap().contains("not found"));
        assert!(status_error(&f, 403).unwrap().contains("gated"));
        assert_eq!(content_range_size("bytes 0-262143/872992"), Some(872_992));
        assert_eq!(content_range_size("bytes 0-9/*"), None);
        assert_eq!(cut(b"0123456789", 4, 8), b"4567");
        assert_eq!(cut(b"0123", 2, 100), b"23");
        assert_eq!(cut(b"0123", 9, 100), b"");
    }
}
