//! Saved scenarios: planner and right-sizing inputs under a name (role planner to save, viewer
//! to read). The pages save through the same [`create`] as the API.

use std::collections::BTreeMap;

use app::data::ScenarioView;
use app::form::{FieldSpec, validate};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use model::FieldError;
use serde::Deserialize;

use crate::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;
use crate::json;
use crate::store::{ScenarioRecord, Store};

/// Largest scenario body.
pub const MAX_SCENARIO_BYTES: usize = 64 * 1024;
/// How many scenarios a list returns.
const LIST_LIMIT: u32 = 500;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/v1/scenarios", get(list).post(create_json).layer(DefaultBodyLimit::max(MAX_SCENARIO_BYTES)))
        .route("/api/v1/scenarios/{id}", get(get_one))
}

/// A scenario to save.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewScenario {
    /// `planner` or `right_sizing`.
    pub kind: String,
    pub name: String,
    /// The page's inputs as typed, e.g. `{"requests": "50M", "growth": "5"}`.
    pub inputs: BTreeMap<String, String>,
}

fn fields_of(kind: &str) -> Result<&'static [FieldSpec], FieldError> {
    match kind {
        app::planner::KIND => Ok(app::planner::FIELDS),
        app::rightsizing::KIND => Ok(app::rightsizing::FIELDS),
        other => Err(FieldError::new("kind", format!("unknown kind '{other}', expected planner or right_sizing"))),
    }
}

/// Checks and saves a scenario for the caller.
pub async fn create(store: &Store, caller: &Caller, new: NewScenario) -> Result<ScenarioView, ApiError> {
    caller.require(Role::Planner)?;
    let user_id = caller.user_id().ok_or_else(|| ApiError::Forbidden("only people save scenarios".into()))?;
    let fields = fields_of(&new.kind)?;
    let name = new.name.trim();
    if name.is_empty() {
        return Err(FieldError::new("name", "must not be empty").into());
    }
    if name.chars().count() > app::scenarios::MAX_NAME {
        return Err(FieldError::new("name", format!("must be at most {} characters", app::scenarios::MAX_NAME)).into());
    }
    validate(fields, &new.inputs).map_err(|(key, reason)| FieldError::new(format!("inputs.{key}"), reason))?;
    let record = store.insert_scenario(&new.kind, name, &new.inputs, user_id).await?;
    view(&record)
}

pub fn view(record: &ScenarioRecord) -> Result<ScenarioView, ApiError> {
    Ok(ScenarioView {
        id: record.id.clone(),
        name: record.name.clone(),
        kind: record.kind.clone(),
        query: app::form::to_query(&record.inputs()?),
        created_by: record.created_by.clone(),
        created_at_ms: record.created_at_ms,
        catalog_version: record.catalog_version,
    })
}

/// Every saved scenario, newest first.
pub async fn all(store: &Store, caller: &Caller) -> Result<Vec<ScenarioView>, ApiError> {
    caller.require(Role::Viewer)?;
    store.list_scenarios(LIST_LIMIT).await?.iter().map(view).collect()
}

/// Saves a scenario.
#[utoipa::path(post, path = "/api/v1/scenarios", tag = "scenarios", request_body = NewScenario,
    responses((status = 201, description = "saved; the body has its id and the query that reopens it"),
        (status = 400, description = "malformed JSON"), (status = 401), (status = 403),
        (status = 413, description = "body over 64 KiB"),
        (status = 422, description = "a field is wrong; `field` names it")))]
pub async fn create_json(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<ScenarioView>), ApiError> {
    caller.require(Role::Planner)?;
    let new: NewScenario = json::from_body(&headers, body)?;
    Ok((StatusCode::CREATED, Json(create(&state.store, &caller, new).await?)))
}

/// Every saved scenario, newest first.
#[utoipa::path(get, path = "/api/v1/scenarios", tag = "scenarios",
    responses((status = 200, description = "the scenarios"), (status = 401), (status = 403)))]
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<ScenarioView>>, ApiError> {
    Ok(Json(all(&state.store, &caller).await?))
}

/// One scenario.
#[utoipa::path(get, path = "/api/v1/scenarios/{id}", tag = "scenarios",
    responses((status = 200, description = "the scenario"), (status = 401), (status = 403), (status = 404)))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ScenarioView>, ApiError> {
    caller.require(Role::Viewer)?;
    let record = state.store.scenario(&id).await?.ok_or_else(|| ApiError::NotFound(format!("no scenario {id}")))?;
    Ok(Json(view(&record)?))
}
