//! Saved scenarios: planner and right-sizing inputs under a name (role planner to save, rename
//! and delete, viewer to read). Scenarios belong to the team, not to who saved them: anyone who
//! may save may rename or delete any of them, as an editor may any dashboard in Grafana. The
//! pages call the same [`create`], [`rename`] and [`delete`] as the API.

use std::collections::BTreeMap;

use app::components::form::{FieldSpec, validate};
use app::data::{ScenarioList, ScenarioView};
use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use model::FieldError;
use serde::Deserialize;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::AppState;
use crate::auth::{Caller, Needs, Role, need};
use crate::error::ApiError;
use crate::json::ApiJson;
use crate::store::{ScenarioRecord, Store};

/// Largest scenario body.
pub const MAX_SCENARIO_BYTES: usize = 64 * 1024;
/// How many scenarios a list returns.
const LIST_LIMIT: u32 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, create_json).layer(DefaultBodyLimit::max(MAX_SCENARIO_BYTES)))
        .routes(routes!(get_one, rename_json, delete_json).layer(DefaultBodyLimit::max(MAX_SCENARIO_BYTES)))
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
        app::pages::planner::KIND => Ok(app::pages::planner::FIELDS),
        app::pages::right_sizing::KIND => Ok(app::pages::right_sizing::FIELDS),
        other => Err(FieldError::new("kind", format!("unknown kind '{other}', expected planner or right_sizing"))),
    }
}

/// Checks and saves a scenario for the caller.
pub async fn create(store: &Store, caller: &Caller, new: NewScenario) -> Result<ScenarioView, ApiError> {
    caller.require(Role::Planner)?;
    let user_id = caller.user_id().ok_or_else(|| ApiError::Forbidden("only people save scenarios".into()))?;
    let fields = fields_of(&new.kind)?;
    let name = checked_name(&new.name)?;
    validate(fields, &new.inputs).map_err(|(key, reason)| FieldError::new(format!("inputs.{key}"), reason))?;
    let record = store.insert_scenario(&new.kind, name, &new.inputs, user_id).await?;
    view(&record)
}

/// Saves a page's inputs given as its URL query (what the pages send).
pub async fn create_from_query(
    store: &Store,
    caller: &Caller,
    kind: String,
    name: String,
    query: &str,
) -> Result<ScenarioView, ApiError> {
    caller.require(Role::Planner)?;
    let inputs = app::components::form::from_query(query).map_err(|e| FieldError::new("inputs", e))?;
    create(store, caller, NewScenario { kind, name, inputs }).await
}

/// The Scenarios page: every scenario, and whether the caller may rename and delete them.
pub async fn page_list(store: &Store, caller: &Caller) -> Result<ScenarioList, ApiError> {
    let items = all(store, caller).await?;
    Ok(ScenarioList { items, can_edit: caller.require(Role::Planner).is_ok() })
}

/// A scenario's name, trimmed, once it is neither empty nor too long.
fn checked_name(name: &str) -> Result<&str, FieldError> {
    let name = name.trim();
    if name.is_empty() {
        return Err(FieldError::new("name", "must not be empty"));
    }
    if name.chars().count() > app::pages::scenarios::MAX_NAME {
        return Err(FieldError::new("name", format!("must be at most {} characters", app::pages::scenarios::MAX_NAME)));
    }
    Ok(name)
}

/// A new name for a scenario.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Rename {
    pub name: String,
}

/// Renames a scenario (role planner).
pub async fn rename(store: &Store, caller: &Caller, id: &str, name: &str) -> Result<ScenarioView, ApiError> {
    let (by, _) = caller.require(Role::Planner)?;
    let id = checked_id(id)?;
    let name = checked_name(name)?;
    let record = store.rename_scenario(id, name).await?.ok_or_else(|| not_found(id))?;
    tracing::info!(scenario = id, by, "scenario renamed");
    view(&record)
}

/// Deletes a scenario (role planner).
pub async fn delete(store: &Store, caller: &Caller, id: &str) -> Result<(), ApiError> {
    let (by, _) = caller.require(Role::Planner)?;
    let id = checked_id(id)?;
    if !store.delete_scenario(id).await? {
        return Err(not_found(id));
    }
    tracing::info!(scenario = id, by, "scenario deleted");
    Ok(())
}

/// One scenario (role viewer).
pub async fn one(store: &Store, caller: &Caller, id: &str) -> Result<ScenarioView, ApiError> {
    caller.require(Role::Viewer)?;
    let id = checked_id(id)?;
    view(&store.scenario(id).await?.ok_or_else(|| not_found(id))?)
}

/// An id no scenario can have is refused before the store is asked, without echoing it.
fn checked_id(id: &str) -> Result<&str, ApiError> {
    if !crate::store::could_be_id(id) {
        return Err(ApiError::NotFound("no scenario has an id like that".into()));
    }
    Ok(id)
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound(format!("no scenario {id}"))
}

pub fn view(record: &ScenarioRecord) -> Result<ScenarioView, ApiError> {
    Ok(ScenarioView {
        id: record.id.clone(),
        name: record.name.clone(),
        kind: record.kind.clone(),
        query: app::components::form::to_query(&record.inputs()?),
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
    caller: Needs<need::Planner>,
    ApiJson(new): ApiJson<NewScenario>,
) -> Result<(StatusCode, Json<ScenarioView>), ApiError> {
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
    Ok(Json(one(&state.store, &caller, &id).await?))
}

/// Renames a scenario.
#[utoipa::path(patch, path = "/api/v1/scenarios/{id}", tag = "scenarios", request_body = Rename,
    responses((status = 200, description = "renamed; the body is the scenario"),
        (status = 400, description = "malformed JSON"), (status = 401), (status = 403), (status = 404),
        (status = 413, description = "body over 64 KiB"),
        (status = 422, description = "the name is empty or too long; `field` names it")))]
pub async fn rename_json(
    State(state): State<AppState>,
    caller: Needs<need::Planner>,
    Path(id): Path<String>,
    ApiJson(Rename { name }): ApiJson<Rename>,
) -> Result<Json<ScenarioView>, ApiError> {
    Ok(Json(rename(&state.store, &caller, &id, &name).await?))
}

/// Deletes a scenario.
#[utoipa::path(delete, path = "/api/v1/scenarios/{id}", tag = "scenarios",
    responses((status = 204, description = "deleted"), (status = 401), (status = 403), (status = 404)))]
pub async fn delete_json(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    delete(&state.store, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
