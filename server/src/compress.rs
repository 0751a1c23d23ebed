//! Compressing pages, JSON and CSV for clients that accept it (`Accept-Encoding`): brotli
//! first, then gzip. The bundle under `/pkg` is not compressed here: its `.br` and `.gz` files
//! are made once at build time and sent as they are (see [`crate::web`]).
//!
//! Pages stream from Leptos in parts; each part is compressed and flushed as it comes, so the
//! browser can start on the head before the body is rendered.

use std::io::Write;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;

/// Bodies smaller than this are sent as they are: the encoding's own overhead eats the gain.
const MIN_BYTES: u64 = 1024;

/// Media types worth compressing (text); images, wasm and gRPC are either already compressed
/// or have their own framing.
const COMPRESSIBLE: [&str; 4] = ["text/html", "application/json", "text/csv", "text/plain"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Brotli,
    Gzip,
}

impl Encoding {
    fn name(self) -> &'static str {
        match self {
            Encoding::Brotli => "br",
            Encoding::Gzip => "gzip",
        }
    }
}

/// The encoding to answer with, from an `Accept-Encoding` header: the client's highest `q`
/// among those we speak, brotli on a tie; `q=0` refuses one, `*` stands for any not named.
pub fn negotiate(headers: &HeaderMap) -> Option<Encoding> {
    let (mut br, mut gzip, mut any) = (None, None, None);
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .filter(|q| q.is_finite())
                .unwrap_or(1.0);
            match name.as_str() {
                "br" => br = Some(q),
                "gzip" | "x-gzip" => gzip = Some(q),
                "*" => any = Some(q),
                _ => {}
            }
        }
    }
    let (br, gzip) = (br.or(any).unwrap_or(0.0), gzip.or(any).unwrap_or(0.0));
    match (br > 0.0, gzip > 0.0) {
        (true, true) if gzip > br => Some(Encoding::Gzip),
        (true, _) => Some(Encoding::Brotli),
        (false, true) => Some(Encoding::Gzip),
        (false, false) => None,
    }
}

/// Middleware: compresses a compressible response the client accepts an encoding for.
pub async fn compress(request: Request, next: Next) -> Response {
    let encoding = negotiate(request.headers());
    let head = request.method() == Method::HEAD;
    let mut response = next.run(request).await;
    if !compressible(&response) {
        return response;
    }
    vary_on_accept_encoding(response.headers_mut());
    let Some(encoding) = encoding else {
        return response;
    };
    // The length is in a header when a handler set one, else in the body when it is whole
    // (JSON, a rendered error); a page that streams has neither and is compressed.
    let length = response
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .or_else(|| HttpBody::size_hint(response.body()).exact());
    let small = length.is_some_and(|n| n < MIN_BYTES);
    if small {
        return response;
    }
    // HEAD answers the headers GET would, with no body to compress and no length: its size
    // is not the compressed one.
    if head {
        mark_encoded(response.headers_mut(), encoding);
        let (parts, _) = response.into_parts();
        return Response::from_parts(parts, Body::from_stream(futures::stream::empty::<Result<Bytes, axum::Error>>()));
    }
    let Some(permit) = permit() else {
        return response;
    };
    mark_encoded(response.headers_mut(), encoding);
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, compressed(body, encoding, permit))
}

/// The headers of a response whose body goes out encoded: no length or ranges of the original.
fn mark_encoded(headers: &mut HeaderMap, encoding: Encoding) {
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::ACCEPT_RANGES);
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding.name()));
}

/// Adds `Accept-Encoding` to `Vary` (once), so a shared cache keeps one copy per encoding.
pub fn vary_on_accept_encoding(headers: &mut HeaderMap) {
    let already = headers
        .get_all(header::VARY)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|v| v.trim().eq_ignore_ascii_case("accept-encoding") || v.trim() == "*");
    if !already {
        headers.append(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
}

fn compressible(response: &Response) -> bool {
    let headers = response.headers();
    let status = response.status();
    let text_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
        .is_some_and(|t| COMPRESSIBLE.contains(&t.as_str()));
    let no_transform = headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("no-transform"));
    text_type
        && !no_transform
        && status != StatusCode::NO_CONTENT
        && status != StatusCode::NOT_MODIFIED
        && !headers.contains_key(header::CONTENT_ENCODING)
        && !headers.contains_key(header::CONTENT_RANGE)
}

/// One encoder over a body that arrives in parts.
enum Encoder {
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Gzip(Box<flate2::write::GzEncoder<Vec<u8>>>),
}

impl Encoder {
    fn new(encoding: Encoding) -> Self {
        match encoding {
            // Quality 5 and a 256 KiB window: most of brotli's gain on HTML at a small fraction
            // of quality 11's time, and about 1 MiB of state per response in flight.
            Encoding::Brotli => Encoder::Brotli(Box::new(brotli::CompressorWriter::new(Vec::new(), 16 * 1024, 5, 18))),
            Encoding::Gzip => {
                Encoder::Gzip(Box::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6))))
            }
        }
    }

    /// Compresses `chunk` and flushes, returning every byte the client can decode so far.
    pub fn push(&mut self, chunk: &[u8]) -> std::io::Result<Bytes> {
        match self {
            Encoder::Brotli(w) => {
                w.write_all(chunk)?;
                w.flush()?;
                Ok(Bytes::from(std::mem::take(w.get_mut())))
            }
            Encoder::Gzip(w) => {
                w.write_all(chunk)?;
                w.flush()?;
                Ok(Bytes::from(std::mem::take(w.get_mut())))
            }
        }
    }

    /// Ends the stream, returning its last bytes.
    pub fn finish(self) -> std::io::Result<Bytes> {
        match self {
            Encoder::Brotli(w) => Ok(Bytes::from(w.into_inner())),
            Encoder::Gzip(w) => Ok(Bytes::from(w.finish()?)),
        }
    }
}

/// At most this many responses are compressed at once; more are sent as they are. Each holds
/// about 1 MiB of brotli state while it is sent, and a client that stops reading (an HTTP/2
/// stream with no window left) holds it until the connection goes.
const MAX_IN_FLIGHT: usize = 256;

/// Parts larger than this are compressed a slice at a time, giving the runtime back in between,
/// so an 8 MiB price catalog does not hold a worker thread for the whole of it.
const SLICE_BYTES: usize = 64 * 1024;

static IN_FLIGHT: std::sync::LazyLock<std::sync::Arc<tokio::sync::Semaphore>> =
    std::sync::LazyLock::new(|| std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT)));

/// A permit for one compressed response, or `None` when [`MAX_IN_FLIGHT`] are already.
fn permit() -> Option<tokio::sync::OwnedSemaphorePermit> {
    IN_FLIGHT.clone().try_acquire_owned().ok()
}

fn compressed(body: Body, encoding: Encoding, permit: tokio::sync::OwnedSemaphorePermit) -> Body {
    struct State {
        parts: axum::body::BodyDataStream,
        encoder: Encoder,
        pending: Bytes,
        _permit: tokio::sync::OwnedSemaphorePermit,
    }
    let state = State {
        parts: body.into_data_stream(),
        encoder: Encoder::new(encoding),
        pending: Bytes::new(),
        _permit: permit,
    };
    let stream = futures::stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        loop {
            if !state.pending.is_empty() {
                let slice = state.pending.split_to(state.pending.len().min(SLICE_BYTES));
                if !state.pending.is_empty() {
                    tokio::task::yield_now().await;
                }
                return match state.encoder.push(&slice) {
                    Ok(out) => Some((Ok(out), Some(state))),
                    Err(err) => Some((Err(axum::Error::new(err)), None)),
                };
            }
            return match state.parts.next().await {
                Some(Ok(chunk)) => {
                    state.pending = chunk;
                    continue;
                }
                // The body failed part-way: the connection is cut, as it would be uncompressed.
                Some(Err(err)) => Some((Err(err), None)),
                None => Some((state.encoder.finish().map_err(axum::Error::new), None)),
            };
        }
    });
    Body::from_stream(stream.filter(|part| std::future::ready(!matches!(part, Ok(b) if b.is_empty()))))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn accepting(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn the_client_s_preference_decides_and_brotli_wins_a_tie() {
        assert_eq!(negotiate(&accepting("gzip, deflate, br, zstd")), Some(Encoding::Brotli));
        assert_eq!(negotiate(&accepting("gzip")), Some(Encoding::Gzip));
        assert_eq!(negotiate(&accepting("br;q=0.5, gzip;q=0.9")), Some(Encoding::Gzip));
        assert_eq!(negotiate(&accepting("br;q=0, gzip")), Some(Encoding::Gzip));
        assert_eq!(negotiate(&accepting("*")), Some(Encoding::Brotli));
        assert_eq!(negotiate(&accepting("*;q=0")), None);
        assert_eq!(negotiate(&accepting("br;q=0, *")), Some(Encoding::Gzip));
        assert_eq!(negotiate(&accepting("identity, deflate")), None);
        assert_eq!(negotiate(&accepting("br;q=NaN, gzip;q=0.1")), Some(Encoding::Brotli));
        assert_eq!(negotiate(&HeaderMap::new()), None);
    }

    fn decode(encoding: Encoding, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match encoding {
            Encoding::Brotli => brotli::Decompressor::new(bytes, 4096).read_to_end(&mut out),
            Encoding::Gzip => flate2::read::GzDecoder::new(bytes).read_to_end(&mut out),
        }
        .unwrap();
        out
    }

    /// What a reader yields before its first error.
    fn readable(mut reader: impl Read) -> Vec<u8> {
        let (mut out, mut buf) = (Vec::new(), [0u8; 4096]);
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    /// A part larger than a slice (a whole CSV export) is compressed a slice at a time and
    /// still decodes to itself.
    #[tokio::test]
    async fn a_large_part_is_compressed_in_slices_and_decodes_whole() {
        let csv: String = (0..20_000).map(|i| format!("{i},node-{},{}\n", i % 97, i * 31 % 1000)).collect();
        assert!(csv.len() > 3 * SLICE_BYTES);
        for encoding in [Encoding::Brotli, Encoding::Gzip] {
            let body = compressed(Body::from(csv.clone()), encoding, permit().unwrap());
            let mut parts = body.into_data_stream();
            let (mut sent, mut count) = (Vec::new(), 0);
            while let Some(part) = parts.next().await {
                sent.extend_from_slice(&part.unwrap());
                count += 1;
            }
            assert!(count > 3, "{encoding:?}: {count} parts for {} bytes", csv.len());
            assert_eq!(decode(encoding, &sent), csv.as_bytes(), "{encoding:?}");
        }
    }

    /// What a streaming page relies on: after each part the client can decode all of it,
    /// before the next one is rendered.
    #[test]
    fn each_part_is_decodable_before_the_next_arrives() {
        for encoding in [Encoding::Brotli, Encoding::Gzip] {
            let parts: Vec<String> =
                (0..5).map(|i| format!("<section>part {i} {}</section>", "x".repeat(i * 400))).collect();
            let mut encoder = Encoder::new(encoding);
            let (mut sent, mut plain) = (Vec::new(), String::new());
            for part in &parts {
                sent.extend_from_slice(&encoder.push(part.as_bytes()).unwrap());
                plain.push_str(part);
                // A stream cut at a flush decodes its bytes so far, then reports the missing end.
                let so_far = match encoding {
                    Encoding::Brotli => readable(brotli::Decompressor::new(sent.as_slice(), 4096)),
                    Encoding::Gzip => readable(flate2::read::GzDecoder::new(sent.as_slice())),
                };
                assert_eq!(String::from_utf8(so_far).unwrap(), plain, "{encoding:?} after {} bytes", plain.len());
            }
            sent.extend_from_slice(&encoder.finish().unwrap());
            assert_eq!(decode(encoding, &sent), plain.as_bytes(), "{encoding:?} whole stream");
        }
    }
}
