//! Signing in and out with a password; the session lives in an HttpOnly SameSite cookie.
//! The form posts work without JavaScript, so the login page works before hydration.

use std::net::SocketAddr;

use axum::extract::rejection::FormRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::header::{LOCATION, SET_COOKIE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::{self, Caller, Role, SESSION_COOKIE};
use crate::error::ApiError;

/// Sign-in and sign-out are form posts from the login page, not API calls: routed, not documented.
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().route("/login", post(create)).route("/logout", post(delete)).routes(routes!(me))
}

#[derive(Deserialize)]
pub struct LoginForm {
    name: String,
    password: String,
    next: Option<String>,
}

fn see_other(location: &str, cookie: Option<String>) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    let location = HeaderValue::from_str(location).unwrap_or(HeaderValue::from_static("/fleet"));
    response.headers_mut().insert(LOCATION, location);
    if let Some(value) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(SET_COOKIE, value);
    }
    response
}

/// Only same-site absolute paths are followed after login: not `//host` nor `/\host` (which
/// browsers read as `//host`), nor anything with a backslash, a space, a control or non-ASCII
/// character (a link's own bytes are percent-encoded ASCII), nor past 2 KiB.
pub fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path)
            if path.starts_with('/')
                && !path[1..].starts_with(['/', '\\'])
                && path.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'\\')
                && path.len() <= 2048
                && !path.starts_with("/login") =>
        {
            path
        }
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

/// The client's address as the socket saw it (a proxy's, behind one), if the server knows it.
pub struct ClientAddress(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddress(parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|ConnectInfo(a)| a.ip())))
    }
}

/// Failed sign-ins an account may have before it is locked (1 s, doubling to 15 min).
pub const FREE_FAILURES_PER_ACCOUNT: u32 = 5;
/// The same for one client address, over all the accounts it tries.
pub const FREE_FAILURES_PER_ADDRESS: u32 = 20;

/// Checks the password; on success sets the session cookie and redirects. Failures are
/// throttled per account and per address (in the database, so across replicas).
pub async fn create(
    State(state): State<AppState>,
    ClientAddress(peer): ClientAddress,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Result<Response, ApiError> {
    let form = match form {
        Ok(Form(form)) => form,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(ApiError::PayloadTooLarge(rejection.body_text()));
        }
        Err(_) => return Ok(see_other("/login?error=missing", None)),
    };
    let name = form.name.trim();
    let account = format!("user:{}", name.to_lowercase());
    let address = format!("addr:{}", peer.map_or_else(|| "unknown".to_string(), |ip| ip.to_string()));
    if state.store.login_locked_until(&[&account, &address]).await?.is_some() {
        tracing::info!(name = ?name, %address, "sign-in refused: throttled");
        return Ok(see_other("/login?error=throttled", None));
    }
    let user = state.store.user_by_name(name).await?;
    let hash = user.as_ref().map(|u| u.password_hash.clone());
    let valid = auth::verify_password_off_runtime(form.password, hash).await?;
    let user = match user {
        Some(user) if valid => user,
        _ => {
            state.store.record_login_failure(&account, FREE_FAILURES_PER_ACCOUNT).await?;
            state.store.record_login_failure(&address, FREE_FAILURES_PER_ADDRESS).await?;
            tracing::info!(name = ?name, %address, "failed sign-in");
            return Ok(see_other("/login?error=invalid", None));
        }
    };
    state.store.clear_login_failures(&account).await?;
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

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn only_same_site_paths_are_followed() {
        for path in ["/planner", "/runs/1?x=y", "/a/b#c"] {
            assert_eq!(safe_next(Some(path)), path);
        }
        for path in [
            "//evil.example/",
            "/\\evil.example/",
            "/\\/evil",
            "https://evil.example",
            "/a\\b",
            "/x\r\nSet-Cookie: a=b",
            "/café",
            "/a b",
            "/login?next=/x",
            "",
        ] {
            assert_eq!(safe_next(Some(path)), "/fleet", "{path:?}");
        }
        assert_eq!(safe_next(None), "/fleet");
    }
}
