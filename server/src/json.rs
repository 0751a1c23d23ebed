//! JSON request bodies whose rejections name the offending field and use [`ApiError`].

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body as a handler argument, refused as [`ApiError`]: 415 for another media type
/// (checked before the body is read), 413 past the route's body limit, 400 for malformed JSON,
/// 422 naming the field of the first shape error. Put it after the caller's extractor
/// ([`crate::auth::Needs`]), so 401 and 403 come first.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !is_json(request.headers()) {
            return Err(unsupported());
        }
        let bytes = Bytes::from_request(request, state).await.map_err(refused_body)?;
        parse(&bytes).map(ApiJson)
    }
}

fn unsupported() -> ApiError {
    ApiError::UnsupportedMediaType("expected Content-Type: application/json".into())
}

/// Parses JSON, naming the path of the first problem. Syntax errors are 400, shape errors 422.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let message = if path == "." { inner.to_string() } else { format!("{path}: {inner}") };
        match inner.classify() {
            serde_json::error::Category::Data => ApiError::Unprocessable(message),
            _ => ApiError::BadRequest(format!("malformed JSON: {message}")),
        }
    })?;
    de.end().map_err(|e| ApiError::BadRequest(format!("malformed JSON: trailing characters: {e}")))?;
    Ok(value)
}

/// Parses a request body already read by a handler that authenticated first.
pub fn from_body<T: DeserializeOwned>(
    headers: &axum::http::HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<T, ApiError> {
    parse(&body_bytes(headers, body)?)
}

/// The bytes of a JSON request body, once its media type and size are checked.
pub fn body_bytes(
    headers: &axum::http::HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Bytes, ApiError> {
    if !is_json(headers) {
        return Err(unsupported());
    }
    body.map_err(refused_body)
}

/// Why a body could not be read: past the route's limit (413), or cut off (400).
fn refused_body(rejection: axum::extract::rejection::BytesRejection) -> ApiError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge(rejection.body_text())
    } else {
        ApiError::BadRequest(rejection.body_text())
    }
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json")))
}
