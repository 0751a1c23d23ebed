//! Nodes that have reported at least one run.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use model::NodeSummary;

use crate::AppState;
use crate::auth::{Caller, Role};
use crate::error::ApiError;

pub fn router() -> Router<AppState> {
    Router::new().route("/api/v1/nodes", get(list))
}

/// Every node, most recently seen first.
#[utoipa::path(get, path = "/api/v1/nodes", tag = "nodes",
    responses((status = 200, body = Vec<NodeSummary>), (status = 401), (status = 403)))]
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<NodeSummary>>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(state.store.list_nodes().await?))
}
