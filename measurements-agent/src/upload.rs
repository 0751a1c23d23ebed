//! Sends spooled runs: gRPC first, HTTP+JSON when gRPC cannot get through, with exponential
//! backoff. A run leaves the spool only after the server acknowledged it.

use std::time::Duration;

use model::{IngestAck, RunUpload};
use proto::codec::REFUSAL_KEY;
use proto::pb::ingest_client::IngestClient;
use tonic::Code;

use crate::spool::Spool;

/// Where and how to upload.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port` of the Headroom server.
    pub server: String,
    pub token: String,
    /// Attempts per run before it is left in the spool for next time.
    pub attempts: u32,
    pub first_backoff: Duration,
    /// A PEM CA certificate to trust besides the public roots (a private CA or a self-signed
    /// server); used for `https://` servers.
    pub ca_pem: Option<Vec<u8>>,
}

/// What became of one attempt.
#[derive(Debug)]
enum Attempt {
    /// Stored by the server, through the named door.
    Acked(IngestAck, &'static str),
    /// The server refused this run's content; retrying cannot help.
    Refused(String),
    /// Our credentials or set-up (token, URL, CA) are wrong; retrying cannot help, but the run
    /// is fine and stays in the spool.
    Blocked(String),
    /// Worth trying again later; no sooner than the server asked, if it did.
    Transient(String),
}

/// The most of an error answer the agent reads and prints.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The longest wait a server's `Retry-After` can impose on one attempt.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// What a flush of the spool did.
#[derive(Debug, Default)]
pub struct Report {
    pub acked: Vec<IngestAck>,
    pub rejected: Vec<(String, String)>,
    /// Runs still in the spool, and the last reason.
    pub kept: Vec<(String, String)>,
}

/// Uploads every pending run, oldest first. Stops early on a credentials problem.
pub async fn flush(spool: &Spool, target: &Target, log: &mut dyn FnMut(&str)) -> anyhow::Result<Report> {
    let mut report = Report::default();
    let pending = spool.pending()?;
    for (index, path) in pending.iter().enumerate() {
        let name = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        let run = match Spool::load(path) {
            Ok(run) => run,
            Err(err) => {
                spool.reject(path, &format!("{err:#}"))?;
                report.rejected.push((name, format!("{err:#}")));
                continue;
            }
        };
        match send_with_retries(&run, target, log).await {
            Attempt::Acked(ack, door) => {
                spool.remove(path)?;
                let verb = if ack.duplicate { "already stored" } else { "stored" };
                log(&format!(
                    "uploaded run {} over {door} ({verb}, {} measurements)",
                    ack.run_id, ack.measurements_stored
                ));
                report.acked.push(ack);
            }
            Attempt::Refused(reason) => {
                let moved = spool.reject(path, &reason)?;
                log(&format!("server refused run {name}: {reason}; moved to {}", moved.display()));
                report.rejected.push((name, reason));
            }
            Attempt::Blocked(reason) => {
                report.kept.extend(pending[index..].iter().map(|p| (stem(p), reason.clone())));
                return Ok(report);
            }
            Attempt::Transient(reason) => report.kept.push((name, reason)),
        }
    }
    Ok(report)
}

fn stem(path: &std::path::Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default()
}

async fn send_with_retries(run: &RunUpload, target: &Target, log: &mut dyn FnMut(&str)) -> Attempt {
    let mut delay = target.first_backoff;
    let mut last = Attempt::Transient("no attempt made".into());
    for attempt in 1..=target.attempts.max(1) {
        let (outcome, retry_after) = send(run, target).await;
        last = outcome;
        let Attempt::Transient(reason) = &last else { return last };
        if attempt < target.attempts {
            // The server's Retry-After (overload) is a floor under our own back-off.
            let wait = retry_after.map_or(delay, |asked| asked.min(MAX_RETRY_AFTER).max(delay));
            log(&format!("upload of run {} failed ({reason}); retrying in {wait:?}", run.run_id));
            tokio::time::sleep(wait).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }
    last
}

/// An acknowledgement counts only when it names the run that was sent.
fn acked(run: &RunUpload, ack: IngestAck, door: &'static str) -> Attempt {
    if ack.run_id == run.run_id {
        Attempt::Acked(ack, door)
    } else {
        Attempt::Transient(format!("the server acknowledged run {} when run {} was sent", ack.run_id, run.run_id))
    }
}

/// Server text as it may be printed: control characters (terminal escapes) removed, and
/// at most [`MAX_ERROR_BODY`] bytes.
pub fn printable(text: &str) -> String {
    printable_within(text, MAX_ERROR_BODY)
}

/// [`printable`] with at most `most` bytes (cut at a character boundary).
pub fn printable_within(text: &str, most: usize) -> String {
    let mut out: String = text.chars().filter(|c| !c.is_control() || *c == ' ').collect();
    if out.len() > most {
        let mut end = most;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

/// One attempt: gRPC, then HTTP+JSON if gRPC could not deliver; with the server's
/// `Retry-After`, if it sent one.
async fn send(run: &RunUpload, target: &Target) -> (Attempt, Option<Duration>) {
    match send_grpc(run, target).await {
        Attempt::Transient(grpc_reason) => match send_http(run, target).await {
            (Attempt::Transient(http_reason), retry_after) => {
                (Attempt::Transient(format!("gRPC: {grpc_reason}; HTTP: {http_reason}")), retry_after)
            }
            other => other,
        },
        other => (other, None),
    }
}

async fn send_grpc(run: &RunUpload, target: &Target) -> Attempt {
    let mut endpoint = match tonic::transport::Endpoint::from_shared(target.server.clone()) {
        Ok(e) => e.connect_timeout(Duration::from_secs(5)).timeout(Duration::from_secs(60)),
        Err(err) => return Attempt::Blocked(format!("bad server URL '{}': {err}", target.server)),
    };
    if target.server.starts_with("https://") {
        let mut tls = tonic::transport::ClientTlsConfig::new().with_webpki_roots();
        if let Some(pem) = &target.ca_pem {
            tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
        }
        endpoint = match endpoint.tls_config(tls) {
            Ok(endpoint) => endpoint,
            Err(err) => return Attempt::Blocked(format!("TLS set-up failed: {}", error_chain(&err))),
        };
    }
    let channel = match endpoint.connect().await {
        Ok(channel) => channel,
        Err(err) => return Attempt::Transient(format!("cannot connect: {}", error_chain(&err))),
    };
    let mut request = tonic::Request::new(proto::pb::RunUpload::from(run));
    match format!("Bearer {}", target.token).parse() {
        Ok(value) => {
            request.metadata_mut().insert("authorization", value);
        }
        Err(_) => return Attempt::Blocked("the token contains characters a header cannot carry".into()),
    }
    match IngestClient::new(channel).max_encoding_message_size(64 << 20).upload_run(request).await {
        Ok(response) => {
            let ack = response.into_inner();
            match ack.run_id.parse() {
                Ok(run_id) => acked(
                    run,
                    IngestAck { run_id, duplicate: ack.duplicate, measurements_stored: ack.measurements_stored },
                    "gRPC",
                ),
                Err(_) => {
                    Attempt::Transient(format!("server acknowledged an unreadable run id '{}'", printable(&ack.run_id)))
                }
            }
        }
        Err(status) => {
            let message = printable(status.message());
            let signed = status.metadata().get(REFUSAL_KEY).is_some_and(|v| v == "content");
            match status.code() {
                Code::InvalidArgument | Code::ResourceExhausted | Code::OutOfRange if signed => {
                    Attempt::Refused(message)
                }
                Code::Unauthenticated | Code::PermissionDenied => Attempt::Blocked(message),
                code => Attempt::Transient(format!("{code:?}: {message}")),
            }
        }
    }
}

async fn send_http(run: &RunUpload, target: &Target) -> (Attempt, Option<Duration>) {
    let mut retry_after = None;
    let attempt = send_http_once(run, target, &mut retry_after).await;
    (attempt, retry_after)
}

async fn send_http_once(run: &RunUpload, target: &Target, retry_after: &mut Option<Duration>) -> Attempt {
    let url = format!("{}/api/v1/runs", target.server.trim_end_matches('/'));
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(60));
    if let Some(pem) = &target.ca_pem {
        match reqwest::Certificate::from_pem(pem) {
            Ok(ca) => builder = builder.add_root_certificate(ca),
            Err(err) => return Attempt::Blocked(format!("the CA certificate is not PEM: {err}")),
        }
    }
    let client = match builder.build() {
        Ok(client) => client,
        Err(err) => return Attempt::Transient(err.to_string()),
    };
    let response = match client.post(&url).bearer_auth(&target.token).json(run).send().await {
        Ok(response) => response,
        Err(err) => return Attempt::Transient(format!("cannot reach {url}: {}", error_chain(&err))),
    };
    let status = response.status();
    let signed = response.headers().get(REFUSAL_KEY).is_some_and(|v| v == "content");
    *retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = match read_capped(response).await {
        Ok(body) => body,
        Err(err) => return Attempt::Transient(format!("HTTP {status}, body unreadable: {}", error_chain(&err))),
    };
    match status.as_u16() {
        200 | 201 => match serde_json::from_slice(&body) {
            Ok(ack) => acked(run, ack, "HTTP"),
            Err(err) => Attempt::Transient(format!("unreadable acknowledgement: {err}")),
        },
        401 | 403 => Attempt::Blocked(printable(&String::from_utf8_lossy(&body))),
        400 | 413 | 415 | 422 if signed => Attempt::Refused(printable(&String::from_utf8_lossy(&body))),
        _ => Attempt::Transient(format!("HTTP {status}: {}", printable(&String::from_utf8_lossy(&body)))),
    }
}

/// At most [`MAX_ERROR_BODY`] bytes of an answer; an acknowledgement is far smaller.
async fn read_capped(mut response: reqwest::Response) -> reqwest::Result<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = MAX_ERROR_BODY - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    Ok(body)
}

/// The error and its causes, each said once, with a hint for the usual certificate mistakes.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        let said = inner.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = inner.source();
    }
    let hint = if text.contains("UnknownIssuer") {
        Some("the server's certificate is not signed by a trusted CA; pass that CA with --ca-cert")
    } else if text.contains("CaUsedAsEndEntity") {
        Some("the server presents a CA certificate as its own; give it a server certificate issued by that CA")
    } else if text.contains("NotValidForName") {
        Some("the server's certificate does not name the host in --server")
    } else {
        None
    };
    match hint {
        Some(hint) => format!("{text} ({hint})"),
        None => text,
    }
}
