//! Finance reports over HTTP (roles finance and admin): build one for a period and a set of
//! deployments, list them, read one, and download it as CSV, XLSX or Parquet.

use std::collections::HashSet;

use app::data::{ReportSummaryView, ReportsView, TeamChargeView};
use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use model::FieldError;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;
use uuid::Uuid;

use crate::AppState;
use crate::auth::{Caller, Needs, Role, need};
use crate::error::ApiError;
use crate::json::ApiJson;
use crate::reports::{self, Prices, Report, ReportRequest};
use crate::store::{ReportRecord, Store};

/// Largest report request: 10,000 deployments take about 4 MiB.
pub const MAX_REPORT_BODY_BYTES: usize = 32 * 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create).layer(DefaultBodyLimit::max(MAX_REPORT_BODY_BYTES)))
        .routes(routes!(get_one))
        .routes(routes!(get_part))
}

/// Prices, checks and stores a report for `caller`.
pub async fn build_and_store(store: &Store, caller: &Caller, request: ReportRequest) -> Result<ReportRecord, ApiError> {
    let (name, _) = caller.require(Role::Finance)?;
    let name = name.to_string();
    let version = store.catalog_version().await?.map(|v| v.version).unwrap_or(0);
    let catalog = store.price_catalog().await?;
    // The grid-intensity table only where a deployment gives its power; one that cannot be
    // read leaves those deployments to name the figure they lack, not every report failing.
    let (grid_version, grid) = if request.deployments.iter().any(|d| d.power_watts.is_some()) {
        match store.grid_table().await {
            Ok(Some((version, rows))) => (version.version, rows),
            Ok(None) => (0, vec![]),
            Err(e) => {
                tracing::error!(error = %e, "the grid-intensity table cannot be read; reports count no grid from it");
                (0, vec![])
            }
        }
    } else {
        (0, vec![])
    };
    let mut wanted: Vec<Uuid> = request
        .deployments
        .iter()
        .flat_map(|d| d.run_ids.iter().chain(d.recommendations.iter().flat_map(|r| r.run_ids.iter())))
        .copied()
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    wanted.sort();
    let known = store.existing_runs(&wanted).await?;
    let scenarios =
        store.existing_scenarios(request.deployments.iter().filter_map(|d| d.scenario_id.as_deref())).await?;
    let id = Uuid::new_v4().to_string();
    let mut report = tokio::task::spawn_blocking(move || {
        let (known_run, known_scenario) = (|run: &Uuid| known.contains(run), |id: &str| scenarios.contains(id));
        reports::build(
            id,
            &request,
            &Prices::new(&catalog).with_grid(&grid, grid_version),
            version,
            &known_run,
            &known_scenario,
        )
    })
    .await
    .map_err(|e| ApiError::Internal(anyhow::anyhow!("report task failed: {e}")))??;
    report.generated_at_ms = crate::store::now_ms();
    report.generated_by = name.clone();
    let record = store.insert_report(&report, &name).await?;
    tracing::info!(report = record.id, deployments = record.deployment_count, by = name, "report built");
    Ok(record)
}

/// Builds and stores a report.
#[utoipa::path(post, path = "/api/v1/reports", tag = "reports", request_body = ReportRequest,
    responses((status = 201, body = ReportRecord), (status = 400, description = "malformed JSON"), (status = 401),
        (status = 403), (status = 413, description = "over 32 MiB"),
        (status = 422, description = "a field is wrong (an unknown instance type, run, date…); `field` names it")))]
pub async fn create(
    State(state): State<AppState>,
    caller: Needs<need::Finance>,
    ApiJson(request): ApiJson<ReportRequest>,
) -> Result<(StatusCode, Json<ReportRecord>), ApiError> {
    Ok((StatusCode::CREATED, Json(build_and_store(&state.store, &caller, request).await?)))
}

/// Every report, newest first.
#[utoipa::path(get, path = "/api/v1/reports", tag = "reports",
    responses((status = 200, body = Vec<ReportRecord>), (status = 401), (status = 403)))]
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<ReportRecord>>, ApiError> {
    caller.require(Role::Finance)?;
    Ok(Json(state.store.list_reports(1000).await?))
}

/// One report as JSON (`{id}`), or its table as `{id}.csv`, `{id}.xlsx` or `{id}.parquet`.
#[utoipa::path(get, path = "/api/v1/reports/{id}", tag = "reports",
    responses((status = 200, body = Report, description = "JSON, or the file its extension names"),
        (status = 401), (status = 403), (status = 404)))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(Role::Finance)?;
    let (id, format) = match id.rsplit_once('.') {
        Some((id, ext)) => (id.to_string(), Some(ext.to_string())),
        None => (id, None),
    };
    if !crate::store::could_be_id(&id) {
        return Err(ApiError::NotFound("no report has an id like that".into()));
    }
    let report = state.store.report(&id).await?.ok_or_else(|| ApiError::NotFound(format!("no report {id}")))?;
    let Some(format) = format else { return Ok(Json(&report).into_response()) };
    let (mime, ext) = match format.as_str() {
        "csv" => ("text/csv; charset=utf-8", "csv"),
        "parquet" => ("application/vnd.apache.parquet", "parquet"),
        "xlsx" => ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"),
        other => return Err(ApiError::NotFound(format!("no export format '{other}'; use csv, xlsx or parquet"))),
    };
    let stem = file_stem(&report);
    let bytes = EXPORTING
        .run(move || match ext {
            "csv" => reports::to_csv(&report).map_err(|e| e.to_string()),
            "parquet" => reports::to_parquet(&report).map_err(|e| e.to_string()),
            _ => reports::to_xlsx(&report).map_err(|e| e.to_string()),
        })
        .await?
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("export failed: {e}")))?;
    Ok((
        [(CONTENT_TYPE, mime.to_string()), (CONTENT_DISPOSITION, format!("attachment; filename=\"{stem}.{ext}\""))],
        bytes,
    )
        .into_response())
}

/// Exports are whole files built in memory (an XLSX of 10,000 deployments is a good part of a
/// second of CPU), and a forecast is months × deployments: on the blocking pool, a few at a
/// time, so that downloads never stall the runtime serving everything else.
pub(crate) static EXPORTING: crate::blocking::Limited = crate::blocking::Limited::new();

/// A report's chargeback by team and cost centre, with idle cost charged by the report's
/// policy (`{id}/chargeback`), or its 12-month forecast by team and deployment beside their
/// budgets (`{id}/forecast`): JSON, or with `.csv`, `.xlsx` or `.parquet` that file.
#[utoipa::path(get, path = "/api/v1/reports/{id}/{file}", tag = "reports",
    params(("id" = String, Path, description = "the report"),
        ("file" = String, Path, description = "`chargeback` or `forecast`, and optionally `.csv`, `.xlsx` or `.parquet`")),
    responses((status = 200, description = "JSON (chargeback: a line per team; forecast: months and lines), or the file its extension names"),
        (status = 401), (status = 403), (status = 404)))]
pub async fn get_part(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, file)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    caller.require(Role::Finance)?;
    let (part, ext) = match file.split_once('.') {
        Some((part, ext)) => (part, Some(ext)),
        None => (file.as_str(), None),
    };
    if !matches!(part, "chargeback" | "forecast") {
        return Err(ApiError::NotFound(format!("no report part '{part}'; use chargeback or forecast")));
    }
    if !crate::store::could_be_id(&id) {
        return Err(ApiError::NotFound("no report has an id like that".into()));
    }
    let report = state.store.report(&id).await?.ok_or_else(|| ApiError::NotFound(format!("no report {id}")))?;
    let budgets = if part == "forecast" { state.store.budgets().await? } else { Vec::new() };
    let (part, ext) = (part.to_string(), ext.map(str::to_string));
    EXPORTING
        .run(move || {
            let exported = if part == "chargeback" {
                match ext.as_deref() {
                    None => return Ok(Json(crate::chargeback::teams(&report)).into_response()),
                    Some(ext) => crate::chargeback::export(&report, ext),
                }
            } else {
                let forecast = crate::forecast::forecast(&report, &budgets);
                match ext.as_deref() {
                    None => return Ok(Json(forecast).into_response()),
                    Some(ext) => crate::forecast::export(&report, &forecast, ext),
                }
            };
            let ext = ext.unwrap_or_default();
            let (bytes, mime) = exported
                .ok_or_else(|| ApiError::NotFound(format!("no export format '{ext}'; use csv, xlsx or parquet")))?
                .map_err(|e| ApiError::Internal(anyhow::anyhow!("export failed: {e}")))?;
            let name = file_stem(&report);
            Ok((
                [
                    (CONTENT_TYPE, mime.to_string()),
                    (CONTENT_DISPOSITION, format!("attachment; filename=\"{name}-{part}.{ext}\"")),
                ],
                bytes,
            )
                .into_response())
        })
        .await?
}

/// A report's name and first day as a file name: letters, digits and dashes only.
fn file_stem(report: &Report) -> String {
    let name: String =
        report.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    format!("{name}-{}", report.from)
}

/// Teams the Reports page shows the chargeback of: the costliest.
const CHARGEBACK_SHOWN: usize = 20;

/// Every report and the newest one's breakdown and savings, for the Reports page.
pub async fn overview(store: &Store, caller: &Caller) -> Result<ReportsView, ApiError> {
    caller.require(Role::Finance)?;
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
                        serde_json::to_value(k).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
                        report.saving_micro_usd(*k),
                    )
                })
                .collect();
            (top, rows.len().saturating_sub(15), savings)
        }
    };
    let planner_scenarios = store.count_scenarios(app::pages::planner::KIND).await? as usize;
    let (chargeback, chargeback_others, idle_known, idle_policy) = match &newest {
        None => (vec![], 0, false, Default::default()),
        Some(report) => {
            let mut teams = crate::chargeback::teams(report);
            teams.sort_by_key(|t| std::cmp::Reverse(t.chargeback_micro_usd));
            let others = teams.len().saturating_sub(CHARGEBACK_SHOWN);
            let teams = teams.into_iter().take(CHARGEBACK_SHOWN).map(|t| TeamChargeView {
                team: t.team,
                cost_centre: t.cost_centre,
                deployments: t.deployments,
                used_serving: t.used_serving_micro_usd,
                idle: t.idle_micro_usd,
                idle_charged: t.idle_charged_micro_usd,
                training: t.training_micro_usd,
                chargeback: t.chargeback_micro_usd,
            });
            let policy = report.idle_policy;
            let known = report.rows.iter().any(|r| r.needed_replicas.is_some());
            (teams.collect(), others, known, (policy.name().to_string(), policy.describe().to_string()))
        }
    };
    let emissions = newest.as_ref().and_then(emissions_of);
    Ok(ReportsView {
        emissions,
        reports: records.into_iter().map(report_view).collect(),
        top,
        others,
        savings,
        planner_scenarios,
        chargeback,
        chargeback_others,
        idle_known,
        idle_policy,
    })
}

/// A report's energy and emissions over the deployments that gave their power.
fn emissions_of(report: &Report) -> Option<app::data::EmissionsView> {
    let counted: Vec<_> = report.rows.iter().filter_map(|r| r.carbon.as_ref().map(|c| (r, c))).collect();
    if counted.is_empty() {
        return None;
    }
    let co2e_kg: f64 = counted.iter().map(|(_, c)| c.co2e_kg).sum();
    let requests: u64 = counted.iter().map(|(r, _)| r.requests).sum();
    Some(app::data::EmissionsView {
        co2e_kg,
        energy_kwh: counted.iter().map(|(_, c)| c.energy_kwh).sum(),
        g_per_1000_requests: (requests > 0).then(|| co2e_kg * 1e6 / requests as f64),
        counted: counted.len(),
        deployments: report.rows.len(),
        grid_version: report.grid_version,
    })
}

/// Builds and stores a report for `from`..=`to` with one deployment per saved Planner scenario,
/// each charged to `team` (none when empty).
pub async fn from_scenarios(
    store: &Store,
    caller: &Caller,
    name: String,
    team: &str,
    from: String,
    to: String,
) -> Result<ReportSummaryView, ApiError> {
    caller.require(Role::Finance)?;
    let deployments: Vec<reports::DeploymentInput> = store
        .list_scenarios(10_000)
        .await?
        .iter()
        .filter(|s| s.kind == app::pages::planner::KIND)
        .map(|s| Ok(deployment_of(s, &s.inputs()?, team.trim())))
        .collect::<anyhow::Result<_>>()?;
    if deployments.is_empty() {
        return Err(
            FieldError::new("deployments", "no planner scenario is saved yet; save one on the Planner page").into()
        );
    }
    let request = reports::ReportRequest { name, from, to, deployments, idle_policy: Default::default() };
    Ok(report_view(build_and_store(store, caller, request).await?))
}

pub fn report_view(r: ReportRecord) -> ReportSummaryView {
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
        let spec = app::pages::planner::FIELDS.iter().find(|f| f.key == key);
        let text = inputs.get(key).map(String::as_str).or(spec.map(|s| s.default)).unwrap_or("0");
        app::components::form::parse_number(text).unwrap_or(0.0)
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
        cost_centre: None,
        instance_type: None,
        purchase_option: "on_demand".into(),
        region: None,
        replicas: None,
        needed_replicas: None,
        sizing: None,
        serving_cost_per_request_usd: Some(reports::Amount::Number(serving)),
        requests_per_month: num("requests").max(0.0).round() as u64,
        // The Planner takes any growth; a forecast only −99 % to +100 % a month.
        growth_per_month: (num("growth") / 100.0)
            .clamp(model::plan::forecast::GROWTH_RANGE.0, model::plan::forecast::GROWTH_RANGE.1),
        training_cost_usd: Some(reports::Amount::Number(num("training"))),
        retrains_per_month: num("retrains"),
        run_ids: vec![],
        scenario_id: Some(scenario.id.clone()),
        recommendations,
        power_watts: None,
        power_source: None,
        pue: None,
        grid_g_co2e_per_kwh: None,
    }
}
