//! Measurement agents: their last contact, and issuing or replacing their ingest-only tokens
//! (admins only; a token is shown once and never again).

use app::data::AgentView;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::AppState;
use crate::api::people::{self, NewAgent};
use crate::auth::{Needs, need};
use crate::error::ApiError;
use crate::json::ApiJson;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list, create_json))
}

/// Every agent.
#[utoipa::path(get, path = "/api/v1/agents", tag = "admin",
    responses((status = 200, description = "name, scope, created_at_ms, last_seen_ms of each"), (status = 401), (status = 403)))]
pub async fn list(State(state): State<AppState>, caller: Needs<need::Admin>) -> Result<Json<Vec<AgentView>>, ApiError> {
    Ok(Json(people::page(&state.store, &caller).await?.agents))
}

/// Issues an agent's token (`replace: true` gives an existing agent a new one).
#[utoipa::path(post, path = "/api/v1/agents", tag = "admin", request_body = NewAgent,
    responses((status = 201, description = "issued; `secret` is the token, shown once; `replaced` says whether an old one stopped working"),
        (status = 400, description = "malformed JSON"), (status = 401), (status = 403),
        (status = 409, description = "an agent has that name and `replace` is not set"),
        (status = 422, description = "the name is wrong; `field` names it")))]
pub async fn create_json(
    State(state): State<AppState>,
    caller: Needs<need::Admin>,
    ApiJson(new): ApiJson<NewAgent>,
) -> Result<Response, ApiError> {
    Ok(people::secret_response(StatusCode::CREATED, people::create_agent(&state.store, &caller, new).await?))
}
