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

/// Judges each headline figure of `run` (stored, or stored before) against its class's history.
pub async fn after_ingest(store: &Store, settings: &Settings, run: &RunUpload) -> anyhow::Result<Vec<Recorded>> {
    let class = regression::class_of(&run.node);
    let run_id = run.run_id.to_string();
    let mut recorded = Vec::new();
    for suite in run.suites() {
        let Some((figure, unit, value)) = measured::headline(suite, &run.measurements) else { continue };
        let Some(better) = Better::of_unit(&unit) else { continue };
        let history =
            store.class_history(class, suite.as_str(), run.started_at_ms, &run_id, regression::HISTORY).await?;
        let values: Vec<f64> = history.iter().rev().map(|(value, _)| *value).collect();
        let Some(verdict) = regression::judge(&values, value, better, settings.threshold) else { continue };
        if !verdict.regressed {
            continue;
        }
        let before = history.first().and_then(|(_, context)| serde_json::from_str(context.as_deref()?).ok());
        // A step is told by this run's value; a shift seen only over the window, by its median.
        let (judged_on, judged, worse_by, bound) = if verdict.step {
            ("run", value, verdict.worse_by, verdict.bound)
        } else {
            ("window", verdict.window_median, verdict.window_worse_by, verdict.window_bound)
        };
        let (monthly_cost_usd, cost_basis) = monthly_cost(store, class, worse_by).await?;
        let new = NewAlert {
            class: class.to_string(),
            suite: suite.as_str().to_string(),
            figure,
            unit,
            better: match better {
                Better::Higher => "higher",
                Better::Lower => "lower",
            },
            run_id: run_id.clone(),
            node_id: run.node.node_id.clone(),
            hostname: run.node.hostname.clone(),
            started_at_ms: run.started_at_ms,
            judged_on,
            value: judged,
            median: verdict.baseline.median,
            noise: verdict.baseline.noise,
            baseline_runs: verdict.baseline.runs as i64,
            worse_by,
            bound,
            threshold: settings.threshold,
            monthly_cost_usd,
            cost_basis,
            changes: changes(&RunContext::of(run), before.as_ref()),
            notify: settings.webhook.is_some(),
        };
        let outcome = store.record_regression(&new).await?;
        if let Recorded::Raised(id) = &outcome {
            metrics::counter!("headroom_alerts_raised_total", "suite" => suite.as_str()).increment(1);
            tracing::warn!(alert = %id, class, suite = suite.as_str(), worse_by, run_id = %run_id, "regression alert raised");
            if settings.webhook.is_some() {
                settings.wake.notify_one();
            }
        }
        recorded.push(outcome);
    }
    Ok(recorded)
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
    Ok((
        Some(regression::monthly_cost(worse_by, monthly)),
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

/// Attempts a delivery gets before it is given up.
pub const WEBHOOK_ATTEMPTS: i64 = 6;
/// How long one attempt may take.
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a claimed delivery is left to its replica before another may try it.
const LEASE_MS: i64 = 60_000;

/// The wait before attempt `attempts + 1`: 5 s, doubling.
pub fn retry_after_ms(attempts: i64) -> i64 {
    5_000 << attempts.clamp(0, 10)
}

/// Delivers pending webhooks until the process ends: when an alert is raised here, and every
/// few seconds for those raised by other replicas or due for another try.
pub fn spawn_deliverer(store: Store, settings: Arc<Settings>) {
    let Some(webhook) = settings.webhook.clone() else { return };
    let client = reqwest::Client::builder()
        .timeout(WEBHOOK_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("headroom-server/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the webhook client's settings are valid");
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = settings.wake.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
            let due = match store.claim_webhooks(LEASE_MS, 20).await {
                Ok(due) => due,
                Err(err) => {
                    tracing::warn!(error = %format!("{err:#}"), "could not read the alerts due to the webhook");
                    continue;
                }
            };
            for alert in due {
                let outcome = deliver(&client, &webhook, &alert).await;
                let label = if outcome.is_ok() { "sent" } else { "failed" };
                metrics::counter!("headroom_alert_webhooks_total", "outcome" => label).increment(1);
                let outcome = outcome.map_err(|error| {
                    let tried = alert.webhook_attempts + 1;
                    tracing::warn!(alert = %alert.id, attempt = tried, %error, "alert webhook failed");
                    let retry = (tried < WEBHOOK_ATTEMPTS).then(|| crate::store::now_ms() + retry_after_ms(tried - 1));
                    (error, retry)
                });
                if let Err(err) = store.webhook_attempted(&alert.id, outcome).await {
                    tracing::warn!(error = %format!("{err:#}"), "could not record a webhook attempt");
                }
            }
        }
    });
}

/// One POST of `alert` to the webhook; the reason it failed, without the URL (its path or query
/// may hold the receiver's secret).
async fn deliver(client: &reqwest::Client, webhook: &Webhook, alert: &AlertRecord) -> Result<(), String> {
    let body = body(webhook.format, &view(alert));
    let response = client.post(webhook.url.clone()).json(&body).send().await.map_err(|e| {
        if e.is_timeout() {
            format!("no answer within {} s", WEBHOOK_TIMEOUT.as_secs())
        } else if e.is_connect() {
            "could not connect".to_string()
        } else {
            "the request failed".to_string()
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

/// The alert in one message, with Slack's three control characters escaped so a node's name
/// cannot make a link or a mention.
pub fn slack_text(a: &AlertView) -> String {
    let escape = |t: &str| t.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let cost = match a.monthly_cost_usd {
        Some(usd) => format!("about {} a month more. ", model::format::usd(usd)),
        None => String::new(),
    };
    format!(
        "Headroom: {} on {} is {:.1} % worse than the median of {} earlier runs of its class ({} on {}, run {}). {}Changed: {}.",
        escape(&a.figure),
        escape(&a.class),
        a.worse_by * 100.0,
        a.baseline_runs,
        escape(&a.suite),
        escape(&a.hostname),
        a.run_id,
        cost,
        escape(&a.changes)
    )
}
