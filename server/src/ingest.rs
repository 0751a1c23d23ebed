//! The one ingest path behind both doors (HTTP JSON and gRPC): decode and validate
//! ([`decode_json`] here, [`proto::decode_upload`] for gRPC), store once, count.

use model::{IngestAck, RunUpload};

use crate::error::ApiError;
use crate::json;
use crate::store::{AgentRecord, Store};

/// Largest accepted upload, for both doors.
pub const MAX_UPLOAD_BYTES: usize = 16 * 1024 * 1024;

/// Which door a run came through, for the metrics.
#[derive(Debug, Clone, Copy)]
pub enum Door {
    Http,
    Grpc,
}

impl Door {
    fn as_str(self) -> &'static str {
        match self {
            Door::Http => "http",
            Door::Grpc => "grpc",
        }
    }
}

/// The body of `POST /api/v1/runs` as a valid run: malformed JSON is 400, a wrong shape or an
/// invalid field 422, each naming the problem. Pure: the entry point for fuzzing.
pub fn decode_json(bytes: &[u8]) -> Result<RunUpload, ApiError> {
    let run: RunUpload = json::parse(bytes)?;
    run.validate()?;
    Ok(run)
}

/// Stores a run for `agent`, one that a door's decoder ([`decode_json`],
/// [`proto::decode_upload`]) returned and so validated.
/// How far ahead of the server's clock a run may say it started: clocks drift, but not by days.
pub const MAX_CLOCK_AHEAD_MS: i64 = 24 * 3_600_000;

pub async fn ingest(
    store: &Store,
    alerts: &crate::alerts::Settings,
    agent: &AgentRecord,
    run: RunUpload,
    door: Door,
) -> Result<IngestAck, ApiError> {
    debug_assert_eq!(run.validate(), Ok(()), "ingest is given decoded, valid runs");
    // Decoding histograms is CPU work: off the async workers, for the runs that carry any.
    let (run, checked) = if run.measurements.iter().any(|m| m.histogram.is_some()) {
        tokio::task::spawn_blocking(move || {
            let checked = crate::histogram::check(&run);
            (run, checked)
        })
        .await
        .map_err(|e| ApiError::Internal(e.into()))?
    } else {
        (run, Ok(()))
    };
    if let Err(err) = checked {
        rejected(door);
        return Err(err.into());
    }
    // A run dated ahead of the server's clock would stand as its node's newest run (and for its
    // instance type on Right-sizing) until the clock caught up with it.
    if run.started_at_ms > crate::store::now_ms() + MAX_CLOCK_AHEAD_MS {
        rejected(door);
        let reason = "is more than a day ahead of the server's clock; check the node's clock (NTP)";
        return Err(ApiError::Invalid(model::FieldError::new("started_at_ms", reason)));
    }
    let outcome = match store.insert_run(&agent.id, &run).await {
        Ok(outcome) => outcome,
        Err(err) => match err.downcast::<crate::store::NodeOwned>() {
            Ok(owned) => {
                rejected(door);
                return Err(ApiError::Forbidden(owned.to_string()));
            }
            Err(err) => return Err(err.into()),
        },
    };
    let label = if outcome.duplicate { "duplicate" } else { "stored" };
    metrics::counter!("headroom_ingest_runs_total", "door" => door.as_str(), "outcome" => label).increment(1);
    if !outcome.duplicate {
        metrics::counter!("headroom_ingest_measurements_total", "door" => door.as_str())
            .increment(u64::from(outcome.measurements));
    }
    tracing::info!(run_id = %run.run_id, agent = %agent.name, duplicate = outcome.duplicate, "run ingested");
    // Stored and so acknowledged whatever the judgement does; a run sent again is judged again
    // from what was stored (it may not have been: the process may have died after the commit)
    // and counted once.
    crate::alerts::after_ingest(store, alerts, &run, &agent.id, !outcome.duplicate).await;
    Ok(IngestAck { run_id: run.run_id, duplicate: outcome.duplicate, measurements_stored: outcome.measurements })
}

/// Counts an upload refused before it reached the store.
pub fn rejected(door: Door) {
    metrics::counter!("headroom_ingest_runs_total", "door" => door.as_str(), "outcome" => "rejected").increment(1);
}
