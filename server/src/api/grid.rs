//! The grid-intensity table over HTTP, exported and imported as CSV like the price catalog: an
//! import replaces the whole table as a new version, or changes nothing and says where.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::HeaderMap;
use axum::response::Response;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use super::prices::{Imported, Rejected, csv_body, csv_download, imported, rejected};
use crate::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::grid::{self, GridRow};
use crate::store::{GridVersion, Store};

/// Largest table upload.
pub const MAX_GRID_BYTES: usize = 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(export, import).layer(DefaultBodyLimit::max(MAX_GRID_BYTES)))
        .routes(routes!(versions))
}

/// The table in force and its version.
pub async fn current(store: &Store) -> Result<(GridVersion, Vec<GridRow>), ApiError> {
    store.grid_table().await?.ok_or_else(|| ApiError::NotFound("no grid-intensity table is loaded".into()))
}

/// Checks and stores a table for `caller`: the new version, or every located problem.
pub async fn replace(store: &Store, caller: &Caller, csv: &str) -> Result<Result<Imported, Rejected>, ApiError> {
    let (name, _) = caller.require(Role::Finance)?;
    match grid::parse(csv) {
        Ok(rows) => {
            let version = store.replace_grid_table(&rows, name, "import").await?;
            tracing::info!(version, rows = rows.len(), by = name, "grid-intensity table imported");
            Ok(Ok(Imported { version, rows: rows.len() }))
        }
        Err(errors) => Ok(Err(rejected("the table", errors))),
    }
}

/// The grid-intensity table in force as CSV.
#[utoipa::path(get, path = "/api/v1/grid-intensity", tag = "carbon",
    responses((status = 200, description = "each region's g CO2e per kWh and PUE as CSV; `x-grid-version` names its version", content_type = "text/csv"),
        (status = 401), (status = 403)))]
pub async fn export(State(state): State<AppState>, caller: Caller) -> Result<Response, ApiError> {
    caller.require(Role::Viewer)?;
    let (version, rows) = current(&state.store).await?;
    Ok(csv_download("grid-intensity", "x-grid-version", version.version, grid::to_csv(&rows)))
}

/// Replaces the grid-intensity table with a CSV (role finance or admin).
#[utoipa::path(post, path = "/api/v1/grid-intensity", tag = "carbon",
    request_body(content = String, content_type = "text/csv", description = "the header of GET /api/v1/grid-intensity, then one row per region"),
    responses((status = 201, body = Imported), (status = 400, description = "not UTF-8 text"),
        (status = 401), (status = 403), (status = 413, description = "over 1 MiB"),
        (status = 415, description = "not text/csv"),
        (status = 422, body = Rejected, description = "each wrong cell with its line and column; nothing imported")))]
pub async fn import(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    caller.require(Role::Finance)?;
    let bytes = csv_body(&headers, body, "the table", MAX_GRID_BYTES)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| ApiError::BadRequest(format!("the CSV is not UTF-8: {e}")))?;
    Ok(imported(replace(&state.store, &caller, text).await?))
}

/// Every version of the table, newest first.
#[utoipa::path(get, path = "/api/v1/grid-intensity/versions", tag = "carbon",
    responses((status = 200, body = Vec<GridVersion>), (status = 401), (status = 403)))]
pub async fn versions(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<GridVersion>>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.store.grid_versions().await?))
}

/// The table as the Planner's region picker shows it.
pub async fn view(store: &Store, caller: &Caller) -> Result<app::data::GridView, ApiError> {
    caller.require(Role::Viewer)?;
    let (version, rows) = current(store).await?;
    Ok(app::data::GridView {
        version: version.version,
        created_at_ms: version.created_at_ms,
        created_by: version.created_by,
        origin: version.origin,
        csv: grid::to_csv(&rows),
        can_edit: caller.require(Role::Finance).is_ok(),
        rows: rows
            .into_iter()
            .map(|r| app::data::GridRowView {
                provider: r.provider,
                region: r.region,
                location: r.location,
                g_co2e_per_kwh: r.g_co2e_per_kwh,
                pue: r.pue,
                source: r.source,
                as_of: r.as_of,
            })
            .collect(),
    })
}
