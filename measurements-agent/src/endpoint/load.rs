//! The open-loop driver: one thread sends on a schedule fixed in advance, a small runtime
//! carries the requests, and every latency is timed from the *scheduled* send, so a stalled
//! server shows up as latency rather than as fewer requests (no coordinated omission).

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::protocol::{Client, Failure, Prepared, Tokens};
use crate::transport::os::Usage;

/// What happened to one scheduled request.
#[derive(Debug)]
pub struct Outcome {
    /// Scheduled send, in seconds from the step's start.
    pub offset: f64,
    /// How late the request's task began, after its scheduled send: the client's own delay.
    pub lag: Duration,
    /// Whether it waited for the in-flight cap.
    pub capped: bool,
    /// From the scheduled send to the end of the response.
    pub latency: Duration,
    /// When the response ended, in seconds from the step's start.
    pub finished: f64,
    pub result: Result<Option<Tokens>, Failure>,
    /// From the scheduled send to the first token, and the gaps between tokens (LLM protocols).
    pub first_token: Option<Duration>,
    pub gaps: Vec<Duration>,
}

/// A finished step: every outcome in schedule order, and the client's CPU over the step.
pub struct Ran {
    pub outcomes: Vec<Outcome>,
    /// Client process CPU seconds per wall second, per core (0..1).
    pub cpu: f64,
}

/// Sends one request at each offset (seconds from now) and waits for every answer.
pub fn run(
    runtime: &tokio::runtime::Runtime,
    client: &Arc<Client>,
    target: &Arc<Prepared>,
    offsets: &[f64],
    max_in_flight: usize,
    give_up_after: Duration,
) -> anyhow::Result<Ran> {
    let (tx, rx) = mpsc::channel::<(usize, Outcome)>();
    let cap = Arc::new(Semaphore::new(max_in_flight));
    set_fine_timer_slack();
    let cpu_before = Usage::now();
    let start = Instant::now() + Duration::from_millis(20);
    for (i, &offset) in offsets.iter().enumerate() {
        let scheduled = start + Duration::from_secs_f64(offset);
        let now = Instant::now();
        if scheduled > now {
            std::thread::sleep(scheduled - now);
        }
        let (tx, cap, client, target) = (tx.clone(), cap.clone(), client.clone(), target.clone());
        let body = target.bodies[i % target.bodies.len()].clone();
        runtime.spawn(async move {
            let began = Instant::now();
            let (permit, capped) = match cap.clone().try_acquire_owned() {
                Ok(permit) => (permit, false),
                Err(_) => (cap.acquire_owned().await.expect("the semaphore is never closed"), true),
            };
            let result = client.send(&target, body).await;
            let done = Instant::now();
            drop(permit);
            let (first_token, gaps) = match &result {
                Ok(Some(tokens)) => timing(tokens, scheduled),
                _ => (None, Vec::new()),
            };
            let outcome = Outcome {
                offset,
                lag: began.saturating_duration_since(scheduled),
                capped,
                latency: done.saturating_duration_since(scheduled),
                finished: done.saturating_duration_since(start).as_secs_f64(),
                result,
                first_token,
                gaps,
            };
            let _ = tx.send((i, outcome));
        });
    }
    drop(tx);
    let wall_start = start.min(Instant::now());
    let mut slots: Vec<Option<Outcome>> = (0..offsets.len()).map(|_| None).collect();
    let deadline = Instant::now() + give_up_after;
    for _ in 0..offsets.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let (i, outcome) = rx.recv_timeout(left).map_err(|_| {
            anyhow::anyhow!("requests were still open {give_up_after:?} after the last send; the step was abandoned")
        })?;
        slots[i] = Some(outcome);
    }
    let wall = wall_start.elapsed().as_secs_f64().max(1e-9);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cpu = Usage::now().since(&cpu_before).cpu_s() / wall / cores;
    Ok(Ran { outcomes: slots.into_iter().map(|o| o.expect("every slot was filled")).collect(), cpu })
}

fn timing(tokens: &Tokens, scheduled: Instant) -> (Option<Duration>, Vec<Duration>) {
    let first = tokens.arrivals.first().map(|t| t.saturating_duration_since(scheduled));
    let gaps = tokens.arrivals.windows(2).map(|w| w[1].saturating_duration_since(w[0])).collect();
    (first, gaps)
}

/// Lets the sending thread's sleeps end within a microsecond or so of when they were asked to
/// (Linux pads them by 50 µs by default).
fn set_fine_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
}
