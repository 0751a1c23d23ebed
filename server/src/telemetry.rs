//! Liveness, readiness and Prometheus metrics.

use std::sync::OnceLock;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::AppState;
use crate::auth::{self, Caller, Role};
use crate::error::ApiError;

pub fn router() -> Router<AppState> {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).route("/metrics", get(render))
}

/// The process-wide Prometheus recorder, installed on first use.
pub fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("http_request_duration_seconds".into()),
                    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0],
                )
                .expect("bucket list is not empty")
                .build_recorder();
            let handle = recorder.handle();
            // A second server in the same process (tests) shares the first recorder.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.store.ping().await {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "database unreachable").into_response()
    }
}

/// The metrics, for the scraper's token or an admin.
async fn render(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| auth::hash_token(t.trim()));
    let scraper = matches!((&bearer, &state.metrics_token_hash), (Some(sent), Some(known)) if sent == known);
    if !scraper {
        let caller = match auth::authenticate(&state.store, &headers).await {
            Ok(principal) => Caller(principal),
            Err(_) if bearer.is_some() && state.metrics_token_hash.is_some() => {
                return ApiError::Unauthorized("unknown metrics token".into()).into_response();
            }
            Err(err) => return err.into_response(),
        };
        if let Err(err) = caller.require(Role::Admin) {
            return err.into_response();
        }
    }
    // Alerts by state, from the database, so every replica answers the fleet's count.
    match state.store.alert_counts().await {
        Ok(counts) => {
            for name in crate::store::ALERT_STATES {
                let n = counts.iter().find(|(s, _)| s == name).map_or(0, |(_, n)| *n);
                metrics::gauge!("headroom_alerts", "state" => name).set(n as f64);
            }
        }
        Err(err) => tracing::warn!(error = %format!("{err:#}"), "could not count the alerts for /metrics"),
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], state.metrics.render()).into_response()
}

/// The method as a metrics label: one of the standard methods or `other`, so a client cannot
/// grow the metrics by inventing methods.
fn method_label(method: &Method) -> &'static str {
    static KNOWN: [Method; 7] =
        [Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::PATCH, Method::HEAD, Method::OPTIONS];
    KNOWN.iter().find(|m| *m == method).map_or("other", Method::as_str)
}

/// Counts every request and its latency by route template, method and status.
pub async fn track(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route =
        request.extensions().get::<MatchedPath>().map(|p| p.as_str().to_string()).unwrap_or_else(|| {
            if request.uri().path().starts_with("/pkg/") { "/pkg/*".into() } else { "other".into() }
        });
    let method = method_label(request.method()).to_string();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("route", route), ("status", status)];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels).record(started.elapsed().as_secs_f64());
    response
}
