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
    #[error("request body too large: {0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("invalid field {0}")]
    Invalid(FieldError),
    #[error("invalid input: {0}")]
    Unprocessable(String),
    #[error("internal error")]
    Internal(#[from] anyhow::Error),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::Invalid(_) | ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
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
        (self.status(), Json(body)).into_response()
    }
}
