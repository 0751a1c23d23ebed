//! Retention: old measurements go, every run's row and digests stay.
//!
//! On Postgres a month's measurements are one partition (migration 0007), dropped whole; on
//! SQLite they are deleted a batch of runs at a time. Either way the runs are marked
//! (`measurements_removed_at_ms`, on the run and on each of its suites) in the same transaction,
//! so the pages read their stored digests from then on and never compute empty ones from the
//! measurements that are gone.

use model::Suite;
use model::calendar::Date;
use serde::Serialize;
use sqlx::AssertSqlSafe;

use super::{DatabaseKind, Store, now_ms};

/// Runs whose measurements SQLite deletes per transaction.
const BATCH: usize = 200;

/// How long retention waits for a server storing the digests of older runs (after an upgrade,
/// refitting thousands of LLM runs takes a while) before it gives up and says to try later.
const RETENTION_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// What [`Store::remove_measurements_before`] removed, or would remove when dry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Retention {
    /// Measurements of runs started before this day (the first of a month, UTC) are removed.
    pub before: String,
    /// Runs whose measurements were removed; their rows and digests stay.
    pub runs: u64,
    /// Measurements removed (the runs' counts as uploaded).
    pub measurements: u64,
    /// Postgres: the monthly partitions dropped (empty on SQLite).
    pub partitions: Vec<String>,
    pub dry_run: bool,
}

impl Store {
    /// Removes the measurements of every run started before `before` (the first day of a
    /// month), keeping the runs and their digests; with `dry_run`, only says what it would
    /// remove. Digests still to be computed from measurements are computed first.
    pub async fn remove_measurements_before(&self, before: Date, dry_run: bool) -> anyhow::Result<Retention> {
        let (_, _, day) = before.ymd();
        anyhow::ensure!(day == 1, "retention removes whole months: {before} is not the first day of a month");
        let cutoff = before.unix_ms();
        let (runs, measurements): (i64, i64) = sqlx::query_as(
            "SELECT COUNT(*), CAST(COALESCE(SUM(measurement_count), 0) AS BIGINT) FROM runs \
             WHERE started_at_ms < $1 AND measurements_removed_at_ms IS NULL",
        )
        .bind(cutoff)
        .fetch_one(&self.pool)
        .await?;
        let mut done = Retention {
            before: before.to_string(),
            runs: runs as u64,
            measurements: measurements as u64,
            partitions: Vec::new(),
            dry_run,
        };
        let months = match self.backend {
            DatabaseKind::Postgres => self.partitions_before(cutoff).await?,
            DatabaseKind::Sqlite => Vec::new(),
        };
        if dry_run {
            done.partitions = months.into_iter().map(|(name, _, _)| name).collect();
            return Ok(done);
        }
        // A digest that would have been computed from the measurements is stored before they go;
        // where a server is storing them already, this waits for it, within reason.
        self.refresh_digests_within(Some(RETENTION_PATIENCE)).await?;
        match self.backend {
            DatabaseKind::Postgres => {
                for (name, from, to) in months {
                    self.drop_month(&name, from, to).await?;
                    done.partitions.push(name);
                }
            }
            DatabaseKind::Sqlite => self.delete_before(cutoff).await?,
        }
        Ok(done)
    }

    /// Postgres: the partitions of `measurements` wholly before `cutoff`, as (name, first
    /// millisecond, end), oldest first.
    async fn partitions_before(&self, cutoff: i64) -> anyhow::Result<Vec<(String, i64, i64)>> {
        let names: Vec<(String,)> = sqlx::query_as(
            "SELECT c.relname::TEXT FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = 'measurements'::regclass ORDER BY 1",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut months = Vec::new();
        for (name,) in names {
            let Some((from, to)) = partition_month(&name) else {
                anyhow::bail!("measurements has a partition '{name}' that retention does not know; drop it by hand")
            };
            if to <= cutoff {
                months.push((name, from, to));
            }
        }
        Ok(months)
    }

    /// Postgres: marks the runs of one month and drops its partition, in one transaction, trying
    /// again while ingests or reads hold the locks it needs.
    async fn drop_month(&self, partition: &str, from: i64, to: i64) -> anyhow::Result<()> {
        const TRIES: u32 = 10;
        for attempt in 1.. {
            match self.try_drop_month(partition, from, to).await {
                // 55P03: lock_not_available, the lock timeout below ran out.
                Err(err) if attempt < TRIES && lock_timed_out(&err) => {
                    tracing::info!(partition, attempt, "waiting for ingests and reads of measurements to finish");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                done => return done,
            }
        }
        unreachable!("the loop returns on its last try")
    }

    async fn try_drop_month(&self, partition: &str, from: i64, to: i64) -> anyhow::Result<()> {
        let mut tx = self.pool.begin().await?;
        // Waiting long behind a lock would queue every read and ingest behind this one.
        sqlx::query("SET LOCAL lock_timeout = '2s'").execute(&mut *tx).await?;
        // The month's runs are marked before the lock (most of them, so the lock is held
        // briefly) and again under it (those stored meanwhile). The lock takes `measurements`
        // before its partition, in the order an ingest's COPY does, so the two never wait on
        // each other crosswise (the other order deadlocked: `server/tests/store.rs`
        // `retention_racing_late_uploads_leaves_no_run_emptied_unmarked`). An ingest that has
        // written into the month commits before the lock is granted, and is marked by the
        // second pass; one that has not finds no partition after this commits, fails whole,
        // and stores its run in a new one when it tries again.
        mark_month(&mut tx, from, to).await?;
        // The name was read from the catalog and matched `measurements_yYYYYmMM`.
        sqlx::query(AssertSqlSafe(format!("LOCK TABLE measurements, {partition} IN ACCESS EXCLUSIVE MODE")))
            .execute(&mut *tx)
            .await?;
        mark_month(&mut tx, from, to).await?;
        sqlx::query(AssertSqlSafe(format!("DROP TABLE {partition}"))).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    /// SQLite: deletes the measurements of runs started before `cutoff` and marks the runs,
    /// [`BATCH`] runs per transaction, newest first.
    async fn delete_before(&self, cutoff: i64) -> anyhow::Result<()> {
        // Walks runs_by_start down from the cutoff; runs already marked are passed over.
        let mut upto = cutoff - 1;
        loop {
            let batch: Vec<(String, i64)> = sqlx::query_as(AssertSqlSafe(format!(
                "SELECT id, started_at_ms FROM runs WHERE started_at_ms <= $1 AND measurements_removed_at_ms IS NULL \
                 ORDER BY started_at_ms DESC, id LIMIT {BATCH}"
            )))
            .bind(upto)
            .fetch_all(&self.pool)
            .await?;
            let Some(&(_, oldest)) = batch.last() else { return Ok(()) };
            let ids = super::runs::placeholders(2, batch.len());
            // Suite names are the model's own constants; every suite, so the key is used.
            let suites = Suite::ALL.iter().map(|s| format!("'{}'", s.as_str())).collect::<Vec<_>>().join(", ");
            let now = now_ms();
            let (_writing, mut tx) = self.begin_write().await?;
            let statements = [
                format!("DELETE FROM measurements WHERE run_id IN ({})", super::runs::placeholders(1, batch.len())),
                format!("UPDATE runs SET measurements_removed_at_ms = $1 WHERE id IN ({ids})"),
                format!(
                    "UPDATE run_suites SET measurements_removed_at_ms = $1 WHERE suite IN ({suites}) AND run_id IN ({ids})"
                ),
            ];
            for (i, sql) in statements.into_iter().enumerate() {
                let mut query = sqlx::query(AssertSqlSafe(sql));
                if i > 0 {
                    query = query.bind(now);
                }
                for (id, _) in &batch {
                    query = query.bind(id);
                }
                query.execute(&mut *tx).await?;
            }
            tx.commit().await?;
            upto = oldest;
        }
    }
}

/// Marks the runs started in `[from, to)`, and their suites, as having lost their
/// measurements; runs marked already keep their time.
async fn mark_month(tx: &mut sqlx::Transaction<'static, sqlx::Any>, from: i64, to: i64) -> anyhow::Result<()> {
    let now = now_ms();
    sqlx::query(
        "UPDATE runs SET measurements_removed_at_ms = $1 \
         WHERE started_at_ms >= $2 AND started_at_ms < $3 AND measurements_removed_at_ms IS NULL",
    )
    .bind(now)
    .bind(from)
    .bind(to)
    .execute(&mut **tx)
    .await?;
    for suite in Suite::ALL {
        sqlx::query(
            "UPDATE run_suites SET measurements_removed_at_ms = $1 WHERE suite = $2 \
             AND started_at_ms >= $3 AND started_at_ms < $4 AND measurements_removed_at_ms IS NULL",
        )
        .bind(now)
        .bind(suite.as_str())
        .bind(from)
        .bind(to)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

/// Whether `err` is Postgres's `lock_not_available` (a `lock_timeout` that ran out).
fn lock_timed_out(err: &anyhow::Error) -> bool {
    super::database_error_is(err, "55P03", "")
}

/// The month a partition named `measurements_yYYYYmMM` holds, as its first millisecond and the
/// next month's.
fn partition_month(name: &str) -> Option<(i64, i64)> {
    let rest = name.strip_prefix("measurements_y")?;
    let (year, month) = rest.split_once('m')?;
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if year.len() != 4 || month.len() != 2 || !all_digits(year) || !all_digits(month) {
        return None;
    }
    let first = Date::parse(&format!("{year}-{month}-01")).ok()?;
    let end = Date::from_unix_ms(first.unix_ms() + 32 * 86_400_000).first_of_month_back(0);
    Some((first.unix_ms(), end.unix_ms()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_are_read_as_their_months() {
        let ms = |d: &str| Date::parse(d).unwrap().unix_ms();
        assert_eq!(partition_month("measurements_y2026m12"), Some((ms("2026-12-01"), ms("2027-01-01"))));
        assert_eq!(partition_month("measurements_y2024m02"), Some((ms("2024-02-01"), ms("2024-03-01"))));
        for bad in
            ["measurements_y2026m13", "measurements_y26m12", "measurements", "measurements_y2026m1x", "x_y2026m12"]
        {
            assert_eq!(partition_month(bad), None, "{bad}");
        }
    }
}
