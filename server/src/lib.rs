//! Headroom's server as a library: [`app`] builds the router, [`serve`] runs it. The binary
//! in `main.rs` only parses arguments.
// The app's page views are deeply nested types; rendering them here needs a deeper limit.
#![recursion_limit = "512"]

pub mod admin;
pub mod api;
pub mod auth;
pub mod error;
pub mod grpc;
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

/// Body limit for every route but ingest, which has its own.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub leptos: LeptosOptions,
    pub metrics: PrometheusHandle,
    /// True when this process terminates TLS itself, so cookies must be `Secure`.
    pub tls: bool,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

impl AppState {
    /// State over `store`, serving the browser bundle from `site_root/pkg`.
    pub fn new(store: Store, site_root: &Path) -> Self {
        let leptos = LeptosOptions::builder()
            .output_name(app::OUTPUT_NAME)
            .site_root(site_root.to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .build();
        AppState { store, leptos, metrics: telemetry::prometheus(), tls: false }
    }
}

/// Every route: the JSON API, gRPC ingest, health and metrics, and the pages.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route_service("/headroom.v1.Ingest/{*method}", grpc::service(state.store.clone()))
        .merge(api::router())
        .merge(telemetry::router())
        .merge(openapi::router())
        .merge(web::router(&state))
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(app::shell))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
        .route_layer(middleware::from_fn(telemetry::track))
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
    axum_server::from_tcp_rustls(listener, tls)?.handle(handle).serve(router.into_make_service()).await
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
    axum::serve(listener, app(state)).with_graceful_shutdown(shutdown).await
}
