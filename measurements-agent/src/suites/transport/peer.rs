//! `measurements-agent serve`: the server end of every transport, in its own process, on this
//! node or another. One TCP port carries HTTP+JSON, gRPC and the control calls; a second TCP
//! port and two Unix sockets carry the raw-exchange floor and the framed Unix-socket transport.
//!
//! It trusts no one it cannot check: every TCP caller proves the shared peer token (a bearer
//! header on HTTP and gRPC, the token's bytes first on the raw exchange); the Unix sockets and
//! shared-memory files live in directories only this user can open, and the only files it maps
//! are ones it created there itself. Connections, buffers and attachments are capped.

use std::io::{IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use proto::transport::infer_server::{Infer, InferServer};
use proto::transport::{InferRequest, InferResponse};
use serde::{Deserialize, Serialize};

use super::os::Usage;
use super::shm;
use super::wire::{self, CLASSES, FEATURES, FRAME_HEADER};

/// Largest tensor a request may carry (16 MiB of f32; the suite sends at most 4 MiB).
pub const MAX_VALUES: usize = 4 * 1024 * 1024;
/// Largest message any transport accepts, JSON text of the largest tensor included.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// Most connections one raw listener serves at once (one thread each); more are closed.
pub const MAX_CONNECTIONS: usize = 32;
/// Most shared-memory attachments alive at once, and the most slots (threads) each.
pub const MAX_ATTACHMENTS: usize = 4;
pub const MAX_SLOTS: usize = 16;
/// How long one shared-memory attachment is served before its threads stop (a busy-polling
/// slot holds a core while it lives).
pub const MAX_ATTACH: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// What a client needs to reach the other doors of a peer (given only to token holders).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PeerInfo {
    pub hostname: String,
    /// Raw-exchange floor over TCP.
    pub exchange_port: u16,
    /// Framed tensor transport over a Unix socket (same node only).
    pub uds_path: PathBuf,
    /// Raw-exchange floor over a Unix socket (same node only).
    pub uds_exchange_path: PathBuf,
    /// CPUs this process may run on.
    pub cpus: Vec<usize>,
}

/// The shared secret of a peer and its clients: 64 hex digits.
pub const TOKEN_ENV: &str = "HEADROOM_PEER_TOKEN";

/// A new random peer token.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    hex::encode(bytes)
}

/// Equal in time independent of where the texts differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Serves until the process is killed or, with `stop_on_stdin_eof`, until its parent goes.
pub fn serve(listen: SocketAddr, token: String, cpu: Option<usize>, stop_on_stdin_eof: bool) -> anyhow::Result<()> {
    anyhow::ensure!(token.len() >= 16, "the peer token must be at least 16 characters");
    if let Some(cpu) = cpu {
        super::pin_thread(cpu)?; // inherited by every thread spawned below
    }
    let http = TcpListener::bind(listen).map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
    let exchange = TcpListener::bind(SocketAddr::new(listen.ip(), 0))?;
    // Both directories are 0700: only this user reaches the sockets and the shared files.
    let dir = tempfile::Builder::new().prefix("headroom-transport-").tempdir()?;
    let shm_dir = tempfile::Builder::new().prefix("headroom-peer-").tempdir_in(shm::shm_dir())?;
    let uds_path = dir.path().join("tensor.sock");
    let uds_exchange_path = dir.path().join("exchange.sock");
    let uds = UnixListener::bind(&uds_path)?;
    let uds_exchange = UnixListener::bind(&uds_exchange_path)?;
    let info = PeerInfo {
        hostname: crate::inventory::hostname(),
        exchange_port: exchange.local_addr()?.port(),
        uds_path,
        uds_exchange_path,
        cpus: super::allowed_cpus(),
    };
    let exchange_token = token.clone();
    accept_loop(exchange, move |mut s: TcpStream| {
        let _ = s.set_nodelay(true);
        // The token's bytes come first; anything else ends the connection unanswered.
        let mut sent = vec![0u8; exchange_token.len()];
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        s.read_exact(&mut sent)?;
        if !same(&sent, exchange_token.as_bytes()) {
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        s.set_read_timeout(None)?;
        exchange_loop(s)
    });
    accept_loop(uds_exchange, exchange_loop::<UnixStream>);
    accept_loop(uds, frame_loop);
    if stop_on_stdin_eof {
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            std::process::exit(0);
        });
    }
    let addr = http.local_addr()?;
    http.set_nonblocking(true)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        use axum::serve::ListenerExt;
        // Small answers must not wait for Nagle's algorithm and the peer's delayed ACK.
        let listener = tokio::net::TcpListener::from_std(http)?.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let grpc = InferServer::new(Peer)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let shm_path = std::sync::Arc::new(shm_dir.path().to_path_buf());
        let app = Router::new()
            .route("/v1/infer", post(infer_json))
            .route("/v1/usage", get(|| async { Json(Usage::now()) }))
            .route("/v1/info", get(move || std::future::ready(Json(info.clone()))))
            .route("/v1/shm", post(move |body: Json<shm::Attach>| attach_shm(shm_path.clone(), body)))
            .layer(DefaultBodyLimit::max(MAX_MESSAGE_BYTES))
            .merge(tonic::service::Routes::new(grpc).prepare().into_axum_router())
            .layer(axum::middleware::from_fn(move |request, next| require_token(token.clone(), request, next)));
        // The parent reads this line to learn the port.
        println!("listening on {addr}");
        let _ = std::io::stdout().flush();
        axum::serve(listener, app).await?;
        drop(dir);
        drop(shm_dir);
        anyhow::Ok(())
    })
}

/// Answers 401 to any HTTP or gRPC call without `authorization: Bearer <token>`.
async fn require_token(
    token: String,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let sent =
        request.headers().get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if sent.is_some_and(|sent| same(sent.as_bytes(), token.as_bytes())) {
        return next.run(request).await;
    }
    let grpc = request.headers().get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if grpc {
        return tonic::Status::unauthenticated("send the peer token").into_http();
    }
    (StatusCode::UNAUTHORIZED, "send the peer token as 'Authorization: Bearer …'").into_response()
}

/// One thread per connection, at most [`MAX_CONNECTIONS`] at once; more are closed at once.
fn accept_loop<L, S, H>(listener: L, handle: H)
where
    L: Incoming<S> + Send + 'static,
    S: Send + 'static,
    H: Fn(S) -> std::io::Result<()> + Clone + Send + 'static,
{
    let live = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    std::thread::spawn(move || {
        while let Ok(stream) = listener.accept_one() {
            use std::sync::atomic::Ordering;
            if live.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                live.fetch_sub(1, Ordering::AcqRel);
                drop(stream);
                continue;
            }
            let (live, handle) = (live.clone(), handle.clone());
            std::thread::spawn(move || {
                let _ = handle(stream);
                live.fetch_sub(1, Ordering::AcqRel);
            });
        }
    });
}

/// A listener of either kind.
trait Incoming<S> {
    fn accept_one(&self) -> std::io::Result<S>;
}

impl Incoming<TcpStream> for TcpListener {
    fn accept_one(&self) -> std::io::Result<TcpStream> {
        self.accept().map(|(s, _)| s)
    }
}

impl Incoming<UnixStream> for UnixListener {
    fn accept_one(&self) -> std::io::Result<UnixStream> {
        self.accept().map(|(s, _)| s)
    }
}

/// Raw exchange: `request_len: u32 LE, response_len: u32 LE`, then `request_len` bytes in and
/// `response_len` bytes back, no parsing. The floor under any framed protocol of those sizes.
fn exchange_loop<S: Read + Write>(mut stream: S) -> std::io::Result<()> {
    let mut header = [0u8; 8];
    let mut buffer = Vec::new();
    loop {
        stream.read_exact(&mut header)?;
        let request = u32::from_le_bytes(header[0..4].try_into().expect("4")) as usize;
        let response = u32::from_le_bytes(header[4..8].try_into().expect("4")) as usize;
        if request.max(response) > MAX_MESSAGE_BYTES {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "exchange larger than the limit"));
        }
        buffer.resize(request.max(response), 0);
        stream.read_exact(&mut buffer[..request])?;
        stream.write_all(&buffer[..response])?;
    }
}

/// The framed tensor transport: read a request frame into an f32 buffer, answer the logits.
fn frame_loop(mut stream: UnixStream) -> std::io::Result<()> {
    let mut header = [0u8; FRAME_HEADER];
    let mut values: Vec<f32> = Vec::new();
    let mut logits: Vec<f32> = Vec::new();
    loop {
        stream.read_exact(&mut header)?;
        let (request_id, batch, width) = wire::parse_frame_header(&header, MAX_VALUES)?;
        if width != FEATURES {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "unexpected tensor width"));
        }
        values.resize(batch * width, 0.0);
        stream.read_exact(bytemuck::cast_slice_mut(&mut values))?;
        logits.resize(batch * CLASSES, 0.0);
        wire::logits_into(&values, batch, &mut logits);
        write_frame(&mut stream, &wire::frame_header(request_id, batch, CLASSES), &logits)?;
    }
}

/// Writes a header and a body of f32 with as few system calls as the kernel allows.
pub fn write_frame<W: Write>(stream: &mut W, header: &[u8], body: &[f32]) -> std::io::Result<()> {
    let body: &[u8] = bytemuck::cast_slice(body);
    let total = header.len() + body.len();
    let mut written = 0;
    while written < total {
        let n = if written < header.len() {
            stream.write_vectored(&[IoSlice::new(&header[written..]), IoSlice::new(body)])?
        } else {
            stream.write(&body[written - header.len()..])?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n;
    }
    Ok(())
}

async fn infer_json(body: Bytes) -> Result<Json<wire::JsonResponse>, (StatusCode, String)> {
    let request: wire::JsonRequest =
        serde_json::from_slice(&body).map_err(|e| (StatusCode::BAD_REQUEST, format!("bad request: {e}")))?;
    let batch = request.batch as usize;
    if request.features as usize != FEATURES || request.values.len() != batch * FEATURES {
        return Err((StatusCode::UNPROCESSABLE_ENTITY, "values do not match batch × features".into()));
    }
    Ok(Json(wire::JsonResponse {
        request_id: request.request_id,
        batch: request.batch,
        classes: CLASSES as u32,
        logits: wire::logits(&request.values, batch),
    }))
}

/// Creates a shared file in this peer's own directory, serves its slots, and tells the client
/// where it is. The client never names a file for this process to open.
async fn attach_shm(
    dir: std::sync::Arc<PathBuf>,
    Json(attach): Json<shm::Attach>,
) -> Result<Json<shm::Layout>, (StatusCode, String)> {
    static LIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    use std::sync::atomic::Ordering;
    if attach.max_batch == 0
        || attach.max_batch * FEATURES > MAX_VALUES
        || attach.slots == 0
        || attach.slots > MAX_SLOTS
    {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("at most {MAX_SLOTS} slots of a batch up to {}", MAX_VALUES / FEATURES),
        ));
    }
    if LIVE.fetch_add(1, Ordering::AcqRel) >= MAX_ATTACHMENTS {
        LIVE.fetch_sub(1, Ordering::AcqRel);
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{MAX_ATTACHMENTS} shared-memory attachments are live already"),
        ));
    }
    let path = dir.join(format!("slots-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    let layout = shm::Layout { path, slots: attach.slots, max_batch: attach.max_batch, wait: attach.wait };
    let served = shm::create_and_serve(&layout, MAX_ATTACH);
    let threads = match served {
        Ok(threads) => threads,
        Err(e) => {
            LIVE.fetch_sub(1, Ordering::AcqRel);
            return Err((StatusCode::INTERNAL_SERVER_ERROR, format!("cannot create the shared file: {e}")));
        }
    };
    // The attachment ends when every slot thread has (the client closed it, or time ran out).
    std::thread::spawn(move || {
        for thread in threads {
            let _ = thread.join();
        }
        LIVE.fetch_sub(1, Ordering::AcqRel);
    });
    Ok(Json(layout))
}

struct Peer;

fn answer(request_id: u64, batch: usize, values: &[f32]) -> Result<tonic::Response<InferResponse>, tonic::Status> {
    if values.len() != batch * FEATURES {
        return Err(tonic::Status::invalid_argument("values do not match batch × features"));
    }
    Ok(tonic::Response::new(InferResponse {
        request_id,
        batch: batch as u32,
        classes: CLASSES as u32,
        logits: wire::logits(values, batch),
    }))
}

#[tonic::async_trait]
impl Infer for Peer {
    async fn packed(
        &self,
        request: tonic::Request<InferRequest>,
    ) -> Result<tonic::Response<InferResponse>, tonic::Status> {
        let r = request.into_inner();
        answer(r.request_id, r.batch as usize, &r.values)
    }

    async fn raw(
        &self,
        request: tonic::Request<InferRequest>,
    ) -> Result<tonic::Response<InferResponse>, tonic::Status> {
        let r = request.into_inner();
        if !r.raw.len().is_multiple_of(4) {
            return Err(tonic::Status::invalid_argument("raw is not a whole number of f32"));
        }
        // Zero-copy when the buffer happens to be aligned, one copy otherwise.
        match bytemuck::try_cast_slice::<u8, f32>(&r.raw) {
            Ok(values) => answer(r.request_id, r.batch as usize, values),
            Err(_) => answer(r.request_id, r.batch as usize, &bytemuck::pod_collect_to_vec::<u8, f32>(&r.raw)),
        }
    }
}
