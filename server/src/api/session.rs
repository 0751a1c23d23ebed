//! Signing in and out with a password; the session lives in an HttpOnly SameSite cookie.
//! The form posts work without JavaScript, so the login page works before hydration.

use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::auth::{self, Caller, Role, SESSION_COOKIE};
use crate::error::ApiError;

pub fn router() -> Router<AppState> {
    Router::new().route("/login", post(create)).route("/logout", post(delete)).route("/api/v1/me", get(me))
}

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: String,
    next: Option<String>,
}

fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(LOCATION, value);
    }
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}

/// Only same-site absolute paths are followed after login.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path) if path.starts_with('/') && !path.starts_with("//") && !path.starts_with("/login") => path,
        _ => "/fleet",
    }
}

/// `; Secure` when the request reached us over HTTPS: our own TLS, or a proxy that says so.
fn secure_attribute(state: &AppState, headers: &HeaderMap) -> &'static str {
    let forwarded =
        headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("https"));
    let https = state.tls || forwarded;
    if https { "; Secure" } else { "" }
}

/// Checks the password; on success sets the session cookie and redirects.
pub async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Result<Response, ApiError> {
    let Ok(Form(form)) = form else { return Ok(see_other("/login?error=missing", None)) };
    let user = state.store.user_by_name(form.name.trim()).await?;
    let user = match user {
        Some(user) if auth::verify_password(&form.password, &user.password_hash) => user,
        _ => {
            tracing::info!(name = %form.name, "failed sign-in");
            return Ok(see_other("/login?error=invalid", None));
        }
    };
    let token = auth::new_token("");
    let max_age = state.store.create_session(&user.id, &auth::hash_token(&token)).await?;
    let secure = secure_attribute(&state, &headers);
    let cookie = format!("{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}");
    Ok(see_other(safe_next(form.next.as_deref()), Some(cookie)))
}

/// Ends the session and clears the cookie.
pub async fn delete(State(state): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(token) = auth::session_cookie(&headers) {
        state.store.delete_session(&auth::hash_token(&token)).await?;
    }
    let cookie =
        format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}", secure_attribute(&state, &headers));
    Ok(see_other("/login", Some(cookie)))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Me {
    name: String,
    role: String,
}

/// Who the caller is.
#[utoipa::path(get, path = "/api/v1/me", tag = "session", responses((status = 200, body = Me), (status = 401)))]
pub async fn me(caller: Caller) -> Result<Json<Me>, ApiError> {
    let (name, role) = caller.require(Role::Viewer)?;
    Ok(Json(Me { name: name.to_string(), role: role.as_str().to_string() }))
}
