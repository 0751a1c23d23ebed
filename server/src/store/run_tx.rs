//! The transaction a run is stored in. On SQLite it is sqlx's `Any` connection, as every other
//! statement of the store; on Postgres it is Postgres's own, which alone has `COPY`, so a run's
//! measurements go in as one stream instead of a multi-row `INSERT` with 20 binds a row. The
//! ingest's other statements are the same SQL on both, written once against [`RunTx`].

use std::fmt::Write as _;

use model::Measurement;
use sqlx::{Any, AssertSqlSafe, Postgres, Row as _, Transaction};

use super::OptF64;
use super::runs::placeholders;

/// A value bound to one of the ingest's statements.
pub(super) enum Value<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
    OptFloat(Option<f64>),
}

/// One of the inserts that make a run's head: `{into} VALUES (row), … {conflict}`.
pub(super) struct Insert<'a> {
    /// `INSERT INTO table (columns)`.
    pub into: &'static str,
    /// Values per row.
    pub width: usize,
    /// Every row's values, row after row.
    pub binds: Vec<Value<'a>>,
    /// What follows the rows, `ON CONFLICT …` or nothing.
    pub conflict: &'static str,
}

impl Insert<'_> {
    /// The rows' placeholders, the first `$first`.
    fn rows(&self, first: usize) -> String {
        debug_assert!(
            !self.binds.is_empty() && self.binds.len().is_multiple_of(self.width),
            "whole rows, at least one"
        );
        (0..self.binds.len() / self.width)
            .map(|row| format!("({})", placeholders(first + row * self.width, self.width)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The statement on its own, its binds from `$1`.
    fn alone(&self) -> String {
        format!("{} VALUES {} {}", self.into, self.rows(1), self.conflict)
    }

    /// The statement as a step of a `WITH`, its binds from `$first`, returning a row for each row
    /// it wrote; after the step `after`, it writes only when that one wrote a row.
    fn step(&self, first: usize, after: Option<&str>) -> String {
        let (into, rows, conflict) = (self.into, self.rows(first), self.conflict);
        match after {
            None => format!("{into} VALUES {rows} {conflict} RETURNING 1"),
            Some(after) => format!(
                "{into} SELECT * FROM (VALUES {rows}) AS v WHERE EXISTS (SELECT FROM {after}) {conflict} RETURNING 1"
            ),
        }
    }
}

/// The rows that place a run among the others, written before its measurements: its node
/// (unless another agent owns it), the run (unless it is stored), its suites' rows, and the
/// node's latest run of each suite.
pub(super) struct Head<'a> {
    pub node: Insert<'a>,
    pub run: Insert<'a>,
    pub suites: Insert<'a>,
    pub latest: Insert<'a>,
}

/// What [`RunTx::put_head`] did.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Placed {
    /// All of it.
    Run,
    /// Nothing: the node belongs to another agent. The caller rolls the transaction back.
    NodeOwned,
    /// Not the run: it is stored already. The node's upsert was made (and counted this run),
    /// so the caller rolls the transaction back.
    Duplicate,
}

/// What [`super::Store::insert_run`] needs of its transaction.
pub(super) trait RunTx: Send {
    /// Runs `sql` with `binds`; the rows it touched.
    fn exec(&mut self, sql: &str, binds: &[Value<'_>]) -> impl Future<Output = sqlx::Result<u64>> + Send;
    /// Writes `head`, or what [`Placed`] says of it.
    fn put_head(&mut self, head: &Head<'_>) -> impl Future<Output = sqlx::Result<Placed>> + Send;
    /// Writes the measurements of run `run_id`, started at `started_at_ms`, `seq` 0, 1, ….
    fn put_measurements(
        &mut self,
        run_id: &str,
        started_at_ms: i64,
        measurements: &[Measurement],
    ) -> impl Future<Output = anyhow::Result<()>> + Send;
    fn commit(self) -> impl Future<Output = sqlx::Result<()>> + Send;
    fn rollback(self) -> impl Future<Output = sqlx::Result<()>> + Send;
}

/// `sql` with `binds` bound in order, an optional double passed through `$float` first.
macro_rules! bound {
    ($sql:expr, $binds:expr, $float:expr) => {{
        let mut query = sqlx::query(AssertSqlSafe($sql.to_string()));
        for value in $binds {
            query = match *value {
                Value::Text(text) => query.bind(text),
                Value::OptText(text) => query.bind(text),
                Value::Int(int) => query.bind(int),
                Value::OptFloat(float) => query.bind($float(float)),
            };
        }
        query
    }};
}

/// Rows per multi-row INSERT on SQLite; 20 binds each stays far below its bind limit.
const INSERT_CHUNK: usize = 200;

const MEASUREMENT_COLUMNS: &str = "run_id, seq, started_at_ms, suite, case_name, parameters_json, unit, status, \
     reason, samples, mean, p50, p90, p99, p999, ci95_low, ci95_high, floor_name, floor_value, histogram";

impl RunTx for Transaction<'_, Any> {
    async fn exec(&mut self, sql: &str, binds: &[Value<'_>]) -> sqlx::Result<u64> {
        // Through `Any`, an optional double must be bound as `OptF64` (see there).
        Ok(bound!(sql, binds, OptF64).execute(&mut **self).await?.rows_affected())
    }

    async fn put_head(&mut self, head: &Head<'_>) -> sqlx::Result<Placed> {
        // SQLite has no writing `WITH`: a statement each, which costs no round trip there.
        if self.exec(&head.node.alone(), &head.node.binds).await? == 0 {
            return Ok(Placed::NodeOwned);
        }
        if self.exec(&head.run.alone(), &head.run.binds).await? == 0 {
            return Ok(Placed::Duplicate);
        }
        self.exec(&head.suites.alone(), &head.suites.binds).await?;
        self.exec(&head.latest.alone(), &head.latest.binds).await?;
        Ok(Placed::Run)
    }

    async fn put_measurements(&mut self, run_id: &str, started_at_ms: i64, ms: &[Measurement]) -> anyhow::Result<()> {
        const COLUMNS: usize = 20;
        for (chunk_index, chunk) in ms.chunks(INSERT_CHUNK).enumerate() {
            let rows = (0..chunk.len())
                .map(|row| format!("({})", placeholders(row * COLUMNS + 1, COLUMNS)))
                .collect::<Vec<_>>()
                .join(", ");
            let mut query =
                sqlx::query(AssertSqlSafe(format!("INSERT INTO measurements ({MEASUREMENT_COLUMNS}) VALUES {rows}")));
            for (offset, m) in chunk.iter().enumerate() {
                let stats = m.stats;
                query = query
                    .bind(run_id)
                    .bind((chunk_index * INSERT_CHUNK + offset) as i64)
                    .bind(started_at_ms)
                    .bind(m.suite.as_str())
                    .bind(&m.case)
                    .bind(serde_json::to_string(&m.parameters)?)
                    .bind(m.unit.as_str())
                    .bind(m.status.as_str())
                    .bind(&m.reason)
                    .bind(stats.map(|s| s.samples as i64))
                    .bind(OptF64(stats.map(|s| s.mean)))
                    .bind(OptF64(stats.map(|s| s.p50)))
                    .bind(OptF64(stats.map(|s| s.p90)))
                    .bind(OptF64(stats.map(|s| s.p99)))
                    .bind(OptF64(stats.map(|s| s.p999)))
                    .bind(OptF64(stats.map(|s| s.ci95_low)))
                    .bind(OptF64(stats.map(|s| s.ci95_high)))
                    .bind(m.floor.as_ref().map(|f| f.name.clone()))
                    .bind(OptF64(m.floor.as_ref().map(|f| f.value)))
                    .bind(&m.histogram);
            }
            query.execute(&mut **self).await?;
        }
        Ok(())
    }

    async fn commit(self) -> sqlx::Result<()> {
        Transaction::commit(self).await
    }

    async fn rollback(self) -> sqlx::Result<()> {
        Transaction::rollback(self).await
    }
}

impl RunTx for Transaction<'_, Postgres> {
    async fn exec(&mut self, sql: &str, binds: &[Value<'_>]) -> sqlx::Result<u64> {
        Ok(bound!(sql, binds, std::convert::identity).execute(&mut **self).await?.rows_affected())
    }

    async fn put_head(&mut self, head: &Head<'_>) -> sqlx::Result<Placed> {
        // One statement, one round trip: each step writes only when the one before it did, and
        // the foreign keys, checked at the statement's end, see the rows of the steps before.
        let Head { node, run, suites, latest } = head;
        let first_run = 1 + node.binds.len();
        let first_suites = first_run + run.binds.len();
        let first_latest = first_suites + suites.binds.len();
        let sql = format!(
            "WITH n AS ({}), r AS ({}), s AS ({}), l AS ({}) SELECT (SELECT count(*) FROM n), (SELECT count(*) FROM r)",
            node.step(1, None),
            run.step(first_run, Some("n")),
            suites.step(first_suites, Some("r")),
            latest.step(first_latest, Some("r")),
        );
        let binds = [node, run, suites, latest].into_iter().flat_map(|insert| insert.binds.iter());
        let row = bound!(sql, binds, std::convert::identity).fetch_one(&mut **self).await?;
        let (nodes, runs): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        Ok(match (nodes, runs) {
            (0, _) => Placed::NodeOwned,
            (_, 0) => Placed::Duplicate,
            _ => Placed::Run,
        })
    }

    async fn put_measurements(&mut self, run_id: &str, started_at_ms: i64, ms: &[Measurement]) -> anyhow::Result<()> {
        let data = copy_text(run_id, started_at_ms, ms)?;
        let mut copy =
            self.copy_in_raw(&format!("COPY measurements ({MEASUREMENT_COLUMNS}) FROM STDIN (FORMAT text)")).await?;
        // A failed send leaves the stream open: end it, so the error is the statement's and the
        // transaction rolls back whole.
        if let Err(err) = copy.send(data.as_bytes()).await {
            copy.abort(err.to_string()).await.ok();
            return Err(err.into());
        }
        let stored = copy.finish().await?;
        anyhow::ensure!(stored == ms.len() as u64, "COPY stored {stored} of {} measurements", ms.len());
        Ok(())
    }

    async fn commit(self) -> sqlx::Result<()> {
        Transaction::commit(self).await
    }

    async fn rollback(self) -> sqlx::Result<()> {
        Transaction::rollback(self).await
    }
}

/// The measurements as rows of `COPY … (FORMAT text)`: tab-separated, `\N` for NULL, a
/// backslash, tab, newline or carriage return in text escaped; floats in Rust's shortest form
/// that reads back to the same bits (validated runs hold no NaN or infinity).
fn copy_text(run_id: &str, started_at_ms: i64, ms: &[Measurement]) -> anyhow::Result<String> {
    let mut out = String::with_capacity(ms.len() * 256);
    let text = |out: &mut String, value: Option<&str>| match value {
        None => out.push_str("\\N"),
        Some(value) => {
            for c in value.chars() {
                match c {
                    '\\' => out.push_str("\\\\"),
                    '\t' => out.push_str("\\t"),
                    '\n' => out.push_str("\\n"),
                    '\r' => out.push_str("\\r"),
                    c => out.push(c),
                }
            }
        }
    };
    let float = |out: &mut String, value: Option<f64>| match value {
        None => out.push_str("\\N"),
        Some(value) => {
            let _ = write!(out, "{value:?}");
        }
    };
    for (seq, m) in ms.iter().enumerate() {
        let stats = m.stats;
        let _ = write!(out, "{run_id}\t{seq}\t{started_at_ms}\t{}\t", m.suite.as_str());
        text(&mut out, Some(&m.case));
        out.push('\t');
        text(&mut out, Some(&serde_json::to_string(&m.parameters)?));
        let _ = write!(out, "\t{}\t{}\t", m.unit.as_str(), m.status.as_str());
        text(&mut out, m.reason.as_deref());
        out.push('\t');
        match stats {
            Some(s) => {
                let _ = write!(out, "{}", s.samples);
            }
            None => out.push_str("\\N"),
        }
        for value in [
            stats.map(|s| s.mean),
            stats.map(|s| s.p50),
            stats.map(|s| s.p90),
            stats.map(|s| s.p99),
            stats.map(|s| s.p999),
            stats.map(|s| s.ci95_low),
            stats.map(|s| s.ci95_high),
        ] {
            out.push('\t');
            float(&mut out, value);
        }
        out.push('\t');
        text(&mut out, m.floor.as_ref().map(|f| f.name.as_str()));
        out.push('\t');
        float(&mut out, m.floor.as_ref().map(|f| f.value));
        out.push('\t');
        text(&mut out, m.histogram.as_deref());
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::{Floor, MeasurementStatus, Stats, Suite, Unit};

    #[test]
    fn copy_rows_escape_text_and_write_null_and_exact_floats() {
        let m = Measurement {
            suite: Suite::Quant,
            case: "a\tb\\c\nd\re".into(),
            parameters: [("k".to_string(), "v\t1".to_string())].into_iter().collect(),
            unit: Unit::Seconds,
            status: MeasurementStatus::Ok,
            reason: None,
            stats: Some(Stats {
                samples: 3,
                mean: 0.1,
                p50: 1e-7,
                p90: 1e300,
                p99: -0.0,
                p999: 2.5,
                ci95_low: 0.1 + 0.2,
                ci95_high: 5e-324,
            }),
            floor: Some(Floor { name: "peak".into(), value: 123.0 }),
            histogram: None,
        };
        let text = copy_text("r", 7, &[m.clone(), Measurement { stats: None, floor: None, ..m }]).unwrap();
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows.len(), 2);
        let cells: Vec<&str> = rows[0].split('\t').collect();
        assert_eq!(cells.len(), 20, "{cells:?}");
        assert_eq!(&cells[..5], ["r", "0", "7", "quant", "a\\tb\\\\c\\nd\\re"]);
        assert_eq!(cells[5], "{\"k\":\"v\\\\t1\"}", "JSON's own escape, then COPY's");
        assert_eq!(cells[8], "\\N");
        let floats: Vec<f64> = cells[10..17].iter().map(|c| c.parse().unwrap()).collect();
        assert_eq!(
            floats.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            [
                0.1f64.to_bits(),
                1e-7f64.to_bits(),
                1e300f64.to_bits(),
                (-0.0f64).to_bits(),
                2.5f64.to_bits(),
                (0.1f64 + 0.2).to_bits(),
                5e-324f64.to_bits()
            ]
        );
        assert_eq!(&cells[17..], ["peak", "123.0", "\\N"]);
        let bare: Vec<&str> = rows[1].split('\t').collect();
        assert_eq!(bare[1], "1");
        assert!(bare[9..19].iter().all(|c| *c == "\\N"), "{bare:?}");
    }
}
