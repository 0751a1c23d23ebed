//! Monthly budgets per team or deployment (role finance), compared with each report's 12-month
//! forecast on the Budgets page and in `GET /api/v1/reports/{id}/forecast`. The page calls the
//! same [`set`], [`delete`] and [`page`] as the API.

use app::data::{BudgetView, BudgetsView, ForecastLineView};
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
use crate::reports::Amount;
use crate::store::{BUDGET_SCOPES, BudgetRecord, Store};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_json, set_json).layer(DefaultBodyLimit::max(4 * 1024)))
        .routes(routes!(delete_json))
}

/// A budget to set: a second one for the same scope and name replaces the amount.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBudget {
    /// `team` or `deployment`.
    pub scope: String,
    /// The team or deployment, as reports name it.
    pub name: String,
    /// US dollars a month: a decimal string (exact) or a number.
    pub monthly_usd: Amount,
}

/// Sets a budget (role finance).
pub async fn set(store: &Store, caller: &Caller, new: NewBudget) -> Result<BudgetRecord, ApiError> {
    let (by, _) = caller.require(Role::Finance)?;
    let by = by.to_string();
    let user = caller.user_id().ok_or_else(|| ApiError::Forbidden("only people set budgets".into()))?;
    let scope = BUDGET_SCOPES
        .into_iter()
        .find(|s| *s == new.scope)
        .ok_or_else(|| FieldError::new("scope", "must be team or deployment"))?;
    let name = new.name.trim();
    if name.is_empty() && scope == "deployment" {
        return Err(FieldError::new("name", "must name the deployment").into());
    }
    crate::reports::team_name("name", name)?;
    let micros = new.monthly_usd.micros("monthly_usd")?;
    let record = store.set_budget(scope, name, micros, user).await?;
    tracing::info!(scope, name, micros, by, "budget set");
    Ok(record)
}

/// Deletes a budget (role finance).
pub async fn delete(store: &Store, caller: &Caller, id: &str) -> Result<(), ApiError> {
    caller.require(Role::Finance)?;
    if !crate::store::could_be_id(id) || !store.delete_budget(id).await? {
        return Err(ApiError::NotFound(format!("no budget {id}")));
    }
    Ok(())
}

/// Every budget, teams first.
#[utoipa::path(get, path = "/api/v1/budgets", tag = "reports",
    responses((status = 200, body = Vec<BudgetRecord>), (status = 401), (status = 403)))]
pub async fn list_json(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<BudgetRecord>>, ApiError> {
    caller.require(Role::Finance)?;
    Ok(Json(state.store.budgets().await?))
}

/// Sets the monthly budget of a team or deployment.
#[utoipa::path(put, path = "/api/v1/budgets", tag = "reports", request_body = NewBudget,
    responses((status = 200, body = BudgetRecord), (status = 400, description = "malformed JSON"), (status = 401),
        (status = 403), (status = 413, description = "body over 4 KiB"),
        (status = 422, description = "a field is wrong; `field` names it")))]
pub async fn set_json(
    State(state): State<AppState>,
    caller: Needs<need::Finance>,
    ApiJson(new): ApiJson<NewBudget>,
) -> Result<Json<BudgetRecord>, ApiError> {
    Ok(Json(set(&state.store, &caller, new).await?))
}

/// Deletes a budget.
#[utoipa::path(delete, path = "/api/v1/budgets/{id}", tag = "reports",
    responses((status = 204), (status = 401), (status = 403), (status = 404)))]
pub async fn delete_json(
    State(state): State<AppState>,
    caller: Needs<need::Finance>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    delete(&state.store, &caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Lines of each scope (teams, deployments) the Budgets page shows.
const PAGE_LINES: usize = 50;

/// The Budgets page: every budget, and the newest report's forecast against them.
pub async fn page(store: &Store, caller: &Caller) -> Result<BudgetsView, ApiError> {
    caller.require(Role::Finance)?;
    let budgets = store.budgets().await?;
    let newest = match store.list_reports(1).await?.into_iter().next() {
        Some(record) => store.report(&record.id).await?.map(|report| (record, report)),
        None => None,
    };
    let (report, months, lines, others) = match newest {
        None => (None, vec![], vec![], 0),
        Some((record, report)) => {
            // Months × deployments, and a sort: on the blocking pool with the exports.
            let for_page = budgets.clone();
            let (months, lines, others) =
                crate::api::reports::EXPORTING.run(move || page_forecast(&report, &for_page)).await?;
            (Some(crate::api::reports::report_view(record)), months, lines, others)
        }
    };
    Ok(BudgetsView { budgets: budgets.into_iter().map(view).collect(), report, months, lines, others })
}

/// The newest report's forecast as the Budgets page shows it: the months, the costliest lines
/// of each scope, and how many were left out.
fn page_forecast(
    report: &crate::reports::Report,
    budgets: &[BudgetRecord],
) -> (Vec<String>, Vec<ForecastLineView>, usize) {
    let mut f = crate::forecast::forecast(report, budgets);
    // The page shows the costliest lines of each scope (by their peak month); the files
    // hold them all: a report of 100,000 deployments would otherwise be megabytes of page.
    let peak = |l: &crate::forecast::ForecastLine| l.spend_micro_usd.iter().copied().max().unwrap_or(0);
    f.lines.sort_by(|a, b| b.scope.cmp(&a.scope).then_with(|| peak(b).cmp(&peak(a))));
    let all = f.lines.len();
    let teams = f.lines.iter().filter(|l| l.scope == "team").count();
    let deployments: Vec<_> = f.lines.drain(teams.min(PAGE_LINES)..).skip(teams.saturating_sub(PAGE_LINES)).collect();
    f.lines.extend(deployments.into_iter().take(PAGE_LINES));
    let others = all - f.lines.len();
    let lines = f
        .lines
        .into_iter()
        .map(|l| ForecastLineView {
            scope: l.scope,
            name: l.name,
            team: l.team,
            spend: l.spend_micro_usd,
            budget: l.budget_micro_usd,
            first_over: l.first_over,
        })
        .collect();
    (f.months, lines, others)
}

/// A stored budget as the page shows it.
pub fn view(b: BudgetRecord) -> BudgetView {
    BudgetView {
        id: b.id,
        scope: b.scope,
        name: b.name,
        monthly: b.monthly_micro_usd,
        updated_by: b.updated_by.unwrap_or_else(|| "(a removed person)".into()),
        updated_at_ms: b.updated_at_ms,
    }
}
