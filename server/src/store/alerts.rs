//! Regression alerts: the history of a hardware class's headline figures (kept on `run_suites`
//! at ingest), the alerts raised from it, who acted on them, and their webhook deliveries.

use model::wire::measured::SuiteDigest;
use sqlx::{AssertSqlSafe, FromRow};

use crate::alerts::Figure;

use super::{OptF64, Store, now_ms};

/// A stored alert.
#[derive(Debug, Clone, FromRow)]
pub struct AlertRecord {
    pub id: String,
    pub state: String,
    pub class: String,
    pub suite: String,
    pub figure: String,
    pub unit: String,
    pub better: String,
    pub run_id: String,
    pub node_id: String,
    pub hostname: String,
    pub started_at_ms: i64,
    pub last_run_id: String,
    pub last_started_at_ms: i64,
    pub runs: i64,
    pub judged_on: String,
    pub value: f64,
    pub median: f64,
    pub noise: f64,
    pub baseline_runs: i64,
    pub worse_by: f64,
    pub bound: f64,
    pub threshold: f64,
    pub monthly_cost_usd: Option<f64>,
    pub cost_basis: String,
    pub changes: String,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub acted_by: Option<String>,
    pub webhook_state: String,
    pub webhook_attempts: i64,
    pub webhook_error: Option<String>,
}

const COLUMNS: &str = "id, state, class, suite, figure, unit, better, run_id, node_id, hostname, started_at_ms, \
                       last_run_id, last_started_at_ms, runs, judged_on, value, median, noise, baseline_runs, worse_by, bound, \
                       threshold, monthly_cost_usd, cost_basis, changes, created_at_ms, updated_at_ms, acted_by, \
                       webhook_state, webhook_attempts, webhook_error";

/// A regressed figure of one run, to raise an alert with or count on the active one.
#[derive(Debug, Clone)]
pub struct NewAlert {
    pub class: String,
    pub suite: String,
    pub figure: String,
    pub unit: String,
    pub better: &'static str,
    pub run_id: String,
    pub node_id: String,
    pub hostname: String,
    pub started_at_ms: i64,
    /// `run`: this run's value was judged; `window`: the median of the newest runs.
    pub judged_on: &'static str,
    pub value: f64,
    pub median: f64,
    pub noise: f64,
    pub baseline_runs: i64,
    pub worse_by: f64,
    pub bound: f64,
    pub threshold: f64,
    pub monthly_cost_usd: Option<f64>,
    pub cost_basis: String,
    pub changes: String,
    /// Whether a webhook is to be told of it.
    pub notify: bool,
}

/// What [`Store::record_regression`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// A new alert, this id.
    Raised(String),
    /// Counted on the class's active alert.
    Counted(String),
    /// Nothing: this run's figure was counted already (an upload sent again).
    Already,
}

/// The states a person may set.
pub const STATES: [&str; 3] = ["open", "acknowledged", "resolved"];

/// Most alerts one page lists.
pub const PAGE: u32 = 200;

impl Store {
    /// The headline figures of `class`'s newest runs of `suite` before the run (`started_at_ms`,
    /// `run_id`), newest first, each with what it was measured with (JSON of
    /// [`model::plan::regression::RunContext`]).
    pub async fn class_history(
        &self,
        class: &str,
        suite: &str,
        started_at_ms: i64,
        run_id: &str,
        limit: usize,
    ) -> anyhow::Result<Vec<(f64, Option<String>)>> {
        Ok(sqlx::query_as(AssertSqlSafe(history_sql(limit)))
            .bind(class)
            .bind(suite)
            .bind(started_at_ms)
            .bind(run_id)
            .fetch_all(&self.pool)
            .await?)
    }

    /// Raises an alert for a regressed figure, or counts it on the active alert of its class
    /// and suite, and marks the run's suite with it; in one transaction, and only once per run
    /// and suite however often the run is uploaded.
    pub async fn record_regression(&self, new: &NewAlert) -> anyhow::Result<Recorded> {
        let id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let (_writing, mut tx) = self.begin_write().await?;
        let (alert_id,): (String,) = sqlx::query_as(
            "INSERT INTO alerts (id, open_key, state, class, suite, figure, unit, better, run_id, node_id, hostname, \
             started_at_ms, last_run_id, last_started_at_ms, runs, judged_on, value, median, noise, baseline_runs, worse_by, \
             bound, threshold, monthly_cost_usd, cost_basis, changes, created_at_ms, updated_at_ms, webhook_state) \
             VALUES ($1, $2, 'open', $3, $4, $5, $6, $7, $8, $9, $10, $11, $8, $11, 1, $24, $12, $13, $14, $15, $16, $17, \
             $18, $19, $20, $21, $22, $22, $23) \
             ON CONFLICT (open_key) DO UPDATE SET runs = alerts.runs + 1, updated_at_ms = excluded.updated_at_ms, \
             last_run_id = CASE WHEN excluded.last_started_at_ms > alerts.last_started_at_ms \
                 THEN excluded.last_run_id ELSE alerts.last_run_id END, \
             last_started_at_ms = CASE WHEN excluded.last_started_at_ms > alerts.last_started_at_ms \
                 THEN excluded.last_started_at_ms ELSE alerts.last_started_at_ms END \
             RETURNING id",
        )
        .bind(&id)
        .bind(open_key(&new.class, &new.suite))
        .bind(&new.class)
        .bind(&new.suite)
        .bind(&new.figure)
        .bind(&new.unit)
        .bind(new.better)
        .bind(&new.run_id)
        .bind(&new.node_id)
        .bind(&new.hostname)
        .bind(new.started_at_ms)
        .bind(new.value)
        .bind(new.median)
        .bind(new.noise)
        .bind(new.baseline_runs)
        .bind(new.worse_by)
        .bind(new.bound)
        .bind(new.threshold)
        .bind(OptF64(new.monthly_cost_usd))
        .bind(&new.cost_basis)
        .bind(&new.changes)
        .bind(now)
        .bind(if new.notify { "pending" } else { "none" })
        .bind(new.judged_on)
        .fetch_one(&mut *tx)
        .await?;
        let marked =
            sqlx::query("UPDATE run_suites SET alert_id = $1 WHERE suite = $2 AND run_id = $3 AND alert_id IS NULL")
                .bind(&alert_id)
                .bind(&new.suite)
                .bind(&new.run_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        if marked == 0 {
            tx.rollback().await?;
            return Ok(Recorded::Already);
        }
        tx.commit().await?;
        Ok(if alert_id == id { Recorded::Raised(alert_id) } else { Recorded::Counted(alert_id) })
    }

    /// The active (open or acknowledged) alert of a class and suite, if any.
    pub async fn active_alert(&self, class: &str, suite: &str) -> anyhow::Result<Option<String>> {
        let found: Option<(String,)> = sqlx::query_as("SELECT id FROM alerts WHERE open_key = $1")
            .bind(open_key(class, suite))
            .fetch_optional(&self.pool)
            .await?;
        Ok(found.map(|(id,)| id))
    }

    /// The headline figures stored for run `run_id`, if agent `agent_id` stored it (none
    /// otherwise): what a run sent again is judged on.
    pub async fn stored_figures(&self, run_id: &str, agent_id: &str) -> anyhow::Result<Vec<Figure>> {
        let run: Option<(String, String, i64, String, String)> = sqlx::query_as(
            "SELECT r.agent_id, r.node_id, r.started_at_ms, r.suites, n.hostname FROM runs r \
             JOIN nodes n ON n.id = r.node_id WHERE r.id = $1",
        )
        .bind(run_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some((owner, node_id, started_at_ms, suites, hostname)) = run else { return Ok(Vec::new()) };
        if owner != agent_id {
            return Ok(Vec::new());
        }
        let mut figures = Vec::new();
        for suite in suites.split(',').filter(|s| !s.is_empty()) {
            type Row = (Option<String>, Option<String>, Option<String>, Option<String>);
            let row: Option<Row> = sqlx::query_as(
                "SELECT class, digest, context, alert_id FROM run_suites WHERE suite = $1 AND run_id = $2",
            )
            .bind(suite)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await?;
            // Counted on an alert already: nothing more to judge.
            let Some((Some(class), Some(digest), context, None)) = row else { continue };
            let Ok(digest) = serde_json::from_str::<SuiteDigest>(&digest) else { continue };
            let Some(headline) = digest.headline else { continue };
            figures.push(Figure {
                run_id: run_id.to_string(),
                suite: suite.to_string(),
                class,
                figure: headline.name,
                unit: headline.unit,
                value: headline.value,
                context: context.and_then(|c| serde_json::from_str(&c).ok()).unwrap_or_default(),
                node_id: node_id.clone(),
                hostname: hostname.clone(),
                started_at_ms,
            });
        }
        Ok(figures)
    }

    /// Alerts, active ones (open, then acknowledged) first, each newest first; or those in `state`.
    pub async fn alerts(&self, state: Option<&str>, limit: u32) -> anyhow::Result<Vec<AlertRecord>> {
        let rows = match state {
            Some(state) => sqlx::query_as(AssertSqlSafe(list_sql(limit))).bind(state).fetch_all(&self.pool).await?,
            None => {
                let mut rows = Vec::new();
                for state in STATES {
                    let left = limit.saturating_sub(rows.len() as u32);
                    if left == 0 {
                        break;
                    }
                    rows.extend(Box::pin(self.alerts(Some(state), left)).await?);
                }
                rows
            }
        };
        Ok(rows)
    }

    pub async fn alert(&self, id: &str) -> anyhow::Result<Option<AlertRecord>> {
        Ok(sqlx::query_as(AssertSqlSafe(format!("SELECT {COLUMNS} FROM alerts WHERE id = $1")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?)
    }

    /// The alerts that the suites of run `run_id` raised or were counted on.
    pub async fn run_alerts(&self, run_id: &str, suites: &[&str]) -> anyhow::Result<Vec<AlertRecord>> {
        let mut found = Vec::new();
        for suite in suites {
            let rows: Vec<AlertRecord> = sqlx::query_as(AssertSqlSafe(format!(
                "SELECT {} FROM run_suites rs JOIN alerts a ON a.id = rs.alert_id \
                 WHERE rs.suite = $1 AND rs.run_id = $2",
                COLUMNS.split(", ").map(|c| format!("a.{c}")).collect::<Vec<_>>().join(", ")
            )))
            .bind(suite)
            .bind(run_id)
            .fetch_all(&self.pool)
            .await?;
            found.extend(rows);
        }
        Ok(found)
    }

    /// Sets an alert's state for a person; `None` when there is no such alert. A resolved alert
    /// stops being the class's active one, so the next regression raises a new alert; one
    /// reopened while its class has another active alert is refused (`Err` with the reason).
    pub async fn set_alert_state(
        &self,
        id: &str,
        state: &str,
        by: &str,
    ) -> anyhow::Result<Option<Result<AlertRecord, String>>> {
        let Some(alert) = self.alert(id).await? else { return Ok(None) };
        let key = (state != "resolved").then(|| open_key(&alert.class, &alert.suite));
        let (_writing, mut tx) = self.begin_write().await?;
        if let Some(key) = &key {
            let other: Option<(String,)> = sqlx::query_as("SELECT id FROM alerts WHERE open_key = $1 AND id <> $2")
                .bind(key)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            if other.is_some() {
                tx.rollback().await?;
                return Ok(Some(Err(format!(
                    "another alert of {} ({}) is active; resolve it before reopening this one",
                    alert.class, alert.suite
                ))));
            }
        }
        let updated =
            sqlx::query("UPDATE alerts SET state = $1, open_key = $2, acted_by = $3, updated_at_ms = $4 WHERE id = $5")
                .bind(state)
                .bind(key)
                .bind(by)
                .bind(now_ms())
                .bind(id)
                .execute(&mut *tx)
                .await;
        match updated {
            // Another alert of the class became active since the check (another replica's
            // upload or reopen): the same answer as the check's.
            Err(e) if e.as_database_error().is_some_and(|db| db.is_unique_violation()) => {
                tx.rollback().await?;
                return Ok(Some(Err(format!(
                    "another alert of {} ({}) became active; resolve it before reopening this one",
                    alert.class, alert.suite
                ))));
            }
            other => {
                other?;
            }
        }
        tx.commit().await?;
        Ok(self.alert(id).await?.map(Ok))
    }

    /// How many alerts are in each state.
    pub async fn alert_counts(&self) -> anyhow::Result<Vec<(String, i64)>> {
        Ok(sqlx::query_as("SELECT state, COUNT(*) FROM alerts GROUP BY state").fetch_all(&self.pool).await?)
    }

    /// The alert whose webhook delivery is most overdue, claimed for `lease_ms` so no other
    /// replica's deliverer tries it meanwhile; with the claim, which [`Store::webhook_attempted`]
    /// must show. `None` when nothing is due.
    pub async fn claim_webhook(&self, lease_ms: i64) -> anyhow::Result<Option<(AlertRecord, i64)>> {
        let now = now_ms();
        loop {
            let due: Option<(String, i64)> = sqlx::query_as(
                "SELECT id, webhook_next_ms FROM alerts WHERE webhook_state = 'pending' AND webhook_next_ms <= $1 \
                 ORDER BY webhook_next_ms LIMIT 1",
            )
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
            let Some((id, seen)) = due else { return Ok(None) };
            // The claim is the new due time: unique enough, as it also changes every attempt.
            let claim = now + lease_ms;
            let won = {
                let (_writing, mut tx) = self.begin_write().await?;
                let won = sqlx::query(
                    "UPDATE alerts SET webhook_next_ms = $1 WHERE id = $2 AND webhook_state = 'pending' \
                     AND webhook_next_ms = $3",
                )
                .bind(claim)
                .bind(&id)
                .bind(seen)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                tx.commit().await?;
                won
            };
            // Another replica took it first: look for the next.
            if won == 1
                && let Some(alert) = self.alert(&id).await?
            {
                return Ok(Some((alert, claim)));
            }
        }
    }

    /// Records a delivery attempt of a claimed alert: sent, or failed with `error` and tried
    /// again at `retry_at_ms` (`None`: given up). Nothing is recorded when the claim has lapsed
    /// and another replica claimed the alert since.
    pub async fn webhook_attempted(
        &self,
        id: &str,
        claim: i64,
        outcome: Result<(), (String, Option<i64>)>,
    ) -> anyhow::Result<()> {
        let (state, error, next) = match outcome {
            Ok(()) => ("sent", None, 0),
            Err((error, Some(at))) => ("pending", Some(error), at),
            Err((error, None)) => ("failed", Some(error), 0),
        };
        let (_writing, mut tx) = self.begin_write().await?;
        sqlx::query(
            "UPDATE alerts SET webhook_state = $1, webhook_error = $2, webhook_next_ms = $3, \
             webhook_attempts = webhook_attempts + 1 WHERE id = $4 AND webhook_state = 'pending' \
             AND webhook_next_ms = $5",
        )
        .bind(state)
        .bind(error)
        .bind(next)
        .bind(id)
        .bind(claim)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A class's newest headlines of a suite before a run: binds class, suite, the run's start and id.
/// Of runs started in the same millisecond, the lower id counts as the newer, as in every list
/// of runs (`ORDER BY started_at_ms DESC, run_id`).
pub(super) fn history_sql(limit: usize) -> String {
    format!(
        "SELECT headline, context FROM run_suites WHERE class = $1 AND suite = $2 AND headline IS NOT NULL \
         AND started_at_ms <= $3 AND (started_at_ms < $3 OR run_id > $4) \
         ORDER BY started_at_ms DESC, run_id LIMIT {limit}"
    )
}

/// Alerts in a state, newest first: binds the state.
pub(super) fn list_sql(limit: u32) -> String {
    format!("SELECT {COLUMNS} FROM alerts WHERE state = $1 ORDER BY created_at_ms DESC, id LIMIT {limit}")
}

/// The active-alert key of a class and suite (the unit separator cannot be in either: node
/// fields refuse control characters).
fn open_key(class: &str, suite: &str) -> String {
    format!("{class}\u{1f}{suite}")
}
