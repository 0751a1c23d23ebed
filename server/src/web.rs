//! The web app: Leptos pages rendered here and hydrated in the browser, the bundle under
//! `/pkg`, and the data the pages ask for.

use std::sync::Arc;

use app::backend::{Backend, BackendHandle, PageError};
use app::data::{
    CatalogView, ImportOutcome, MeasuredFleet, MeasuredNode, MeasuredService, PriceRowView, ReportSummaryView,
    ReportsView, RunView, ScenarioList, ScenarioView, TransportRun, TrendPoint,
};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};
use model::{FieldError, FleetView, NodeSummary, RunDetail, Suite, measured};
use tower_http::services::ServeDir;
use uuid::Uuid;

use crate::auth::{self, Caller, Principal, Role};
use crate::error::ApiError;
use crate::store::ReportRecord;
use crate::store::{RunFilter, Store};
use crate::{AppState, api, prices, reports};

/// How many runs the Fleet page lists.
const RECENT_RUNS: u32 = 20;

/// How many of a node's runs the run page lists and follows in its trend charts.
const NODE_RUNS: u32 = 30;

struct WebBackend {
    store: Store,
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
    /// Runs `f` for the caller identified by `headers`, once they hold `role`.
    fn answer<T, F, Fut>(&self, headers: HeaderMap, role: Role, f: F) -> Answer<T>
    where
        T: Send + 'static,
        F: FnOnce(Store, Caller) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, ApiError>> + Send + 'static,
    {
        let store = self.store.clone();
        Box::pin(async move {
            let caller = Caller(auth::authenticate(&store, &headers).await.map_err(shown)?);
            caller.require(role).map_err(shown)?;
            f(store, caller).await.map_err(shown)
        })
    }
}

impl Backend for WebBackend {
    fn fleet(&self, headers: HeaderMap) -> Answer<FleetView> {
        self.answer(headers, Role::Viewer, |store, caller| async move {
            let user = caller.require(Role::Viewer)?.0.to_string();
            let nodes = store.list_nodes().await?;
            let filter = RunFilter { limit: RECENT_RUNS, ..RunFilter::default() };
            let recent_runs = store.list_runs(&filter).await?;
            Ok(FleetView { user, nodes, recent_runs })
        })
    }

    fn measured_nodes(&self, headers: HeaderMap) -> Answer<MeasuredFleet> {
        self.answer(headers, Role::Viewer, |store, _| async move {
            let mut nodes = Vec::new();
            for (node, detail) in latest_with_suite(&store, Suite::Quant).await? {
                let (hourly_usd, price_source) = match (node.hourly_usd, &node.instance_type) {
                    (Some(price), _) => (Some(price), "the node's operator (--hourly-usd)".to_string()),
                    (None, Some(instance)) => match store.catalog_price(instance).await? {
                        Some((price, source)) => (Some(price), source),
                        None => (None, format!("nowhere: {instance} is not in the price catalog")),
                    },
                    (None, None) => (None, "nowhere: the node gave no instance type or price".to_string()),
                };
                let run_id = detail.run.run_id.to_string();
                let Some(hardware) = measured::hardware_from_quant_run(
                    &node,
                    &run_id,
                    &detail.measurements,
                    hourly_usd.unwrap_or(0.0),
                    1.0,
                ) else {
                    continue;
                };
                let best_throughput_rps = detail
                    .measurements
                    .iter()
                    .filter(|m| {
                        m.is(model::Case::MlpThroughput)
                            && m.parameters.get("variant").map(String::as_str) == Some("fp32")
                    })
                    .filter_map(|m| m.stats.map(|s| s.mean))
                    .max_by(f64::total_cmp);
                nodes.push(MeasuredNode {
                    node_id: node.node_id.clone(),
                    hostname: node.hostname.clone(),
                    run_id,
                    run_started_at_ms: detail.run.started_at_ms,
                    hourly_usd,
                    price_source,
                    best_throughput_rps,
                    hardware,
                });
            }
            let services = measured_services(&store).await?;
            Ok(MeasuredFleet { nodes, services })
        })
    }

    fn transport_runs(&self, headers: HeaderMap) -> Answer<Vec<TransportRun>> {
        self.answer(headers, Role::Viewer, |store, _| async move {
            let mut runs: Vec<TransportRun> = latest_with_suite(&store, Suite::Transport)
                .await?
                .into_iter()
                .map(|(node, detail)| {
                    let run_id = detail.run.run_id.to_string();
                    TransportRun {
                        points: measured::transport_points(&run_id, &detail.measurements),
                        node_id: node.node_id,
                        hostname: node.hostname,
                        run_id,
                        started_at_ms: detail.run.started_at_ms,
                    }
                })
                .collect();
            runs.sort_by_key(|r| std::cmp::Reverse(r.started_at_ms));
            Ok(runs)
        })
    }

    fn run_page(&self, headers: HeaderMap, run_id: String) -> Answer<RunView> {
        self.answer(headers, Role::Viewer, move |store, _| async move {
            let id =
                Uuid::parse_str(&run_id).map_err(|_| ApiError::BadRequest(format!("'{run_id}' is not a run id")))?;
            let detail =
                store.get_run_figures(id).await?.ok_or_else(|| ApiError::NotFound(format!("no run {run_id}")))?;
            let filter = RunFilter { node: Some(detail.run.node_id.clone()), limit: NODE_RUNS, ..RunFilter::default() };
            let node_runs = store.list_runs(&filter).await?;
            let mut trends = Vec::new();
            for &suite in &detail.run.suites {
                let mut points = Vec::new();
                let mut label = None;
                for run in node_runs.iter().filter(|r| r.suites.contains(&suite)).rev() {
                    let Some(other) = store.get_run_figures(run.run_id).await? else { continue };
                    if let Some((name, unit, value)) = measured::headline(suite, &other.measurements) {
                        label = Some((name, unit));
                        points.push(TrendPoint {
                            run_id: run.run_id.to_string(),
                            started_at_ms: run.started_at_ms,
                            value,
                        });
                    }
                }
                if let Some((name, unit)) = label {
                    trends.push((name, unit, points));
                }
            }
            Ok(RunView { detail, node_runs, trends })
        })
    }

    fn save_scenario(&self, headers: HeaderMap, kind: String, name: String, query: String) -> Answer<ScenarioView> {
        self.answer(headers, Role::Planner, move |store, caller| async move {
            let inputs = app::form::from_query(&query).map_err(|e| FieldError::new("inputs", e))?;
            api::scenarios::create(&store, &caller, api::scenarios::NewScenario { kind, name, inputs }).await
        })
    }

    fn scenarios(&self, headers: HeaderMap) -> Answer<ScenarioList> {
        self.answer(headers, Role::Viewer, |store, caller| async move {
            let items = api::scenarios::all(&store, &caller).await?;
            Ok(ScenarioList { items, can_edit: caller.require(Role::Planner).is_ok() })
        })
    }

    fn scenario(&self, headers: HeaderMap, id: String) -> Answer<ScenarioView> {
        self.answer(headers, Role::Viewer, move |store, caller| async move {
            api::scenarios::one(&store, &caller, &id).await
        })
    }

    fn rename_scenario(&self, headers: HeaderMap, id: String, name: String) -> Answer<ScenarioView> {
        self.answer(headers, Role::Planner, move |store, caller| async move {
            api::scenarios::rename(&store, &caller, &id, &name).await
        })
    }

    fn delete_scenario(&self, headers: HeaderMap, id: String) -> Answer<()> {
        self.answer(headers, Role::Planner, move |store, caller| async move {
            api::scenarios::delete(&store, &caller, &id).await
        })
    }

    fn price_catalog(&self, headers: HeaderMap) -> Answer<CatalogView> {
        self.answer(headers, Role::Viewer, |store, caller| async move {
            let version = store.catalog_version().await?.ok_or_else(|| anyhow::anyhow!("no price catalog loaded"))?;
            let rows = store.price_catalog().await?;
            Ok(CatalogView {
                version: version.version,
                created_at_ms: version.created_at_ms,
                created_by: version.created_by,
                origin: version.origin,
                csv: prices::to_csv(&rows),
                rows: rows.into_iter().map(price_view).collect(),
                can_edit: caller.require(Role::Finance).is_ok(),
            })
        })
    }

    fn reports(&self, headers: HeaderMap) -> Answer<ReportsView> {
        self.answer(headers, Role::Finance, |store, _| async move {
            let records = store.list_reports(200).await?;
            let newest = match records.first() {
                Some(r) => store.report(&r.id).await?,
                None => None,
            };
            let (top, others, savings) = match &newest {
                None => (vec![], 0, vec![]),
                Some(report) => {
                    let mut rows: Vec<_> = report.rows.iter().collect();
                    rows.sort_by_key(|r| std::cmp::Reverse(r.total_micro_usd));
                    let top = rows
                        .iter()
                        .take(15)
                        .map(|r| (r.deployment.clone(), r.serving_micro_usd, r.training_micro_usd))
                        .collect();
                    let savings = reports::KINDS
                        .iter()
                        .map(|k| {
                            (
                                serde_json::to_value(k)
                                    .ok()
                                    .and_then(|v| v.as_str().map(str::to_string))
                                    .unwrap_or_default(),
                                report.saving_micro_usd(*k),
                            )
                        })
                        .collect();
                    (top, rows.len().saturating_sub(15), savings)
                }
            };
            let planner_scenarios = store.count_scenarios(app::planner::KIND).await? as usize;
            Ok(ReportsView {
                reports: records.into_iter().map(report_view).collect(),
                top,
                others,
                savings,
                planner_scenarios,
            })
        })
    }

    fn report_from_scenarios(
        &self,
        headers: HeaderMap,
        name: String,
        team: String,
        from: String,
        to: String,
    ) -> Answer<ReportSummaryView> {
        self.answer(headers, Role::Finance, move |store, caller| async move {
            let deployments: Vec<reports::DeploymentInput> = store
                .list_scenarios(10_000)
                .await?
                .iter()
                .filter(|s| s.kind == app::planner::KIND)
                .map(|s| Ok(deployment_of(s, &s.inputs()?, team.trim())))
                .collect::<anyhow::Result<_>>()?;
            if deployments.is_empty() {
                return Err(FieldError::new(
                    "deployments",
                    "no planner scenario is saved yet; save one on the Planner page",
                )
                .into());
            }
            let request = reports::ReportRequest { name, from, to, deployments };
            Ok(report_view(api::reports::build_and_store(&store, &caller, request).await?))
        })
    }

    fn import_prices(&self, headers: HeaderMap, csv: String) -> Answer<ImportOutcome> {
        self.answer(headers, Role::Finance, move |store, caller| async move {
            Ok(match api::prices::replace(&store, &caller, &csv).await? {
                Ok(done) => ImportOutcome::Imported { version: done.version, rows: done.rows },
                Err(rejected) => ImportOutcome::Rejected {
                    error: rejected.error,
                    problems: rejected.errors.into_iter().map(|e| (e.line, e.column, e.reason)).collect(),
                },
            })
        })
    }
}

fn report_view(r: ReportRecord) -> ReportSummaryView {
    ReportSummaryView {
        id: r.id,
        name: r.name,
        from: r.period_from,
        to: r.period_to,
        catalog_version: r.catalog_version,
        created_by: r.created_by,
        created_at_ms: r.created_at_ms,
        deployments: r.deployment_count,
        total_micro_usd: r.total_micro_usd,
    }
}

/// A saved planner scenario as a report deployment: its monthly volume, training, serving cost
/// per request (entered, or derived from price and throughput as the planner does), and its
/// distillation option as a recommendation.
fn deployment_of(
    scenario: &crate::store::ScenarioRecord,
    inputs: &std::collections::BTreeMap<String, String>,
    team: &str,
) -> reports::DeploymentInput {
    let num = |key: &str| -> f64 {
        let spec = app::planner::FIELDS.iter().find(|f| f.key == key);
        let text = inputs.get(key).map(String::as_str).or(spec.map(|s| s.default)).unwrap_or("0");
        app::form::parse_number(text).unwrap_or(0.0)
    };
    let flag = |key: &str| num(key) == 1.0;
    let serving = if flag("derive") {
        num("hourly") / 3600.0 / (num("throughput") * num("utilization") / 100.0)
    } else {
        num("serving")
    };
    let recommendations = if flag("optimize") {
        vec![reports::RecommendationInput::cheaper_model(
            reports::Kind::Distillation,
            num("saving") / 100.0,
            num("extra"),
        )]
    } else {
        vec![]
    };
    reports::DeploymentInput {
        name: scenario.name.clone(),
        team: (!team.is_empty()).then(|| team.to_string()),
        instance_type: None,
        purchase_option: "on_demand".into(),
        region: None,
        replicas: None,
        serving_cost_per_request_usd: Some(reports::Amount::Number(serving)),
        requests_per_month: num("requests").max(0.0).round() as u64,
        training_cost_usd: Some(reports::Amount::Number(num("training"))),
        retrains_per_month: num("retrains"),
        run_ids: vec![],
        scenario_id: Some(scenario.id.clone()),
        recommendations,
    }
}

fn price_view(r: prices::PriceRow) -> PriceRowView {
    PriceRowView {
        gpus: match (&r.gpu_model, r.gpu_count) {
            (Some(model), n) if n > 0 => format!("{n} × {model}"),
            _ => String::new(),
        },
        provider: r.provider,
        instance_type: r.instance_type,
        vcpus: r.vcpus,
        memory_bytes: r.memory_bytes,
        hourly_micro_usd: r.hourly_micro_usd,
        purchase_option: r.purchase_option,
        region: r.region,
        source: r.source,
        as_of: r.as_of,
    }
}

/// Each node with its newest run that has `suite`.
/// Services the endpoint suite measured, newest run first, each calibrated by the model.
async fn measured_services(store: &Store) -> Result<Vec<MeasuredService>, ApiError> {
    const SERVICES: u32 = 10;
    let filter = RunFilter { suite: Some(Suite::Endpoint), limit: SERVICES, ..RunFilter::default() };
    let mut services = Vec::new();
    for run in store.list_runs(&filter).await? {
        let Some(detail) = store.get_run_figures(run.run_id).await? else { continue };
        let Some(check) = model::endpoint::check(&model::endpoint::steps(&detail.measurements)) else { continue };
        let first = detail.measurements.iter().find(|m| m.suite == Suite::Endpoint);
        let param = |key: &str| first.and_then(|m| m.parameters.get(key).cloned());
        let c = check.calibration;
        services.push(MeasuredService {
            run_id: run.run_id.to_string(),
            started_at_ms: run.started_at_ms,
            hostname: run.hostname.clone(),
            target: param("target").unwrap_or_default(),
            protocol: param("protocol").unwrap_or_default(),
            model: param("model"),
            service_mean_s: c.service_mean,
            service_cv: c.service_cv,
            concurrency: c.concurrency,
            saturation_rps: c.saturation_rps,
            saturation_measured: c.saturation_measured,
            mape_p99: check.mape_p99,
        });
    }
    Ok(services)
}

async fn latest_with_suite(store: &Store, suite: Suite) -> Result<Vec<(NodeSummary, RunDetail)>, ApiError> {
    let mut out = Vec::new();
    for node in store.list_nodes().await? {
        let filter =
            RunFilter { node: Some(node.node_id.clone()), suite: Some(suite), limit: 1, ..RunFilter::default() };
        let Some(run) = store.list_runs(&filter).await?.into_iter().next() else { continue };
        if let Some(detail) = store.get_run_figures(run.run_id).await? {
            out.push((node, detail));
        }
    }
    Ok(out)
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
    if path.starts_with("/srv/") {
        let limit = if path == "/srv/import_prices" { api::prices::MAX_CATALOG_BYTES } else { crate::MAX_BODY_BYTES };
        return match crate::buffer_body(request, limit).await {
            Ok(request) => caller_error_as_4xx(next.run(request).await).await,
            Err(refusal) => refusal.into_response(),
        };
    }
    if path == "/login" {
        return next.run(request).await;
    }
    match auth::authenticate(&state.store, request.headers()).await {
        Ok(Some(Principal::User { .. })) => next.run(request).await,
        _ => {
            // The whole link, query included, so a shared scenario opens as shared after sign-in.
            let wanted = request.uri().path_and_query().map_or(path, |pq| pq.as_str());
            let target = format!("/login?next={}", encode_query_value(wanted));
            (StatusCode::SEE_OTHER, [(LOCATION, target)]).into_response()
        }
    }
}

/// A page-data call whose arguments could not be read (a missing or mistyped field) is the
/// caller's mistake, but Leptos answers it 500 with `Args|…` or `Deserialization|…`: say 400 and
/// what was wrong instead, so it is neither logged nor alerted on as a server fault.
async fn caller_error_as_4xx(response: Response) -> Response {
    if response.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
        return ApiError::Internal(anyhow::anyhow!("page data error too long to read")).into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    for prefix in ["Args|", "Deserialization|"] {
        if let Some(reason) = text.strip_prefix(prefix) {
            return ApiError::BadRequest(format!("the call's arguments are wrong: {reason}")).into_response();
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
