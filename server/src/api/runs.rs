//! Runs: ingest over HTTP (agents) and read back (viewers).

use app::data::{LlmRunView, RunView, TrendPoint};
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use model::{IngestAck, RunDetail, RunSummary, RunUpload, Suite};
use serde::Deserialize;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;
use uuid::Uuid;

use crate::AppState;
use crate::auth::{AgentCaller, Caller, Role};
use crate::error::ApiError;
use crate::ingest::{self, Door, MAX_UPLOAD_BYTES};
use crate::json;
use crate::store::{RunFilter, Store};

/// How many of a node's runs the run page lists, and of its runs of each suite the trend charts follow.
const NODE_RUNS: u32 = 30;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list).layer(DefaultBodyLimit::max(MAX_UPLOAD_BYTES)))
        .routes(routes!(get_one))
}

/// Stores a run uploaded by an agent; the same run id twice is stored once.
#[utoipa::path(post, path = "/api/v1/runs", tag = "ingest", request_body = RunUpload,
    security(("bearer" = [])),
    responses((status = 201, description = "stored", body = IngestAck),
        (status = 200, description = "already stored; nothing written", body = IngestAck),
        (status = 400, description = "malformed JSON"), (status = 401, description = "no or unknown token"),
        (status = 403, description = "not an agent token"), (status = 413, description = "body over 16 MiB"),
        (status = 415, description = "not application/json"), (status = 422, description = "invalid field")))]
pub async fn create(
    State(state): State<AppState>,
    AgentCaller(agent): AgentCaller,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<IngestAck>), ApiError> {
    let run = match json::body_bytes(&headers, body).and_then(|bytes| ingest::decode_json(&bytes)) {
        Ok(run) => run,
        Err(err) => {
            ingest::rejected(Door::Http);
            return Err(err);
        }
    };
    let ack = ingest::ingest(&state.store, &state.alerts, &agent, run, Door::Http).await?;
    let status = if ack.duplicate { StatusCode::OK } else { StatusCode::CREATED };
    Ok((status, Json(ack)))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only runs of this node id.
    node: Option<String>,
    /// Only runs holding this suite.
    suite: Option<String>,
    /// Only runs started before this Unix time in milliseconds (paging).
    before_ms: Option<i64>,
    /// At most this many runs (1–1000, default 100).
    limit: Option<u32>,
}

/// Runs, newest first.
#[utoipa::path(get, path = "/api/v1/runs", tag = "runs", params(ListParams),
    responses((status = 200, body = Vec<RunSummary>), (status = 401), (status = 403), (status = 422)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<Vec<RunSummary>>, ApiError> {
    caller.require(Role::Viewer)?;
    let Query(params) = params.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let suite = params
        .suite
        .as_deref()
        .map(Suite::parse)
        .transpose()
        .map_err(|reason| ApiError::Invalid(model::FieldError::new("suite", reason)))?;
    let limit = params.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::Invalid(model::FieldError::new("limit", "must be between 1 and 1000")));
    }
    let filter = RunFilter { node: params.node, suite, before_ms: params.before_ms, limit, ..RunFilter::default() };
    Ok(Json(state.store.list_runs(&filter).await?))
}

/// One run with every measurement.
#[utoipa::path(get, path = "/api/v1/runs/{id}", tag = "runs", params(("id" = String, Path, description = "run UUID")),
    responses((status = 200, body = RunDetail), (status = 400), (status = 401), (status = 403), (status = 404)))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<RunDetail>, ApiError> {
    caller.require(Role::Viewer)?;
    let run_id =
        uuid::Uuid::parse_str(&id).map_err(|e| ApiError::BadRequest(format!("run id '{id}' is not a UUID: {e}")))?;
    let run = state.store.get_run(run_id).await?;
    run.map(Json).ok_or_else(|| ApiError::NotFound(format!("no run with id {run_id}")))
}

/// How many load tests of OpenAI-compatible servers the LLM page offers.
const LLM_RUNS: u32 = 10;

/// The newest load tests of OpenAI-compatible servers, newest first, each with the engine
/// fitted when it was stored; and the run `include` (a link's or a saved scenario's pick) if it
/// is one but no longer among the newest.
pub async fn llm_runs(store: &Store, caller: &Caller, include: Option<String>) -> Result<Vec<LlmRunView>, ApiError> {
    caller.require(Role::Viewer)?;
    let view = |d: crate::store::RunDigest| {
        let llm = d.digest.llm?;
        Some(LlmRunView {
            run_id: d.run_id.to_string(),
            started_at_ms: d.started_at_ms,
            hostname: d.hostname,
            target: llm.target,
            protocol: llm.protocol,
            model: llm.model,
            check: llm.check,
        })
    };
    let mut runs: Vec<LlmRunView> = store.recent_llm_digests(LLM_RUNS).await?.into_iter().filter_map(view).collect();
    let wanted = include.as_deref().and_then(|id| Uuid::parse_str(id).ok());
    if let Some(id) = wanted.filter(|id| !runs.iter().any(|r| r.run_id == id.to_string())) {
        runs.extend(store.run_digest(id, Suite::Endpoint).await?.and_then(view));
    }
    Ok(runs)
}

/// One run and its node's history, with a trend per suite's headline figure.
pub async fn page(store: &Store, caller: &Caller, run_id: &str) -> Result<RunView, ApiError> {
    caller.require(Role::Viewer)?;
    let id = Uuid::parse_str(run_id).map_err(|_| ApiError::BadRequest(format!("'{run_id}' is not a run id")))?;
    let detail = store.get_run_figures(id).await?.ok_or_else(|| ApiError::NotFound(format!("no run {run_id}")))?;
    let filter = RunFilter { node: Some(detail.run.node_id.clone()), limit: NODE_RUNS, ..RunFilter::default() };
    let node_runs = store.list_runs(&filter).await?;
    let mut trends = Vec::new();
    for &suite in &detail.run.suites {
        let mut history = store.node_digests(&detail.run.node_id, suite, NODE_RUNS).await?;
        history.reverse();
        let mut label = None;
        let points = history
            .into_iter()
            .filter_map(|run| {
                let headline = run.digest.headline?;
                label = Some((headline.name, headline.unit));
                Some(TrendPoint {
                    run_id: run.run_id.to_string(),
                    started_at_ms: run.started_at_ms,
                    value: headline.value,
                })
            })
            .collect();
        if let Some((name, unit)) = label {
            trends.push((name, unit, points));
        }
    }
    // The LLM engine was fitted, and the steps' noise simulated, when the run was stored; the
    // page only reads them.
    let endpoint = match detail.run.suites.contains(&Suite::Endpoint) {
        true => store.run_digest(id, Suite::Endpoint).await?.map(|d| d.digest),
        false => None,
    };
    let (llm, llm_bands, endpoint_bands) = match endpoint {
        Some(d) => {
            let (llm, llm_bands) = d.llm.map_or((None, Vec::new()), |l| (Some(l.check), l.bands));
            (llm, llm_bands, d.endpoint_bands)
        }
        None => (None, Vec::new(), Vec::new()),
    };
    let suites: Vec<&str> = detail.run.suites.iter().map(|s| s.as_str()).collect();
    let alerts = store.run_alerts(&id.to_string(), &suites).await?.iter().map(crate::alerts::view).collect();
    Ok(RunView { detail, node_runs, trends, llm, llm_bands, endpoint_bands, alerts })
}
