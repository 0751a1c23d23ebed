//! Runs and their measurements: append-only, idempotent by the client's run id.

use std::collections::{BTreeMap, HashMap};

use anyhow::Context;
use model::plan::regression;
use model::wire::measured::{self, SuiteDigest, digest_version};
use model::{
    Floor, GpuInfo, Measurement, MeasurementStatus, NodeSummary, RunDetail, RunStatus, RunSummary, RunUpload, Stats,
    Suite, Unit,
};
// Dynamic SQL here interpolates only integers and `$N` placeholders; values are bound.
use sqlx::{AssertSqlSafe, FromRow};
use uuid::Uuid;

use super::run_tx::{Head, Insert, Placed, RunTx, Value};
use super::{BackfillTurn, Store, now_ms};

/// What an ingest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOutcome {
    pub duplicate: bool,
    pub measurements: u32,
}

/// A run for a node that another agent reported first.
#[derive(Debug, thiserror::Error)]
#[error(
    "node '{node_id}' belongs to another agent; an admin can bind it to this one (headroom-server admin bind-node)"
)]
pub struct NodeOwned {
    pub node_id: String,
}

/// Which runs to list.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub node: Option<String>,
    pub suite: Option<Suite>,
    /// Only runs started strictly before this Unix time in milliseconds (for paging).
    pub before_ms: Option<i64>,
    /// With `suite`: only runs whose digest of it holds an LLM engine (`true`) or does not
    /// (`false`; `run_suites.llm`, written with the digest).
    pub llm: Option<bool>,
    pub limit: u32,
}

#[derive(FromRow)]
struct NodeRow {
    id: String,
    hostname: String,
    cpu_model: String,
    cpu_cores: i64,
    memory_bytes: i64,
    kernel: String,
    instance_type: Option<String>,
    hourly_usd: Option<f64>,
    gpus_json: String,
    first_seen_ms: i64,
    last_seen_ms: i64,
    run_count: i64,
}

#[derive(FromRow)]
struct RunRow {
    id: String,
    node_id: String,
    hostname: String,
    agent_name: String,
    agent_version: String,
    started_at_ms: i64,
    finished_at_ms: i64,
    received_at_ms: i64,
    status: String,
    suites: String,
    measurement_count: i64,
    measurements_removed_at_ms: Option<i64>,
}

#[derive(FromRow)]
struct MeasurementRow {
    suite: String,
    case_name: String,
    parameters_json: String,
    unit: String,
    status: String,
    reason: Option<String>,
    samples: Option<i64>,
    mean: Option<f64>,
    p50: Option<f64>,
    p90: Option<f64>,
    p99: Option<f64>,
    p999: Option<f64>,
    ci95_low: Option<f64>,
    ci95_high: Option<f64>,
    floor_name: Option<String>,
    floor_value: Option<f64>,
    histogram: Option<String>,
}

/// One suite of a stored run, as the pages read it.
#[derive(Debug, Clone)]
pub struct RunDigest {
    pub run_id: Uuid,
    pub node_id: String,
    pub hostname: String,
    pub started_at_ms: i64,
    pub digest: SuiteDigest,
}

#[derive(FromRow)]
struct DigestRow {
    run_id: String,
    node_id: String,
    hostname: String,
    started_at_ms: i64,
    digest_version: i64,
    digest: Option<String>,
    measurements_removed_at_ms: Option<i64>,
}

#[derive(FromRow)]
struct RunMeasurementRow {
    run_id: String,
    #[sqlx(flatten)]
    measurement: MeasurementRow,
}

/// What [`Store::latest_digests_by_type`] takes for one kind of hardware.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HardwareKind {
    /// An instance type, at the hourly price its nodes' operator gave (bits of the f64), if any.
    Type(String, Option<u64>),
    /// A node that gave no instance type.
    Node(String),
}

/// Runs the start-up backfill reads and rewrites at a time: a run may hold 10 000 measurements.
const BACKFILL_BATCH: usize = 50;

/// Runs whose digests are computed or rewritten per query (one bind each, far below both
/// backends' bind limits).
const DIGEST_CHUNK: usize = 500;

const DIGEST_SELECT: &str = "SELECT rs.run_id, rs.node_id, n.hostname, rs.started_at_ms, rs.digest_version, rs.digest, rs.measurements_removed_at_ms";

const RUN_SELECT: &str = "SELECT r.id, r.node_id, n.hostname, a.name AS agent_name, r.agent_version, \
     r.started_at_ms, r.finished_at_ms, r.received_at_ms, r.status, r.suites, r.measurement_count, \
     r.measurements_removed_at_ms";
const RUN_JOINS: &str = "JOIN nodes n ON n.id = r.node_id JOIN agents a ON a.id = r.agent_id";

impl Store {
    /// Stores a validated run in one transaction. A run id already stored is left as it was.
    pub async fn insert_run(&self, agent_id: &str, run: &RunUpload) -> anyhow::Result<StoreOutcome> {
        // A run already stored is answered before its digests are computed: a retried or
        // replayed LLM load test would otherwise cost a fit each time. (Only there: other
        // digests are cheap, and the transaction below finds duplicates anyway.)
        if run.suites().contains(&Suite::Endpoint)
            && let Some(count) = self.stored_measurement_count(run.run_id).await?
        {
            return Ok(StoreOutcome { duplicate: true, measurements: count });
        }
        let digests = suite_digests(run).await?;
        let digests = digests.as_slice();
        let stored = match &self.copy_pool {
            Some(postgres) => {
                let (year, month, _) = model::calendar::Date::from_unix_ms(run.started_at_ms).ymd();
                let key = year * 12 + i64::from(month);
                let known = self.known_months.lock().map(|m| m.contains(&key)).unwrap_or(false);
                let stored =
                    match store_run(postgres.begin().await?, agent_id, run, digests, Month::Postgres { known }).await {
                        // Retention dropped the run's month (since this process saw it, or between
                        // the check and the COPY): nothing was stored; this try makes it again.
                        Err(err) if no_partition(&err) => {
                            store_run(postgres.begin().await?, agent_id, run, digests, Month::Postgres { known: false })
                                .await?
                        }
                        stored => stored?,
                    };
                if let Ok(mut months) = self.known_months.lock() {
                    months.insert(key);
                }
                stored
            }
            None => {
                let (_writing, tx) = self.begin_write().await?;
                store_run(tx, agent_id, run, digests, Month::Sqlite).await?
            }
        };
        if stored {
            if self.copy_pool.is_some() {
                self.touch_agent(agent_id).await;
            }
            return Ok(StoreOutcome { duplicate: false, measurements: run.measurements.len() as u32 });
        }
        let count = self.stored_measurement_count(run.run_id).await?.context("a duplicate run is stored")?;
        Ok(StoreOutcome { duplicate: true, measurements: count })
    }

    /// The measurement count of the stored run `run_id`, if it is stored.
    async fn stored_measurement_count(&self, run_id: Uuid) -> anyhow::Result<Option<u32>> {
        let count: Option<(i64,)> = sqlx::query_as("SELECT measurement_count FROM runs WHERE id = $1")
            .bind(run_id.to_string())
            .fetch_optional(&self.pool)
            .await?;
        Ok(count.map(|(n,)| n as u32))
    }

    /// Postgres: notes that `agent_id` was seen, after its run's transaction and at most once a
    /// second, so the uploads of one agent's nodes do not queue on its row. A failure here
    /// loses only the time, never the run, which is stored and acknowledged.
    async fn touch_agent(&self, agent_id: &str) {
        let now = now_ms();
        let touched = sqlx::query(
            "UPDATE agents SET last_seen_ms = $1 WHERE id = $2 AND (last_seen_ms IS NULL OR last_seen_ms < $3)",
        )
        .bind(now)
        .bind(agent_id)
        .bind(now - 1_000)
        .execute(&self.pool)
        .await;
        if let Err(err) = touched {
            tracing::warn!(error = %err, "could not note when the agent was last seen");
        }
    }

    /// Lets the agent `agent_id` report `node_id` from now on; false when there is no such node.
    pub async fn bind_node(&self, node_id: &str, agent_id: &str) -> anyhow::Result<bool> {
        let done = sqlx::query("UPDATE nodes SET owner_agent_id = $1 WHERE id = $2")
            .bind(agent_id)
            .bind(node_id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Every node, most recently seen first.
    pub async fn list_nodes(&self) -> anyhow::Result<Vec<NodeSummary>> {
        let rows: Vec<NodeRow> = sqlx::query_as(AssertSqlSafe(list_nodes_sql())).fetch_all(&self.pool).await?;
        let memcpy = self.latest_memcpy().await?;
        rows.into_iter()
            .map(|r| {
                let bandwidth = memcpy.get(&r.id).copied();
                node_summary(r, bandwidth)
            })
            .collect()
    }

    /// Per node: the median memcpy bandwidth of its latest `system` run (that suite's
    /// headline, [`model::wire::measured::memcpy_rank`]'s pick), as on the run's page.
    async fn latest_memcpy(&self) -> anyhow::Result<HashMap<String, f64>> {
        let latest = self.latest_digests(Suite::System, u32::MAX).await?;
        Ok(latest.into_iter().filter_map(|d| Some((d.node_id, d.digest.headline?.value))).collect())
    }

    /// Each node's newest run holding `suite`, with that suite's digest, newest first, at most
    /// `limit`: a row per node, read off `node_latest`.
    pub async fn latest_digests(&self, suite: Suite, limit: u32) -> anyhow::Result<Vec<RunDigest>> {
        let rows: Vec<DigestRow> =
            sqlx::query_as(AssertSqlSafe(latest_digests_sql(limit))).bind(suite.as_str()).fetch_all(&self.pool).await?;
        self.resolve_digests(suite, rows, false).await
    }

    /// Per instance type (a node without one is its own type), the newest run holding `suite`
    /// of its nodes, and how many other nodes of that type have one; newest first. Nodes of one
    /// type are one kind of hardware: a fleet of thousands is a handful of candidates, and only
    /// their digests are read.
    pub async fn latest_digests_by_type(&self, suite: Suite) -> anyhow::Result<Vec<(RunDigest, u32)>> {
        // Every node's newest run id (a short row each), newest first, grouped by kind.
        let latest: Vec<(String, String, Option<String>, Option<f64>)> =
            sqlx::query_as(LATEST_RUN_IDS).bind(suite.as_str()).fetch_all(&self.pool).await?;
        let mut kinds: Vec<Vec<String>> = Vec::new();
        let mut index: HashMap<HardwareKind, usize> = HashMap::new();
        for (run_id, node_id, instance_type, hourly_usd) in latest {
            // Nodes priced by their operator are of one kind only at one price; a node without
            // an instance type is a kind of its own.
            let kind = match instance_type {
                Some(instance_type) => HardwareKind::Type(instance_type, hourly_usd.map(f64::to_bits)),
                None => HardwareKind::Node(node_id),
            };
            let at = *index.entry(kind).or_insert_with(|| {
                kinds.push(Vec::new());
                kinds.len() - 1
            });
            kinds[at].push(run_id);
        }
        // A kind's newest run stands for it, or where that measured no latency (every case
        // failed or was skipped), the newest one that did.
        let mut chosen: Vec<(RunDigest, u32)> = Vec::new();
        let mut open: Vec<usize> = (0..kinds.len()).collect();
        for round in 0.. {
            open.retain(|&k| round < kinds[k].len());
            if open.is_empty() {
                break;
            }
            let ids: Vec<String> = open.iter().map(|&k| kinds[k][round].clone()).collect();
            let mut rows: Vec<DigestRow> = Vec::new();
            for chunk in ids.chunks(DIGEST_CHUNK) {
                let mut query = sqlx::query_as(AssertSqlSafe(digests_of_runs_sql(chunk.len()))).bind(suite.as_str());
                for id in chunk {
                    query = query.bind(id);
                }
                rows.extend(query.fetch_all(&self.pool).await?);
            }
            let stored_ids: Vec<String> = rows.iter().map(|r| r.run_id.clone()).collect();
            let mut found: HashMap<String, RunDigest> =
                stored_ids.into_iter().zip(self.resolve_digests(suite, rows, false).await?).collect();
            open.retain(|&k| match found.remove(&kinds[k][round]) {
                Some(digest) if !digest.digest.perf.is_empty() || suite != Suite::Quant => {
                    chosen.push((digest, (kinds[k].len() - 1) as u32));
                    false
                }
                _ => true,
            });
        }
        chosen.sort_by(|a, b| b.0.started_at_ms.cmp(&a.0.started_at_ms).then_with(|| a.0.run_id.cmp(&b.0.run_id)));
        Ok(chosen)
    }

    /// The nodes `ids` as the nodes table holds them: without the memcpy figure, which only
    /// [`Store::list_nodes`] reads.
    pub async fn nodes_by_id(&self, ids: &[String]) -> anyhow::Result<HashMap<String, NodeSummary>> {
        let mut nodes = HashMap::new();
        for chunk in ids.chunks(DIGEST_CHUNK) {
            let mut query = sqlx::query_as::<_, NodeRow>(AssertSqlSafe(format!(
                "{NODE_COLUMNS} WHERE n.id IN ({})",
                placeholders(1, chunk.len())
            )));
            for id in chunk {
                query = query.bind(id);
            }
            for row in query.fetch_all(&self.pool).await? {
                nodes.insert(row.id.clone(), node_summary(row, None)?);
            }
        }
        Ok(nodes)
    }

    /// The newest `limit` endpoint runs of any node whose stored digest holds an LLM engine
    /// (`run_suites.llm`, off its partial index, however many other endpoint runs came since),
    /// newest first, of those this reading of runs stored: a row the start-up backfill has not
    /// rewritten yet is left out rather than fitted, so the page never waits on a fit of each.
    pub async fn recent_llm_digests(&self, limit: u32) -> anyhow::Result<Vec<RunDigest>> {
        let mut rows: Vec<DigestRow> = sqlx::query_as(AssertSqlSafe(recent_llm_digests_sql(limit)))
            .bind(Suite::Endpoint.as_str())
            .fetch_all(&self.pool)
            .await?;
        rows.retain(|row| stored_digest(Suite::Endpoint, row).is_some());
        self.resolve_digests(Suite::Endpoint, rows, false).await
    }

    /// `suite`'s digest of the run `run_id`; `None` when the run does not hold that suite.
    pub async fn run_digest(&self, run_id: Uuid, suite: Suite) -> anyhow::Result<Option<RunDigest>> {
        let rows: Vec<DigestRow> = sqlx::query_as(AssertSqlSafe(digests_of_runs_sql(1)))
            .bind(suite.as_str())
            .bind(run_id.to_string())
            .fetch_all(&self.pool)
            .await?;
        Ok(self.resolve_digests(suite, rows, true).await?.pop())
    }

    /// The newest `limit` runs of `node_id` holding `suite`, with that suite's digest, newest first.
    pub async fn node_digests(&self, node_id: &str, suite: Suite, limit: u32) -> anyhow::Result<Vec<RunDigest>> {
        let rows: Vec<DigestRow> = sqlx::query_as(AssertSqlSafe(node_digests_sql(limit)))
            .bind(node_id)
            .bind(suite.as_str())
            .fetch_all(&self.pool)
            .await?;
        self.resolve_digests(suite, rows, false).await
    }

    /// The digests of `rows`: as stored where the model's reading is the current one, computed
    /// from the runs' measurements (one query for all of them) where not, with an endpoint run's
    /// LLM fit only where `fit_llm` (one run's page), never for pages over many runs. Nothing
    /// computed here is written: the start-up backfill writes the whole digest.
    async fn resolve_digests(
        &self,
        suite: Suite,
        rows: Vec<DigestRow>,
        fit_llm: bool,
    ) -> anyhow::Result<Vec<RunDigest>> {
        let parsed: Vec<(DigestRow, Option<SuiteDigest>)> = rows
            .into_iter()
            .map(|row| {
                let digest = stored_digest(suite, &row);
                (row, digest)
            })
            .collect();
        let stale: Vec<(String, i64)> = parsed
            .iter()
            .filter(|(row, digest)| digest.is_none() && row.measurements_removed_at_ms.is_none())
            .map(|(row, _)| (row.run_id.clone(), row.started_at_ms))
            .collect();
        let computed = self.compute_digests(suite, &stale, fit_llm).await?;
        parsed
            .into_iter()
            .map(|(row, digest)| {
                if digest.is_none() && row.measurements_removed_at_ms.is_some() {
                    tracing::warn!(run_id = %row.run_id, suite = suite.as_str(), "a run whose measurements retention removed has no digest this server can read; it shows as empty");
                }
                let digest = digest.or_else(|| computed.get(&row.run_id).cloned()).unwrap_or_default();
                Ok(RunDigest {
                    run_id: Uuid::parse_str(&row.run_id)?,
                    node_id: row.node_id,
                    hostname: row.hostname,
                    started_at_ms: row.started_at_ms,
                    digest,
                })
            })
            .collect()
    }

    /// `suite`'s digest of each of `runs` (id, start time), read from their measurements of
    /// that suite.
    async fn compute_digests(
        &self,
        suite: Suite,
        runs: &[(String, i64)],
        fit_llm: bool,
    ) -> anyhow::Result<HashMap<String, SuiteDigest>> {
        let mut digests = HashMap::new();
        for chunk in runs.chunks(DIGEST_CHUNK / 2) {
            let mut query = sqlx::query_as::<_, RunMeasurementRow>(AssertSqlSafe(suite_measurements_sql(chunk.len())))
                .bind(suite.as_str());
            for (id, _) in chunk {
                query = query.bind(id);
            }
            for (_, started_at_ms) in chunk {
                query = query.bind(started_at_ms);
            }
            let mut by_run: BTreeMap<String, Vec<Measurement>> = BTreeMap::new();
            for row in query.fetch_all(&self.pool).await? {
                by_run.entry(row.run_id).or_default().push(Measurement::try_from(row.measurement)?);
            }
            let ids: Vec<String> = chunk.iter().map(|(id, _)| id.clone()).collect();
            let compute = move || {
                ids.into_iter()
                    .map(|id| {
                        let measurements = by_run.get(&id).map(Vec::as_slice).unwrap_or_default();
                        let digest = measured::digest_with(suite, &id, measurements, fit_llm);
                        (id, digest)
                    })
                    .collect::<Vec<_>>()
            };
            // An LLM run's fit is seconds of CPU: off the async workers, a few at a time. The
            // other digests are cheap and stay where they are.
            let computed = if suite == Suite::Endpoint && fit_llm { FITTING.run(compute).await? } else { compute() };
            digests.extend(computed);
        }
        Ok(digests)
    }

    /// Rewrites, a batch at a time, every digest stored before digests existed or by an older
    /// reading of runs ([`digest_version`]); returns how many. Suite by suite, newest runs first,
    /// so that after an upgrade the runs people look at are stored again first (the pages read
    /// the others right meanwhile, computing them). On Postgres one server does it at a time
    /// ([`Store::backfill_turn`]): replicas started together wait their turn and then find
    /// nothing left. Writers never go over a newer reading a newer server stored, and each
    /// batch writes in key order (so two never wait on each other crosswise).
    pub async fn refresh_digests(&self) -> anyhow::Result<u64> {
        self.refresh_digests_within(None).await
    }

    /// [`Store::refresh_digests`], waiting at most `patience` for its turn (an error after it).
    pub async fn refresh_digests_within(&self, patience: Option<std::time::Duration>) -> anyhow::Result<u64> {
        let mut turn = self.backfill_turn(patience).await?;
        let mut rewritten = 0;
        for &suite in Suite::ALL {
            rewritten += self.refresh_suite(suite, u64::MAX, Some(&mut turn)).await?;
        }
        turn.release().await;
        Ok(rewritten)
    }

    /// One suite's part of [`Store::refresh_digests`], newest runs first, rewriting at most
    /// `limit`, without waiting for the turn (other servers may be at it too; the guard on
    /// every write keeps that safe, only not cheap).
    pub async fn refresh_suite_digests(&self, suite: Suite, limit: u64) -> anyhow::Result<u64> {
        self.refresh_suite(suite, limit, None).await
    }

    async fn refresh_suite(
        &self,
        suite: Suite,
        limit: u64,
        mut turn: Option<&mut BackfillTurn>,
    ) -> anyhow::Result<u64> {
        let current = digest_version(suite);
        // Never over a newer reading (a newer server's).
        let update = format!(
            "UPDATE run_suites SET digest_version = {current}, digest = $1, llm = $2, headline = $3 \
             WHERE suite = $4 AND run_id = $5 AND (digest_version < {current} OR digest IS NULL) \
             AND measurements_removed_at_ms IS NULL"
        );
        // From where the last batch ended, along run_suites_by_start (suite, started_at_ms DESC, run_id).
        let mut after = (i64::MAX, String::new());
        let mut rewritten = 0;
        while rewritten < limit {
            if let Some(turn) = turn.as_deref_mut() {
                turn.check().await?;
            }
            let batch = (limit - rewritten).min(BACKFILL_BATCH as u64);
            let stale: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(stale_digests_sql(current, batch)))
                .bind(suite.as_str())
                .bind(after.0)
                .bind(&after.1)
                .fetch_all(&self.pool)
                .await?;
            let Some(last) = stale.last().map(|(run_id, started_at_ms)| (*started_at_ms, run_id.clone())) else {
                break;
            };
            let digests = self.compute_readable_digests(suite, &stale).await;
            let (_writing, mut tx) = self.begin_write().await?;
            for (run_id, digest) in digests {
                let stored = StoredDigest::new(suite, &digest)?;
                rewritten += sqlx::query(AssertSqlSafe(update.as_str()))
                    .bind(stored.json)
                    .bind(i64::from(stored.llm))
                    .bind(super::OptF64(stored.headline))
                    .bind(suite.as_str())
                    .bind(&run_id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            tx.commit().await?;
            after = last;
        }
        Ok(rewritten)
    }

    /// The digests of `runs` for the backfill. A run whose stored measurements cannot be read
    /// back (a row this build does not understand) is left as it is, with a warning, rather
    /// than stopping at each start the backfill of every run after it: when the batch fails,
    /// its runs are read one by one.
    async fn compute_readable_digests(&self, suite: Suite, runs: &[(String, i64)]) -> BTreeMap<String, SuiteDigest> {
        if let Ok(digests) = self.compute_digests(suite, runs, true).await {
            return digests.into_iter().collect();
        }
        let mut digests = BTreeMap::new();
        for run in runs {
            match self.compute_digests(suite, std::slice::from_ref(run), true).await {
                Ok(one) => digests.extend(one),
                Err(err) => tracing::warn!(
                    run_id = %run.0, suite = suite.as_str(), error = %format!("{err:#}"),
                    "cannot read this run's measurements back; its digest is left as it was"
                ),
            }
        }
        digests
    }

    /// Runs matching the filter, newest first.
    pub async fn list_runs(&self, filter: &RunFilter) -> anyhow::Result<Vec<RunSummary>> {
        let (sql, text_binds) = list_runs_sql(filter);
        let mut query = sqlx::query_as::<_, RunRow>(AssertSqlSafe(sql));
        for value in &text_binds {
            query = query.bind(value);
        }
        query.fetch_all(&self.pool).await?.into_iter().map(RunSummary::try_from).collect()
    }

    /// One run with its measurements in upload order, histograms included (the API's answer).
    pub async fn get_run(&self, run_id: Uuid) -> anyhow::Result<Option<RunDetail>> {
        self.get_run_with(run_id, true).await
    }

    /// One run as the pages read it: without the histograms, which no page draws and which
    /// would only weigh on the page (and its hydration data).
    pub async fn get_run_figures(&self, run_id: Uuid) -> anyhow::Result<Option<RunDetail>> {
        self.get_run_with(run_id, false).await
    }

    async fn get_run_with(&self, run_id: Uuid, histograms: bool) -> anyhow::Result<Option<RunDetail>> {
        let id = run_id.to_string();
        let row: Option<RunRow> =
            sqlx::query_as(AssertSqlSafe(run_by_id_sql())).bind(&id).fetch_optional(&self.pool).await?;
        let Some(row) = row else { return Ok(None) };
        let rows: Vec<MeasurementRow> = sqlx::query_as(AssertSqlSafe(run_measurements_sql(histograms)))
            .bind(&id)
            .bind(row.started_at_ms)
            .fetch_all(&self.pool)
            .await?;
        let measurements = rows.into_iter().map(Measurement::try_from).collect::<anyhow::Result<_>>()?;
        Ok(Some(RunDetail { run: RunSummary::try_from(row)?, measurements }))
    }
}

const NODE_COLUMNS: &str = "SELECT n.id, n.hostname, n.cpu_model, n.cpu_cores, n.memory_bytes, n.kernel, \
     n.instance_type, n.hourly_usd, n.gpus_json, n.first_seen_ms, n.last_seen_ms, n.run_count FROM nodes n";

fn list_nodes_sql() -> String {
    format!("{NODE_COLUMNS} ORDER BY n.last_seen_ms DESC, n.id")
}

/// Each node's newest run id with the suite `$1`, its node, instance type and price, newest first.
const LATEST_RUN_IDS: &str = "SELECT l.run_id, l.node_id, n.instance_type, n.hourly_usd FROM node_latest l \
     JOIN nodes n ON n.id = l.node_id WHERE l.suite = $1 ORDER BY l.started_at_ms DESC, l.run_id";

/// The suite `$1` of `runs` runs (`$2`…).
fn digests_of_runs_sql(runs: usize) -> String {
    format!(
        "{DIGEST_SELECT} FROM run_suites rs JOIN nodes n ON n.id = rs.node_id WHERE rs.suite = $1 AND rs.run_id IN ({})",
        placeholders(2, runs)
    )
}

fn node_summary(r: NodeRow, memcpy_bytes_per_second: Option<f64>) -> anyhow::Result<NodeSummary> {
    Ok(NodeSummary {
        memcpy_bytes_per_second,
        gpus: serde_json::from_str::<Vec<GpuInfo>>(&r.gpus_json)?,
        node_id: r.id,
        hostname: r.hostname,
        cpu_model: r.cpu_model,
        cpu_cores: r.cpu_cores as u32,
        memory_bytes: r.memory_bytes as u64,
        kernel: r.kernel,
        instance_type: r.instance_type,
        hourly_usd: r.hourly_usd,
        first_seen_ms: r.first_seen_ms,
        last_seen_ms: r.last_seen_ms,
        run_count: r.run_count as u64,
    })
}

/// Each node's newest run with the suite `$1`, newest first: a walk of `node_latest_by_start`
/// and a key lookup per node.
fn latest_digests_sql(limit: u32) -> String {
    format!(
        "{DIGEST_SELECT} FROM node_latest l JOIN run_suites rs ON rs.suite = l.suite AND rs.run_id = l.run_id \
         JOIN nodes n ON n.id = l.node_id WHERE l.suite = $1 ORDER BY l.started_at_ms DESC, l.run_id LIMIT {limit}"
    )
}

/// The digest stored in `row`, where this reading of runs wrote it. A run whose measurements
/// retention removed has only its stored digest, whatever reading wrote it.
fn stored_digest(suite: Suite, row: &DigestRow) -> Option<SuiteDigest> {
    (row.digest_version == digest_version(suite) || row.measurements_removed_at_ms.is_some())
        .then(|| row.digest.as_deref().and_then(|json| serde_json::from_str::<SuiteDigest>(json).ok()))
        .flatten()
}

/// The newest runs of any node with the suite `$1` (the endpoint suite) whose digest, written
/// by this reading of runs (or kept when retention removed the measurements), holds an LLM
/// engine: a walk of the partial index `run_suites_llm`, stale rows skipped before the limit.
fn recent_llm_digests_sql(limit: u32) -> String {
    format!(
        "{DIGEST_SELECT} FROM run_suites rs JOIN nodes n ON n.id = rs.node_id \
         WHERE rs.suite = $1 AND rs.llm = 1 \
         AND (rs.digest_version = {} OR rs.measurements_removed_at_ms IS NOT NULL) \
         ORDER BY rs.started_at_ms DESC, rs.run_id LIMIT {limit}",
        digest_version(Suite::Endpoint)
    )
}

/// The node `$1`'s newest runs with the suite `$2`.
fn node_digests_sql(limit: u32) -> String {
    format!(
        "{DIGEST_SELECT} FROM run_suites rs JOIN nodes n ON n.id = rs.node_id \
         WHERE rs.node_id = $1 AND rs.suite = $2 ORDER BY rs.started_at_ms DESC, rs.run_id LIMIT {limit}"
    )
}

/// The measurements of suite `$1` of `runs` runs (`$2`…), then their start times (so Postgres
/// reads only their months' partitions), without histograms.
fn suite_measurements_sql(runs: usize) -> String {
    format!(
        "SELECT run_id, suite, case_name, parameters_json, unit, status, reason, samples, mean, p50, p90, p99, \
         p999, ci95_low, ci95_high, floor_name, floor_value, CAST(NULL AS TEXT) AS histogram FROM measurements \
         WHERE suite = $1 AND run_id IN ({}) AND started_at_ms IN ({}) ORDER BY run_id, seq",
        placeholders(2, runs),
        placeholders(2 + runs, runs)
    )
}

/// `$first, $first+1, …`, `count` of them.
pub(super) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
}

fn run_by_id_sql() -> String {
    format!("{RUN_SELECT} FROM runs r {RUN_JOINS} WHERE r.id = $1")
}

/// The measurements of run `$1`, started at `$2`, in upload order: on Postgres, a read of that
/// month's partition only.
fn run_measurements_sql(histograms: bool) -> String {
    let histogram = if histograms { "histogram" } else { "CAST(NULL AS TEXT) AS histogram" };
    format!(
        "SELECT suite, case_name, parameters_json, unit, status, reason, samples, mean, p50, p90, p99, p999, \
         ci95_low, ci95_high, floor_name, floor_value, {histogram} FROM measurements \
         WHERE run_id = $1 AND started_at_ms = $2 ORDER BY seq"
    )
}

/// The SQL of [`Store::list_runs`] and its text binds, in order.
fn list_runs_sql(filter: &RunFilter) -> (String, Vec<String>) {
    // With a suite, walk the (suite, started) index of run_suites; otherwise that of runs.
    let (from, time, id) = match filter.suite {
        Some(_) => ("FROM run_suites rs JOIN runs r ON r.id = rs.run_id", "rs.started_at_ms", "rs.run_id"),
        None => ("FROM runs r", "r.started_at_ms", "r.id"),
    };
    let mut sql = format!("{RUN_SELECT} {from} {RUN_JOINS} WHERE 1 = 1");
    let mut text_binds: Vec<String> = Vec::new();
    if let Some(suite) = filter.suite {
        text_binds.push(suite.as_str().to_string());
        sql.push_str(&format!(" AND rs.suite = ${}", text_binds.len()));
    }
    if let Some(node) = &filter.node {
        text_binds.push(node.clone());
        let column = if filter.suite.is_some() { "rs.node_id" } else { "r.node_id" };
        sql.push_str(&format!(" AND {column} = ${}", text_binds.len()));
    }
    if let Some(before) = filter.before_ms {
        sql.push_str(&format!(" AND {time} < {before}"));
    }
    debug_assert!(
        filter.llm.is_none() || filter.suite.is_some(),
        "RunFilter::llm is a suite's digest's: name the suite"
    );
    if let (Some(_), Some(llm)) = (filter.suite, filter.llm) {
        sql.push_str(&format!(" AND rs.llm = {}", i32::from(llm)));
    }
    // In the indexes' own order, so a page is read off the index and never sorted.
    sql.push_str(&format!(" ORDER BY {time} DESC, {id} LIMIT {}", filter.limit));
    (sql, text_binds)
}

/// A value bound to a read in [`page_reads`].
pub(super) enum Bind {
    Text(String),
    Int(i64),
}

/// Up to `limit` runs of the suite `$1` whose digest is older than `current` or missing,
/// newest first, after ($2, $3) in that order (`started_at_ms` descending, then `run_id`):
/// along the index `run_suites_by_start`.
fn stale_digests_sql(current: i64, limit: u64) -> String {
    format!(
        "SELECT run_id, started_at_ms FROM run_suites WHERE suite = $1 \
         AND started_at_ms <= $2 AND (started_at_ms < $2 OR run_id > $3) \
         AND (digest_version < {current} OR digest IS NULL) AND measurements_removed_at_ms IS NULL \
         ORDER BY started_at_ms DESC, run_id LIMIT {limit}"
    )
}

/// Every read the pages make of runs, as (what it is, SQL, binds), for [`Store::query_plans`];
/// `run` is a run's id and start time.
pub(super) fn page_reads(node: &str, run: (&str, i64)) -> Vec<(String, String, Vec<Bind>)> {
    let text = |values: &[&str]| values.iter().map(|v| Bind::Text(v.to_string())).collect::<Vec<_>>();
    let (run_id, started) = run;
    let mut reads = vec![
        ("nodes".to_string(), list_nodes_sql(), vec![]),
        ("run by id".into(), run_by_id_sql(), text(&[run_id])),
        (
            "a run's measurements".into(),
            run_measurements_sql(false),
            vec![Bind::Text(run_id.into()), Bind::Int(started)],
        ),
        ("each node's latest transport run".into(), latest_digests_sql(100), text(&["transport"])),
        ("each node's latest quant run id".into(), LATEST_RUN_IDS.to_string(), text(&["quant"])),
        ("quant digests of chosen runs".into(), digests_of_runs_sql(1), text(&["quant", run_id])),
        ("a node's quant runs".into(), node_digests_sql(30), text(&[node, "quant"])),
        ("the newest LLM endpoint runs".into(), recent_llm_digests_sql(10), text(&["endpoint"])),
        ("the backfill's next stale digests".into(), stale_digests_sql(1, BACKFILL_BATCH as u64), {
            vec![Bind::Text("endpoint".into()), Bind::Int(started), Bind::Text(run_id.into())]
        }),
        ("measurements of stale digests".into(), suite_measurements_sql(2), {
            let mut binds = text(&["quant", run_id, node]);
            binds.extend([Bind::Int(started), Bind::Int(started - 1)]);
            binds
        }),
    ];
    let filters = [
        ("newest runs", RunFilter { limit: 20, ..RunFilter::default() }),
        ("a node's runs", RunFilter { node: Some(node.into()), limit: 30, ..RunFilter::default() }),
        ("runs with a suite", RunFilter { suite: Some(Suite::Endpoint), limit: 10, ..RunFilter::default() }),
        (
            "endpoint runs without an LLM engine",
            RunFilter { suite: Some(Suite::Endpoint), llm: Some(false), limit: 10, ..RunFilter::default() },
        ),
        (
            "a node's runs with a suite, a page back",
            RunFilter {
                node: Some(node.into()),
                suite: Some(Suite::Quant),
                before_ms: Some(1),
                limit: 100,
                ..RunFilter::default()
            },
        ),
    ];
    for (name, filter) in filters {
        let (sql, binds) = list_runs_sql(&filter);
        reads.push((name.to_string(), sql, binds.into_iter().map(Bind::Text).collect()));
    }
    reads
}

impl TryFrom<RunRow> for RunSummary {
    type Error = anyhow::Error;

    fn try_from(r: RunRow) -> anyhow::Result<Self> {
        let suites = r
            .suites
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| Suite::parse(s).map_err(anyhow::Error::msg))
            .collect::<anyhow::Result<_>>()?;
        Ok(RunSummary {
            run_id: Uuid::parse_str(&r.id)?,
            node_id: r.node_id,
            hostname: r.hostname,
            agent_name: r.agent_name,
            agent_version: r.agent_version,
            started_at_ms: r.started_at_ms,
            finished_at_ms: r.finished_at_ms,
            received_at_ms: r.received_at_ms,
            status: RunStatus::parse(&r.status).ok_or_else(|| anyhow::anyhow!("bad run status {}", r.status))?,
            suites,
            measurement_count: r.measurement_count as u64,
            measurements_removed_at_ms: r.measurements_removed_at_ms,
        })
    }
}

impl TryFrom<MeasurementRow> for Measurement {
    type Error = anyhow::Error;

    fn try_from(r: MeasurementRow) -> anyhow::Result<Self> {
        let stats = match (r.samples, r.mean, r.p50, r.p90, r.p99, r.p999, r.ci95_low, r.ci95_high) {
            (Some(samples), Some(mean), Some(p50), Some(p90), Some(p99), Some(p999), Some(lo), Some(hi)) => {
                Some(Stats { samples: samples as u64, mean, p50, p90, p99, p999, ci95_low: lo, ci95_high: hi })
            }
            _ => None,
        };
        Ok(Measurement {
            suite: Suite::parse(&r.suite).map_err(anyhow::Error::msg)?,
            case: r.case_name,
            parameters: serde_json::from_str(&r.parameters_json)?,
            unit: Unit::parse(&r.unit).map_err(anyhow::Error::msg)?,
            status: MeasurementStatus::parse(&r.status).map_err(anyhow::Error::msg)?,
            reason: r.reason,
            stats,
            floor: r.floor_name.zip(r.floor_value).map(|(name, value)| Floor { name, value }),
            histogram: r.histogram,
        })
    }
}

/// Whether `err` is Postgres's "no partition of relation … found for row" (23514 with that
/// text; the same code also names a failed CHECK).
fn no_partition(err: &anyhow::Error) -> bool {
    super::database_error_is(err, "23514", "no partition of relation")
}

/// Where a run's measurements go.
#[derive(Clone, Copy)]
enum Month {
    /// One table.
    Sqlite,
    /// The partition of the run's month, which `known` to exist unless it is made first.
    Postgres { known: bool },
}

/// A suite's digest of a run as `run_suites` stores it.
struct StoredDigest {
    suite: Suite,
    /// [`SuiteDigest`] as JSON.
    json: String,
    /// Whether it holds an LLM engine (`run_suites.llm`), which the LLM page picks runs by.
    llm: bool,
    /// Its headline figure's value (`run_suites.headline`), which regression alerts compare.
    headline: Option<f64>,
}

impl StoredDigest {
    fn new(suite: Suite, digest: &SuiteDigest) -> anyhow::Result<StoredDigest> {
        Ok(StoredDigest {
            suite,
            json: serde_json::to_string(digest)?,
            llm: digest.llm.is_some(),
            headline: digest.headline.as_ref().map(|h| h.value).filter(|v| v.is_finite()),
        })
    }
}

/// Each of `run`'s suites with its digest, in the order of [`RunUpload::suites`], computed
/// before its transaction opens (so no database lock waits on it). The endpoint suite's may fit
/// an LLM engine, up to seconds of CPU: it runs off the async workers, a few at a time
/// ([`FITTING`]), over a copy of the endpoint measurements without their histograms.
async fn suite_digests(run: &RunUpload) -> anyhow::Result<Vec<StoredDigest>> {
    let run_id = run.run_id.to_string();
    let mut digests = Vec::new();
    for suite in run.suites() {
        let digest = if suite == Suite::Endpoint {
            let measurements: Vec<Measurement> = run
                .measurements
                .iter()
                .filter(|m| m.suite == suite)
                .map(|m| Measurement { histogram: None, ..m.clone() })
                .collect();
            let id = run_id.clone();
            FITTING.run(move || measured::digest(suite, &id, &measurements)).await?
        } else {
            measured::digest(suite, &run_id, &run.measurements)
        };
        digests.push(StoredDigest::new(suite, &digest)?);
    }
    Ok(digests)
}

/// Fitting LLM engines: on the blocking pool, a core's worth at a time, so that uploads and
/// reads of many LLM runs at once queue rather than take every core and thread.
static FITTING: crate::blocking::Limited = crate::blocking::Limited::new();

/// Stores `run` in `tx` with its suites' `digests` ([`suite_digests`]) and commits; false (and
/// nothing written) when its id is already stored.
async fn store_run(
    mut tx: impl RunTx,
    agent_id: &str,
    run: &RunUpload,
    digests: &[StoredDigest],
    month: Month,
) -> anyhow::Result<bool> {
    use Value::{Int, OptFloat, OptText, Text};
    let now = now_ms();
    let run_id = run.run_id.to_string();
    let node = &run.node;
    if let Month::Postgres { known: false } = month {
        // The month's partition of measurements, made in this transaction if it is new.
        tx.exec("SELECT headroom_measurements_partition($1)", &[Int(run.started_at_ms)]).await?;
    }
    let gpus = serde_json::to_string(&node.gpus)?;
    let status = if run.measurements.iter().any(|m| m.status == MeasurementStatus::Failed) {
        RunStatus::Partial
    } else {
        RunStatus::Ok
    };
    let suite_list = digests.iter().map(|d| d.suite.as_str()).collect::<Vec<_>>().join(",");
    let class = regression::class_of(node);
    let context = serde_json::to_string(&regression::RunContext::of(run))?;
    let head = Head {
        node: Insert {
            into: "INSERT INTO nodes (id, hostname, cpu_model, cpu_cores, memory_bytes, kernel, instance_type, \
                   hourly_usd, gpus_json, first_seen_ms, last_seen_ms, owner_agent_id, run_count)",
            width: 13,
            binds: vec![
                Text(&node.node_id),
                Text(&node.hostname),
                Text(&node.cpu_model),
                Int(i64::from(node.cpu_cores)),
                Int(node.memory_bytes as i64),
                Text(&node.kernel),
                OptText(node.instance_type.as_deref()),
                OptFloat(node.hourly_usd),
                Text(&gpus),
                Int(now),
                Int(now),
                Text(agent_id),
                // This run counted: a run already stored rolls the whole transaction back.
                Int(1),
            ],
            // Not when another agent owns the node.
            conflict: "ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, cpu_model = excluded.cpu_model, \
                       cpu_cores = excluded.cpu_cores, memory_bytes = excluded.memory_bytes, kernel = excluded.kernel, \
                       instance_type = excluded.instance_type, hourly_usd = excluded.hourly_usd, \
                       gpus_json = excluded.gpus_json, last_seen_ms = excluded.last_seen_ms, \
                       owner_agent_id = excluded.owner_agent_id, run_count = nodes.run_count + 1 \
                       WHERE nodes.owner_agent_id IS NULL OR nodes.owner_agent_id = excluded.owner_agent_id",
        },
        run: Insert {
            into: "INSERT INTO runs (id, node_id, agent_id, agent_version, started_at_ms, finished_at_ms, \
                   received_at_ms, status, suites, measurement_count)",
            width: 10,
            binds: vec![
                Text(&run_id),
                Text(&node.node_id),
                Text(agent_id),
                Text(&run.agent_version),
                Int(run.started_at_ms),
                Int(run.finished_at_ms),
                Int(now),
                Text(status.as_str()),
                Text(&suite_list),
                Int(run.measurements.len() as i64),
            ],
            conflict: "ON CONFLICT (id) DO NOTHING",
        },
        suites: Insert {
            into: "INSERT INTO run_suites (suite, run_id, node_id, started_at_ms, digest_version, digest, llm, class, \
                   headline, context)",
            width: 10,
            binds: digests
                .iter()
                .flat_map(|d| {
                    [
                        Text(d.suite.as_str()),
                        Text(&run_id),
                        Text(&node.node_id),
                        Int(run.started_at_ms),
                        Int(digest_version(d.suite)),
                        Text(&d.json),
                        Int(i64::from(d.llm)),
                        OptText(class),
                        OptFloat(d.headline),
                        Text(&context),
                    ]
                })
                .collect(),
            conflict: "",
        },
        latest: Insert {
            into: "INSERT INTO node_latest (node_id, suite, run_id, started_at_ms)",
            width: 4,
            binds: digests
                .iter()
                .flat_map(|d| [Text(&node.node_id), Text(d.suite.as_str()), Text(&run_id), Int(run.started_at_ms)])
                .collect(),
            conflict: "ON CONFLICT (node_id, suite) DO UPDATE SET run_id = excluded.run_id, \
                       started_at_ms = excluded.started_at_ms \
                       WHERE excluded.started_at_ms > node_latest.started_at_ms \
                       OR (excluded.started_at_ms = node_latest.started_at_ms AND excluded.run_id < node_latest.run_id)",
        },
    };
    match tx.put_head(&head).await? {
        Placed::Run => {}
        Placed::NodeOwned => {
            tx.rollback().await?;
            return Err(NodeOwned { node_id: node.node_id.clone() }.into());
        }
        Placed::Duplicate => {
            tx.rollback().await?;
            return Ok(false);
        }
    }
    tx.put_measurements(&run_id, run.started_at_ms, &run.measurements).await?;
    if let Month::Sqlite = month {
        // SQLite has one writer: in the run's transaction, as ever. Postgres: after it (below).
        tx.exec("UPDATE agents SET last_seen_ms = $1 WHERE id = $2", &[Int(now), Text(agent_id)]).await?;
    }
    tx.commit().await?;
    Ok(true)
}
