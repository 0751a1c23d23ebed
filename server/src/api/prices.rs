//! The price catalog over HTTP: exported and imported as CSV. An import replaces the whole
//! catalog as a new version, or, when any cell is wrong, changes nothing and says where.

use app::data::{CatalogView, PriceRowView};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::prices::{self, CellError};
use crate::store::{CatalogVersion, Store};

/// Largest catalog upload.
pub const MAX_CATALOG_BYTES: usize = 8 * 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(export, import).layer(DefaultBodyLimit::max(MAX_CATALOG_BYTES)))
        .routes(routes!(versions))
}

/// What an import did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Imported {
    pub version: i64,
    pub rows: usize,
}

/// Why an import changed nothing.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Rejected {
    pub error: String,
    pub errors: Vec<CellError>,
}

/// Checks and stores a catalog for `caller`: the new version, or every located problem.
pub async fn replace(store: &Store, caller: &Caller, csv: &str) -> Result<Result<Imported, Rejected>, ApiError> {
    let (name, _) = caller.require(Role::Finance)?;
    match prices::parse(csv) {
        Ok(rows) => {
            let version = store.replace_price_catalog(&rows, name, "import").await?;
            tracing::info!(version, rows = rows.len(), by = name, "price catalog imported");
            Ok(Ok(Imported { version, rows: rows.len() }))
        }
        Err(errors) => Ok(Err(rejected("the catalog", errors))),
    }
}

/// The current catalog as CSV.
#[utoipa::path(get, path = "/api/v1/prices", tag = "prices",
    responses((status = 200, description = "the catalog as CSV; `x-catalog-version` names its version", content_type = "text/csv"),
        (status = 401), (status = 403)))]
pub async fn export(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    caller.require(Role::Viewer)?;
    let version = state.store.catalog_version().await?.map(|v| v.version).unwrap_or(0);
    let rows = state.store.price_catalog().await?;
    Ok(csv_download("price-catalog", "x-catalog-version", version, prices::to_csv(&rows)))
}

/// A versioned CSV as a download named `{stem}-v{version}.csv`, its version also in the header
/// `version_header`.
pub(crate) fn csv_download(stem: &str, version_header: &'static str, version: i64, csv: String) -> Response {
    (
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8".to_string()),
            (CONTENT_DISPOSITION, format!("attachment; filename=\"{stem}-v{version}.csv\"")),
            (axum::http::HeaderName::from_static(version_header), version.to_string()),
        ],
        csv,
    )
        .into_response()
}

/// Replaces the catalog with a CSV (role finance or admin).
#[utoipa::path(post, path = "/api/v1/prices", tag = "prices",
    request_body(content = String, content_type = "text/csv", description = "the header of GET /api/v1/prices, then one row per price"),
    responses((status = 201, body = Imported), (status = 400, description = "not UTF-8 text"),
        (status = 401), (status = 403), (status = 413, description = "over 8 MiB"),
        (status = 415, description = "not text/csv"),
        (status = 422, body = Rejected, description = "each wrong cell with its line and column; nothing imported")))]
pub async fn import(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    caller.require(Role::Finance)?;
    let bytes = csv_body(&headers, body, "the catalog", MAX_CATALOG_BYTES)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| ApiError::BadRequest(format!("the CSV is not UTF-8: {e}")))?;
    Ok(imported(replace(&state.store, &caller, text).await?))
}

/// A CSV upload's bytes: refused unless it says `text/csv` and fits in `limit`.
pub(crate) fn csv_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    what: &str,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let is_csv = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/csv"));
    if !is_csv {
        return Err(ApiError::UnsupportedMediaType("expected Content-Type: text/csv".into()));
    }
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(format!("{what} is over {} MiB", limit >> 20))
        } else {
            ApiError::BadRequest(r.body_text())
        }
    })
}

/// An import's answer: 201 with the new version, or 422 with every located problem.
pub(crate) fn imported(outcome: Result<Imported, Rejected>) -> Response {
    match outcome {
        Ok(imported) => (StatusCode::CREATED, Json(imported)).into_response(),
        Err(rejected) => (StatusCode::UNPROCESSABLE_ENTITY, Json(rejected)).into_response(),
    }
}

/// Why a CSV changed nothing, from its located problems.
pub(crate) fn rejected(what: &str, errors: Vec<CellError>) -> Rejected {
    Rejected {
        error: format!(
            "{} problem{} in {what}; nothing was imported",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        ),
        errors,
    }
}

/// Every catalog version, newest first.
#[utoipa::path(get, path = "/api/v1/prices/versions", tag = "prices",
    responses((status = 200, body = Vec<CatalogVersion>), (status = 401), (status = 403)))]
pub async fn versions(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<CatalogVersion>>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.store.catalog_versions().await?))
}

/// The current price catalog as the Admin page shows it, and whether the caller may import.
pub async fn catalog(store: &Store, caller: &Caller) -> Result<CatalogView, ApiError> {
    caller.require(Role::Viewer)?;
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
}

fn price_view(r: prices::PriceRow) -> PriceRowView {
    PriceRowView {
        gpus: match (&r.gpu_model, r.gpu_count) {
            (Some(model), n) if n > 0 => format!("{n} × {model}"),
            _ => String::new(),
        },
        gpu_model: r.gpu_model,
        gpu_count: r.gpu_count,
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
