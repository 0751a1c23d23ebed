//! Measurement agents and their last contact (admins only; tokens are never shown again).

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;

use crate::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/agents", get(list))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct AgentView {
    name: String,
    scope: String,
    created_at_ms: i64,
    last_seen_ms: Option<i64>,
}

/// Every agent.
#[utoipa::path(get, path = "/api/v1/agents", tag = "admin",
    responses((status = 200, body = Vec<AgentView>), (status = 401), (status = 403)))]
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<AgentView>>, ApiError> {
    caller.require(Role::Admin)?;
    let agents = state.store.list_agents().await?;
    Ok(Json(
        agents
            .into_iter()
            .map(|a| AgentView {
                name: a.name,
                scope: a.scope,
                created_at_ms: a.created_at_ms,
                last_seen_ms: a.last_seen_ms,
            })
            .collect(),
    ))
}
