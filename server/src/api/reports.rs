//! Finance reports over HTTP (roles finance and admin): build one for a period and a set of
//! deployments, list them, read one, and download it as CSV, XLSX or Parquet.

use std::collections::HashSet;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use uuid::Uuid;

use crate::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::json;
use crate::reports::{self, Prices, Report, ReportRequest};
use crate::store::{ReportRecord, Store};

/// Largest report request: 10,000 deployments take about 4 MiB.
pub const MAX_REPORT_BODY_BYTES: usize = 32 * 1024 * 1024;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/reports", get(list).post(create).layer(DefaultBodyLimit::max(MAX_REPORT_BODY_BYTES)))
        .route("/api/v1/reports/{id}", get(get_one))
}

/// Prices, checks and stores a report for `caller`.
pub async fn build_and_store(store: &Store, caller: &Caller, request: ReportRequest) -> Result<ReportRecord, ApiError> {
    let (name, _) = caller.require(Role::Finance)?;
    let name = name.to_string();
    let version = store.catalog_version().await?.map(|v| v.version).unwrap_or(0);
    let catalog = store.price_catalog().await?;
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
    if let Some((i, missing)) =
        request.deployments.iter().enumerate().find_map(|(i, d)| {
            d.scenario_id.as_ref().filter(|s| s.len() <= 64 && !scenarios.contains(*s)).map(|s| (i, s))
        })
    {
        return Err(model::FieldError::new(
            format!("deployments[{i}].scenario_id"),
            format!("no saved scenario {missing}"),
        )
        .into());
    }
    let id = Uuid::new_v4().to_string();
    let mut report = tokio::task::spawn_blocking(move || {
        reports::build(id, &request, &Prices::new(&catalog), version, &|run| known.contains(run))
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
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<ReportRecord>), ApiError> {
    caller.require(Role::Finance)?;
    let request: ReportRequest = json::from_body(&headers, body)?;
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
    let report = state.store.report(&id).await?.ok_or_else(|| ApiError::NotFound(format!("no report {id}")))?;
    let file = |bytes: Vec<u8>, mime: &str, ext: &str| {
        let name: String =
            report.name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
        (
            [
                (CONTENT_TYPE, mime.to_string()),
                (CONTENT_DISPOSITION, format!("attachment; filename=\"{name}-{}.{ext}\"", report.from)),
            ],
            bytes,
        )
            .into_response()
    };
    let failed = |e: String| ApiError::Internal(anyhow::anyhow!("export failed: {e}"));
    Ok(match format.as_deref() {
        None => Json(&report).into_response(),
        Some("csv") => {
            file(reports::to_csv(&report).map_err(|e| failed(e.to_string()))?, "text/csv; charset=utf-8", "csv")
        }
        Some("parquet") => file(
            reports::to_parquet(&report).map_err(|e| failed(e.to_string()))?,
            "application/vnd.apache.parquet",
            "parquet",
        ),
        Some("xlsx") => file(
            reports::to_xlsx(&report).map_err(|e| failed(e.to_string()))?,
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "xlsx",
        ),
        Some(other) => return Err(ApiError::NotFound(format!("no export format '{other}'; use csv, xlsx or parquet"))),
    })
}
