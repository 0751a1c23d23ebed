//! A lean HTTP/1.1 client for plain-`http` targets whose answers are read whole (`http-json`,
//! `kserve-v2` over REST), built as `wrk` is: each request serialised once, then written as one
//! buffer, the answer parsed with `httparse` and its body read and dropped, on connections kept
//! alive and reused, all in the task that waits for the answer.
//!
//! It exists because the general client (reqwest over hyper's pool) cost about three times
//! `wrk`'s CPU per request against a trivial server and two wake-ups across threads per request
//! (`measurements-agent/scripts/endpoint_bench.sh`, section 3): a load tester's own cost is a
//! ceiling on what it can measure. HTTPS and streamed (LLM) answers stay with the general client.

use std::net::SocketAddr;
use std::sync::Mutex;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::protocol::Failure;

/// Header bytes accepted in one answer (and trailer bytes after a chunked body); a server that
/// sends more is not answering.
const MAX_HEAD: usize = 64 * 1024;
/// Headers parsed in one answer (hyper's limit).
const MAX_HEADERS: usize = 100;
/// Interim (1xx) heads accepted before an answer.
const MAX_INTERIM: usize = 8;

/// Requests to one `http://` URL over reusable connections.
pub struct Wire {
    /// Every address the host resolved to, tried in order (as the general client does).
    addrs: Vec<SocketAddr>,
    /// Each body's whole request, headers included (the Authorization header, when set, is in
    /// these bytes: they are never printed, and `Debug` shows only the addresses).
    requests: Vec<Bytes>,
    idle: Mutex<Vec<TcpStream>>,
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire").field("addrs", &self.addrs).finish_non_exhaustive()
    }
}

/// An answer's status and whether its connection may carry the next request.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    reusable: bool,
}

impl Wire {
    /// The client for `url`, or `None` where this client does not apply, and the general client
    /// serves it: not `http`, credentials in the URL (sent as Basic auth by the general client),
    /// a host that does not resolve (the general client then names the problem), or no body.
    pub async fn new(
        url: &reqwest::Url,
        bodies: &[Bytes],
        binary_header: Option<usize>,
        authorization: Option<&[u8]>,
    ) -> Option<Wire> {
        if url.scheme() != "http" || bodies.is_empty() || !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port)).await.ok()?.collect();
        if addrs.is_empty() {
            return None;
        }
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        let mut target = url.path().to_string();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let requests =
            bodies.iter().map(|body| request(&target, &authority, binary_header, authorization, body)).collect();
        Some(Wire { addrs, requests, idle: Mutex::new(Vec::new()) })
    }

    /// Sends the `i`th body (cycled) and reads the whole answer, returning its status.
    ///
    /// A connection is reused while the server keeps it alive and left nothing unread. One
    /// taken from the pool is looked at first: closed by the server while idle, or holding bytes
    /// no request asked for, it is replaced before anything is written. Should the server close
    /// it in the moment between that look and the write, the request is sent once more on a new
    /// connection, but only when the write failed or not one byte came back; a server that
    /// answered anything, or took the request and then closed, is counted as failing.
    pub async fn send(&self, i: usize) -> Result<u16, Failure> {
        let request = &self.requests[i % self.requests.len()];
        let (mut stream, reused) = match self.pooled() {
            Some(stream) => (stream, true),
            None => (self.connect().await?, false),
        };
        let mut buffer = Buffer::default();
        let answer = match exchange(&mut stream, request, &mut buffer).await {
            Err(Exchange::Closed) if reused => {
                stream = self.connect().await?;
                buffer = Buffer::default();
                exchange(&mut stream, request, &mut buffer).await
            }
            other => other,
        };
        let answer = answer.map_err(|e| match e {
            Exchange::Closed | Exchange::Io => Failure::Io,
            Exchange::Malformed => Failure::MalformedResponse,
        })?;
        // Bytes past the answer's end would be taken for the next answer's start.
        if answer.reusable && buffer.is_empty() {
            self.idle.lock().expect("the pool is never poisoned").push(stream);
        }
        Ok(answer.status)
    }

    /// An idle connection that is still open and quiet.
    fn pooled(&self) -> Option<TcpStream> {
        loop {
            let stream = self.idle.lock().expect("the pool is never poisoned").pop()?;
            match stream.try_read(&mut [0u8; 1]) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Some(stream),
                // Closed (Ok(0)), unsolicited bytes, or an error: dropped.
                _ => continue,
            }
        }
    }

    async fn connect(&self) -> Result<TcpStream, Failure> {
        let stream = TcpStream::connect(&self.addrs[..]).await.map_err(|_| Failure::Connect)?;
        stream.set_nodelay(true).map_err(|_| Failure::Connect)?;
        Ok(stream)
    }
}

fn request(
    target: &str,
    authority: &str,
    binary_header: Option<usize>,
    authorization: Option<&[u8]>,
    body: &[u8],
) -> Bytes {
    let mut out = Vec::with_capacity(body.len() + 200);
    out.extend_from_slice(format!("POST {target} HTTP/1.1\r\nHost: {authority}\r\n").as_bytes());
    match binary_header {
        Some(length) => out.extend_from_slice(
            format!("Content-Type: application/octet-stream\r\n{}: {length}\r\n", super::protocol::INFERENCE_HEADER)
                .as_bytes(),
        ),
        None => out.extend_from_slice(b"Content-Type: application/json\r\n"),
    }
    if let Some(value) = authorization {
        out.extend_from_slice(b"Authorization: ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    Bytes::from(out)
}

#[derive(Debug, PartialEq, Eq)]
enum Exchange {
    /// The write failed, or the connection ended before one byte of an answer.
    Closed,
    Io,
    Malformed,
}

/// What has been read of an answer and not yet consumed: consuming moves a cursor, and the
/// consumed bytes are dropped only before the next read, so each byte is copied at most once
/// however small the pieces a server sends.
#[derive(Default)]
struct Buffer {
    data: Vec<u8>,
    at: usize,
    /// Whether any byte of an answer arrived (a server that sent one did take the request).
    received: bool,
}

impl Buffer {
    fn rest(&self) -> &[u8] {
        &self.data[self.at..]
    }

    fn consume(&mut self, n: usize) {
        self.at = self.at.saturating_add(n).min(self.data.len());
    }

    fn is_empty(&self) -> bool {
        self.at == self.data.len()
    }

    /// Reads more onto the end; 0 at the end of the connection.
    async fn fill<R: tokio::io::AsyncRead + Unpin>(&mut self, source: &mut R) -> Result<usize, Exchange> {
        if self.at > 0 {
            self.data.drain(..self.at);
            self.at = 0;
        }
        self.data.reserve(8192);
        let n = source.read_buf(&mut self.data).await.map_err(|_| Exchange::Io)?;
        self.received |= n > 0;
        Ok(n)
    }
}

/// Writes one request and reads its answer to the end of its body.
async fn exchange(stream: &mut TcpStream, request: &[u8], buffer: &mut Buffer) -> Result<Answer, Exchange> {
    stream.write_all(request).await.map_err(|_| Exchange::Closed)?;
    read_answer(stream, buffer).await
}

/// How an answer's head says its body is framed (RFC 9112 §6).
struct Head {
    /// Bytes of the head itself.
    len: usize,
    status: u16,
    length: Option<u64>,
    /// Transfer-Encoding was present; `chunked` when its last coding is chunked.
    encoded: bool,
    chunked: bool,
    close: bool,
    http10: bool,
}

fn parse_head(bytes: &[u8]) -> Result<Option<Head>, Exchange> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(Exchange::Malformed),
    };
    let http10 = response.version == Some(0);
    let mut head = Head {
        len,
        status: response.code.ok_or(Exchange::Malformed)?,
        length: None,
        encoded: false,
        chunked: false,
        close: false,
        http10,
    };
    let (mut keep_alive, mut close) = (false, false);
    for header in response.headers.iter() {
        let tokens = || header.value.split(|&b| b == b',').map(|t| t.trim_ascii());
        if header.name.eq_ignore_ascii_case("content-length") {
            let value = header.value.trim_ascii();
            if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
                return Err(Exchange::Malformed);
            }
            let value =
                std::str::from_utf8(value).ok().and_then(|v| v.parse::<u64>().ok()).ok_or(Exchange::Malformed)?;
            // Two lengths that disagree frame nothing (RFC 9112 §6.3, item 5).
            if head.length.is_some_and(|l| l != value) {
                return Err(Exchange::Malformed);
            }
            head.length = Some(value);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            head.encoded = true;
            head.chunked = tokens().rfind(|t| !t.is_empty()).is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"));
        } else if header.name.eq_ignore_ascii_case("connection") {
            for token in tokens() {
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep_alive = true;
                }
            }
        }
    }
    // A close anywhere stands; keep-alive only lifts HTTP/1.0's default.
    head.close = close || (http10 && !keep_alive);
    Ok(Some(head))
}

/// Reads an HTTP/1.1 answer from `source` through `buffer`: interim heads, the head, then a body
/// by Content-Length, chunked, or to the end of the connection.
async fn read_answer<R: tokio::io::AsyncRead + Unpin>(source: &mut R, buffer: &mut Buffer) -> Result<Answer, Exchange> {
    for _ in 0..=MAX_INTERIM {
        // How much of the buffer is known to hold no end of the head: each byte is looked at
        // once, so a server sending its head a byte at a time costs linear time, not quadratic.
        let mut scanned = 0;
        let head = loop {
            if ends_head(buffer.rest(), scanned) {
                if let Some(head) = parse_head(buffer.rest())? {
                    break head;
                }
                // A blank line ends every head, so a complete one that does not parse is broken.
                return Err(Exchange::Malformed);
            }
            if buffer.rest().len() >= MAX_HEAD {
                return Err(Exchange::Malformed);
            }
            scanned = buffer.rest().len();
            if buffer.fill(source).await? == 0 {
                return Err(if buffer.received { Exchange::Malformed } else { Exchange::Closed });
            }
        };
        buffer.consume(head.len);
        match head.status {
            // Nothing here asks to switch protocols.
            101 => return Err(Exchange::Malformed),
            // 100 Continue, 103 Early Hints: the answer itself comes after.
            100..=199 => continue,
            _ => {}
        }
        let reusable = if head.status == 204 || head.status == 304 {
            true
        } else if head.chunked {
            skip_chunked(source, buffer).await?;
            // Both framings at once, or an encoding on HTTP/1.0: answered, but not trusted again.
            head.length.is_none() && !head.http10
        } else if let (Some(length), false) = (head.length, head.encoded) {
            skip(source, buffer, length).await?;
            true
        } else {
            // No length, or an encoding that is not chunked: the body runs to the end.
            buffer.consume(usize::MAX);
            while buffer.fill(source).await? > 0 {
                buffer.consume(usize::MAX);
            }
            false
        };
        return Ok(Answer { status: head.status, reusable: reusable && !head.close });
    }
    Err(Exchange::Malformed)
}

/// Whether `bytes` holds a blank line (LF LF or LF CR LF) ending at or after `from`.
fn ends_head(bytes: &[u8], from: usize) -> bool {
    let start = from.saturating_sub(2).min(bytes.len());
    bytes[start..]
        .windows(2)
        .enumerate()
        .any(|(at, w)| w == b"\n\n" || (w == b"\n\r" && bytes.get(start + at + 2) == Some(&b'\n')))
}

/// Drops `length` body bytes, from `buffer` first.
async fn skip<R: tokio::io::AsyncRead + Unpin>(
    source: &mut R,
    buffer: &mut Buffer,
    mut length: u64,
) -> Result<(), Exchange> {
    loop {
        let have = (buffer.rest().len() as u64).min(length);
        buffer.consume(have as usize);
        length -= have;
        if length == 0 {
            return Ok(());
        }
        if buffer.fill(source).await? == 0 {
            return Err(Exchange::Malformed);
        }
    }
}

/// Drops a chunked body and its trailers (at most [`MAX_HEAD`] bytes of them).
async fn skip_chunked<R: tokio::io::AsyncRead + Unpin>(source: &mut R, buffer: &mut Buffer) -> Result<(), Exchange> {
    loop {
        let size = {
            let line = read_line(source, buffer).await?;
            let size = line.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
            let hex = !size.is_empty() && size.len() <= 16 && size.iter().all(u8::is_ascii_hexdigit);
            let size = std::str::from_utf8(size).ok().filter(|_| hex).and_then(|s| u64::from_str_radix(s, 16).ok());
            size.ok_or(Exchange::Malformed)?
        };
        if size == 0 {
            let mut trailers = 0;
            loop {
                let line = read_line(source, buffer).await?;
                if line.is_empty() {
                    return Ok(());
                }
                trailers += line.len() + 2;
                if trailers > MAX_HEAD {
                    return Err(Exchange::Malformed);
                }
            }
        }
        skip(source, buffer, size).await?;
        if !read_line(source, buffer).await?.is_empty() {
            return Err(Exchange::Malformed);
        }
    }
}

/// Takes one CRLF-ended line off the front of `buffer` (without its CRLF), reading more as
/// needed; a line longer than [`MAX_HEAD`] is malformed.
async fn read_line<'b, R: tokio::io::AsyncRead + Unpin>(
    source: &mut R,
    buffer: &'b mut Buffer,
) -> Result<&'b [u8], Exchange> {
    let mut scanned = 0usize;
    loop {
        let from = scanned.saturating_sub(1);
        if let Some(at) = buffer.rest()[from..].windows(2).position(|w| w == b"\r\n") {
            let at = at + from;
            let start = buffer.at;
            buffer.consume(at + 2);
            return Ok(&buffer.data[start..start + at]);
        }
        scanned = buffer.rest().len();
        if scanned > MAX_HEAD || buffer.fill(source).await? == 0 {
            return Err(Exchange::Malformed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> (Result<Answer, Exchange>, Vec<u8>) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        // One byte at a time as well as whole: every read boundary is exercised.
        let whole = runtime.block_on(async {
            let mut source = bytes;
            let mut buffer = Buffer::default();
            let answer = read_answer(&mut source, &mut buffer).await;
            (answer, buffer.rest().to_vec())
        });
        let trickled = runtime.block_on(async {
            let mut source = tokio_test_reader(bytes);
            let mut buffer = Buffer::default();
            read_answer(&mut source, &mut buffer).await
        });
        assert_eq!(whole.0, trickled, "read whole and byte by byte alike");
        whole
    }

    /// A reader that gives one byte per read.
    fn tokio_test_reader(bytes: &[u8]) -> impl tokio::io::AsyncRead + Unpin + '_ {
        struct Trickle<'a>(&'a [u8]);
        impl tokio::io::AsyncRead for Trickle<'_> {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                if let Some((&first, rest)) = self.0.split_first() {
                    buf.put_slice(&[first]);
                    self.0 = rest;
                }
                std::task::Poll::Ready(Ok(()))
            }
        }
        Trickle(bytes)
    }

    #[test]
    fn answers_by_length_chunked_and_to_the_end_of_the_connection() {
        let (answer, rest) = read(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1");
        assert_eq!(answer, Ok(Answer { status: 200, reusable: true }));
        assert_eq!(rest, b"HTTP/1.1", "the next answer's bytes stay");
        let chunked = b"HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(read(chunked).0, Ok(Answer { status: 503, reusable: true }));
        let to_end = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        assert_eq!(read(to_end).0, Ok(Answer { status: 200, reusable: false }));
        let close = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(read(close).0, Ok(Answer { status: 200, reusable: false }));
        let old = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(read(old).0, Ok(Answer { status: 200, reusable: false }));
        let kept = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(read(kept).0, Ok(Answer { status: 200, reusable: true }));
        let early = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(read(early).0, Ok(Answer { status: 204, reusable: true }));
        // A close anywhere among the tokens stands; keep-alive lifts only HTTP/1.0's default.
        let both = b"HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(read(both).0, Ok(Answer { status: 200, reusable: false }));
        let listed = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(read(listed).0, Ok(Answer { status: 200, reusable: false }));
        // Chunked with a length too: framed by the chunks, and the connection not trusted again.
        let framed_twice =
            b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        assert_eq!(read(framed_twice), (Ok(Answer { status: 200, reusable: false }), Vec::new()));
        // An encoding that is not chunked runs to the end, whatever length it gives.
        let gzip = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 1\r\n\r\nabc";
        assert_eq!(read(gzip), (Ok(Answer { status: 200, reusable: false }), Vec::new()));
        // Header values that are not UTF-8 are legal (obs-text) and are not read.
        let latin1 = b"HTTP/1.1 200 OK\r\nServer: caf\xe9\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(read(latin1).0, Ok(Answer { status: 200, reusable: true }));
    }

    #[test]
    fn a_broken_answer_is_malformed_and_silence_is_a_closed_connection() {
        assert_eq!(read(b"").0, Err(Exchange::Closed));
        assert_eq!(read(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").0, Err(Exchange::Malformed));
        assert_eq!(read(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").0, Err(Exchange::Malformed));
        assert_eq!(read(b"SSH-2.0-OpenSSH_9.2\r\n").0, Err(Exchange::Malformed));
        assert_eq!(read(b"HTTP/1.1 200 OK\r\nContent-").0, Err(Exchange::Malformed));
        let bad_chunk = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(read(bad_chunk).0, Err(Exchange::Malformed));
        let signed = b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok";
        assert_eq!(read(signed).0, Err(Exchange::Malformed));
        let disagree = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(read(disagree).0, Err(Exchange::Malformed), "two lengths that disagree frame nothing");
        let upgrade = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n";
        assert_eq!(read(upgrade).0, Err(Exchange::Malformed));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM + 1);
        assert_eq!(read(&interim).0, Err(Exchange::Malformed), "interim heads are bounded");
        // A 1xx then silence: the server took the request, so it is not retried as closed.
        assert_eq!(read(b"HTTP/1.1 100 Continue\r\n\r\n").0, Err(Exchange::Malformed));
        // A thousand one-byte chunks: consumed in linear time (a cursor, not a copy per chunk).
        let chunks = b"1\r\nx\r\n".repeat(1000);
        let tiny =
            [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".as_slice(), &chunks, b"0\r\n\r\n"].concat();
        assert_eq!(read(&tiny).0, Ok(Answer { status: 200, reusable: true }));
        let endless = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &vec![b'a'; MAX_HEAD + 10]].concat();
        assert_eq!(read(&endless).0, Err(Exchange::Malformed), "a head past 64 KiB is refused");
    }

    #[test]
    fn a_request_is_serialised_once_with_its_headers() {
        let r = request("/v2/models/m/infer?x=1", "10.0.0.5:8080", None, Some(b"Bearer s"), b"{}");
        assert_eq!(
            &r[..],
            b"POST /v2/models/m/infer?x=1 HTTP/1.1\r\nHost: 10.0.0.5:8080\r\nContent-Type: application/json\r\nAuthorization: Bearer s\r\nContent-Length: 2\r\n\r\n{}"
        );
        let binary = request("/infer", "h", Some(2), None, b"{}\x01\x02");
        assert_eq!(
            &binary[..],
            b"POST /infer HTTP/1.1\r\nHost: h\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: 2\r\nContent-Length: 4\r\n\r\n{}\x01\x02"
        );
    }

    #[test]
    fn a_connection_closed_while_idle_or_left_with_unread_bytes_is_not_reused() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            // The first connection is closed after its answer without a word, as a server whose
            // keep-alive timer ran out does; the second answers with a byte past its length and
            // stays open, not reading; the third is well behaved.
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = tokio::spawn(async move {
                let mut held = Vec::new();
                for n in 0..3 {
                    let (mut socket, _) = listener.accept().await.unwrap();
                    let mut buffer = vec![0u8; 4096];
                    let mut got = Vec::new();
                    while !got.ends_with(b"{}") {
                        let read = socket.read(&mut buffer).await.unwrap();
                        got.extend_from_slice(&buffer[..read]);
                    }
                    let extra = if n == 1 { "X" } else { "" };
                    let answer = format!("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok{extra}");
                    socket.write_all(answer.as_bytes()).await.unwrap();
                    if n == 1 {
                        held.push(socket);
                    }
                }
                held
            });
            let url = reqwest::Url::parse(&format!("http://localhost:{port}/infer")).unwrap();
            let wire = Wire::new(&url, &[Bytes::from_static(b"{}")], None, None).await.unwrap();
            for _ in 0..3 {
                let sent = tokio::time::timeout(std::time::Duration::from_secs(5), wire.send(0)).await;
                assert_eq!(sent, Ok(Ok(201)), "a reused bad connection would wait here");
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            drop(server.await.unwrap());
            let refused = Wire {
                addrs: vec!["127.0.0.1:1".parse().unwrap()],
                requests: vec![Bytes::new()],
                idle: Mutex::default(),
            };
            assert_eq!(refused.send(0).await, Err(Failure::Connect));
            let https = reqwest::Url::parse("https://127.0.0.1/").unwrap();
            assert!(Wire::new(&https, &[], None, None).await.is_none(), "HTTPS stays with the general client");
        });
    }
}
