//! What the pages ask the server for: measured nodes for the planner and right-sizing, transport
//! figures, a run with its node's history. The server implements [`crate::backend::Backend`].

use model::plan::rightsize::Hardware;
use model::wire::measured::TransportPoint;
use model::wire::view::PriceOffer;
use model::{RunDetail, RunSummary};
use serde::{Deserialize, Serialize};

/// A node with a quantization run, the newest of its instance type: what right-sizing and the
/// planner can use of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredNode {
    pub node_id: String,
    pub hostname: String,
    /// The latest run with the quantization suite.
    pub run_id: String,
    pub run_started_at_ms: i64,
    /// What the node costs per hour, where known.
    pub hourly_usd: Option<f64>,
    /// Where that price came from: the operator's `--hourly-usd`, the price catalog, or nowhere.
    pub price_source: String,
    /// Requests per second of the reference model at FP32, at its best measured batch size.
    pub best_throughput_rps: Option<f64>,
    /// How many other nodes of this instance type have a quantization run: this node's, the
    /// newest, stands for them all.
    #[serde(default)]
    pub others_of_type: u32,
    /// Service times per precision and batch, priced at `hourly_usd` (0 when unknown).
    pub hardware: Hardware,
    /// The catalog's prices of its instance type under each purchase option it lists.
    #[serde(default)]
    pub offers: Vec<PriceOffer>,
    /// Its power where the agent measured it, and the run that did: CPU packages and DRAM (RAPL,
    /// the newest system run), and on a GPU node its GPUs (NVML, the newest gemm run, which is
    /// the run named).
    #[serde(default)]
    pub power: Option<(model::wire::measured::PowerDigest, String)>,
}

impl MeasuredNode {
    /// The catalog's price under `purchase_option`, if it lists one.
    pub fn offer(&self, purchase_option: &str) -> Option<&PriceOffer> {
        self.offers.iter().find(|o| o.purchase_option == purchase_option)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredFleet {
    pub nodes: Vec<MeasuredNode>,
    /// Services the endpoint suite load-tested, newest first.
    #[serde(default)]
    pub services: Vec<MeasuredService>,
}

/// An inference service the endpoint suite load-tested, calibrated by
/// [`model::plan::endpoint::check`]: what the Planner sizes "your service" with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredService {
    pub run_id: String,
    pub started_at_ms: i64,
    /// The node the load came from (not the service's own).
    pub hostname: String,
    /// Scheme, host, port and path of the service.
    pub target: String,
    pub protocol: String,
    pub model: Option<String>,
    pub service_mean_s: f64,
    pub service_cv: f64,
    pub concurrency: u32,
    pub saturation_rps: f64,
    pub saturation_measured: bool,
    /// The model's mean absolute p99 error over the run's steps below 80 % utilisation.
    pub mape_p99: Option<f64>,
}

impl MeasuredService {
    /// Requests per second one replica completes when always busy: c ÷ mean service time, but
    /// never more than the load test saw it complete (a rate limit or a shared bottleneck can
    /// cap a service below what its latency alone suggests).
    pub fn throughput_rps(&self) -> f64 {
        (f64::from(self.concurrency) / self.service_mean_s).min(self.saturation_rps)
    }

    /// `digits at http://10.0.0.5:8080`.
    pub fn name(&self) -> String {
        served(self.model.as_deref(), &self.target)
    }

    /// How far the model was off where it was checked, in words.
    pub fn error_words(&self) -> String {
        match self.mape_p99 {
            Some(e) => format!("the model's p99 was off by {:.0} % on average in that run", e * 100.0),
            None => "the model's error is not known: that run has no step to check it on".into(),
        }
    }
}

/// A service as people name it: its model, where it is served. A model named by an absolute
/// file path, as llama.cpp's server names the GGUF file it loaded, is named by the file (the
/// directories say where it sits on that node, not what it is); a hub id such as
/// `meta-llama/Llama-3.1-8B` is kept whole.
fn served(model: Option<&str>, target: &str) -> String {
    let file = |path: &str| path.rsplit(['/', '\\']).find(|part| !part.is_empty()).map(str::to_string);
    let absolute = |m: &str| m.starts_with('/') || m.starts_with('\\') || m.get(1..3) == Some(":\\");
    match model {
        Some(model) if absolute(model) => match file(model) {
            Some(file) => format!("{file} at {target}"),
            None => target.to_string(),
        },
        Some(model) => format!("{model} at {target}"),
        None => target.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::served;

    #[test]
    fn a_model_loaded_from_a_file_is_named_by_the_file_and_a_hub_id_whole() {
        let at = "http://10.0.0.5:8080";
        assert_eq!(served(Some("/models/cache/tiny-9.8M.gguf"), at), "tiny-9.8M.gguf at http://10.0.0.5:8080");
        assert_eq!(served(Some("C:\\models\\llama.gguf"), at), "llama.gguf at http://10.0.0.5:8080");
        assert_eq!(served(Some("meta-llama/Llama-3.1-8B"), at), "meta-llama/Llama-3.1-8B at http://10.0.0.5:8080");
        assert_eq!(served(Some("/"), at), at);
        assert_eq!(served(None, at), at);
    }
}

/// A load test of an OpenAI-compatible server and the engine fitted on it when it was stored
/// ([`model::wire::measured::LlmDigest`]): what the LLM page sizes "your server" with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlmRunView {
    pub run_id: String,
    pub started_at_ms: i64,
    /// The node the load came from.
    pub hostname: String,
    pub target: String,
    pub protocol: String,
    pub model: Option<String>,
    pub check: model::plan::llm::fit::LlmCheck,
}

impl LlmRunView {
    /// `tiny at http://10.0.0.5:8080`.
    pub fn name(&self) -> String {
        served(self.model.as_deref(), &self.target)
    }

    /// How far the model was off in that run, in words.
    pub fn error_words(&self) -> String {
        let counted = self.check.predictions.iter().filter(|p| p.counted).count();
        match (self.check.mape_ttft_p99, self.check.mape_itl_p99) {
            (Some(ttft), Some(itl)) => format!(
                "in that run the model's TTFT p99 was off by {:.0} % and its ITL p99 by {:.0} % on average, over {counted} step(s) below {:.0} % of capacity",
                ttft * 100.0,
                itl * 100.0,
                model::plan::endpoint::COUNTED_BELOW_UTILIZATION * 100.0
            ),
            _ => {
                "the model's error is not known: that run has no step besides the calibration one to check it on".into()
            }
        }
    }
}

/// How many nodes' transport runs the Transport page offers, the nodes measured last: its
/// picker stays usable and its data small on a fleet of thousands.
pub const TRANSPORT_NODES: u32 = 100;

/// One node's transport run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransportRun {
    pub node_id: String,
    pub hostname: String,
    pub run_id: String,
    pub started_at_ms: i64,
    pub points: Vec<TransportPoint>,
}

/// One figure of a node's runs over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendPoint {
    pub run_id: String,
    pub started_at_ms: i64,
    pub value: f64,
}

/// A run, and the same figure across the node's runs of the same suites.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub detail: RunDetail,
    /// Earlier and later runs of the same node (newest first).
    pub node_runs: Vec<RunSummary>,
    /// (figure name, unit, points oldest first)
    pub trends: Vec<(String, String, Vec<TrendPoint>)>,
    /// A load test of an OpenAI-compatible server: the engine fitted on it when it was stored,
    /// and each step predicted.
    pub llm: Option<model::plan::llm::fit::LlmCheck>,
    /// A load test's steps: where each one's p99 would fall by chance were the service the
    /// calibrated queue ([`model::plan::endpoint::bands`], simulated by the server).
    #[serde(default)]
    pub endpoint_bands: Vec<model::plan::endpoint::Band>,
    /// LLM endpoint: where each counted step's TTFT and ITL p99 would fall by chance were the
    /// server the fitted engine ([`model::plan::llm::simulate::bands`], simulated by the server).
    #[serde(default)]
    pub llm_bands: Vec<model::plan::llm::simulate::LlmBand>,
    /// Regression alerts this run raised or was counted on.
    #[serde(default)]
    pub alerts: Vec<AlertView>,
}

/// A regression alert ([`model::plan::regression`]): a run's headline figure worse than the
/// recent runs of its hardware class by more than the threshold and the noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertView {
    pub id: String,
    /// `open`, `acknowledged` or `resolved`.
    pub state: String,
    /// The instance type, else the CPU model, whose runs were compared.
    pub class: String,
    pub suite: String,
    pub figure: String,
    pub unit: String,
    /// `higher` or `lower`: which way the figure gets better.
    pub better: String,
    /// The run that raised it.
    pub run_id: String,
    pub node_id: String,
    pub hostname: String,
    pub started_at_ms: i64,
    /// The newest run counted on it.
    pub last_run_id: String,
    pub last_started_at_ms: i64,
    /// Regressed runs counted on it.
    pub runs: i64,
    /// `run`: the raising run's value was judged; `window`: the median of it and the runs just
    /// before it (a shift that lasted, hidden in any one run by the noise).
    pub judged_on: String,
    pub value: f64,
    /// What was judged (the run's figure, or the window's median), and the baseline's median and
    /// noise (σ from their MAD).
    pub median: f64,
    pub noise: f64,
    pub baseline_runs: i64,
    /// w of what was judged: the extra capacity the same volume needs, the share the spend
    /// grows by.
    pub worse_by: f64,
    /// What `worse_by` had to exceed: the threshold, or 3.5 standard deviations of what was
    /// judged (σ for a run, 0.32σ for the window's median) beyond the median, in w's terms.
    pub bound: f64,
    pub threshold: f64,
    /// What it costs a month, where a report lists deployments on the class.
    pub monthly_cost_usd: Option<f64>,
    /// Where that figure came from, or why there is none.
    pub cost_basis: String,
    /// What the run was measured with that differs from the run before it in the class.
    pub changes: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Who last set its state.
    pub acted_by: Option<String>,
    /// `none` (no webhook set), `pending`, `sent` or `failed`.
    pub webhook_state: String,
    pub webhook_attempts: i64,
    pub webhook_error: Option<String>,
}

impl AlertView {
    pub fn is_active(&self) -> bool {
        self.state != "resolved"
    }
}

/// The Alerts page: alerts, active first, and whether the caller may act on them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertList {
    pub items: Vec<AlertView>,
    pub can_act: bool,
    /// The threshold the server alerts above, as a fraction.
    pub threshold: f64,
    /// Whether a webhook is told of new alerts.
    pub webhook: bool,
}

/// A saved set of page inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioView {
    pub id: String,
    pub name: String,
    /// `planner` or `right_sizing`.
    pub kind: String,
    /// The inputs as a URL query: `/planner?{query}` reopens them.
    pub query: String,
    pub created_by: Option<String>,
    pub created_at_ms: i64,
    /// The price catalog version current when it was saved.
    pub catalog_version: Option<i64>,
}

impl ScenarioView {
    /// The page that opens this scenario, with its inputs.
    pub fn url(&self) -> String {
        let name = crate::components::form::to_query(&[("name".to_string(), self.name.clone())].into());
        format!("{}?{}&{name}", page_of(&self.kind), self.query)
    }
}

/// The Scenarios page: every saved scenario, and whether the caller may rename and delete them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioList {
    pub items: Vec<ScenarioView>,
    /// Roles planner and above.
    pub can_edit: bool,
}

/// The page a kind of scenario belongs to.
pub fn page_of(kind: &str) -> &'static str {
    match kind {
        "right_sizing" => "/right-sizing",
        _ => "/planner",
    }
}

/// One priced instance type as the Admin page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceRowView {
    pub provider: String,
    pub instance_type: String,
    /// `8 × NVIDIA H100 80GB`, or empty for CPU-only.
    pub gpus: String,
    pub gpu_model: Option<String>,
    pub gpu_count: u32,
    pub vcpus: Option<u32>,
    pub memory_bytes: Option<u64>,
    pub hourly_micro_usd: i64,
    pub purchase_option: String,
    pub region: Option<String>,
    pub source: String,
    pub as_of: String,
}

/// The current price catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogView {
    pub version: i64,
    pub created_at_ms: i64,
    pub created_by: String,
    /// `default` (shipped) or `import`.
    pub origin: String,
    pub rows: Vec<PriceRowView>,
    /// The catalog as CSV, to edit and import again.
    pub csv: String,
    /// Whether the caller may import (roles finance and admin).
    pub can_edit: bool,
}

/// The grid-intensity table in force: each cloud region's grid emissions and PUE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridView {
    pub version: i64,
    pub created_at_ms: i64,
    pub created_by: String,
    /// `default` (shipped) or `import`.
    pub origin: String,
    pub rows: Vec<GridRowView>,
    /// The table as CSV, to edit and import again.
    pub csv: String,
    /// Whether the caller may import (roles finance and admin).
    pub can_edit: bool,
}

/// One region's grid, as the Planner's region picker lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridRowView {
    pub provider: String,
    pub region: String,
    pub location: String,
    pub g_co2e_per_kwh: f64,
    pub pue: f64,
    pub source: String,
    pub as_of: String,
}

/// What an import did: the new version, or every located problem and nothing changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ImportOutcome {
    Imported { version: i64, rows: usize },
    Rejected { error: String, problems: Vec<(u64, Option<String>, String)> },
}

/// A person as the Admin page shows them (never a secret).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PersonView {
    pub id: String,
    pub name: String,
    /// `viewer`, `planner`, `finance` or `admin`.
    pub role: String,
    pub created_at_ms: i64,
    /// API tokens neither revoked nor expired.
    pub live_tokens: i64,
}

/// An API token as an admin sees it: its id (the first 12 hex digits of its hash), never the
/// token itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenView {
    pub id: String,
    pub user_name: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

impl TokenView {
    /// Whether it still works at `now_ms`, in a word: `active`, `expired` or `revoked`.
    pub fn state(&self, now_ms: i64) -> &'static str {
        if self.revoked_at_ms.is_some() {
            "revoked"
        } else if self.expires_at_ms.is_some_and(|t| t <= now_ms) {
            "expired"
        } else {
            "active"
        }
    }
}

/// A measurements agent (its token is never shown again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentView {
    pub name: String,
    /// `ingest`: agents may only upload runs.
    pub scope: String,
    pub created_at_ms: i64,
    pub last_seen_ms: Option<i64>,
}

/// Everyone who can sign in, their API tokens and the agents: what an admin manages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeopleView {
    pub people: Vec<PersonView>,
    pub tokens: Vec<TokenView>,
    pub agents: Vec<AgentView>,
    /// The admin looking, so the page can say which row is theirs.
    pub you: String,
    /// The server's clock when it answered: which tokens are live is judged by it, so the page
    /// reads the same rendered on the server and in a browser whose clock is off.
    pub now_ms: i64,
}

/// A new user and, when the server made it up, their password (shown once).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedUser {
    pub person: PersonView,
    pub generated_password: Option<String>,
}

/// A new token and its secret, shown once: API tokens act as their user, agent tokens only
/// upload runs.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct CreatedToken {
    /// The token's id (API tokens) or the agent's name.
    pub id: String,
    /// Who it acts as: the person (API tokens) or the agent.
    pub acts_as: String,
    pub secret: String,
    pub expires_at_ms: Option<i64>,
    /// For an agent: whether this replaced the token it had (which stopped working).
    pub replaced: bool,
}

// Secrets never reach a log line, even by `{:?}`.
impl std::fmt::Debug for CreatedUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let password = self.generated_password.as_ref().map(|_| "<hidden>");
        f.debug_struct("CreatedUser").field("person", &self.person).field("generated_password", &password).finish()
    }
}

impl std::fmt::Debug for CreatedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedToken")
            .field("id", &self.id)
            .field("acts_as", &self.acts_as)
            .field("secret", &"<hidden>")
            .field("expires_at_ms", &self.expires_at_ms)
            .field("replaced", &self.replaced)
            .finish()
    }
}

/// A stored report without its rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportSummaryView {
    pub id: String,
    pub name: String,
    pub from: String,
    pub to: String,
    pub catalog_version: i64,
    pub created_by: String,
    pub created_at_ms: i64,
    pub deployments: i64,
    pub total_micro_usd: i64,
}

/// The Reports page: every report, and the newest one's breakdown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportsView {
    pub reports: Vec<ReportSummaryView>,
    /// (deployment, serving, training) in micro-dollars, costliest first, at most 15.
    pub top: Vec<(String, i64, i64)>,
    /// Deployments of the newest report not in `top`.
    pub others: usize,
    /// (kind of recommendation, saving in micro-dollars) of the newest report.
    pub savings: Vec<(String, i64)>,
    /// Saved planner scenarios a report can be built from.
    pub planner_scenarios: usize,
    /// The newest report's chargeback by team and cost centre (the costliest 20), how many
    /// more are in its files, whether any of its deployments said what it needs (so that idle
    /// is counted), and the policy its idle cost was charged by (`owner` or `proportional`,
    /// with its meaning).
    pub chargeback: Vec<TeamChargeView>,
    pub chargeback_others: usize,
    pub idle_known: bool,
    pub idle_policy: (String, String),
    /// The newest report's energy and emissions, when any deployment gave its power.
    pub emissions: Option<EmissionsView>,
}

/// A report's energy and emissions over the deployments that gave their power.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmissionsView {
    pub co2e_kg: f64,
    pub energy_kwh: f64,
    /// g CO2e per 1,000 of those deployments' requests (none when they served none).
    pub g_per_1000_requests: Option<f64>,
    /// Deployments counted, of how many.
    pub counted: usize,
    pub deployments: usize,
    /// The grid-intensity table version used (0: every grid figure entered).
    pub grid_version: i64,
}

/// A monthly budget of a team or deployment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    pub id: String,
    /// `team` or `deployment`.
    pub scope: String,
    pub name: String,
    /// Micro-dollars a month.
    pub monthly: i64,
    pub updated_by: String,
    pub updated_at_ms: i64,
}

/// A team's or deployment's forecast spend, micro-dollars a month.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForecastLineView {
    pub scope: String,
    pub name: String,
    pub team: String,
    pub spend: Vec<i64>,
    pub budget: Option<i64>,
    /// The first month (1-based) over the budget.
    pub first_over: Option<u32>,
}

/// The Budgets page: every budget, and the newest report's 12-month forecast against them
/// (`months` empty when the newest report was stored before forecasts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetsView {
    pub budgets: Vec<BudgetView>,
    pub report: Option<ReportSummaryView>,
    pub months: Vec<String>,
    /// The costliest 50 teams, then the costliest 50 deployments (by their peak month).
    pub lines: Vec<ForecastLineView>,
    /// Lines of the report's forecast files that the page leaves out.
    pub others: usize,
}

/// One team's (and cost centre's) charge in a report, micro-dollars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeamChargeView {
    pub team: String,
    pub cost_centre: Option<String>,
    pub deployments: u32,
    pub used_serving: i64,
    pub idle: i64,
    pub idle_charged: i64,
    pub training: i64,
    pub chargeback: i64,
}

#[cfg(feature = "ssr")]
fn backend() -> crate::backend::BackendHandle {
    leptos::prelude::expect_context::<crate::backend::BackendHandle>()
}

#[cfg(feature = "ssr")]
async fn headers() -> Result<http::HeaderMap, leptos::prelude::ServerFnError> {
    Ok(leptos_axum::extract().await?)
}

use leptos::prelude::{ServerFnError, server};

/// Nodes with quantization measurements, newest run of each.
#[server(prefix = "/srv", endpoint = "measured_nodes")]
pub async fn measured_nodes() -> Result<MeasuredFleet, ServerFnError> {
    backend().0.measured_nodes(headers().await?).await.map_err(crate::backend::page_error)
}

/// Each node's newest transport run.
#[server(prefix = "/srv", endpoint = "transport_runs")]
pub async fn transport_runs() -> Result<Vec<TransportRun>, ServerFnError> {
    backend().0.transport_runs(headers().await?).await.map_err(crate::backend::page_error)
}

/// The newest load tests of OpenAI-compatible servers, each with its fitted engine, and the run
/// `include` (a link's pick) if it is one but no longer among the newest.
#[server(prefix = "/srv", endpoint = "llm_runs")]
pub async fn llm_runs(include: Option<String>) -> Result<Vec<LlmRunView>, ServerFnError> {
    backend().0.llm_runs(headers().await?, include).await.map_err(crate::backend::page_error)
}

/// One run with its node's history.
#[server(prefix = "/srv", endpoint = "run_page")]
pub async fn run_page(run_id: String) -> Result<RunView, ServerFnError> {
    backend().0.run_page(headers().await?, run_id).await.map_err(crate::backend::page_error)
}

/// Saves a page's inputs under a name (role planner or above).
#[server(prefix = "/srv", endpoint = "save_scenario")]
pub async fn save_scenario(kind: String, name: String, query: String) -> Result<ScenarioView, ServerFnError> {
    backend().0.save_scenario(headers().await?, kind, name, query).await.map_err(crate::backend::page_error)
}

/// Regression alerts, active first.
#[server(prefix = "/srv", endpoint = "alerts")]
pub async fn alerts() -> Result<AlertList, ServerFnError> {
    backend().0.alerts(headers().await?).await.map_err(crate::backend::page_error)
}

/// Acknowledges, resolves or reopens an alert (role planner or above).
#[server(prefix = "/srv", endpoint = "set_alert_state")]
pub async fn set_alert_state(id: String, state: String) -> Result<AlertView, ServerFnError> {
    backend().0.set_alert_state(headers().await?, id, state).await.map_err(crate::backend::page_error)
}

/// Every saved scenario, newest first.
#[server(prefix = "/srv", endpoint = "scenarios")]
pub async fn scenarios() -> Result<ScenarioList, ServerFnError> {
    backend().0.scenarios(headers().await?).await.map_err(crate::backend::page_error)
}

/// One saved scenario.
#[server(prefix = "/srv", endpoint = "scenario")]
pub async fn scenario(id: String) -> Result<ScenarioView, ServerFnError> {
    backend().0.scenario(headers().await?, id).await.map_err(crate::backend::page_error)
}

/// Gives a saved scenario a new name (role planner or above).
#[server(prefix = "/srv", endpoint = "rename_scenario")]
pub async fn rename_scenario(id: String, name: String) -> Result<ScenarioView, ServerFnError> {
    backend().0.rename_scenario(headers().await?, id, name).await.map_err(crate::backend::page_error)
}

/// Deletes a saved scenario (role planner or above).
#[server(prefix = "/srv", endpoint = "delete_scenario")]
pub async fn delete_scenario(id: String) -> Result<(), ServerFnError> {
    backend().0.delete_scenario(headers().await?, id).await.map_err(crate::backend::page_error)
}

/// The current price catalog.
#[server(prefix = "/srv", endpoint = "price_catalog")]
pub async fn price_catalog() -> Result<CatalogView, ServerFnError> {
    backend().0.price_catalog(headers().await?).await.map_err(crate::backend::page_error)
}

/// The grid-intensity table in force.
#[server(prefix = "/srv", endpoint = "grid_table")]
pub async fn grid_table() -> Result<GridView, ServerFnError> {
    backend().0.grid_table(headers().await?).await.map_err(crate::backend::page_error)
}

/// Replaces the grid-intensity table with `csv` (roles finance and admin).
#[server(prefix = "/srv", endpoint = "import_grid")]
pub async fn import_grid(csv: String) -> Result<ImportOutcome, ServerFnError> {
    backend().0.import_grid(headers().await?, csv).await.map_err(crate::backend::page_error)
}

/// Replaces the catalog with `csv` (roles finance and admin).
#[server(prefix = "/srv", endpoint = "import_prices")]
pub async fn import_prices(csv: String) -> Result<ImportOutcome, ServerFnError> {
    backend().0.import_prices(headers().await?, csv).await.map_err(crate::backend::page_error)
}

/// People, API tokens and agents, for an admin; `None` for anyone else signed in.
#[server(prefix = "/srv", endpoint = "people")]
pub async fn people() -> Result<Option<PeopleView>, ServerFnError> {
    backend().0.people(headers().await?).await.map_err(crate::backend::page_error)
}

/// Adds a person; `password` empty or absent has one made up (admin).
#[server(prefix = "/srv", endpoint = "create_user")]
pub async fn create_user(name: String, role: String, password: Option<String>) -> Result<CreatedUser, ServerFnError> {
    let password = password.filter(|p| !p.is_empty());
    backend().0.create_user(headers().await?, name, role, password).await.map_err(crate::backend::page_error)
}

/// Gives a person another role (admin).
#[server(prefix = "/srv", endpoint = "set_user_role")]
pub async fn set_user_role(id: String, role: String) -> Result<PersonView, ServerFnError> {
    backend().0.set_user_role(headers().await?, id, role).await.map_err(crate::backend::page_error)
}

/// Removes a person with their sessions and tokens (admin).
#[server(prefix = "/srv", endpoint = "delete_user")]
pub async fn delete_user(id: String) -> Result<(), ServerFnError> {
    backend().0.delete_user(headers().await?, id).await.map_err(crate::backend::page_error)
}

/// Issues an API token acting as `user_id`, expiring after `expires_in_days` if given (admin).
#[server(prefix = "/srv", endpoint = "create_api_token")]
pub async fn create_api_token(user_id: String, expires_in_days: Option<u32>) -> Result<CreatedToken, ServerFnError> {
    backend().0.create_api_token(headers().await?, user_id, expires_in_days).await.map_err(crate::backend::page_error)
}

/// Revokes an API token (admin).
#[server(prefix = "/srv", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(id: String) -> Result<(), ServerFnError> {
    backend().0.revoke_api_token(headers().await?, id).await.map_err(crate::backend::page_error)
}

/// Issues an agent's token; `replace` gives an existing agent a new one (admin).
#[server(prefix = "/srv", endpoint = "create_agent_token")]
pub async fn create_agent_token(name: String, replace: bool) -> Result<CreatedToken, ServerFnError> {
    backend().0.create_agent_token(headers().await?, name, replace).await.map_err(crate::backend::page_error)
}

/// Reports, for finance and admin.
#[server(prefix = "/srv", endpoint = "reports")]
pub async fn reports_page() -> Result<ReportsView, ServerFnError> {
    backend().0.reports(headers().await?).await.map_err(crate::backend::page_error)
}

/// Budgets and the newest report's forecast (finance).
#[server(prefix = "/srv", endpoint = "budgets")]
pub async fn budgets_page() -> Result<BudgetsView, ServerFnError> {
    backend().0.budgets(headers().await?).await.map_err(crate::backend::page_error)
}

/// Sets the monthly budget (US dollars, as typed) of a team or deployment (finance).
#[server(prefix = "/srv", endpoint = "set_budget")]
pub async fn set_budget(scope: String, name: String, monthly_usd: String) -> Result<BudgetView, ServerFnError> {
    backend().0.set_budget(headers().await?, scope, name, monthly_usd).await.map_err(crate::backend::page_error)
}

/// Deletes a budget (finance).
#[server(prefix = "/srv", endpoint = "delete_budget")]
pub async fn delete_budget(id: String) -> Result<(), ServerFnError> {
    backend().0.delete_budget(headers().await?, id).await.map_err(crate::backend::page_error)
}

/// Builds a report for `from`..=`to` with one deployment per saved planner scenario, each
/// charged to `team` (none when empty).
#[server(prefix = "/srv", endpoint = "report_from_scenarios")]
pub async fn report_from_scenarios(
    name: String,
    // Optional, so a page loaded before the field existed can still build a report.
    team: Option<String>,
    from: String,
    to: String,
) -> Result<ReportSummaryView, ServerFnError> {
    backend().0.report_from_scenarios(headers().await?, name, team, from, to).await.map_err(crate::backend::page_error)
}
