//! What the pages need from the server, provided as context by the server at render time.
//! The app cannot depend on the server crate (the server depends on the app), so the server
//! implements this trait. Each method authenticates the caller from `headers` (session cookie
//! or token) and checks the role the data needs.

use std::sync::Arc;

use futures::future::BoxFuture;
use model::FleetView;

use crate::data::{
    AlertList, AlertView, BudgetView, BudgetsView, CatalogView, CreatedToken, CreatedUser, GridView, ImportOutcome,
    LlmRunView, MeasuredFleet, PeopleView, PersonView, ReportSummaryView, ReportsView, RunView, ScenarioList,
    ScenarioView, TransportRun,
};

/// Why page data could not be given: the HTTP status the API would answer and its message.
#[derive(Debug, Clone)]
pub struct PageError {
    pub status: u16,
    pub message: String,
}

type Answer<T> = BoxFuture<'static, Result<T, PageError>>;

/// A page-data error as a server function error. A `/srv/*` call answers the API's status
/// (401, 403, 404, 422…) rather than a blanket 500. A page rendered on the server does not:
/// its data resolves while the page streams, so whether a status set here still reached the
/// headers would depend on timing; the page answers 200 and says the reason in its content.
pub fn page_error(err: PageError) -> leptos::prelude::ServerFnError {
    let server_function =
        leptos::prelude::use_context::<http::request::Parts>().is_some_and(|p| p.uri.path().starts_with("/srv/"));
    if server_function && let Some(response) = leptos::prelude::use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::from_u16(err.status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR));
    }
    leptos::prelude::ServerFnError::new(err.message)
}

/// The server's side of the pages' data.
pub trait Backend: Send + Sync + 'static {
    /// The Fleet page's data.
    fn fleet(&self, headers: http::HeaderMap) -> Answer<FleetView>;
    /// Nodes with a quantization run, for the planner and right-sizing.
    fn measured_nodes(&self, headers: http::HeaderMap) -> Answer<MeasuredFleet>;
    /// Each node's newest transport run.
    fn transport_runs(&self, headers: http::HeaderMap) -> Answer<Vec<TransportRun>>;
    /// The newest load tests of OpenAI-compatible servers, each with its fitted engine, and
    /// the run `include` if it is one but no longer among the newest.
    fn llm_runs(&self, headers: http::HeaderMap, include: Option<String>) -> Answer<Vec<LlmRunView>>;
    /// One run and its node's history.
    fn run_page(&self, headers: http::HeaderMap, run_id: String) -> Answer<RunView>;
    /// Regression alerts, active first.
    fn alerts(&self, headers: http::HeaderMap) -> Answer<AlertList>;
    /// Sets an alert's state (planner).
    fn set_alert_state(&self, headers: http::HeaderMap, id: String, state: String) -> Answer<AlertView>;
    /// Saves page inputs under a name.
    fn save_scenario(
        &self,
        headers: http::HeaderMap,
        kind: String,
        name: String,
        query: String,
    ) -> Answer<ScenarioView>;
    /// Saved scenarios, newest first.
    fn scenarios(&self, headers: http::HeaderMap) -> Answer<ScenarioList>;
    /// One saved scenario.
    fn scenario(&self, headers: http::HeaderMap, id: String) -> Answer<ScenarioView>;
    /// Gives a saved scenario a new name.
    fn rename_scenario(&self, headers: http::HeaderMap, id: String, name: String) -> Answer<ScenarioView>;
    /// Deletes a saved scenario.
    fn delete_scenario(&self, headers: http::HeaderMap, id: String) -> Answer<()>;
    /// The current price catalog.
    fn price_catalog(&self, headers: http::HeaderMap) -> Answer<CatalogView>;
    /// The grid-intensity table in force.
    fn grid_table(&self, headers: http::HeaderMap) -> Answer<GridView>;
    /// Replaces the grid-intensity table with a CSV.
    fn import_grid(&self, headers: http::HeaderMap, csv: String) -> Answer<ImportOutcome>;
    /// Replaces the price catalog with a CSV.
    fn import_prices(&self, headers: http::HeaderMap, csv: String) -> Answer<ImportOutcome>;
    /// People, tokens and agents for an admin; `None` for anyone else signed in.
    fn people(&self, headers: http::HeaderMap) -> Answer<Option<PeopleView>>;
    /// Adds a person (admin).
    fn create_user(
        &self,
        headers: http::HeaderMap,
        name: String,
        role: String,
        password: Option<String>,
    ) -> Answer<CreatedUser>;
    /// Changes a person's role (admin).
    fn set_user_role(&self, headers: http::HeaderMap, id: String, role: String) -> Answer<PersonView>;
    /// Removes a person (admin).
    fn delete_user(&self, headers: http::HeaderMap, id: String) -> Answer<()>;
    /// Issues an API token acting as a person (admin).
    fn create_api_token(
        &self,
        headers: http::HeaderMap,
        user_id: String,
        expires_in_days: Option<u32>,
    ) -> Answer<CreatedToken>;
    /// Revokes an API token (admin).
    fn revoke_api_token(&self, headers: http::HeaderMap, id: String) -> Answer<()>;
    /// Issues (or with `replace`, replaces) an agent's token (admin).
    fn create_agent_token(&self, headers: http::HeaderMap, name: String, replace: bool) -> Answer<CreatedToken>;
    /// Reports and the newest one's breakdown.
    fn reports(&self, headers: http::HeaderMap) -> Answer<ReportsView>;
    /// Budgets and the newest report's forecast (finance).
    fn budgets(&self, headers: http::HeaderMap) -> Answer<BudgetsView>;
    /// Sets a team's or deployment's monthly budget (finance).
    fn set_budget(
        &self,
        headers: http::HeaderMap,
        scope: String,
        name: String,
        monthly_usd: String,
    ) -> Answer<BudgetView>;
    /// Deletes a budget (finance).
    fn delete_budget(&self, headers: http::HeaderMap, id: String) -> Answer<()>;
    /// Builds a report from the saved planner scenarios.
    fn report_from_scenarios(
        &self,
        headers: http::HeaderMap,
        name: String,
        team: Option<String>,
        from: String,
        to: String,
    ) -> Answer<ReportSummaryView>;
}

/// The context value the server provides.
#[derive(Clone)]
pub struct BackendHandle(pub Arc<dyn Backend>);
