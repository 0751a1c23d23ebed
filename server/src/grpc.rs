//! The gRPC door of ingest: `headroom.v1.Ingest/UploadRun`, served on the HTTP port.

use proto::pb::ingest_server::{Ingest, IngestServer};
use proto::pb::{RunUpload, UploadAck};
use tonic::{Request, Response, Status};

use crate::auth;
use crate::error::ApiError;
use crate::ingest::{self, Door, MAX_UPLOAD_BYTES};
use crate::store::Store;

pub struct IngestService {
    store: Store,
}

/// The tonic service, with the same size limit as the HTTP door.
pub fn service(store: Store) -> IngestServer<IngestService> {
    IngestServer::new(IngestService { store }).max_decoding_message_size(MAX_UPLOAD_BYTES)
}

fn status(err: ApiError) -> Status {
    let message = err.to_string();
    match err {
        ApiError::Unauthorized(_) => Status::unauthenticated(message),
        ApiError::Forbidden(_) => Status::permission_denied(message),
        ApiError::Invalid(_) | ApiError::Unprocessable(_) | ApiError::BadRequest(_) => {
            Status::invalid_argument(message)
        }
        ApiError::PayloadTooLarge(_) => Status::resource_exhausted(message),
        ApiError::NotFound(_) => Status::not_found(message),
        ApiError::UnsupportedMediaType(_) => Status::invalid_argument(message),
        ApiError::Internal(err) => {
            tracing::error!(error = format!("{err:#}"), "gRPC ingest failed");
            Status::internal("internal error")
        }
    }
}

#[tonic::async_trait]
impl Ingest for IngestService {
    async fn upload_run(&self, request: Request<RunUpload>) -> Result<Response<UploadAck>, Status> {
        let token = request
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| Status::unauthenticated("send the agent's token as 'authorization: Bearer …'"))?
            .to_string();
        let caller = auth::Caller(Some(auth::bearer(&self.store, &token).await.map_err(status)?));
        let agent = caller.require_agent().map_err(status)?.clone();
        let run = model::RunUpload::try_from(request.into_inner()).map_err(|e| {
            ingest::rejected(Door::Grpc);
            status(e.into())
        })?;
        let ack = ingest::ingest(&self.store, &agent, run, Door::Grpc).await.map_err(status)?;
        Ok(Response::new(UploadAck::from(&ack)))
    }
}
