//! The wire formats the endpoint suite speaks, each a real client of its protocol: the Open
//! Inference Protocol over REST (`kserve-v2`: Triton, KServe, MLServer) and gRPC
//! (`kserve-v2-grpc`, in [`super::grpc`]), OpenAI-compatible
//! streaming completions (`openai-chat`, `openai-completions`, server-sent events) and a plain
//! JSON POST (`http-json`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use bytes::Bytes;
use model::plan::llm::fit::{MAX_FITTED_SLOTS, SlotsFrom};
use serde_json::{Value, json};

use super::http1::Wire;

/// Which protocol a target speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    KserveV2,
    KserveV2Grpc,
    OpenaiChat,
    OpenaiCompletions,
    HttpJson,
}

impl Protocol {
    pub const NAMES: &'static str = "kserve-v2, kserve-v2-grpc, openai-chat, openai-completions, http-json";

    pub fn parse(text: &str) -> Result<Protocol, String> {
        match text {
            "kserve-v2" => Ok(Protocol::KserveV2),
            "openai-chat" => Ok(Protocol::OpenaiChat),
            "openai-completions" => Ok(Protocol::OpenaiCompletions),
            "http-json" => Ok(Protocol::HttpJson),
            "kserve-v2-grpc" => Ok(Protocol::KserveV2Grpc),
            other => Err(format!("--protocol must be one of {}, not '{other}'", Protocol::NAMES)),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::KserveV2 => "kserve-v2",
            Protocol::KserveV2Grpc => "kserve-v2-grpc",
            Protocol::OpenaiChat => "openai-chat",
            Protocol::OpenaiCompletions => "openai-completions",
            Protocol::HttpJson => "http-json",
        }
    }

    /// Streams tokens: time to first token and inter-token gaps are measured.
    pub fn is_llm(self) -> bool {
        matches!(self, Protocol::OpenaiChat | Protocol::OpenaiCompletions)
    }
}

/// How `kserve-v2` (REST) sends tensors: as JSON numbers, or as raw bytes after a JSON header
/// (the binary tensor data extension, which Triton and KServe accept and MLServer does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TensorData {
    /// Binary where the server lists `binary_tensor_data` among its extensions (Triton does;
    /// KServe accepts it without saying so), else JSON.
    #[default]
    Auto,
    Json,
    Binary,
}

impl TensorData {
    pub fn parse(text: &str) -> Result<TensorData, String> {
        match text {
            "auto" => Ok(TensorData::Auto),
            "json" => Ok(TensorData::Json),
            "binary" => Ok(TensorData::Binary),
            other => Err(format!("--tensor-data must be auto, json or binary, not '{other}'")),
        }
    }
}

/// A target ready to load: the URL requests go to, the bodies to send (cycled) and what the
/// target said about itself.
#[derive(Clone)]
pub struct Prepared {
    pub protocol: Protocol,
    pub url: String,
    pub bodies: Vec<Bytes>,
    pub expect_status: u16,
    /// Set when the bodies are framed by the binary tensor data extension: the length of each
    /// body's JSON header (`kserve-v2` sends one body).
    pub binary_header: Option<usize>,
    /// The model's name and version as the server reported them, where it did.
    pub model: Option<String>,
    pub model_version: Option<String>,
    /// The server's software, from `/v2` (kserve-v2), `ServerMetadata` (kserve-v2-grpc) or
    /// llama.cpp's `/props` (openai-*).
    pub server: Option<String>,
    /// The most sequences an LLM server decodes at once, and who said so (openai-*).
    pub slots: Option<(u32, SlotsFrom)>,
    /// What llama.cpp's `/props` reported where `--slots` stated otherwise: said, not used.
    pub server_slots: Option<u32>,
    /// The connection requests go over (kserve-v2-grpc).
    pub channel: Option<tonic::transport::Channel>,
    /// `url` parsed, once: parsing it per request cost more than a trivial server's answer.
    parsed: std::sync::OnceLock<reqwest::Url>,
    /// The lean HTTP/1.1 client, for a plain-`http` target answering whole (see [`Wire`]).
    wire: tokio::sync::OnceCell<Option<Arc<Wire>>>,
}

impl Prepared {
    /// The target for a load lane: the same requests, with connections of the lane's own (the
    /// lean client's pool and the gRPC channel are made again, in the runtime that calls this).
    pub async fn lane(&self, client: &Client) -> anyhow::Result<Prepared> {
        let channel = match &self.channel {
            Some(_) => {
                let shown = super::public_url(&self.url).unwrap_or_else(|_| "the target".into());
                Some(super::grpc::connect(&self.url, &shown, client.timeout).await?)
            }
            None => None,
        };
        let lane = Prepared {
            protocol: self.protocol,
            url: self.url.clone(),
            bodies: self.bodies.clone(),
            expect_status: self.expect_status,
            binary_header: self.binary_header,
            model: self.model.clone(),
            model_version: self.model_version.clone(),
            server: self.server.clone(),
            slots: self.slots,
            server_slots: self.server_slots,
            channel,
            parsed: std::sync::OnceLock::new(),
            wire: tokio::sync::OnceCell::new(),
        };
        // Made now, not on the lane's first request inside the measured window; and every lane
        // takes the same client as the probe did.
        anyhow::ensure!(
            client.wire(&lane).await.is_some() == client.wire(self).await.is_some(),
            "{} resolved differently for a load lane than for the probe",
            super::public_url(&self.url).unwrap_or_else(|_| "the target".into())
        );
        Ok(lane)
    }

    /// `url`, parsed on first use (it was checked when the run began).
    fn parsed_url(&self) -> Result<&reqwest::Url, Failure> {
        if let Some(url) = self.parsed.get() {
            return Ok(url);
        }
        let url = reqwest::Url::parse(&self.url).map_err(|_| Failure::Connect)?;
        Ok(self.parsed.get_or_init(|| url))
    }
}

/// The URL as stored (no credentials, no query: either may hold a secret), and no bodies.
impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let url = super::public_url(&self.url).unwrap_or_else(|_| "the target".into());
        f.debug_struct("Prepared")
            .field("protocol", &self.protocol)
            .field("url", &url)
            .field("bodies", &self.bodies.len())
            .field("model", &self.model)
            .field("model_version", &self.model_version)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// How a request failed, as a stable label for counting.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Failure {
    Status(u16),
    /// A gRPC status code other than OK.
    Grpc(i32),
    Timeout,
    Connect,
    Io,
    MalformedStream,
    /// An HTTP answer that does not parse (a head past 64 KiB, a bad length or chunk).
    MalformedResponse,
    EmptyStream,
}

impl Failure {
    pub fn label(&self) -> String {
        match self {
            Failure::Status(code) => format!("http_{code}"),
            Failure::Grpc(code) => format!("grpc_{}", super::grpc::code_name(tonic::Code::from_i32(*code))),
            Failure::Timeout => "timeout".into(),
            Failure::Connect => "connect".into(),
            Failure::Io => "io".into(),
            Failure::MalformedStream => "malformed_stream".into(),
            Failure::MalformedResponse => "malformed_response".into(),
            Failure::EmptyStream => "empty_stream".into(),
        }
    }

    fn of(err: &reqwest::Error) -> Failure {
        if err.is_timeout() {
            Failure::Timeout
        } else if err.is_connect() {
            Failure::Connect
        } else {
            Failure::Io
        }
    }
}

/// What one streamed completion looked like.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    /// When each content-bearing event arrived.
    pub arrivals: Vec<Instant>,
    /// `usage.completion_tokens` and `usage.prompt_tokens`, when the server sent usage.
    pub usage: Option<(u64, u64)>,
}

impl Tokens {
    /// Output tokens, and whether the server's usage said so (else: content events counted).
    pub fn output(&self) -> (u64, bool) {
        match self.usage {
            Some((completion, _)) => (completion, true),
            None => (self.arrivals.len() as u64, false),
        }
    }
}

/// A load-test client of one target.
pub struct Client {
    http: reqwest::Client,
    authorization: Option<reqwest::header::HeaderValue>,
    grpc_authorization: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
    timeout: Duration,
    pool: usize,
}

impl Client {
    /// `authorization` is sent as the Authorization header on every request and never stored.
    pub fn new(timeout: Duration, pool: usize, authorization: Option<String>) -> anyhow::Result<Client> {
        let grpc_authorization = authorization.as_deref().map(super::grpc::authorization).transpose()?;
        let authorization = match authorization {
            Some(value) => {
                let mut value = reqwest::header::HeaderValue::from_str(&value)
                    .map_err(|_| anyhow::anyhow!("HEADROOM_ENDPOINT_AUTHORIZATION is not a valid header value"))?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(Client { http: general(timeout, pool)?, authorization, grpc_authorization, timeout, pool })
    }

    /// A client as this one, with a pool of its own: a load lane's, whose connections are made
    /// and served by the lane's own runtime.
    pub fn lane(&self) -> anyhow::Result<Client> {
        Ok(Client {
            http: general(self.timeout, self.pool)?,
            authorization: self.authorization.clone(),
            grpc_authorization: self.grpc_authorization.clone(),
            timeout: self.timeout,
            pool: self.pool,
        })
    }

    fn post(&self, url: reqwest::Url, body: Bytes, binary_header: Option<usize>) -> reqwest::RequestBuilder {
        let mut request = self.http.post(url).body(body);
        request = match binary_header {
            Some(length) => request
                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                .header(INFERENCE_HEADER, length),
            None => request.header(reqwest::header::CONTENT_TYPE, "application/json"),
        };
        if let Some(value) = &self.authorization {
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        request
    }

    async fn get_json(&self, url: &str) -> anyhow::Result<Value> {
        let mut request = self.http.get(url).timeout(self.timeout);
        if let Some(value) = &self.authorization {
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        // Errors name the URL without credentials or query.
        let shown = super::public_url(url).unwrap_or_else(|_| "the target".into());
        let mut response = request
            .send()
            .await
            .map_err(reqwest::Error::without_url)
            .with_context(|| format!("cannot reach {shown}"))?;
        let status = response.status();
        // Metadata is small: a megabyte is ample, and a hostile server gets no further.
        let mut body = Vec::new();
        while let Some(chunk) =
            response.chunk().await.map_err(reqwest::Error::without_url).with_context(|| format!("reading {shown}"))?
        {
            body.extend_from_slice(&chunk);
            anyhow::ensure!(body.len() <= 1 << 20, "{shown} answered more than 1 MiB of metadata");
        }
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            bail!("{shown} answered {status}: {}", excerpt(&text));
        }
        serde_json::from_str(&text).with_context(|| format!("{shown} did not answer JSON: {}", excerpt(&text)))
    }

    /// The lean client for `target`, made on first use, where it applies (see [`Wire::new`]):
    /// answers read whole (not an LLM's stream) from a plain-`http` target.
    async fn wire<'a>(&self, target: &'a Prepared) -> Option<&'a Arc<Wire>> {
        if target.protocol.is_llm() || target.channel.is_some() {
            return None;
        }
        let url = target.parsed_url().ok()?;
        let authorization = self.authorization.as_ref().map(|v| v.as_bytes());
        let made = target.wire.get_or_init(|| async {
            Wire::new(url, &target.bodies, target.binary_header, authorization).await.map(Arc::new)
        });
        made.await.as_ref()
    }

    /// Sends the `i`th of the target's bodies (cycled); `Ok` carries the streamed tokens for
    /// LLM protocols.
    pub async fn send(&self, target: &Prepared, i: usize) -> Result<Option<Tokens>, Failure> {
        let body = || target.bodies[i % target.bodies.len()].clone();
        if let Some(channel) = &target.channel {
            return super::grpc::send(channel, self.grpc_authorization.as_ref(), body()).await.map(|()| None);
        }
        let url = target.parsed_url()?;
        if let Some(wire) = self.wire(target).await {
            let status = wire.send(i).await?;
            return if status == target.expect_status { Ok(None) } else { Err(Failure::Status(status)) };
        }
        // The caller bounds the request's time (the load loops by their timeouts), so no
        // timer is armed here per request.
        let response =
            self.post(url.clone(), body(), target.binary_header).send().await.map_err(|e| Failure::of(&e))?;
        let status = response.status().as_u16();
        if !target.protocol.is_llm() {
            // Read the whole answer (the service's work includes sending it), keeping none of it.
            let mut response = response;
            while response.chunk().await.map_err(|e| Failure::of(&e))?.is_some() {}
            return if status == target.expect_status { Ok(None) } else { Err(Failure::Status(status)) };
        }
        if status != 200 {
            return Err(Failure::Status(status));
        }
        read_stream(response, target.protocol).await.map(Some)
    }
}

/// The general client (reqwest over hyper's pool), for HTTPS and streamed answers.
fn general(timeout: Duration, pool: usize) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .pool_max_idle_per_host(pool)
        .tcp_nodelay(true)
        .no_proxy()
        .http1_only()
        .build()
}

/// The binary tensor data extension's header: the length of the body's JSON part.
pub const INFERENCE_HEADER: &str = "Inference-Header-Content-Length";

/// Content events accepted in one completion (a million tokens): a stream longer than that is
/// not a completion.
const MAX_EVENTS: usize = 1 << 20;

/// Reads a server-sent-events completion to its `[DONE]`, timing each event with content.
async fn read_stream(mut response: reqwest::Response, protocol: Protocol) -> Result<Tokens, Failure> {
    let mut tokens = Tokens::default();
    let mut buffer: Vec<u8> = Vec::new();
    // How much of `buffer` is known to hold no event's end: each byte is searched once.
    let mut searched = 0;
    let mut done = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| Failure::of(&e))? {
        let now = Instant::now();
        buffer.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some((end, next)) = event_end(&buffer, searched.max(start)) {
            let event = buffer[start..end].to_vec();
            start = next;
            searched = next;
            match parse_event(&event, protocol)? {
                Event::Done => done = true,
                Event::Data { content, usage } => {
                    if content {
                        if tokens.arrivals.len() >= MAX_EVENTS {
                            return Err(Failure::MalformedStream);
                        }
                        tokens.arrivals.push(now);
                    }
                    if usage.is_some() {
                        tokens.usage = usage;
                    }
                }
                Event::Other => {}
            }
        }
        buffer.drain(..start);
        // A delimiter may straddle the next chunk: its first three bytes are searched again.
        searched = buffer.len().saturating_sub(3);
        if buffer.len() > 1 << 20 {
            return Err(Failure::MalformedStream);
        }
    }
    if !done {
        return Err(Failure::MalformedStream);
    }
    if tokens.arrivals.is_empty() {
        return Err(Failure::EmptyStream);
    }
    Ok(tokens)
}

/// Where the first event at or after `from` ends: (end of its data, start of the next), at a
/// blank line of either line ending.
fn event_end(buffer: &[u8], from: usize) -> Option<(usize, usize)> {
    (from..buffer.len()).find_map(|i| {
        let rest = &buffer[i..];
        if rest.starts_with(b"\n\n") {
            Some((i, i + 2))
        } else if rest.starts_with(b"\r\n\r\n") {
            Some((i, i + 4))
        } else {
            None
        }
    })
}

#[derive(Debug, PartialEq)]
enum Event {
    Done,
    Data { content: bool, usage: Option<(u64, u64)> },
    Other,
}

/// One SSE event: its `data:` lines joined, then `[DONE]` or a completion chunk.
fn parse_event(event: &[u8], protocol: Protocol) -> Result<Event, Failure> {
    let text = std::str::from_utf8(event).map_err(|_| Failure::MalformedStream)?;
    let data: Vec<&str> =
        text.lines().filter_map(|line| line.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect();
    if data.is_empty() {
        return Ok(Event::Other); // a comment or keep-alive
    }
    let data = data.join("\n");
    if data.trim() == "[DONE]" {
        return Ok(Event::Done);
    }
    let chunk: Value = serde_json::from_str(&data).map_err(|_| Failure::MalformedStream)?;
    if chunk.get("error").is_some() {
        return Err(Failure::MalformedStream);
    }
    let choice = chunk.get("choices").and_then(|c| c.get(0));
    let text = match protocol {
        Protocol::OpenaiChat => choice.and_then(|c| c.pointer("/delta/content")),
        _ => choice.and_then(|c| c.get("text")),
    };
    let content = text.and_then(Value::as_str).is_some_and(|t| !t.is_empty());
    let usage = chunk.get("usage").and_then(|u| {
        Some((u.get("completion_tokens")?.as_u64()?, u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0)))
    });
    Ok(Event::Data { content, usage })
}

fn excerpt(text: &str) -> String {
    let line = crate::upload::printable_within(text, 200);
    if line.is_empty() { "(empty)".into() } else { line }
}

/// Settings a target needs besides its URL.
#[derive(Debug, Clone, Default)]
pub struct TargetOptions {
    pub model: Option<String>,
    pub model_version: Option<String>,
    /// A body to send instead of the generated one (http-json: required).
    pub input: Option<Vec<u8>>,
    pub expect_status: u16,
    pub max_tokens: u32,
    /// openai-*: the most sequences the server decodes at once, where the user says.
    pub slots: Option<u32>,
    /// Prompt length in words: each prompt is drawn uniformly from this range.
    pub prompt_words: (u32, u32),
    /// kserve-v2: JSON or binary tensors.
    pub tensor_data: TensorData,
}

/// Reads what the target says about itself and builds the request bodies. Fails, naming the
/// URL, when the target cannot be reached or does not speak the protocol.
pub async fn prepare(
    client: &Client,
    base: &str,
    protocol: Protocol,
    options: &TargetOptions,
) -> anyhow::Result<Prepared> {
    let base = base.trim_end_matches('/');
    let mut prepared = Prepared {
        protocol,
        url: base.to_string(),
        bodies: Vec::new(),
        expect_status: options.expect_status,
        binary_header: None,
        model: options.model.clone(),
        model_version: options.model_version.clone(),
        server: None,
        slots: None,
        server_slots: None,
        channel: None,
        parsed: std::sync::OnceLock::new(),
        wire: tokio::sync::OnceCell::new(),
    };
    match protocol {
        Protocol::HttpJson => {
            let body = options.input.clone().context("--protocol http-json needs --input FILE (the body to POST)")?;
            prepared.bodies.push(Bytes::from(body));
        }
        Protocol::KserveV2 => {
            let name = options.model.clone().context("--protocol kserve-v2 needs --model NAME")?;
            let path = match &options.model_version {
                Some(v) => format!("/v2/models/{}/versions/{}", segment(&name), segment(v)),
                None => format!("/v2/models/{}", segment(&name)),
            };
            let mut lists_binary = false;
            if let Ok(server) = client.get_json(&format!("{base}/v2")).await {
                let s = |k: &str| server.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                prepared.server = Some(format!("{} {}", s("name"), s("version")).trim().to_string());
                lists_binary = server
                    .get("extensions")
                    .and_then(Value::as_array)
                    .is_some_and(|e| e.iter().any(|e| e.as_str() == Some("binary_tensor_data")));
            }
            let metadata = client.get_json(&format!("{base}{path}")).await?;
            prepared.model = metadata.get("name").and_then(Value::as_str).map(str::to_string).or(Some(name));
            if prepared.model_version.is_none() {
                prepared.model_version = metadata.pointer("/versions/0").and_then(Value::as_str).map(str::to_string);
            }
            let binary = match options.tensor_data {
                // A body of the user's own goes as given unless binary is asked for.
                TensorData::Auto => lists_binary && options.input.is_none(),
                TensorData::Json => false,
                TensorData::Binary => true,
            };
            let body = match (&options.input, binary) {
                (Some(body), false) => Bytes::from(body.clone()),
                (None, false) => Bytes::from(v2_request(&metadata)?.to_string()),
                (input, true) => {
                    let request = match input {
                        Some(body) => parsed_input(body)?,
                        None => v2_request(&metadata)?,
                    };
                    let (body, json_length) = super::tensors::binary_body(&request)?;
                    prepared.binary_header = Some(json_length);
                    body
                }
            };
            prepared.bodies.push(body);
            prepared.url = format!("{base}{path}/infer");
        }
        Protocol::KserveV2Grpc => {
            let name = options.model.clone().context("--protocol kserve-v2-grpc needs --model NAME")?;
            let shown = super::public_url(base).unwrap_or_else(|_| "the target".into());
            let channel = super::grpc::connect(base, &shown, client.timeout).await?;
            let auth = client.grpc_authorization.as_ref();
            let version = options.model_version.as_deref();
            let (server, metadata) = super::grpc::metadata(&channel, auth, &shown, &name, version).await?;
            prepared.server = server;
            prepared.model = metadata
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .or(Some(name));
            if prepared.model_version.is_none() {
                prepared.model_version = metadata.pointer("/versions/0").and_then(Value::as_str).map(str::to_string);
            }
            let request = match &options.input {
                Some(body) => parsed_input(body)?,
                None => v2_request(&metadata)?,
            };
            let model = prepared.model.as_deref().unwrap_or_default();
            prepared.bodies.push(super::grpc::infer_request(model, options.model_version.as_deref(), &request)?);
            prepared.channel = Some(channel);
        }
        Protocol::OpenaiChat | Protocol::OpenaiCompletions => {
            let model = match &options.model {
                Some(model) => model.clone(),
                None => {
                    let models = client.get_json(&format!("{base}/v1/models")).await?;
                    models
                        .pointer("/data/0/id")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .context("the server's /v1/models lists no model; pass --model NAME")?
                }
            };
            prepared.model = Some(model.clone());
            prepared.slots = options.slots.map(|n| (n, SlotsFrom::Stated));
            // llama.cpp's server says how many sequences it decodes at once, and its build; other
            // servers answer 404 (or anything), which leaves the slots unknown, not the run failed.
            // A few seconds at most: the load test is what the user asked for.
            let props = tokio::time::timeout(Duration::from_secs(5), client.get_json(&format!("{base}/props"))).await;
            if let Ok(Ok(props)) = props {
                let reported = props.get("total_slots").and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok());
                match prepared.slots {
                    None => {
                        prepared.slots =
                            reported.filter(|n| (1..=MAX_FITTED_SLOTS).contains(n)).map(|n| (n, SlotsFrom::Server))
                    }
                    Some((stated, _)) => prepared.server_slots = reported.filter(|&n| n != stated),
                }
                if let Some(build) = props.get("build_info").and_then(Value::as_str).filter(|_| reported.is_some()) {
                    prepared.server = Some(format!("llama.cpp {build}"));
                }
            }
            let chat = protocol == Protocol::OpenaiChat;
            prepared.url = format!("{base}{}", if chat { "/v1/chat/completions" } else { "/v1/completions" });
            prepared.bodies = match &options.input {
                Some(body) => vec![Bytes::from(body.clone())],
                None => super::prompts::prompts(options.prompt_words, 64)
                    .into_iter()
                    .map(|prompt| {
                        let mut body = json!({
                            "model": model,
                            "max_tokens": options.max_tokens,
                            "stream": true,
                            "stream_options": {"include_usage": true},
                        });
                        if chat {
                            body["messages"] = json!([{"role": "user", "content": prompt}]);
                        } else {
                            body["prompt"] = json!(prompt);
                        }
                        Bytes::from(body.to_string())
                    })
                    .collect(),
            };
        }
    }
    Ok(prepared)
}

/// The most of `--input` re-encoded as raw tensors (gRPC, or REST's binary extension): parsed
/// into JSON values first, a body takes about twenty times its size in memory.
const MAX_REENCODED_INPUT: usize = 16 << 20;

/// `--input` as a V2 inference request, to be sent as raw tensors.
fn parsed_input(body: &[u8]) -> anyhow::Result<Value> {
    anyhow::ensure!(
        body.len() <= MAX_REENCODED_INPUT,
        "--input is over 16 MiB: send it as JSON over REST (kserve-v2 with --tensor-data json), or make it smaller"
    );
    serde_json::from_slice(body).context("--input is not a V2 inference request in JSON")
}

/// A path segment with the characters a model name may hold percent-encoded.
fn segment(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An inference request with every input the model's metadata lists, variable dimensions set
/// to 1 and deterministic values of the input's datatype.
pub fn v2_request(metadata: &Value) -> anyhow::Result<Value> {
    let inputs = metadata.get("inputs").and_then(Value::as_array).filter(|i| !i.is_empty()).context(
        "the model's metadata lists no inputs (the server was not told its signature); pass --input FILE with a V2 \
         inference request",
    )?;
    let mut tensors = Vec::new();
    let mut total = 0i64;
    for input in inputs.iter().take(1024) {
        let name = input.get("name").and_then(Value::as_str).context("a metadata input has no name")?;
        anyhow::ensure!(name.len() <= 256, "a metadata input's name is over 256 bytes");
        let datatype = input.get("datatype").and_then(Value::as_str).context("a metadata input has no datatype")?;
        let shape: Vec<i64> = input
            .get("shape")
            .and_then(Value::as_array)
            .context("a metadata input has no shape")?
            .iter()
            .map(|d| d.as_i64().map(|d| if d < 0 { 1 } else { d }))
            .collect::<Option<_>>()
            .context("a metadata shape is not a list of integers")?;
        let count = shape.iter().try_fold(1i64, |n, d| n.checked_mul(*d)).unwrap_or(i64::MAX);
        total = total.saturating_add(count);
        anyhow::ensure!(
            (0..=1 << 20).contains(&count) && total <= 1 << 20,
            "the model's inputs hold more than a million elements at batch 1: pass --input FILE"
        );
        let data: Vec<Value> = (0..count)
            .map(|i| match datatype {
                "BOOL" => json!(i % 2 == 0),
                "BYTES" => json!("headroom"),
                "FP16" | "FP32" | "FP64" | "BF16" => json!(((i * 7919) % 17) as f64),
                _ => json!((i * 7919) % 17),
            })
            .collect();
        tensors.push(json!({"name": name, "shape": shape, "datatype": datatype, "data": data}));
    }
    Ok(json!({ "inputs": tensors }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prepared_target_prints_no_credentials_query_or_body() {
        let prepared = Prepared {
            protocol: Protocol::HttpJson,
            url: "http://user:hunter2@10.0.0.5:8080/infer?api_key=sk-secret".into(),
            bodies: vec![Bytes::from_static(b"{\"token\": \"body-secret\"}")],
            expect_status: 200,
            binary_header: None,
            model: None,
            model_version: None,
            server: None,
            slots: None,
            server_slots: None,
            channel: None,
            parsed: std::sync::OnceLock::new(),
            wire: tokio::sync::OnceCell::new(),
        };
        let shown = format!("{prepared:?}");
        assert!(shown.contains("http://10.0.0.5:8080/infer"), "{shown}");
        for secret in ["hunter2", "sk-secret", "body-secret", "user"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }

    #[test]
    fn sse_events_split_on_either_line_ending_and_parse() {
        let stream = b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n: keep-alive\n\ndata: [DONE]\n\n";
        let (end, next) = event_end(stream, 0).unwrap();
        assert_eq!(parse_event(&stream[..end], Protocol::OpenaiChat), Ok(Event::Data { content: true, usage: None }));
        let (end2, next2) = event_end(stream, next).unwrap();
        assert_eq!(parse_event(&stream[next..end2], Protocol::OpenaiChat), Ok(Event::Other));
        let (end3, _) = event_end(stream, next2).unwrap();
        assert_eq!(parse_event(&stream[next2..end3], Protocol::OpenaiChat), Ok(Event::Done));
        assert_eq!(event_end(b"data: x\n", 0), None, "no blank line yet");
        let usage = br#"data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":30}}"#;
        assert_eq!(
            parse_event(usage, Protocol::OpenaiCompletions),
            Ok(Event::Data { content: false, usage: Some((30, 12)) })
        );
        assert_eq!(parse_event(b"data: {not json", Protocol::OpenaiChat), Err(Failure::MalformedStream));
    }

    #[test]
    fn v2_requests_follow_the_metadata() {
        let metadata = json!({"name": "digits", "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 64]}]});
        let request = v2_request(&metadata).unwrap();
        assert_eq!(request.pointer("/inputs/0/shape"), Some(&json!([1, 64])));
        assert_eq!(request.pointer("/inputs/0/data").and_then(Value::as_array).map(Vec::len), Some(64));
        let err = v2_request(&json!({"name": "digits", "inputs": []})).unwrap_err().to_string();
        assert!(err.contains("--input FILE"), "{err}");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }
}
