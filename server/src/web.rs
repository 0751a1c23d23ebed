//! The web app: Leptos pages rendered here and hydrated in the browser, the bundle under
//! `/pkg`, and the data the pages ask for.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use app::backend::{Backend, BackendHandle, PageError};
use app::data::{
    AlertList, AlertView, BudgetView, BudgetsView, CatalogView, CreatedToken, CreatedUser, GridView, ImportOutcome,
    LlmRunView, MeasuredFleet, PeopleView, PersonView, ReportSummaryView, ReportsView, RunView, ScenarioList,
    ScenarioView, TransportRun,
};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::HeaderValue;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, LOCATION};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use leptos::prelude::provide_context;
use leptos_axum::{AxumRouteListing, LeptosRoutes, generate_route_list};
use model::FleetView;
use tower_http::services::ServeDir;

use crate::auth::{self, Caller, Principal};
use crate::error::ApiError;
use crate::store::Store;
use crate::{AppState, api};

struct WebBackend {
    store: Store,
    alerts: Arc<crate::alerts::Settings>,
}

type Answer<T> = BoxFuture<'static, Result<T, PageError>>;

/// Page data errors as the page shows them: what the API would say, internal errors logged.
fn shown(err: ApiError) -> PageError {
    let status = err.status().as_u16();
    let message = match err {
        ApiError::Internal(e) => internal(&e),
        other => other.to_string(),
    };
    PageError { status, message }
}

fn internal(err: &anyhow::Error) -> String {
    tracing::error!(error = format!("{err:#}"), "page data failed");
    "internal error".to_string()
}

impl WebBackend {
    /// Runs `f` for the caller identified by `headers`; `f` checks the role its data needs (each
    /// is the resource module's function the JSON API calls too).
    fn answer<T, F, Fut>(&self, headers: HeaderMap, f: F) -> Answer<T>
    where
        T: Send + 'static,
        F: FnOnce(Store, Caller) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, ApiError>> + Send + 'static,
    {
        let store = self.store.clone();
        Box::pin(async move {
            let caller = Caller(auth::authenticate(&store, &headers).await.map_err(shown)?);
            f(store, caller).await.map_err(shown)
        })
    }
}

impl Backend for WebBackend {
    fn fleet(&self, headers: HeaderMap) -> Answer<FleetView> {
        self.answer(headers, |store, caller| async move { api::nodes::fleet(&store, &caller).await })
    }

    fn measured_nodes(&self, headers: HeaderMap) -> Answer<MeasuredFleet> {
        self.answer(headers, |store, caller| async move { api::nodes::measured(&store, &caller).await })
    }

    fn transport_runs(&self, headers: HeaderMap) -> Answer<Vec<TransportRun>> {
        self.answer(headers, |store, caller| async move { api::nodes::transport_runs(&store, &caller).await })
    }

    fn llm_runs(&self, headers: HeaderMap, include: Option<String>) -> Answer<Vec<LlmRunView>> {
        self.answer(headers, move |store, caller| async move { api::runs::llm_runs(&store, &caller, include).await })
    }

    fn run_page(&self, headers: HeaderMap, run_id: String) -> Answer<RunView> {
        self.answer(headers, move |store, caller| async move { api::runs::page(&store, &caller, &run_id).await })
    }

    fn alerts(&self, headers: HeaderMap) -> Answer<AlertList> {
        let settings = self.alerts.clone();
        self.answer(headers, move |store, caller| async move { api::alerts::page(&store, &caller, &settings).await })
    }

    fn set_alert_state(&self, headers: HeaderMap, id: String, state: String) -> Answer<AlertView> {
        self.answer(
            headers,
            move |store, caller| async move { api::alerts::set_state(&store, &caller, &id, &state).await },
        )
    }

    fn save_scenario(&self, headers: HeaderMap, kind: String, name: String, query: String) -> Answer<ScenarioView> {
        self.answer(headers, move |store, caller| async move {
            api::scenarios::create_from_query(&store, &caller, kind, name, &query).await
        })
    }

    fn scenarios(&self, headers: HeaderMap) -> Answer<ScenarioList> {
        self.answer(headers, |store, caller| async move { api::scenarios::page_list(&store, &caller).await })
    }

    fn scenario(&self, headers: HeaderMap, id: String) -> Answer<ScenarioView> {
        self.answer(headers, move |store, caller| async move { api::scenarios::one(&store, &caller, &id).await })
    }

    fn rename_scenario(&self, headers: HeaderMap, id: String, name: String) -> Answer<ScenarioView> {
        self.answer(
            headers,
            move |store, caller| async move { api::scenarios::rename(&store, &caller, &id, &name).await },
        )
    }

    fn delete_scenario(&self, headers: HeaderMap, id: String) -> Answer<()> {
        self.answer(headers, move |store, caller| async move { api::scenarios::delete(&store, &caller, &id).await })
    }

    fn price_catalog(&self, headers: HeaderMap) -> Answer<CatalogView> {
        self.answer(headers, |store, caller| async move { api::prices::catalog(&store, &caller).await })
    }

    fn grid_table(&self, headers: HeaderMap) -> Answer<GridView> {
        self.answer(headers, |store, caller| async move { api::grid::view(&store, &caller).await })
    }

    fn people(&self, headers: HeaderMap) -> Answer<Option<PeopleView>> {
        self.answer(headers, |store, caller| async move { api::people::page_if_admin(&store, &caller).await })
    }

    fn create_user(
        &self,
        headers: HeaderMap,
        name: String,
        role: String,
        password: Option<String>,
    ) -> Answer<CreatedUser> {
        self.answer(headers, move |store, caller| async move {
            api::people::create_user(&store, &caller, api::people::NewUser { name, role, password }).await
        })
    }

    fn set_user_role(&self, headers: HeaderMap, id: String, role: String) -> Answer<PersonView> {
        self.answer(
            headers,
            move |store, caller| async move { api::people::set_role(&store, &caller, &id, &role).await },
        )
    }

    fn delete_user(&self, headers: HeaderMap, id: String) -> Answer<()> {
        self.answer(headers, move |store, caller| async move { api::people::delete_user(&store, &caller, &id).await })
    }

    fn create_api_token(
        &self,
        headers: HeaderMap,
        user_id: String,
        expires_in_days: Option<u32>,
    ) -> Answer<CreatedToken> {
        self.answer(headers, move |store, caller| async move {
            api::people::create_token(&store, &caller, api::people::NewToken { user_id, expires_in_days }).await
        })
    }

    fn revoke_api_token(&self, headers: HeaderMap, id: String) -> Answer<()> {
        self.answer(headers, move |store, caller| async move { api::people::revoke_token(&store, &caller, &id).await })
    }

    fn create_agent_token(&self, headers: HeaderMap, name: String, replace: bool) -> Answer<CreatedToken> {
        self.answer(headers, move |store, caller| async move {
            api::people::create_agent(&store, &caller, api::people::NewAgent { name, replace }).await
        })
    }

    fn reports(&self, headers: HeaderMap) -> Answer<ReportsView> {
        self.answer(headers, |store, caller| async move { api::reports::overview(&store, &caller).await })
    }

    fn budgets(&self, headers: HeaderMap) -> Answer<BudgetsView> {
        self.answer(headers, |store, caller| async move { api::budgets::page(&store, &caller).await })
    }

    fn set_budget(&self, headers: HeaderMap, scope: String, name: String, monthly_usd: String) -> Answer<BudgetView> {
        self.answer(headers, move |store, caller| async move {
            let new = api::budgets::NewBudget { scope, name, monthly_usd: crate::reports::Amount::Text(monthly_usd) };
            Ok(api::budgets::view(api::budgets::set(&store, &caller, new).await?))
        })
    }

    fn delete_budget(&self, headers: HeaderMap, id: String) -> Answer<()> {
        self.answer(headers, move |store, caller| async move { api::budgets::delete(&store, &caller, &id).await })
    }

    fn report_from_scenarios(
        &self,
        headers: HeaderMap,
        name: String,
        team: Option<String>,
        from: String,
        to: String,
    ) -> Answer<ReportSummaryView> {
        self.answer(headers, move |store, caller| async move {
            api::reports::from_scenarios(&store, &caller, name, team.as_deref().unwrap_or_default(), from, to).await
        })
    }

    fn import_prices(&self, headers: HeaderMap, csv: String) -> Answer<ImportOutcome> {
        self.answer(headers, move |store, caller| async move {
            Ok(outcome(api::prices::replace(&store, &caller, &csv).await?))
        })
    }

    fn import_grid(&self, headers: HeaderMap, csv: String) -> Answer<ImportOutcome> {
        self.answer(headers, move |store, caller| async move {
            Ok(outcome(api::grid::replace(&store, &caller, &csv).await?))
        })
    }
}

/// The pages (behind sign-in), the page data endpoints and the browser bundle.
pub fn router(state: &AppState) -> Router<AppState> {
    let options = state.leptos.clone();
    let backend = BackendHandle(Arc::new(WebBackend { store: state.store.clone(), alerts: state.alerts.clone() }));
    let pkg = Path::new(&*options.site_root).join(&*options.site_pkg_dir);
    let bundle = bundle(pkg, &options.output_name);
    Router::new()
        .leptos_routes_with_context(
            state,
            routes(),
            move || provide_context(backend.clone()),
            move || app::shell(options.clone()),
        )
        .route_layer(middleware::from_fn_with_state(state.clone(), require_sign_in))
        .nest_service("/pkg", bundle)
}

/// The app's routes, listed once per process. Listing them renders the whole app once with
/// resource loading switched off for the entire process (leptos_router's `RouteList::generate`
/// holds leptos_server's `SuppressResourceLoad`, a process-wide flag), so a page rendering at
/// that moment keeps a resource pending forever: its head is sent and its body never ends
/// (leptos-rs/leptos#4773, open). A server lists them before it serves; a process that builds
/// a second router while the first serves (the tests do) must not list them again.
/// `pages_end_while_other_routers_are_built` in `server/tests/hardening.rs` hangs without this.
fn routes() -> Vec<AxumRouteListing> {
    static ROUTES: OnceLock<Vec<AxumRouteListing>> = OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(app::App)).clone()
}

/// Where a release build writes the bundle's hashed name, beside `pkg/`.
pub const BUNDLE_MANIFEST: &str = "bundle.json";

/// The name of the bundle's files under `site_root/pkg`: `headroom.<hash>` from a release
/// build's manifest, else `headroom` (a dev build's plain names). A manifest that cannot be
/// read, or names files that are not there, is logged and ignored: pages then name the plain
/// files, which a dev build has and a broken release folder may not.
pub fn output_name(site_root: &Path) -> String {
    #[derive(serde::Deserialize)]
    struct Manifest {
        output_name: String,
    }
    let path = site_root.join(BUNDLE_MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return app::OUTPUT_NAME.to_string(),
        Err(err) => {
            tracing::error!(manifest = %path.display(), error = %err, "cannot read the bundle manifest");
            return app::OUTPUT_NAME.to_string();
        }
    };
    let checked = serde_json::from_str::<Manifest>(&text).map_err(|e| e.to_string()).and_then(|m| {
        let name = m.output_name;
        let plausible = name.starts_with(&format!("{}.", app::OUTPUT_NAME))
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
        if !plausible {
            return Err(format!("{name:?} is not a bundle name (headroom.<hash>)"));
        }
        let pkg = site_root.join("pkg");
        match [".js", "_bg.wasm", ".css"].iter().map(|part| pkg.join(format!("{name}{part}"))).find(|f| !f.is_file()) {
            Some(missing) => Err(format!("it names {}, which is not there", missing.display())),
            None => Ok(name),
        }
    });
    checked.unwrap_or_else(|reason| {
        tracing::error!(manifest = %path.display(), reason, "ignoring the bundle manifest; pages name the plain bundle files");
        app::OUTPUT_NAME.to_string()
    })
}

/// The bundle's files. A release build's are named after their content, so a browser may keep
/// them a year without asking again; anything else is checked on every use (`no-cache`). The
/// `.br` and `.gz` copies a release build makes are sent to a browser that accepts them.
fn bundle(
    pkg: PathBuf,
    output_name: &str,
) -> impl tower::Service<
    Request,
    Response = Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<Response, std::convert::Infallible>> + Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    let files = ServeDir::new(pkg).precompressed_br().precompressed_gzip();
    let hashed: Arc<[String]> = if output_name == app::OUTPUT_NAME {
        Arc::new([])
    } else {
        Arc::new([format!("{output_name}."), format!("{output_name}_bg.")])
    };
    tower::Layer::layer(&middleware::from_fn_with_state(hashed, cache_policy), files)
}

async fn cache_policy(State(hashed): State<Arc<[String]>>, request: Request, next: Next) -> Response {
    let name = request.uri().path().trim_start_matches('/');
    let named_by_content = hashed.iter().any(|prefix| name.starts_with(prefix.as_str()));
    let mut response = next.run(request).await;
    let found = response.status().is_success() || response.status() == StatusCode::NOT_MODIFIED;
    let policy = if named_by_content && found { "public, max-age=31536000, immutable" } else { "no-cache" };
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(policy));
    // ServeDir picks the `.br` or `.gz` by Accept-Encoding but does not say so to caches.
    crate::compress::vary_on_accept_encoding(headers);
    response
}

/// Sends anyone not signed in to the login page, remembering where they were going.
async fn require_sign_in(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    // Page-data endpoints check the caller themselves and answer errors, not redirects.
    if path.starts_with("/srv/") {
        let limit = match path {
            "/srv/import_prices" => api::prices::MAX_CATALOG_BYTES,
            "/srv/import_grid" => api::grid::MAX_GRID_BYTES,
            _ => crate::MAX_BODY_BYTES,
        };
        return match crate::buffer_body(request, limit).await {
            // Page data is the caller's own, and some of it is a secret shown once (a new
            // token or password): no cache or history may keep it.
            Ok(request) => {
                let mut response = caller_error_as_4xx(next.run(request).await).await;
                response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                response
            }
            Err(refusal) => refusal.into_response(),
        };
    }
    if path == "/login" {
        return next.run(request).await;
    }
    match auth::authenticate(&state.store, request.headers()).await {
        // A signed-in page holds that person's data (the Admin page lists people and tokens):
        // no shared cache or browser history keeps it after they sign out.
        Ok(Some(Principal::User { .. })) => {
            let mut response = next.run(request).await;
            response.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        _ => {
            // The whole link, query included, so a shared scenario opens as shared after sign-in.
            let wanted = request.uri().path_and_query().map_or(path, |pq| pq.as_str());
            let target = format!("/login?next={}", encode_query_value(wanted));
            (StatusCode::SEE_OTHER, [(LOCATION, target)]).into_response()
        }
    }
}

/// A page-data call whose arguments could not be read (a missing or mistyped field) is the
/// caller's mistake, but Leptos answers it 500 with `Args|…` or `Deserialization|…`: answer 400
/// instead, so it is neither logged nor alerted on as a server fault. The body keeps the server
/// function encoding (`ServerError|…`), so the page's own client still reads the reason.
async fn caller_error_as_4xx(response: Response) -> Response {
    if response.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return ApiError::Internal(anyhow::anyhow!("page data error too long to read")).into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    for prefix in ["Args|", "Deserialization|"] {
        if let Some(reason) = text.strip_prefix(prefix) {
            parts.status = StatusCode::BAD_REQUEST;
            parts.headers.remove(axum::http::header::CONTENT_LENGTH);
            let body = format!("ServerError|the call's arguments are wrong: {reason}");
            return Response::from_parts(parts, axum::body::Body::from(body));
        }
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Percent-encodes `text` as one query value: everything but unreserved characters and `/`.
fn encode_query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// An import's answer as the Admin page shows it.
fn outcome(result: Result<api::prices::Imported, api::prices::Rejected>) -> ImportOutcome {
    match result {
        Ok(done) => ImportOutcome::Imported { version: done.version, rows: done.rows },
        Err(rejected) => ImportOutcome::Rejected {
            error: rejected.error,
            problems: rejected.errors.into_iter().map(|e| (e.line, e.column, e.reason)).collect(),
        },
    }
}
