//! The gRPC door of ingest: `headroom.v1.Ingest/UploadRun`, served on the HTTP port. The
//! caller is authenticated from the metadata before a byte of the message is read.

use axum::Router;
use axum::extract::{Request as HttpRequest, State};
use axum::http::HeaderValue;
use axum::middleware::{self, Next};
use axum::response::Response as HttpResponse;
use proto::pb::ingest_server::{Ingest, IngestServer};
use proto::pb::{RunUpload, UploadAck};
use tonic::{Code, Request, Response, Status};

use crate::AppState;
use crate::auth;
use crate::error::{ApiError, REFUSAL_HEADER};
use crate::ingest::{self, Door, MAX_UPLOAD_BYTES};
use crate::store::{AgentRecord, Store};

pub struct IngestService {
    store: Store,
    alerts: std::sync::Arc<crate::alerts::Settings>,
}

/// The gRPC routes, behind [`authenticate`].
pub fn router(state: &AppState) -> Router<AppState> {
    let service = IngestServer::new(IngestService { store: state.store.clone(), alerts: state.alerts.clone() })
        .max_decoding_message_size(MAX_UPLOAD_BYTES);
    Router::new()
        .route_service("/headroom.v1.Ingest/{*method}", service)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
}

/// Lets only agent tokens through to the decoder, and answers an oversized message with
/// RESOURCE_EXHAUSTED (tonic says OUT_OF_RANGE, which clients do not read as "too large").
async fn authenticate(State(state): State<AppState>, mut request: HttpRequest, next: Next) -> HttpResponse {
    let token = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let Some(token) = token else {
        return Status::unauthenticated("send the agent's token as 'authorization: Bearer …'").into_http();
    };
    let agent = match auth::bearer(&state.store, &token).await {
        Ok(principal) => auth::Caller(Some(principal)).require_agent().cloned(),
        Err(err) => Err(err),
    };
    match agent {
        Ok(agent) => {
            request.extensions_mut().insert(agent);
        }
        Err(err) => return status(err).into_http(),
    }
    let request = match whole_frame(request).await {
        Ok(request) => request,
        Err(refused) => return refusal(refused),
    };
    let mut response = next.run(request).await;
    let code = response.headers().get("grpc-status").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    if code == Some(Code::OutOfRange as i32) {
        let headers = response.headers_mut();
        headers.insert("grpc-status", HeaderValue::from(Code::ResourceExhausted as i32));
        headers.insert(REFUSAL_HEADER, HeaderValue::from_static("content"));
    }
    response
}

/// Reads the (authenticated) body and checks its gRPC framing: exactly one uncompressed
/// message whose declared length is what was sent. tonic would answer a broken frame with
/// INTERNAL, which reads as the server's fault; here it is INVALID_ARGUMENT naming the problem,
/// and a message past the size limit RESOURCE_EXHAUSTED.
async fn whole_frame(request: HttpRequest) -> Result<HttpRequest, Status> {
    let (parts, body) = request.into_parts();
    let limit = MAX_UPLOAD_BYTES + 5;
    // Past the limit is the usual error; a body cut off by the client ends the call anyway.
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| {
        Status::resource_exhausted(format!("the message is larger than {MAX_UPLOAD_BYTES} bytes (or was cut off)"))
    })?;
    let Some((&[flag, a, b, c, d], message)) = bytes.split_first_chunk::<5>() else {
        return Err(Status::invalid_argument(format!(
            "a gRPC message frame needs a 5-byte header; {} bytes were sent",
            bytes.len()
        )));
    };
    if flag != 0 {
        return Err(Status::invalid_argument(format!(
            "compressed (or unknown) frames are not accepted (flag {flag}); send the message uncompressed"
        )));
    }
    let declared = u32::from_be_bytes([a, b, c, d]) as usize;
    if declared > MAX_UPLOAD_BYTES {
        return Err(Status::resource_exhausted(format!("the message is larger than {MAX_UPLOAD_BYTES} bytes")));
    }
    if declared != message.len() {
        return Err(Status::invalid_argument(format!(
            "the frame declares a {declared}-byte message but {} bytes follow; send exactly one message",
            message.len()
        )));
    }
    Ok(HttpRequest::from_parts(parts, axum::body::Body::from(bytes)))
}

/// A content refusal as a gRPC answer the agent reads as final.
fn refusal(mut status: Status) -> HttpResponse {
    status.metadata_mut().insert(REFUSAL_HEADER, tonic::metadata::MetadataValue::from_static("content"));
    status.into_http()
}

fn status(err: ApiError) -> Status {
    let message = err.to_string();
    let refusal = err.is_content_refusal();
    let mut status = match err {
        ApiError::Unauthorized(_) => Status::unauthenticated(message),
        ApiError::Forbidden(_) => Status::permission_denied(message),
        ApiError::Invalid(_) | ApiError::Unprocessable(_) | ApiError::BadRequest(_) => {
            Status::invalid_argument(message)
        }
        ApiError::PayloadTooLarge(_) => Status::resource_exhausted(message),
        ApiError::NotFound(_) => Status::not_found(message),
        ApiError::Conflict(_) => Status::already_exists(message),
        ApiError::UnsupportedMediaType(_) => Status::invalid_argument(message),
        ApiError::Unavailable(_) => Status::unavailable(message),
        ApiError::Internal(err) => {
            tracing::error!(error = format!("{err:#}"), "gRPC ingest failed");
            Status::internal("internal error")
        }
    };
    if refusal {
        status.metadata_mut().insert(REFUSAL_HEADER, tonic::metadata::MetadataValue::from_static("content"));
    }
    status
}

#[tonic::async_trait]
impl Ingest for IngestService {
    async fn upload_run(&self, request: Request<RunUpload>) -> Result<Response<UploadAck>, Status> {
        let agent = request
            .extensions()
            .get::<AgentRecord>()
            .cloned()
            .ok_or_else(|| Status::unauthenticated("no agent authenticated this call"))?;
        // The codec has checked and decoded the bytes; see `proto::decode_upload` for the whole.
        let run = proto::run_from_message(request.into_inner()).map_err(|e| {
            ingest::rejected(Door::Grpc);
            proto::codec::invalid_field(e)
        })?;
        let ack = ingest::ingest(&self.store, &self.alerts, &agent, run, Door::Grpc).await.map_err(status)?;
        Ok(Response::new(UploadAck::from(&ack)))
    }
}
