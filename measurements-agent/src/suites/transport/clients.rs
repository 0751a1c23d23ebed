//! One client per transport, each a real client of the peer's real server, each sending the
//! same tensor and checking the answer it gets back.

use std::hint::black_box;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;

use anyhow::Context;
use prost::Message;
use proto::transport::InferRequest;
use proto::transport::infer_client::InferClient;
use serde::Serialize;

use super::peer::{self, MAX_MESSAGE_BYTES};
use super::wire::{self, CLASSES, FEATURES, FRAME_HEADER, MODEL};
use super::{Peer, shm};

/// The transports, in the order they are reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Transport {
    HttpJson,
    GrpcPacked,
    GrpcBytes,
    UnixSocket,
    SharedMemorySpin,
    SharedMemoryFutex,
}

impl Transport {
    pub const ALL: [Transport; 6] = [
        Transport::HttpJson,
        Transport::GrpcPacked,
        Transport::GrpcBytes,
        Transport::UnixSocket,
        Transport::SharedMemorySpin,
        Transport::SharedMemoryFutex,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Transport::HttpJson => "http_json",
            Transport::GrpcPacked => "grpc_protobuf_packed",
            Transport::GrpcBytes => "grpc_protobuf_bytes",
            Transport::UnixSocket => "unix_socket",
            Transport::SharedMemorySpin => "shared_memory",
            Transport::SharedMemoryFutex => "shared_memory",
        }
    }

    /// For shared memory: how a waiting side wakes.
    pub fn wait(self) -> Option<shm::Wait> {
        match self {
            Transport::SharedMemorySpin => Some(shm::Wait::Spin),
            Transport::SharedMemoryFutex => Some(shm::Wait::Futex),
            _ => None,
        }
    }

    /// Why this transport cannot run against `peer`, if it cannot.
    pub fn not_applicable(self, peer: &Peer) -> Option<String> {
        let same_node_only =
            matches!(self, Transport::UnixSocket | Transport::SharedMemorySpin | Transport::SharedMemoryFutex);
        (same_node_only && !peer.local).then(|| {
            format!(
                "not applicable across nodes: {} needs both ends on one node (peer {} is {})",
                self.as_str(),
                peer.addr,
                peer.info.hostname
            )
        })
    }
}

/// One connection (or slot) doing one call at a time.
pub trait Client: Send {
    fn call(&mut self) -> anyhow::Result<()>;
}

/// Makes clients of one transport and payload for as many threads as the harness wants.
pub struct Factory<'a> {
    pub transport: Transport,
    pub peer: &'a Peer,
    pub tensor: Vec<f32>,
    shm: Option<shm::ShmClients>,
    /// Shared-memory slots no client holds now.
    free_slots: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

impl<'a> Factory<'a> {
    /// `slots` is the most clients that will exist at once (shared memory sizes its file by it).
    pub fn new(transport: Transport, peer: &'a Peer, payload_bytes: usize, slots: usize) -> anyhow::Result<Self> {
        let batch = wire::batch_for(payload_bytes);
        let shm = match transport.wait() {
            Some(wait) => {
                let layout = peer.attach_shm(&shm::Attach { slots, max_batch: batch, wait })?;
                let path = layout.path.clone();
                let clients = shm::ShmClients::open(layout)
                    .with_context(|| format!("cannot map the peer's shared memory {}", path.display()))?;
                Some(clients)
            }
            None => None,
        };
        let free_slots = std::sync::Arc::new(std::sync::Mutex::new((0..slots).rev().collect()));
        Ok(Factory { transport, peer, tensor: wire::tensor(batch), shm, free_slots })
    }

    /// A new client with its own connection (or slot).
    pub fn client(&self) -> anyhow::Result<Box<dyn Client>> {
        let tensor = self.tensor.clone();
        Ok(match self.transport {
            Transport::HttpJson => Box::new(HttpJson::connect(self.peer.addr, &self.peer.token, tensor)?),
            Transport::GrpcPacked => Box::new(Grpc::connect(self.peer.addr, &self.peer.token, tensor, false)?),
            Transport::GrpcBytes => Box::new(Grpc::connect(self.peer.addr, &self.peer.token, tensor, true)?),
            Transport::UnixSocket => Box::new(Framed::connect(&self.peer.info.uds_path, tensor)?),
            Transport::SharedMemorySpin | Transport::SharedMemoryFutex => {
                let slot = self.free_slots.lock().expect("lock").pop();
                let slot = slot.context("more shared-memory clients at once than slots")?;
                let clients = self.shm.as_ref().expect("shared memory set up");
                Box::new(SharedMemory {
                    client: clients.client(slot, &tensor),
                    id: 0,
                    slot,
                    free: self.free_slots.clone(),
                })
            }
        })
    }
}

/// Request plus response bytes of one call, without transport framing (HTTP headers,
/// HTTP/2 frames, TCP/IP headers).
pub fn wire_bytes(transport: Transport, tensor: &[f32]) -> usize {
    let batch = tensor.len() / FEATURES;
    let logits = wire::logits(tensor, batch);
    match transport {
        Transport::HttpJson => {
            json_request(tensor, 1).len()
                + serde_json::to_vec(&wire::JsonResponse {
                    request_id: 1,
                    batch: batch as u32,
                    classes: CLASSES as u32,
                    logits,
                })
                .map(|v| v.len())
                .unwrap_or(0)
        }
        Transport::GrpcPacked | Transport::GrpcBytes => {
            let raw = transport == Transport::GrpcBytes;
            // gRPC adds a 5-byte length prefix to each message.
            grpc_request(tensor, 1, raw).encoded_len()
                + 5
                + proto::transport::InferResponse {
                    request_id: 1,
                    batch: batch as u32,
                    classes: CLASSES as u32,
                    logits,
                }
                .encoded_len()
                + 5
        }
        Transport::UnixSocket => 2 * FRAME_HEADER + (tensor.len() + batch * CLASSES) * 4,
        // Request id, batch and two sequence numbers; the tensor stays where it was produced.
        Transport::SharedMemorySpin | Transport::SharedMemoryFutex => 8 + 4 + 4 + 4,
    }
}

/// Encodes a request and decodes a response the way this transport's client does, for
/// timing the serialization alone; `None` for shared memory, which serializes nothing.
#[allow(clippy::type_complexity)]
pub fn codec(
    transport: Transport,
    tensor: &[f32],
) -> Option<(Box<dyn FnMut() -> usize + '_>, Box<dyn FnMut() -> usize + '_>)> {
    let batch = tensor.len() / FEATURES;
    match transport {
        Transport::HttpJson => {
            let encoded = json_request(tensor, 1);
            Some((
                Box::new(move || black_box(json_request(tensor, 1)).len()),
                Box::new(move || {
                    serde_json::from_slice::<wire::JsonRequest>(&encoded)
                        .map(|r| black_box(r.values).len())
                        .unwrap_or(0)
                }),
            ))
        }
        Transport::GrpcPacked | Transport::GrpcBytes => {
            let raw = transport == Transport::GrpcBytes;
            let encoded = grpc_request(tensor, 1, raw).encode_to_vec();
            let encoded = prost::bytes::Bytes::from(encoded);
            Some((
                Box::new(move || black_box(grpc_request(tensor, 1, raw).encode_to_vec()).len()),
                Box::new(move || InferRequest::decode(encoded.clone()).map(|r| black_box(r).values.len()).unwrap_or(0)),
            ))
        }
        Transport::UnixSocket => {
            let mut frame = Vec::new();
            let encoded = {
                let mut f = wire::frame_header(1, batch, FEATURES).to_vec();
                f.extend_from_slice(bytemuck::cast_slice(tensor));
                f
            };
            let mut values: Vec<f32> = vec![0.0; tensor.len()];
            Some((
                Box::new(move || {
                    frame.clear();
                    frame.extend_from_slice(&wire::frame_header(1, batch, FEATURES));
                    frame.extend_from_slice(bytemuck::cast_slice(tensor));
                    black_box(&frame).len()
                }),
                // What the server does after its read: check the header, and the payload's copy
                // out of the socket buffer into the f32 tensor, done here with a memcpy.
                Box::new(move || {
                    let header: &[u8; FRAME_HEADER] = encoded[..FRAME_HEADER].try_into().expect("header");
                    let values_n = wire::parse_frame_header(header, values.len()).map(|(_, b, w)| b * w).unwrap_or(0);
                    bytemuck::cast_slice_mut::<f32, u8>(&mut values[..values_n])
                        .copy_from_slice(&encoded[FRAME_HEADER..]);
                    black_box(&values).len()
                }),
            ))
        }
        Transport::SharedMemorySpin | Transport::SharedMemoryFutex => None,
    }
}

#[derive(Serialize)]
struct JsonRequestRef<'a> {
    model: &'a str,
    request_id: u64,
    batch: u32,
    features: u32,
    values: &'a [f32],
}

fn json_request(tensor: &[f32], request_id: u64) -> Vec<u8> {
    serde_json::to_vec(&JsonRequestRef {
        model: MODEL,
        request_id,
        batch: (tensor.len() / FEATURES) as u32,
        features: FEATURES as u32,
        values: tensor,
    })
    .expect("a tensor serializes")
}

fn grpc_request(tensor: &[f32], request_id: u64, raw: bool) -> InferRequest {
    InferRequest {
        model: MODEL.into(),
        request_id,
        batch: (tensor.len() / FEATURES) as u32,
        features: FEATURES as u32,
        values: if raw { Vec::new() } else { tensor.to_vec() },
        raw: if raw { prost::bytes::Bytes::copy_from_slice(bytemuck::cast_slice(tensor)) } else { Default::default() },
    }
}

fn check_logits(request_id: u64, sent: u64, batch: usize, logits: usize) -> anyhow::Result<()> {
    anyhow::ensure!(request_id == sent, "answer to request {request_id} arrived for request {sent}");
    anyhow::ensure!(logits == batch * CLASSES, "{logits} logits for a batch of {batch}");
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// HTTP/1.1 keep-alive, JSON both ways.
struct HttpJson {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    url: String,
    tensor: Vec<f32>,
    id: u64,
}

impl HttpJson {
    fn connect(addr: SocketAddr, token: &str, tensor: Vec<f32>) -> anyhow::Result<Self> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse()?);
        let http = reqwest::Client::builder()
            .http1_only()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1)
            .default_headers(headers)
            .build()?;
        Ok(HttpJson { runtime: runtime()?, http, url: format!("http://{addr}/v1/infer"), tensor, id: 0 })
    }
}

impl Client for HttpJson {
    fn call(&mut self) -> anyhow::Result<()> {
        self.id += 1;
        let body = json_request(&self.tensor, self.id);
        let (http, url) = (&self.http, &self.url);
        let bytes = self.runtime.block_on(async move {
            let response = http.post(url).header("content-type", "application/json").body(body).send().await?;
            let status = response.status();
            let bytes = response.bytes().await?;
            anyhow::ensure!(status.is_success(), "HTTP {status}: {}", String::from_utf8_lossy(&bytes));
            anyhow::Ok(bytes)
        })?;
        let response: wire::JsonResponse = serde_json::from_slice(&bytes)?;
        check_logits(response.request_id, self.id, self.tensor.len() / FEATURES, response.logits.len())
    }
}

/// gRPC over HTTP/2, the tensor as packed floats or as bytes.
struct Grpc {
    runtime: tokio::runtime::Runtime,
    client: InferClient<tonic::transport::Channel>,
    authorization: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
    tensor: Vec<f32>,
    raw: bool,
    id: u64,
}

impl Grpc {
    fn connect(addr: SocketAddr, token: &str, tensor: Vec<f32>, raw: bool) -> anyhow::Result<Self> {
        let authorization = format!("Bearer {token}").parse()?;
        let runtime = runtime()?;
        let client = runtime.block_on(async {
            let channel =
                tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?.tcp_nodelay(true).connect().await?;
            anyhow::Ok(
                InferClient::new(channel)
                    .max_decoding_message_size(MAX_MESSAGE_BYTES)
                    .max_encoding_message_size(MAX_MESSAGE_BYTES),
            )
        })?;
        Ok(Grpc { runtime, client, authorization, tensor, raw, id: 0 })
    }
}

impl Client for Grpc {
    fn call(&mut self) -> anyhow::Result<()> {
        self.id += 1;
        let mut request = tonic::Request::new(grpc_request(&self.tensor, self.id, self.raw));
        request.metadata_mut().insert("authorization", self.authorization.clone());
        let client = &mut self.client;
        let raw = self.raw;
        let response = self
            .runtime
            .block_on(async move { if raw { client.raw(request).await } else { client.packed(request).await } })?
            .into_inner();
        check_logits(response.request_id, self.id, self.tensor.len() / FEATURES, response.logits.len())
    }
}

/// Length-prefixed binary frames over a Unix domain socket.
struct Framed {
    stream: UnixStream,
    tensor: Vec<f32>,
    /// The whole answer, header and logits, read with as few calls as the kernel allows.
    answer: Vec<u8>,
    id: u64,
}

impl Framed {
    fn connect(path: &std::path::Path, tensor: Vec<f32>) -> anyhow::Result<Self> {
        let stream = UnixStream::connect(path).with_context(|| format!("cannot connect to {}", path.display()))?;
        let answer = vec![0; FRAME_HEADER + tensor.len() / FEATURES * CLASSES * 4];
        Ok(Framed { stream, tensor, answer, id: 0 })
    }
}

impl Client for Framed {
    fn call(&mut self) -> anyhow::Result<()> {
        self.id += 1;
        let batch = self.tensor.len() / FEATURES;
        peer::write_frame(&mut self.stream, &wire::frame_header(self.id, batch, FEATURES), &self.tensor)?;
        // The answer's size is known, so it is read whole and its header checked after.
        self.stream.read_exact(&mut self.answer)?;
        let header: &[u8; FRAME_HEADER] = self.answer[..FRAME_HEADER].try_into().expect("header");
        let (id, answered, width) = wire::parse_frame_header(header, batch * CLASSES)?;
        anyhow::ensure!(width == CLASSES && answered == batch, "answer of {answered} × {width}");
        check_logits(id, self.id, batch, (self.answer.len() - FRAME_HEADER) / 4)
    }
}

struct SharedMemory {
    client: shm::ShmClient,
    id: u64,
    slot: usize,
    free: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        if let Ok(mut free) = self.free.lock() {
            free.push(self.slot);
        }
    }
}

impl Client for SharedMemory {
    fn call(&mut self) -> anyhow::Result<()> {
        self.id += 1;
        self.client.call(self.id)
    }
}

/// The raw exchange floor's client: `request` bytes out, `response` bytes back, no parsing.
pub struct Exchange<S> {
    stream: S,
    out: Vec<u8>,
    back: Vec<u8>,
}

impl Exchange<TcpStream> {
    /// Connects and proves `token` (its bytes go first), before anything is timed.
    pub fn tcp(addr: SocketAddr, token: &str, request: usize, response: usize) -> anyhow::Result<Self> {
        let mut stream = TcpStream::connect(addr).with_context(|| format!("cannot connect to {addr}"))?;
        stream.set_nodelay(true)?;
        stream.write_all(token.as_bytes())?;
        Ok(Exchange::new(stream, request, response))
    }
}

impl Exchange<UnixStream> {
    pub fn unix(path: &std::path::Path, request: usize, response: usize) -> anyhow::Result<Self> {
        let stream = UnixStream::connect(path).with_context(|| format!("cannot connect to {}", path.display()))?;
        Ok(Exchange::new(stream, request, response))
    }
}

impl<S: Read + Write> Exchange<S> {
    fn new(stream: S, request: usize, response: usize) -> Self {
        let mut out = vec![7u8; 8 + request];
        out[0..4].copy_from_slice(&(request as u32).to_le_bytes());
        out[4..8].copy_from_slice(&(response as u32).to_le_bytes());
        Exchange { stream, out, back: vec![0; response] }
    }
}

impl<S: Read + Write + Send> Client for Exchange<S> {
    fn call(&mut self) -> anyhow::Result<()> {
        self.stream.write_all(&self.out)?;
        self.stream.read_exact(&mut self.back)?;
        Ok(())
    }
}
