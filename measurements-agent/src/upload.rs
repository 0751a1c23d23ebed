//! Sends spooled runs: gRPC first, HTTP+JSON when gRPC cannot get through, with exponential
//! backoff. A run leaves the spool only after the server acknowledged it.

use std::time::Duration;

use model::{IngestAck, RunUpload};
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
    /// The server refused our credentials; retrying cannot help, but the run is fine.
    Unauthorized(String),
    /// Worth trying again later.
    Transient(String),
}

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
            Attempt::Unauthorized(reason) => {
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
        last = send(run, target).await;
        let Attempt::Transient(reason) = &last else { return last };
        if attempt < target.attempts {
            log(&format!("upload of run {} failed ({reason}); retrying in {delay:?}", run.run_id));
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(30));
        }
    }
    last
}

/// One attempt: gRPC, then HTTP+JSON if gRPC could not deliver.
async fn send(run: &RunUpload, target: &Target) -> Attempt {
    match send_grpc(run, target).await {
        Attempt::Transient(grpc_reason) => match send_http(run, target).await {
            Attempt::Transient(http_reason) => Attempt::Transient(format!("gRPC: {grpc_reason}; HTTP: {http_reason}")),
            other => other,
        },
        other => other,
    }
}

async fn send_grpc(run: &RunUpload, target: &Target) -> Attempt {
    let mut endpoint = match tonic::transport::Endpoint::from_shared(target.server.clone()) {
        Ok(e) => e.connect_timeout(Duration::from_secs(5)).timeout(Duration::from_secs(60)),
        Err(err) => return Attempt::Refused(format!("bad server URL '{}': {err}", target.server)),
    };
    if target.server.starts_with("https://") {
        let mut tls = tonic::transport::ClientTlsConfig::new().with_webpki_roots();
        if let Some(pem) = &target.ca_pem {
            tls = tls.ca_certificate(tonic::transport::Certificate::from_pem(pem));
        }
        endpoint = match endpoint.tls_config(tls) {
            Ok(endpoint) => endpoint,
            Err(err) => return Attempt::Refused(format!("TLS set-up failed: {}", error_chain(&err))),
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
        Err(_) => return Attempt::Unauthorized("the token contains characters a header cannot carry".into()),
    }
    match IngestClient::new(channel).max_encoding_message_size(64 << 20).upload_run(request).await {
        Ok(response) => {
            let ack = response.into_inner();
            match ack.run_id.parse() {
                Ok(run_id) => Attempt::Acked(
                    IngestAck { run_id, duplicate: ack.duplicate, measurements_stored: ack.measurements_stored },
                    "gRPC",
                ),
                Err(_) => Attempt::Transient(format!("server acknowledged an unreadable run id '{}'", ack.run_id)),
            }
        }
        Err(status) => match status.code() {
            Code::InvalidArgument | Code::ResourceExhausted | Code::OutOfRange => {
                Attempt::Refused(status.message().to_string())
            }
            Code::Unauthenticated | Code::PermissionDenied => Attempt::Unauthorized(status.message().to_string()),
            _ => Attempt::Transient(format!("{:?}: {}", status.code(), status.message())),
        },
    }
}

async fn send_http(run: &RunUpload, target: &Target) -> Attempt {
    let url = format!("{}/api/v1/runs", target.server.trim_end_matches('/'));
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(60));
    if let Some(pem) = &target.ca_pem {
        match reqwest::Certificate::from_pem(pem) {
            Ok(ca) => builder = builder.add_root_certificate(ca),
            Err(err) => return Attempt::Refused(format!("the CA certificate is not PEM: {err}")),
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
    let body = response.text().await.unwrap_or_default();
    match status.as_u16() {
        200 | 201 => match serde_json::from_str(&body) {
            Ok(ack) => Attempt::Acked(ack, "HTTP"),
            Err(err) => Attempt::Transient(format!("unreadable acknowledgement: {err}")),
        },
        401 | 403 => Attempt::Unauthorized(body),
        400 | 413 | 415 | 422 => Attempt::Refused(body),
        _ => Attempt::Transient(format!("HTTP {status}: {body}")),
    }
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
