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

/// Header bytes accepted in one answer; a server that sends more is not answering.
const MAX_HEAD: usize = 64 * 1024;
/// Headers parsed in one answer.
const MAX_HEADERS: usize = 64;

/// Requests to one `http://` URL over reusable connections.
pub struct Wire {
    addr: SocketAddr,
    /// Each body's whole request, headers included (the Authorization header, when set, is in
    /// these bytes: they are never printed, and `Debug` shows only the address).
    requests: Vec<Bytes>,
    idle: Mutex<Vec<TcpStream>>,
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// An answer's status and whether its connection may carry the next request.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    reusable: bool,
}

impl Wire {
    /// The client for `url`, or `None` where this client does not apply (not `http`, or the
    /// host does not resolve: the general client then names the problem; or no body).
    pub async fn new(url: &reqwest::Url, bodies: &[Bytes], authorization: Option<&[u8]>) -> Option<Wire> {
        if url.scheme() != "http" || bodies.is_empty() {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let addr =
            tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port)).await.ok()?.next()?;
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        let mut target = url.path().to_string();
        if let Some(query) = url.query() {
            target.push('?');
            target.push_str(query);
        }
        let requests = bodies.iter().map(|body| request(&target, &authority, authorization, body)).collect();
        Some(Wire { addr, requests, idle: Mutex::new(Vec::new()) })
    }

    /// Sends the `i`th body (cycled) and reads the whole answer, returning its status. A
    /// connection is reused while the server keeps it alive; one the server closed while idle
    /// is replaced once, as browsers and hyper do, since nothing of the request was answered.
    pub async fn send(&self, i: usize) -> Result<u16, Failure> {
        let request = &self.requests[i % self.requests.len()];
        let pooled = self.idle.lock().expect("the pool is never poisoned").pop();
        let (mut stream, reused) = match pooled {
            Some(stream) => (stream, true),
            None => (self.connect().await?, false),
        };
        let mut buffer = Vec::with_capacity(4096);
        let answer = match exchange(&mut stream, request, &mut buffer).await {
            Err(Exchange::Closed) if reused => {
                stream = self.connect().await?;
                buffer.clear();
                exchange(&mut stream, request, &mut buffer).await
            }
            other => other,
        };
        let answer = answer.map_err(|e| match e {
            Exchange::Closed | Exchange::Io => Failure::Io,
            Exchange::Malformed => Failure::MalformedResponse,
        })?;
        if answer.reusable {
            self.idle.lock().expect("the pool is never poisoned").push(stream);
        }
        Ok(answer.status)
    }

    async fn connect(&self) -> Result<TcpStream, Failure> {
        let stream = TcpStream::connect(self.addr).await.map_err(|_| Failure::Connect)?;
        stream.set_nodelay(true).map_err(|_| Failure::Connect)?;
        Ok(stream)
    }
}

fn request(target: &str, authority: &str, authorization: Option<&[u8]>, body: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(body.len() + 160);
    out.extend_from_slice(format!("POST {target} HTTP/1.1\r\nHost: {authority}\r\n").as_bytes());
    out.extend_from_slice(b"Content-Type: application/json\r\n");
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
    /// The connection ended before any byte of the answer.
    Closed,
    Io,
    Malformed,
}

/// Writes one request and reads its answer to the end of its body.
async fn exchange(stream: &mut TcpStream, request: &[u8], buffer: &mut Vec<u8>) -> Result<Answer, Exchange> {
    stream.write_all(request).await.map_err(|_| Exchange::Closed)?;
    read_answer(stream, buffer).await
}

/// Reads an HTTP/1.1 answer from `source` into `buffer` (which keeps only what is still to be
/// parsed): the head, then a body by Content-Length, chunked, or to the end of the connection.
async fn read_answer<R: tokio::io::AsyncRead + Unpin>(
    source: &mut R,
    buffer: &mut Vec<u8>,
) -> Result<Answer, Exchange> {
    loop {
        // How much of `buffer` is known to hold no end of the head: each byte is looked at
        // once, so a server sending its head a byte at a time costs linear time, not quadratic.
        let mut scanned = 0;
        let (head, status, length, chunked, close) = loop {
            if !ends_head(buffer, scanned) {
                if buffer.len() >= MAX_HEAD {
                    return Err(Exchange::Malformed);
                }
                scanned = buffer.len();
                let was = buffer.len();
                if fill(source, buffer).await? == 0 {
                    return Err(if was == 0 { Exchange::Closed } else { Exchange::Malformed });
                }
                continue;
            }
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(buffer) {
                Ok(httparse::Status::Complete(head)) => {
                    let status = response.code.ok_or(Exchange::Malformed)?;
                    let mut length = None;
                    let (mut chunked, mut close) = (false, response.version == Some(0));
                    for header in response.headers.iter() {
                        let value = std::str::from_utf8(header.value).map_err(|_| Exchange::Malformed)?.trim();
                        if header.name.eq_ignore_ascii_case("content-length") {
                            length = Some(value.parse::<u64>().map_err(|_| Exchange::Malformed)?);
                        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = value.to_ascii_lowercase().ends_with("chunked");
                        } else if header.name.eq_ignore_ascii_case("connection") {
                            let value = value.to_ascii_lowercase();
                            close = value.contains("close") || (close && !value.contains("keep-alive"));
                        }
                    }
                    break (head, status, length, chunked, close);
                }
                // A blank line ends every head, so a complete one that does not parse is broken.
                _ => return Err(Exchange::Malformed),
            }
        };
        buffer.drain(..head);
        // 1xx heads (100 Continue, 103 Early Hints) come before the answer itself.
        if (100..200).contains(&status) && status != 101 {
            continue;
        }
        let reusable = if status == 204 || status == 304 {
            true
        } else if chunked {
            skip_chunked(source, buffer).await?;
            true
        } else if let Some(length) = length {
            skip(source, buffer, length).await?;
            true
        } else {
            // No length: the body runs to the end of the connection.
            while fill(source, buffer).await? > 0 {
                buffer.clear();
            }
            false
        };
        return Ok(Answer { status, reusable: reusable && !close });
    }
}

/// Whether `buffer` holds a blank line (LF LF or LF CR LF) ending at or after `from`.
fn ends_head(buffer: &[u8], from: usize) -> bool {
    let start = from.saturating_sub(2);
    buffer[start.min(buffer.len())..]
        .windows(2)
        .enumerate()
        .any(|(at, w)| w == b"\n\n" || (w == b"\n\r" && buffer.get(start + at + 2) == Some(&b'\n')))
}

/// Reads more of the answer onto the end of `buffer`; 0 at the end of the connection.
async fn fill<R: tokio::io::AsyncRead + Unpin>(source: &mut R, buffer: &mut Vec<u8>) -> Result<usize, Exchange> {
    buffer.reserve(8192);
    source.read_buf(buffer).await.map_err(|_| Exchange::Io)
}

/// Drops `length` body bytes, from `buffer` first.
async fn skip<R: tokio::io::AsyncRead + Unpin>(
    source: &mut R,
    buffer: &mut Vec<u8>,
    mut length: u64,
) -> Result<(), Exchange> {
    loop {
        let have = (buffer.len() as u64).min(length);
        buffer.drain(..have as usize);
        length -= have;
        if length == 0 {
            return Ok(());
        }
        if fill(source, buffer).await? == 0 {
            return Err(Exchange::Malformed);
        }
    }
}

/// Drops a chunked body and its trailers.
async fn skip_chunked<R: tokio::io::AsyncRead + Unpin>(source: &mut R, buffer: &mut Vec<u8>) -> Result<(), Exchange> {
    loop {
        let line = read_line(source, buffer).await?;
        let size = line.split(|&b| b == b';').next().unwrap_or_default();
        let size = std::str::from_utf8(size).ok().map(str::trim).and_then(|s| u64::from_str_radix(s, 16).ok());
        match size {
            Some(0) => {
                // Trailers, up to the empty line.
                while !read_line(source, buffer).await?.is_empty() {}
                return Ok(());
            }
            Some(size) => {
                skip(source, buffer, size).await?;
                if !read_line(source, buffer).await?.is_empty() {
                    return Err(Exchange::Malformed);
                }
            }
            None => return Err(Exchange::Malformed),
        }
    }
}

/// Takes one CRLF-ended line off the front of `buffer`, reading more as needed.
async fn read_line<R: tokio::io::AsyncRead + Unpin>(source: &mut R, buffer: &mut Vec<u8>) -> Result<Vec<u8>, Exchange> {
    let mut scanned = 0usize;
    loop {
        let from = scanned.saturating_sub(1);
        if let Some(at) = buffer[from..].windows(2).position(|w| w == b"\r\n") {
            let at = at + from;
            let line = buffer[..at].to_vec();
            buffer.drain(..at + 2);
            return Ok(line);
        }
        scanned = buffer.len();
        if buffer.len() > MAX_HEAD || fill(source, buffer).await? == 0 {
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
            let mut buffer = Vec::new();
            let answer = read_answer(&mut source, &mut buffer).await;
            (answer, buffer)
        });
        let trickled = runtime.block_on(async {
            let mut source = tokio_test_reader(bytes);
            let mut buffer = Vec::new();
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
        let endless = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &vec![b'a'; MAX_HEAD + 10]].concat();
        assert_eq!(read(&endless).0, Err(Exchange::Malformed), "a head past 64 KiB is refused");
    }

    #[test]
    fn a_request_is_serialised_once_with_its_headers() {
        let r = request("/v2/models/m/infer?x=1", "10.0.0.5:8080", Some(b"Bearer s"), b"{}");
        assert_eq!(
            &r[..],
            b"POST /v2/models/m/infer?x=1 HTTP/1.1\r\nHost: 10.0.0.5:8080\r\nContent-Type: application/json\r\nAuthorization: Bearer s\r\nContent-Length: 2\r\n\r\n{}"
        );
    }

    #[test]
    fn a_connection_the_server_closed_while_idle_is_replaced_once() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            // Answers one request per connection, then closes it without saying so, as a
            // server whose keep-alive timer ran out does.
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = tokio::spawn(async move {
                for _ in 0..3 {
                    let (mut socket, _) = listener.accept().await.unwrap();
                    let mut buffer = vec![0u8; 4096];
                    let mut got = Vec::new();
                    while !got.ends_with(b"{}") {
                        let n = socket.read(&mut buffer).await.unwrap();
                        got.extend_from_slice(&buffer[..n]);
                    }
                    socket.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok").await.unwrap();
                }
            });
            let url = reqwest::Url::parse(&format!("http://127.0.0.1:{port}/infer")).unwrap();
            let wire = Wire::new(&url, &[Bytes::from_static(b"{}")], None).await.unwrap();
            for _ in 0..3 {
                assert_eq!(wire.send(0).await, Ok(201));
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            server.await.unwrap();
            let refused =
                Wire { addr: "127.0.0.1:1".parse().unwrap(), requests: vec![Bytes::new()], idle: Mutex::default() };
            assert_eq!(refused.send(0).await, Err(Failure::Connect));
            let https = reqwest::Url::parse("https://127.0.0.1/").unwrap();
            assert!(Wire::new(&https, &[], None).await.is_none(), "HTTPS stays with the general client");
        });
    }
}
