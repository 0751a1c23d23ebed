//! Storage behind one seam. Both backends run the same SQL through sqlx's `Any` driver
//! (`$N` placeholders are understood by SQLite and Postgres alike); only the migrations and
//! the connection set-up differ, chosen from the URL at start-up.

mod alerts;
mod budgets;
mod grid;
mod people;
mod prices;
mod reports;
mod retention;
mod run_tx;
mod runs;
mod scenarios;
mod throttle;

use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::sync::Arc;

use anyhow::Context;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions, AnyTypeInfo};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Any, AnyPool, AssertSqlSafe, ConnectOptions, Database, Encode, Row, Type};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use alerts::{AlertRecord, NewAlert, PAGE as ALERT_PAGE, Recorded, STATES as ALERT_STATES};
pub use budgets::{BudgetRecord, SCOPES as BUDGET_SCOPES};
pub use grid::GridVersion;
pub use people::{AgentRecord, ApiTokenRecord, NameTaken, PersonChange, PersonRecord, UserRecord};
pub use prices::CatalogVersion;
pub use reports::ReportRecord;
pub use retention::Retention;
pub use runs::{NodeOwned, RunDigest, RunFilter, StoreOutcome};
pub use scenarios::ScenarioRecord;

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// The longest id the store hands out (UUIDs are 36); a longer one names nothing stored.
pub const MAX_ID_BYTES: usize = 64;

/// Whether `id` has the shape of an id the store hands out (UUIDs, hex token ids): 1 to 64
/// ASCII letters, digits and `-`. Anything else names nothing stored and is never sent to the
/// database (Postgres refuses a NUL byte in text with an error, not an empty answer) nor echoed.
pub fn could_be_id(id: &str) -> bool {
    (1..=MAX_ID_BYTES).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatabaseKind {
    Sqlite,
    Postgres,
}

impl DatabaseKind {
    pub fn from_url(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("sqlite:") {
            Ok(DatabaseKind::Sqlite)
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Ok(DatabaseKind::Postgres)
        } else {
            anyhow::bail!("unsupported database URL '{url}': expected sqlite://PATH or postgres://…")
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DatabaseKind::Sqlite => "sqlite",
            DatabaseKind::Postgres => "postgres",
        }
    }
}

/// The server's database.
#[derive(Clone, Debug)]
pub struct Store {
    pool: AnyPool,
    backend: DatabaseKind,
    /// SQLite takes one writer at a time. Writers queue here, first come first served, without
    /// holding a pooled connection, instead of spinning in SQLite's busy handler while readers
    /// starve for connections. `None` on Postgres, whose writers run side by side.
    writer: Option<Arc<Semaphore>>,
    /// Postgres: connections of its own driver, for the ingest, which writes measurements with
    /// `COPY` (sqlx's `Any` driver has no copy-in); `None` on SQLite.
    copy_pool: Option<PgPool>,
    /// Postgres: months whose partition of measurements this process has seen made, so their
    /// runs skip the check. One dropped by retention since is found by the insert failing,
    /// and made again (`Store::insert_run`).
    known_months: Arc<std::sync::Mutex<std::collections::HashSet<i64>>>,
}

/// How long a write waits for SQLite's single writer before the caller gets a 503 with
/// `Retry-After` (the agent's request timeout is 60 s).
const WRITE_QUEUE_WAIT: Duration = Duration::from_secs(30);

/// The SQLite URL of the embedded database in `data_dir`.
pub fn sqlite_url(data_dir: &Path) -> String {
    format!("sqlite://{}?mode=rwc", data_dir.join("headroom.db").display())
}

impl Store {
    /// Connects, creating an SQLite file if needed, and applies pending migrations.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let backend = DatabaseKind::from_url(url)?;
        // SQLite: one writer at a time (see `Store::writer`) and readers beside it under WAL.
        Self::connect_with(url, if backend == DatabaseKind::Sqlite { 8 } else { 16 }).await
    }

    /// [`Store::connect`] with at most `max_connections` (on Postgres, half of them for the
    /// ingest's own pool).
    pub async fn connect_with(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        Self::open(url, max_connections, true).await
    }

    /// Connects to a store that must already be at this build's schema, changing nothing on
    /// the way (no migration, no catalog seeding): for commands like `retention`, which must
    /// not start a long migration as a side effect. Fails, naming the versions, otherwise.
    pub async fn connect_current(url: &str) -> anyhow::Result<Self> {
        Self::open(url, 2, false).await
    }

    async fn open(url: &str, max_connections: u32, migrate: bool) -> anyhow::Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = DatabaseKind::from_url(url)?;
        if backend == DatabaseKind::Sqlite {
            create_private_file(url)?;
        }
        let options = AnyConnectOptions::from_str(url)
            .with_context(|| format!("invalid database URL for {}", backend.name()))?
            .disable_statement_logging();
        // On Postgres the ingest has a pool of its own (COPY); the two share the budget.
        let copy_connections = (max_connections / 2).max(1);
        let any_connections = match backend {
            DatabaseKind::Postgres => max_connections.saturating_sub(copy_connections).max(1),
            DatabaseKind::Sqlite => max_connections,
        };
        let pool = AnyPoolOptions::new()
            .max_connections(any_connections)
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    if backend == DatabaseKind::Sqlite {
                        // WAL lets readers proceed during ingest; synchronous=FULL keeps every
                        // acknowledged commit across a power loss.
                        sqlx::query("PRAGMA journal_mode = WAL").execute(&mut *conn).await?;
                        sqlx::query("PRAGMA synchronous = FULL").execute(&mut *conn).await?;
                        sqlx::query("PRAGMA foreign_keys = ON").execute(&mut *conn).await?;
                        // Writes queue in `Store::writer` first; this covers the single
                        // statements outside it and checkpoints.
                        sqlx::query("PRAGMA busy_timeout = 30000").execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .with_context(|| format!("cannot connect to the {} database", backend.name()))?;
        let migrator = match backend {
            DatabaseKind::Sqlite => &SQLITE_MIGRATIONS,
            DatabaseKind::Postgres => &POSTGRES_MIGRATIONS,
        };
        if migrate {
            migrator.run(&pool).await.context("database migration failed")?;
        } else {
            let latest = migrator.iter().map(|m| m.version).max().unwrap_or(0);
            let applied: Option<i64> =
                sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations WHERE success = TRUE")
                    .fetch_one(&pool)
                    .await
                    .unwrap_or(None);
            let applied = applied.unwrap_or(0);
            anyhow::ensure!(
                applied == latest,
                "the database's schema is at migration {applied} and this build's at {latest}: start this \
                 version's server once (it migrates the database) and try again"
            );
        }
        let writer = (backend == DatabaseKind::Sqlite).then(|| Arc::new(Semaphore::new(1)));
        // Opened on first use, so commands that store no run never connect it.
        let copy_pool = match backend {
            DatabaseKind::Postgres => Some(
                PgPoolOptions::new()
                    .max_connections(copy_connections)
                    .acquire_timeout(Duration::from_secs(10))
                    .connect_lazy_with(PgConnectOptions::from_str(url)?.disable_statement_logging()),
            ),
            DatabaseKind::Sqlite => None,
        };
        let store = Store { pool, backend, writer, copy_pool, known_months: Arc::default() };
        if migrate {
            store.seed_price_catalog().await.context("cannot load the default price catalog")?;
            store.seed_grid_table().await.context("cannot load the default grid-intensity table")?;
        }
        Ok(store)
    }

    /// Begins a write transaction, first waiting (at most [`WRITE_QUEUE_WAIT`]) for SQLite's
    /// single writer. Keep the permit until the transaction ends. A wait past the limit is
    /// `PoolTimedOut`, which callers answer with 503 and `Retry-After`.
    pub(crate) async fn begin_write(
        &self,
    ) -> Result<(Option<OwnedSemaphorePermit>, sqlx::Transaction<'static, Any>), sqlx::Error> {
        let permit = match &self.writer {
            Some(writer) => Some(
                tokio::time::timeout(WRITE_QUEUE_WAIT, writer.clone().acquire_owned())
                    .await
                    .map_err(|_| sqlx::Error::PoolTimedOut)?
                    .map_err(|_| sqlx::Error::PoolClosed)?,
            ),
            None => None,
        };
        Ok((permit, self.pool.begin().await?))
    }

    pub fn database(&self) -> DatabaseKind {
        self.backend
    }

    /// True when the database answers a trivial query.
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }

    /// SQLite's journal mode (`wal` expected); `None` on Postgres.
    pub async fn journal_mode(&self) -> anyhow::Result<Option<String>> {
        if self.backend != DatabaseKind::Sqlite {
            return Ok(None);
        }
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode").fetch_one(&self.pool).await?;
        Ok(Some(mode))
    }

    /// Refreshes the planner's statistics (Postgres `ANALYZE`, SQLite `ANALYZE`).
    pub async fn analyze(&self) -> anyhow::Result<()> {
        sqlx::query("ANALYZE").execute(&self.pool).await?;
        Ok(())
    }

    /// What Postgres's autovacuum does in service, at once: `VACUUM (ANALYZE)`, which also
    /// clears the dead versions each upload leaves of its node's row (its run count and last
    /// seen time); SQLite `ANALYZE`. For benchmarks that read right after a bulk fill.
    pub async fn vacuum_analyze(&self) -> anyhow::Result<()> {
        let sql = match self.backend {
            DatabaseKind::Postgres => "VACUUM (ANALYZE)",
            DatabaseKind::Sqlite => "ANALYZE",
        };
        sqlx::query(sql).execute(&self.pool).await?;
        Ok(())
    }

    /// How the database would run each read the pages make (`EXPLAIN`; SQLite's
    /// `EXPLAIN QUERY PLAN`), as (what it is, plan), with `node` and the run `run_id` (started
    /// at `run_started_at_ms`) bound where a read takes them. On Postgres sequential and bitmap scans are priced out first
    /// (`enable_seqscan`, `enable_bitmapscan`, in a transaction rolled back after): a plan that
    /// still scans a whole table has no index to use, and one that still sorts has no index in
    /// the order asked for, however small the tables are.
    pub async fn query_plans(
        &self,
        node: &str,
        run_id: &str,
        run_started_at_ms: i64,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let mut reads = runs::page_reads(node, (run_id, run_started_at_ms));
        reads.push(("reports".into(), reports::list_sql(200), vec![]));
        reads.push((
            "a class's newest headlines (regression alerts)".into(),
            alerts::history_sql(model::plan::regression::TRAILING),
            vec![
                runs::Bind::Text("c7i.2xlarge".into()),
                runs::Bind::Text("system".into()),
                runs::Bind::Int(run_started_at_ms),
                runs::Bind::Text(run_id.into()),
            ],
        ));
        reads.push(("alerts in a state".into(), alerts::list_sql(alerts::PAGE), vec![runs::Bind::Text("open".into())]));
        let mut tx = self.pool.begin().await?;
        let (explain, detail_column) = match self.backend {
            DatabaseKind::Sqlite => ("EXPLAIN QUERY PLAN", 3),
            DatabaseKind::Postgres => {
                sqlx::query("SET LOCAL enable_seqscan = off").execute(&mut *tx).await?;
                sqlx::query("SET LOCAL enable_bitmapscan = off").execute(&mut *tx).await?;
                ("EXPLAIN", 0)
            }
        };
        let mut plans = Vec::new();
        for (name, sql, binds) in reads {
            let mut query = sqlx::query(AssertSqlSafe(format!("{explain} {sql}")));
            for value in binds {
                query = match value {
                    runs::Bind::Text(text) => query.bind(text),
                    runs::Bind::Int(int) => query.bind(int),
                };
            }
            let rows = query.fetch_all(&mut *tx).await.with_context(|| format!("EXPLAIN {name}"))?;
            let lines =
                rows.iter().map(|row| row.try_get::<String, _>(detail_column)).collect::<Result<Vec<_>, _>>()?;
            plans.push((name, lines.join("\n")));
        }
        tx.rollback().await?;
        Ok(plans)
    }

    /// This server's turn at storing the digests of older runs ([`Store::refresh_digests`]):
    /// on Postgres a session advisory lock ([`BACKFILL_LOCK`]) on a connection of its own, taken
    /// out of the pool (one connection beyond the pool's, while it lasts), so that replicas do
    /// not repeat one another's work. While another session holds it, this asks again every
    /// [`BACKFILL_POLL`] (a blocking wait would meet `lock_timeout` or `statement_timeout`, and
    /// would leave a killed waiter's backend queued), and gives up after `patience` if one is
    /// given. The lock goes with its session, which is kept from idling out and made to notice
    /// a vanished client within about a minute (TCP keepalives); [`BackfillTurn::release`] frees
    /// it at the end, and dropping the turn (an error, the process dying) closes the session.
    /// SQLite, one server's file, always has its turn.
    pub(crate) async fn backfill_turn(&self, patience: Option<Duration>) -> anyhow::Result<BackfillTurn> {
        let Some(copy_pool) = &self.copy_pool else { return Ok(BackfillTurn { session: None }) };
        let mut conn = copy_pool.acquire().await?.detach();
        // Best effort: a setting this Postgres does not have (idle_session_timeout before 14)
        // fails alone, outside any transaction, and the session goes on.
        for setting in [
            "SET idle_session_timeout = 0",
            "SET tcp_keepalives_idle = 30",
            "SET tcp_keepalives_interval = 10",
            "SET tcp_keepalives_count = 3",
            "SET tcp_user_timeout = 60000",
        ] {
            let _ = sqlx::query(setting).execute(&mut conn).await;
        }
        let asked = std::time::Instant::now();
        let mut said = false;
        loop {
            let (taken,): (bool,) =
                sqlx::query_as("SELECT pg_try_advisory_lock($1)").bind(BACKFILL_LOCK).fetch_one(&mut conn).await?;
            if taken {
                return Ok(BackfillTurn { session: Some(conn) });
            }
            if !said {
                tracing::info!("another server is storing the digests of older runs; waiting for it to finish");
                said = true;
            }
            if let Some(patience) = patience {
                anyhow::ensure!(
                    asked.elapsed() < patience,
                    "another server has been storing the digests of older runs for over {} min (its log says \
                     `stored the digests of older runs` when it is done); try again then",
                    patience.as_secs() / 60
                );
            }
            tokio::time::sleep(BACKFILL_POLL).await;
        }
    }

    pub async fn close(&self) {
        if let Some(copy_pool) = &self.copy_pool {
            copy_pool.close().await;
        }
        self.pool.close().await;
    }
}

/// The Postgres advisory lock key of the start-up backfill ("HdrmDgst" in ASCII).
pub const BACKFILL_LOCK: i64 = 0x4864_726d_4467_7374;

/// How often a server waiting for its turn at the backfill asks again.
pub const BACKFILL_POLL: Duration = Duration::from_secs(2);

/// Held while this server stores the digests of older runs (see [`Store::backfill_turn`]).
pub(crate) struct BackfillTurn {
    /// The session holding the lock (Postgres).
    session: Option<sqlx::PgConnection>,
}

impl BackfillTurn {
    /// Fails when the session holding the lock no longer answers: its lock is gone with it,
    /// another server may have taken the work over, and this one stops.
    pub(crate) async fn check(&mut self) -> anyhow::Result<()> {
        if let Some(session) = &mut self.session {
            sqlx::query("SELECT 1")
                .execute(session)
                .await
                .context("lost the session holding the lock on storing the digests of older runs")?;
        }
        Ok(())
    }

    /// Frees the lock and closes its session.
    pub(crate) async fn release(mut self) {
        if let Some(mut session) = self.session.take() {
            let _ = sqlx::query("SELECT pg_advisory_unlock($1)").bind(BACKFILL_LOCK).execute(&mut session).await;
            let _ = sqlx::Connection::close(session).await;
        }
    }
}

/// Creates the SQLite file of `url` readable by its owner only (0600) before SQLite does (it
/// would use 0644); its `-wal` and `-shm` files follow the database file's mode.
fn create_private_file(url: &str) -> anyhow::Result<()> {
    let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" || Path::new(path).exists() {
        return Ok(());
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot create the database file {path}")),
    }
}

/// Whether `err` holds a database error with the SQLSTATE `code` whose message starts with
/// `message` (empty: any).
fn database_error_is(err: &anyhow::Error, code: &str, message: &str) -> bool {
    err.chain().filter_map(|cause| cause.downcast_ref::<sqlx::Error>()).any(|e| {
        matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some(code) && db.message().starts_with(message))
    })
}

/// Unix time now, in milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// An optional double bound so that Postgres always sees `float8`, NULL or not.
///
/// Postgres prepares a statement once per connection with the parameter types of its first
/// execution, so a statement first run with a NULL of another type fails on that connection for
/// every later value ("incorrect binary data format"). sqlx 0.9.0's `Any` driver had its
/// `Real`/`Double` NULL mapping swapped (so this bound a `Real` NULL); 0.9.1 maps them straight,
/// which made that a `float4` NULL, found by regression alerts (a first alert without a price,
/// the next with one). `an_alert_unpriced_then_priced_binds_alike_on_one_connection` in
/// `server/tests/alerts.rs` fails if a sqlx upgrade changes the mapping again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OptF64(pub Option<f64>);

impl Type<Any> for OptF64 {
    fn type_info() -> AnyTypeInfo {
        <f64 as Type<Any>>::type_info()
    }
}

impl<'q> Encode<'q, Any> for OptF64 {
    fn encode_by_ref(&self, buf: &mut <Any as Database>::ArgumentBuffer) -> Result<IsNull, BoxDynError> {
        match self.0 {
            Some(value) => <f64 as Encode<'q, Any>>::encode_by_ref(&value, buf),
            None => <Option<f64> as Encode<'q, Any>>::encode_by_ref(&None, buf),
        }
    }
}

impl Store {
    /// In `tx`, the next version of the versioned table `versions` (`catalog_versions`,
    /// `grid_versions`), read under a lock on it (Postgres; SQLite has one writer) so that two
    /// imports at once get two versions in turn instead of one failing on the same number;
    /// `None` where `only_if_empty` and a version exists.
    async fn next_version(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        versions: &'static str,
        only_if_empty: bool,
    ) -> anyhow::Result<Option<i64>> {
        if self.backend == DatabaseKind::Postgres {
            // Conflicts with itself and with writes, not with readers.
            let lock = format!("LOCK TABLE {versions} IN SHARE ROW EXCLUSIVE MODE");
            sqlx::query(AssertSqlSafe(lock)).execute(&mut **tx).await?;
        }
        let newest = format!("SELECT MAX(version) FROM {versions}");
        let (last,): (Option<i64>,) = sqlx::query_as(AssertSqlSafe(newest)).fetch_one(&mut **tx).await?;
        Ok(if only_if_empty && last.is_some() { None } else { Some(last.unwrap_or(0) + 1) })
    }
}

/// A version of a versioned table, as [`record_version`] writes it.
struct Made<'a> {
    version: i64,
    created_by: &'a str,
    origin: &'a str,
    rows: usize,
    csv: String,
}

/// Records a version in `versions` (its number, who made it and how, its rows and CSV).
async fn record_version(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    versions: &'static str,
    made: Made<'_>,
) -> anyhow::Result<()> {
    let insert = format!(
        "INSERT INTO {versions} (version, created_at_ms, created_by, origin, row_count, csv) VALUES ($1, $2, $3, $4, $5, $6)"
    );
    sqlx::query(AssertSqlSafe(insert))
        .bind(made.version)
        .bind(now_ms())
        .bind(made.created_by)
        .bind(made.origin)
        .bind(made.rows as i64)
        .bind(made.csv)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
