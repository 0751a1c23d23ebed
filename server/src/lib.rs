//! Headroom's server as a library: [`app`] builds the router, [`serve`] runs it. The binary
//! in `main.rs` only parses arguments.
// The app's page views are deeply nested types; rendering them here needs a deeper limit.
#![recursion_limit = "512"]

pub mod admin;
pub mod alerts;
pub mod api;
pub mod auth;
pub mod blocking;
pub mod chargeback;
pub mod compress;
pub mod csv_cell;
pub mod error;
pub mod forecast;
pub mod grid;
pub mod grpc;
pub mod histogram;
pub mod ingest;
pub mod json;
pub mod openapi;
pub mod prices;
pub mod reports;
pub mod store;
pub mod telemetry;
pub mod web;

use std::future::Future;
use std::path::Path;

use axum::extract::{DefaultBodyLimit, FromRef};
use axum::{Router, middleware};
use leptos::config::LeptosOptions;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

use crate::store::Store;

/// Body limit for every route that states none of its own.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub leptos: LeptosOptions,
    pub metrics: PrometheusHandle,
    /// True when this process terminates TLS itself, so cookies must be `Secure`.
    pub tls: bool,
    /// SHA-256 of the bearer token a Prometheus scraper sends for `/metrics` (admins may read
    /// it too); `None`: only admins.
    pub metrics_token_hash: Option<String>,
    /// Regression alerts: the threshold and the webhook.
    pub alerts: std::sync::Arc<alerts::Settings>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

impl AppState {
    /// State over `store`, serving the browser bundle from `site_root/pkg` (under the hashed
    /// names of a release build's `site_root/bundle.json` when there is one).
    pub fn new(store: Store, site_root: &Path) -> Self {
        let leptos = LeptosOptions::builder()
            .output_name(web::output_name(site_root))
            .site_root(site_root.to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .build();
        AppState {
            store,
            leptos,
            metrics: telemetry::prometheus(),
            tls: false,
            metrics_token_hash: None,
            alerts: Default::default(),
        }
    }
}

/// Every route: the JSON API, gRPC ingest, health and metrics, and the pages.
pub fn app(state: AppState) -> Router {
    Router::new()
        .merge(grpc::router(&state))
        .merge(openapi::router(&state))
        .merge(telemetry::router())
        .merge(web::router(&state))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
        .layer(middleware::from_fn(compress::compress))
        .layer(middleware::from_fn(same_origin_writes))
        .route_layer(middleware::from_fn(telemetry::track))
        // Every request gets an id (a proxy's own is kept when it looks like one), answered in
        // `x-request-id` and carried by every log line of the request, so a logged 5xx names it.
        .layer(tower_http::request_id::PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(|request: &axum::extract::Request| {
                    let id = request.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or_default();
                    tracing::info_span!("request", id, method = %request.method(), path = request.uri().path())
                })
                // One line per answered request: its status and latency, in the request's span. The
                // path has no query string, and no header or body is logged, so no secret is.
                .on_response(
                    tower_http::trace::DefaultOnResponse::new()
                        .level(tracing::Level::INFO)
                        .latency_unit(tower_http::LatencyUnit::Micros),
                ),
        )
        .layer(tower_http::request_id::SetRequestIdLayer::new(REQUEST_ID, tower_http::request_id::MakeRequestUuid))
        .layer(middleware::from_fn(drop_foreign_request_id))
}

/// The header that carries a request's id.
pub const REQUEST_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("x-request-id");

/// Keeps a caller's `x-request-id` only when it is a short token of letters, digits, `-`, `_`
/// and `.` (what proxies generate); anything else is replaced by our own, so no caller can put
/// arbitrary text into the logs.
async fn drop_foreign_request_id(
    mut request: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    let plausible = |v: &axum::http::HeaderValue| {
        let b = v.as_bytes();
        !b.is_empty() && b.len() <= 64 && b.iter().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
    };
    if request.headers().get(&REQUEST_ID).is_some_and(|v| !plausible(v)) {
        request.headers_mut().remove(&REQUEST_ID);
    }
    next.run(request).await
}

/// Unknown paths: the app's own "not found" page. Files are served only from the bundle's
/// `/pkg` (see [`web::router`]), never from elsewhere under the site root.
async fn not_found(
    uri: axum::http::Uri,
    axum::extract::State(mut state): axum::extract::State<AppState>,
    request: axum::extract::Request,
) -> axum::response::Response {
    // Leptos' handler serves any file under `site_root` before rendering its 404; point it at
    // a root that holds none.
    state.leptos.site_root = "/nonexistent-headroom-site-root".into();
    let render = leptos_axum::file_and_error_handler::<AppState, _>(app::shell);
    render(uri, axum::extract::State(state), request).await
}

/// Refuses a cross-site write that a browser would authenticate with our cookie (a form on
/// another site posting to `/login`, `/logout` or `/srv/*`): by `Sec-Fetch-Site` where the
/// browser sends it, else by `Origin` against `Host`. Requests with an `Authorization` header
/// carry their own credentials and are not a browser's ambient authority.
async fn same_origin_writes(request: axum::extract::Request, next: middleware::Next) -> axum::response::Response {
    use axum::http::{Method, header};
    use axum::response::IntoResponse;
    let headers = request.headers();
    let writes = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !writes || headers.contains_key(header::AUTHORIZATION) {
        return next.run(request).await;
    }
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let cross_site = match (text("sec-fetch-site"), text("origin")) {
        (Some(site), _) => !matches!(site, "same-origin" | "none"),
        (None, Some(origin)) => {
            let origin_host = origin.split_once("://").map_or(origin, |(_, host)| host);
            let hosts = [text("host"), text("x-forwarded-host")];
            !hosts.into_iter().flatten().any(|host| host.eq_ignore_ascii_case(origin_host))
        }
        (None, None) => false,
    };
    if cross_site {
        return error::ApiError::Forbidden(
            "cross-site form posts are refused; use the app from its own address".into(),
        )
        .into_response();
    }
    next.run(request).await
}

/// Reads the whole body of `request` (at most `limit` bytes) for handlers that read bodies
/// their own way; more is 413, whether announced by `Content-Length` or not.
pub async fn buffer_body(
    request: axum::extract::Request,
    limit: usize,
) -> Result<axum::extract::Request, error::ApiError> {
    let too_large = || error::ApiError::PayloadTooLarge(format!("this route takes at most {} KiB", limit >> 10));
    let announced = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|_| too_large())?;
    Ok(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes)))
}

/// Serves `router` over TLS (HTTP/1.1 and HTTP/2 by ALPN, so gRPC works) until `shutdown`
/// completes, then lets requests in flight finish for up to 10 s.
pub async fn serve_router_tls(
    listener: std::net::TcpListener,
    router: Router,
    tls: axum_server::tls_rustls::RustlsConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopper.graceful_shutdown(Some(std::time::Duration::from_secs(10)));
    });
    listener.set_nonblocking(true)?;
    axum_server::from_tcp_rustls(listener, tls)?
        .handle(handle)
        .serve(router.into_make_service_with_connect_info::<std::net::SocketAddr>())
        .await
}

/// Serves HTTP/1.1 and HTTP/2 (gRPC) on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    // Small answers (acks, gRPC responses) must not wait for Nagle's algorithm and the peer's
    // delayed ACK: about 40 ms each, as the transport suite measured before its server set this.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let service = app(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, service).with_graceful_shutdown(shutdown).await
}
