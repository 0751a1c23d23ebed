//! The web app: Leptos pages rendered here and hydrated in the browser, the bundle under
//! `/pkg`, and the data the pages ask for.

use std::sync::Arc;

use app::backend::{Backend, BackendHandle};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};
use model::FleetView;
use tower_http::services::ServeDir;

use crate::AppState;
use crate::auth::{self, Caller, Principal, Role};
use crate::store::{RunFilter, Store};

/// How many runs the Fleet page lists.
const RECENT_RUNS: u32 = 20;

struct WebBackend {
    store: Store,
}

impl Backend for WebBackend {
    fn fleet(&self, headers: axum::http::HeaderMap) -> BoxFuture<'static, Result<FleetView, String>> {
        let store = self.store.clone();
        Box::pin(async move {
            let caller = Caller(auth::authenticate(&store, &headers).await.map_err(|e| e.to_string())?);
            let (user, _) = caller.require(Role::Viewer).map_err(|e| e.to_string())?;
            let user = user.to_string();
            let nodes = store.list_nodes().await.map_err(|e| internal(&e))?;
            let filter = RunFilter { limit: RECENT_RUNS, ..RunFilter::default() };
            let recent_runs = store.list_runs(&filter).await.map_err(|e| internal(&e))?;
            Ok(FleetView { user, nodes, recent_runs })
        })
    }
}

fn internal(err: &anyhow::Error) -> String {
    tracing::error!(error = format!("{err:#}"), "page data failed");
    "internal error".to_string()
}

/// The pages (behind sign-in), the page data endpoints and the browser bundle.
pub fn router(state: &AppState) -> Router<AppState> {
    let options = state.leptos.clone();
    let backend = BackendHandle(Arc::new(WebBackend { store: state.store.clone() }));
    let pkg = std::path::Path::new(&*options.site_root).join(&*options.site_pkg_dir);
    Router::new()
        .leptos_routes_with_context(
            state,
            generate_route_list(app::App),
            move || provide_context(backend.clone()),
            move || app::shell(options.clone()),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), require_sign_in))
        .nest_service("/pkg", ServeDir::new(pkg))
}

/// Sends anyone not signed in to the login page, remembering where they were going.
async fn require_sign_in(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    // Page-data endpoints check the caller themselves and answer errors, not redirects.
    if path == "/login" || path.starts_with("/srv/") {
        return next.run(request).await;
    }
    match auth::authenticate(&state.store, request.headers()).await {
        Ok(Some(Principal::User { .. })) => next.run(request).await,
        _ => {
            let target = format!("/login?next={}", encode_path(path));
            (StatusCode::SEE_OTHER, [(LOCATION, target)]).into_response()
        }
    }
}

/// Escapes the few characters of a path that would break a query value.
fn encode_path(path: &str) -> String {
    path.chars()
        .map(|c| match c {
            '&' => "%26".to_string(),
            '#' => "%23".to_string(),
            '+' => "%2B".to_string(),
            '?' => "%3F".to_string(),
            ' ' => "%20".to_string(),
            other => other.to_string(),
        })
        .collect()
}
