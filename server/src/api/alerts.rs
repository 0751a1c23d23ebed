//! Regression alerts (viewer to read, planner to acknowledge, resolve or reopen). The Alerts
//! page calls the same [`list`] and [`set_state`] as the API.

use app::data::{AlertList, AlertView};
use axum::Json;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use model::FieldError;
use serde::Deserialize;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::AppState;
use crate::alerts::{Settings, view};
use crate::auth::{Caller, Needs, Role, need};
use crate::error::ApiError;
use crate::json::ApiJson;
use crate::store::Store;
use crate::store::{ALERT_PAGE as PAGE, ALERT_STATES as STATES};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_json))
        .routes(routes!(get_one, set_state_json).layer(DefaultBodyLimit::max(4 * 1024)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only alerts in this state: `open`, `acknowledged` or `resolved`.
    pub state: Option<String>,
}

/// A state to set.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewState {
    /// `acknowledged` (someone is looking), `resolved` (the next regression raises a new alert)
    /// or `open`.
    pub state: String,
}

fn checked_state(state: &str) -> Result<&'static str, FieldError> {
    STATES
        .into_iter()
        .find(|s| *s == state)
        .ok_or_else(|| FieldError::new("state", "must be open, acknowledged or resolved"))
}

/// Alerts, active (open, then acknowledged) first, newest first within each; at most 200.
pub async fn list(store: &Store, caller: &Caller, state: Option<&str>) -> Result<Vec<AlertView>, ApiError> {
    caller.require(Role::Viewer)?;
    let state = state.map(checked_state).transpose()?;
    Ok(store.alerts(state, PAGE).await?.iter().map(view).collect())
}

/// The Alerts page's data.
pub async fn page(store: &Store, caller: &Caller, settings: &Settings) -> Result<AlertList, ApiError> {
    Ok(AlertList {
        items: list(store, caller, None).await?,
        can_act: caller.require(Role::Planner).is_ok(),
        threshold: settings.threshold,
        webhook: settings.webhook.is_some(),
    })
}

/// Sets an alert's state (role planner).
pub async fn set_state(store: &Store, caller: &Caller, id: &str, state: &str) -> Result<AlertView, ApiError> {
    let (by, _) = caller.require(Role::Planner)?;
    let state = checked_state(state)?;
    if !crate::store::could_be_id(id) {
        return Err(ApiError::NotFound("no alert has an id like that".into()));
    }
    match store.set_alert_state(id, state, by).await? {
        None => Err(ApiError::NotFound(format!("no alert {id}"))),
        Some(Err(reason)) => Err(ApiError::Conflict(reason)),
        Some(Ok(alert)) => {
            tracing::info!(alert = id, state, by, "alert state set");
            Ok(view(&alert))
        }
    }
}

/// Regression alerts.
#[utoipa::path(get, path = "/api/v1/alerts", tag = "alerts", params(ListParams),
    responses((status = 200, description = "alerts, active first, newest first"), (status = 401), (status = 403),
        (status = 422, description = "an unknown state")))]
pub async fn list_json(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ListParams>,
) -> Result<Json<Vec<AlertView>>, ApiError> {
    Ok(Json(list(&state.store, &caller, params.state.as_deref()).await?))
}

/// One alert.
#[utoipa::path(get, path = "/api/v1/alerts/{id}", tag = "alerts",
    responses((status = 200, description = "the alert"), (status = 401), (status = 403), (status = 404)))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<AlertView>, ApiError> {
    caller.require(Role::Viewer)?;
    if !crate::store::could_be_id(&id) {
        return Err(ApiError::NotFound("no alert has an id like that".into()));
    }
    let alert = state.store.alert(&id).await?.ok_or_else(|| ApiError::NotFound(format!("no alert {id}")))?;
    Ok(Json(view(&alert)))
}

/// Acknowledges, resolves or reopens an alert.
#[utoipa::path(patch, path = "/api/v1/alerts/{id}", tag = "alerts", request_body = NewState,
    responses((status = 200, description = "the alert as it is now"),
        (status = 400, description = "malformed JSON"), (status = 401), (status = 403), (status = 404),
        (status = 409, description = "reopening it while its class has another active alert"),
        (status = 413, description = "body over 4 KiB"),
        (status = 422, description = "an unknown state; `field` names it")))]
pub async fn set_state_json(
    State(state): State<AppState>,
    caller: Needs<need::Planner>,
    Path(id): Path<String>,
    ApiJson(NewState { state: new }): ApiJson<NewState>,
) -> Result<Json<AlertView>, ApiError> {
    Ok(Json(set_state(&state.store, &caller, &id, &new).await?))
}
