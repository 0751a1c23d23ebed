//! The API's one error type: it knows its status code, answers JSON `{"error": "..."}`,
//! logs server faults and never shows their internals to the caller.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use model::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("authentication required: {0}")]
    Unauthorized(String),
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    /// The request is sound but the state forbids it (a taken name, the last admin).
    #[error("{0}")]
    Conflict(String),
    #[error("request body too large: {0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("invalid field {0}")]
    Invalid(FieldError),
    #[error("invalid input: {0}")]
    Unprocessable(String),
    /// The database is busy or unreachable: 503 with `Retry-After`, which agents honour.
    #[error("service unavailable: {0}; retry later")]
    Unavailable(String),
    #[error("internal error")]
    Internal(anyhow::Error),
}

/// Seconds a client is asked to wait after a 503.
pub const RETRY_AFTER_SECONDS: u64 = 2;

impl From<anyhow::Error> for ApiError {
    /// A database that is overloaded or down is the caller's "try again", not a fault here.
    fn from(err: anyhow::Error) -> Self {
        match err.chain().find_map(|cause| cause.downcast_ref::<sqlx::Error>()).and_then(unavailable) {
            Some(reason) => {
                tracing::warn!(error = format!("{err:#}"), "database unavailable");
                ApiError::Unavailable(reason.into())
            }
            None => ApiError::Internal(err),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        anyhow::Error::from(err).into()
    }
}

/// Why `err` means the database cannot serve now (rather than that the query is wrong).
fn unavailable(err: &sqlx::Error) -> Option<&'static str> {
    match err {
        sqlx::Error::PoolTimedOut => Some("the database is busy"),
        sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_) => Some("the database is unreachable"),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // Postgres: 08 connection exceptions, 57P01-03 shutdown and start-up, 53 resources.
            // SQLite: 5 SQLITE_BUSY, 6 SQLITE_LOCKED (after the busy timeout ran out).
            // 40001 and 40P01: a serialization failure or deadlock, which a retry resolves.
            let busy = code.starts_with("08")
                || code == "40001"
                || code == "40P01"
                || code.starts_with("57P")
                || code.starts_with("53")
                || matches!(&*code, "5" | "6" | "517" | "262");
            busy.then_some("the database is busy or restarting")
        }
        _ => None,
    }
}

/// The header (and gRPC metadata key) by which the server says "this content is refused;
/// sending it again cannot succeed". Agents move a run aside only on an answer that carries it,
/// so a proxy's 413 or 400 makes them retry instead of giving up on the run.
pub const REFUSAL_HEADER: &str = proto::codec::REFUSAL_KEY;

impl ApiError {
    /// True for a refusal of the request's content (not of the caller, not a fault).
    pub fn is_content_refusal(&self) -> bool {
        matches!(
            self,
            ApiError::BadRequest(_)
                | ApiError::PayloadTooLarge(_)
                | ApiError::UnsupportedMediaType(_)
                | ApiError::Invalid(_)
                | ApiError::Unprocessable(_)
        )
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Invalid(_) | ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<FieldError> for ApiError {
    fn from(err: FieldError) -> Self {
        ApiError::Invalid(err)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(err) = &self {
            tracing::error!(error = format!("{err:#}"), "request failed");
        }
        let mut body = serde_json::json!({ "error": self.to_string() });
        if let ApiError::Invalid(field) = &self {
            body["field"] = field.field.clone().into();
        }
        let mut response = (self.status(), Json(body)).into_response();
        if self.is_content_refusal() {
            response.headers_mut().insert(REFUSAL_HEADER, axum::http::HeaderValue::from_static("content"));
        }
        if let ApiError::Unavailable(_) = self {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, RETRY_AFTER_SECONDS.into());
        }
        response
    }
}
