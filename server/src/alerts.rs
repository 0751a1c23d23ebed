//! Regression alerts, judged after each ingest ([`model::plan::regression`]): each headline
//! figure of the run against the newest runs of its hardware class, an alert raised (or the
//! class's active one counted on) when it is worse by more than the threshold and the noise,
//! with what it costs a month, and a webhook told of each new alert.
//!
//! The judgement runs after the run's transaction commits, so the run is acknowledged whatever
//! befalls it; a run whose upload is sent again is judged again, and counted once. A process
//! killed between the commit and the judgement leaves that run unjudged until it is uploaded
//! again (an agent that got no answer does so).

use std::sync::Arc;
use std::time::Duration;

use app::data::AlertView;
use model::RunUpload;
use model::calendar::DAYS_PER_MONTH;
use model::plan::regression::{self, Better, RunContext};
use model::wire::measured;
use tokio::sync::Notify;

use crate::store::{AlertRecord, NewAlert, Recorded, Store};

/// How a webhook's body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WebhookFormat {
    /// The alert as a JSON object.
    Json,
    /// `{"text": …}`, which Slack's (and Mattermost's, and Teams' workflow) incoming webhooks take.
    Slack,
}

/// Where new alerts are posted.
#[derive(Debug, Clone)]
pub struct Webhook {
    pub url: reqwest::Url,
    pub format: WebhookFormat,
}

impl Webhook {
    /// A webhook at `url` (http or https, no credentials in it, which would be logged).
    pub fn new(url: &str, format: WebhookFormat) -> anyhow::Result<Webhook> {
        let url = reqwest::Url::parse(url).map_err(|e| anyhow::anyhow!("--alert-webhook: {e}"))?;
        anyhow::ensure!(matches!(url.scheme(), "http" | "https"), "--alert-webhook must be an http or https URL");
        anyhow::ensure!(
            url.username().is_empty() && url.password().is_none(),
            "--alert-webhook must not carry a user name or password; put a token in its path or query"
        );
        Ok(Webhook { url, format })
    }
}

/// The alert settings of a server.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The smallest change that alerts, as a fraction.
    pub threshold: f64,
    pub webhook: Option<Webhook>,
    /// Wakes the webhook deliverer when an alert is raised.
    pub wake: Arc<Notify>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings { threshold: regression::DEFAULT_THRESHOLD, webhook: None, wake: Arc::new(Notify::new()) }
    }
}

/// A stored run's headline figure of one suite, to judge.
#[derive(Debug, Clone)]
pub struct Figure {
    pub run_id: String,
    pub suite: String,
    pub class: String,
    pub figure: String,
    pub unit: String,
    pub value: f64,
    pub context: RunContext,
    pub node_id: String,
    pub hostname: String,
    pub started_at_ms: i64,
}

/// The headline figures of `run` as it was just stored.
pub fn figures(run: &RunUpload) -> Vec<Figure> {
    let Some(class) = regression::class_of(&run.node) else { return Vec::new() };
    run.suites()
        .into_iter()
        .filter_map(|suite| {
            let (figure, unit, value) = measured::headline(suite, &run.measurements)?;
            Some(Figure {
                run_id: run.run_id.to_string(),
                suite: suite.as_str().to_string(),
                class: class.to_string(),
                figure,
                unit,
                value,
                context: RunContext::of(run),
                node_id: run.node.node_id.clone(),
                hostname: run.node.hostname.clone(),
                started_at_ms: run.started_at_ms,
            })
        })
        .collect()
}

/// Judges the headline figures of a run just stored (`stored`: its body is what was stored) or
/// sent again (then the figures stored for it are judged, and only for the agent that stored
/// it: a body sent again under a known run id may say anything). Each figure is judged on its
/// own: one that fails is logged and the others go on.
pub async fn after_ingest(
    store: &Store,
    settings: &Settings,
    run: &RunUpload,
    agent_id: &str,
    stored: bool,
) -> Vec<Recorded> {
    let figures = if stored {
        figures(run)
    } else {
        match store.stored_figures(&run.run_id.to_string(), agent_id).await {
            Ok(figures) => figures,
            Err(err) => {
                tracing::warn!(run_id = %run.run_id, error = %format!("{err:#}"), "could not read a run sent again to judge it");
                Vec::new()
            }
        }
    };
    let mut recorded = Vec::new();
    for figure in figures {
        match judge_figure(store, settings, &figure).await {
            Ok(Some(outcome)) => recorded.push(outcome),
            Ok(None) => {}
            Err(err) => tracing::warn!(
                run_id = %figure.run_id, suite = figure.suite, error = %format!("{err:#}"),
                "could not judge a figure for regressions; it is judged again if the run is sent again"
            ),
        }
    }
    recorded
}

/// Judges one figure; what was recorded, if it regressed.
async fn judge_figure(store: &Store, settings: &Settings, f: &Figure) -> anyhow::Result<Option<Recorded>> {
    let Some(better) = Better::of_unit(&f.unit) else { return Ok(None) };
    let history = store.class_history(&f.class, &f.suite, f.started_at_ms, &f.run_id, regression::HISTORY).await?;
    let values: Vec<f64> = history.iter().rev().map(|(value, _)| *value).collect();
    let Some(verdict) = regression::judge(&values, f.value, better, settings.threshold) else { return Ok(None) };
    if !verdict.regressed {
        return Ok(None);
    }
    let told = verdict.told();
    // `judge` keeps what it returns finite, and a bound that was crossed is finite; an alert is
    // stored as numbers and read as JSON, which has no infinity.
    if ![told.value, told.worse_by, told.bound].iter().all(|x| x.is_finite()) {
        return Ok(None);
    }
    let before = history.first().and_then(|(_, context)| serde_json::from_str(context.as_deref()?).ok());
    // Priced only for a new alert: one counted on the class's active alert keeps its price.
    let (monthly_cost_usd, cost_basis) = match store.active_alert(&f.class, &f.suite).await? {
        Some(_) => (None, String::new()),
        None => monthly_cost(store, &f.class, told.worse_by).await?,
    };
    let new = NewAlert {
        class: f.class.clone(),
        suite: f.suite.clone(),
        figure: f.figure.clone(),
        unit: f.unit.clone(),
        better: match better {
            Better::Higher => "higher",
            Better::Lower => "lower",
        },
        run_id: f.run_id.clone(),
        node_id: f.node_id.clone(),
        hostname: f.hostname.clone(),
        started_at_ms: f.started_at_ms,
        judged_on: told.judged_on,
        value: told.value,
        median: verdict.baseline.median,
        noise: verdict.baseline.noise,
        baseline_runs: verdict.baseline.runs as i64,
        worse_by: told.worse_by,
        bound: told.bound,
        threshold: settings.threshold,
        monthly_cost_usd,
        cost_basis,
        changes: changes(&f.context, before.as_ref()),
        notify: settings.webhook.is_some(),
    };
    let outcome = store.record_regression(&new).await?;
    if let Recorded::Raised(id) = &outcome {
        metrics::counter!("headroom_alerts_raised_total", "suite" => f.suite.clone()).increment(1);
        tracing::warn!(alert = %id, class = f.class, suite = f.suite, worse_by = told.worse_by, run_id = f.run_id, "regression alert raised");
        if settings.webhook.is_some() {
            settings.wake.notify_one();
        }
    }
    Ok(Some(outcome))
}

/// What changed since the class's run before, in words.
fn changes(now: &RunContext, before: Option<&RunContext>) -> String {
    match before {
        None => "not recorded for the runs before".into(),
        Some(before) => {
            let changed = now.changes_since(before);
            if changed.is_empty() {
                format!("nothing recorded changed since the run before (agent {}, kernel {})", now.agent, now.kernel)
            } else {
                changed.join("; ")
            }
        }
    }
}

/// What a regression of `worse_by` costs a month: the newest report's monthly serving spend on
/// deployments of `class`, times `worse_by`; or why it cannot say.
async fn monthly_cost(store: &Store, class: &str, worse_by: f64) -> anyhow::Result<(Option<f64>, String)> {
    let Some(newest) = store.list_reports(1).await?.into_iter().next() else {
        return Ok((None, format!("no report yet: a report with deployments on {class} prices this")));
    };
    let Some(report) = store.report(&newest.id).await? else {
        return Ok((None, format!("no report yet: a report with deployments on {class} prices this")));
    };
    let rows: Vec<_> = report.rows.iter().filter(|r| r.instance_type.as_deref() == Some(class)).collect();
    if rows.is_empty() || report.days == 0 {
        return Ok((None, format!("the newest report, “{}”, has no deployment on {class}", report.name)));
    }
    let period_usd = rows.iter().map(|r| r.serving_micro_usd).sum::<i64>() as f64 / 1e6;
    let monthly = period_usd / f64::from(report.days) * DAYS_PER_MONTH;
    let cost = regression::monthly_cost(worse_by, monthly);
    if !cost.is_finite() {
        return Ok((None, format!("not priced: {class}'s regression is too large to price")));
    }
    Ok((
        Some(cost),
        format!(
            "{} deployment{} on {class} in the newest report, “{}” ({} to {}): {} a month of serving",
            rows.len(),
            if rows.len() == 1 { "" } else { "s" },
            report.name,
            report.from,
            report.to,
            model::format::usd(monthly)
        ),
    ))
}

pub fn view(a: &AlertRecord) -> AlertView {
    AlertView {
        id: a.id.clone(),
        state: a.state.clone(),
        class: a.class.clone(),
        suite: a.suite.clone(),
        figure: a.figure.clone(),
        unit: a.unit.clone(),
        better: a.better.clone(),
        run_id: a.run_id.clone(),
        node_id: a.node_id.clone(),
        hostname: a.hostname.clone(),
        started_at_ms: a.started_at_ms,
        last_run_id: a.last_run_id.clone(),
        last_started_at_ms: a.last_started_at_ms,
        runs: a.runs,
        judged_on: a.judged_on.clone(),
        value: a.value,
        median: a.median,
        noise: a.noise,
        baseline_runs: a.baseline_runs,
        worse_by: a.worse_by,
        bound: a.bound,
        threshold: a.threshold,
        monthly_cost_usd: a.monthly_cost_usd,
        cost_basis: a.cost_basis.clone(),
        changes: a.changes.clone(),
        created_at_ms: a.created_at_ms,
        updated_at_ms: a.updated_at_ms,
        acted_by: a.acted_by.clone(),
        webhook_state: a.webhook_state.clone(),
        webhook_attempts: a.webhook_attempts,
        webhook_error: a.webhook_error.clone(),
    }
}

/// Attempts a delivery gets before it is given up: the waits between them (5 s doubling,
/// at most an hour) add up to about three and a half hours, so a receiver down for an
/// afternoon's deploy still gets the alert. Delivery is at least once: a post whose success
/// cannot be recorded (the database away for the lease's minute) is posted again.
pub const WEBHOOK_ATTEMPTS: i64 = 13;
/// How long one attempt may take.
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claimed delivery is left to its replica before another may try it: six times an
/// attempt's limit, and one delivery is claimed at a time.
const LEASE_MS: i64 = 60_000;

/// The wait after failed attempt `attempts` (1, 2, …): 5 s, doubling, at most an hour.
pub fn retry_after_ms(attempts: i64) -> i64 {
    (5_000i64 << (attempts - 1).clamp(0, 20)).min(3_600_000)
}

/// Delivers pending webhooks until the process ends: when an alert is raised here, and every
/// few seconds for those raised by other replicas or due for another try; one at a time, each
/// claimed first, so several replicas send an alert once.
pub fn spawn_deliverer(store: Store, settings: Arc<Settings>) -> Option<tokio::task::JoinHandle<()>> {
    let webhook = settings.webhook.clone()?;
    let client = reqwest::Client::builder()
        .timeout(WEBHOOK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("headroom-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the webhook client's settings are valid");
    Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = settings.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
            // A bounded batch at a time, so a wake-up always ends.
            for _ in 0..64 {
                let (alert, claim) = match store.claim_webhook(LEASE_MS).await {
                    Ok(Some(due)) => due,
                    Ok(None) => break,
                    Err(err) => {
                        tracing::warn!(error = %format!("{err:#}"), "could not read the alerts due to the webhook");
                        break;
                    }
                };
                let outcome = deliver(&client, &webhook, &alert).await;
                let label = if outcome.is_ok() { "sent" } else { "failed" };
                metrics::counter!("headroom_alert_webhooks_total", "outcome" => label).increment(1);
                let outcome = outcome.map_err(|error| {
                    let tried = alert.webhook_attempts + 1;
                    tracing::warn!(alert = %alert.id, attempt = tried, %error, "alert webhook failed");
                    let retry = (tried < WEBHOOK_ATTEMPTS).then(|| crate::store::now_ms() + retry_after_ms(tried));
                    (error, retry)
                });
                // Recorded within the lease, or the alert is posted again when it lapses.
                let mut recorded = store.webhook_attempted(&alert.id, claim, outcome.clone()).await;
                for wait in [1, 3, 9] {
                    if recorded.is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_secs(wait)).await;
                    recorded = store.webhook_attempted(&alert.id, claim, outcome.clone()).await;
                }
                if let Err(err) = recorded {
                    tracing::warn!(error = %format!("{err:#}"), alert = %alert.id, "could not record a webhook attempt; it is posted again when its claim lapses");
                }
            }
        }
    }))
}

/// One POST of `alert` to the webhook; the reason it failed, without the URL (its path or query
/// may hold the receiver's secret), and without anything the receiver sent but its status.
async fn deliver(client: &reqwest::Client, webhook: &Webhook, alert: &AlertRecord) -> Result<(), String> {
    let body = body(webhook.format, &view(alert));
    let response = client.post(webhook.url.clone()).json(&body).send().await.map_err(|e| {
        let e = e.without_url();
        tracing::debug!(error = %e, "alert webhook request failed");
        if e.is_timeout() {
            format!("no answer within {} s", WEBHOOK_TIMEOUT.as_secs())
        } else if e.is_connect() {
            "could not connect".to_string()
        } else {
            format!("the request failed: {e}")
        }
    })?;
    let status = response.status();
    if status.is_success() { Ok(()) } else { Err(format!("answered {status}")) }
}

/// The body posted for `alert`.
pub fn body(format: WebhookFormat, alert: &AlertView) -> serde_json::Value {
    match format {
        WebhookFormat::Json => serde_json::json!({ "event": "headroom.regression_alert", "alert": alert }),
        WebhookFormat::Slack => serde_json::json!({ "text": slack_text(alert) }),
    }
}

/// Text from a node (its name, kernel, agent version) or the catalog, made inert in a chat
/// message: control characters become spaces (no forged lines), Slack's `&`, `<`, `>` are
/// escaped (no `<!channel>`, no links), and it is set in a code span with its backticks
/// replaced, so neither Slack nor Mattermost renders `@channel`, `[links](…)`, images or
/// emphasis in it; at most 120 characters.
fn inert(text: &str) -> String {
    let mut clean: String = text
        .chars()
        .map(|c| match c {
            '`' => '\'',
            // Control characters, and the line and paragraph separators some clients break on.
            c if c.is_control() || c.is_whitespace() => ' ',
            c => c,
        })
        .collect();
    if clean.trim().is_empty() {
        clean = "—".into();
    }
    if clean.chars().count() > 120 {
        clean = clean.chars().take(119).collect::<String>() + "…";
    }
    format!("`{}`", clean.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;"))
}

/// The alert in one message, every text that came from a node or the catalog made [`inert`].
pub fn slack_text(a: &AlertView) -> String {
    let cost = match a.monthly_cost_usd {
        Some(usd) => format!("about {} a month more. ", model::format::usd(usd)),
        None => String::new(),
    };
    format!(
        "Headroom: {} on {} is {:.1} % worse than the median of {} earlier runs of its class ({} on {}, run {}). {}Changed: {}.",
        inert(&a.figure),
        inert(&a.class),
        a.worse_by * 100.0,
        a.baseline_runs,
        inert(&a.suite),
        inert(&a.hostname),
        a.run_id,
        cost,
        inert(&a.changes)
    )
}
