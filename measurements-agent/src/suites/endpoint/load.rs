//! The load drivers. Open loop ([`run`]): one thread sends on a schedule fixed in advance, a
//! small runtime carries the requests, and every latency is timed from the *scheduled* send, so
//! a stalled server shows up as latency rather than as fewer requests (no coordinated
//! omission). Closed loop ([`run_closed`]): a fixed number of requests in flight, back to back,
//! for comparing like with like with closed-loop tools.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::protocol::{Client, Failure, Prepared, Tokens};
use crate::suites::transport::os::Usage;

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

/// Sends one request at each offset (seconds from now) and waits for every answer. A request
/// not answered within `timeout` of its scheduled send (waiting for the in-flight cap
/// included) is a timeout.
pub fn run(
    runtime: &tokio::runtime::Runtime,
    client: &Arc<Client>,
    target: &Arc<Prepared>,
    offsets: &[f64],
    max_in_flight: usize,
    timeout: Duration,
    workers: usize,
) -> Ran {
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
        runtime.spawn(async move {
            let began = Instant::now();
            let mut capped = false;
            let send = async {
                let _permit = match cap.clone().try_acquire_owned() {
                    Ok(permit) => permit,
                    Err(_) => {
                        capped = true;
                        cap.acquire_owned().await.expect("the semaphore is never closed")
                    }
                };
                client.send(&target, i).await
            };
            let deadline = tokio::time::Instant::from_std(scheduled + timeout);
            let result = tokio::time::timeout_at(deadline, send).await.unwrap_or(Err(Failure::Timeout));
            let done = Instant::now();
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
    // Every task ends by its deadline; the margin is for a runtime too busy to say so.
    let mut slots: Vec<Option<Outcome>> = (0..offsets.len()).map(|_| None).collect();
    let give_up = Instant::now() + timeout + Duration::from_secs(10);
    while let Ok((i, outcome)) = rx.recv_timeout(give_up.saturating_duration_since(Instant::now())) {
        slots[i] = Some(outcome);
    }
    let wall = wall_start.elapsed().as_secs_f64().max(1e-9);
    // Of the cores the client may use: the runtime has a worker per core (up to 8), and the
    // sending thread shares them, so a client out of CPU reads 1 (over `workers + 1` threads it
    // could never pass 2/3 on two cores, and the client-CPU rule would never fire).
    let cpu = (Usage::now().since(&cpu_before).cpu_s() / wall / workers as f64).min(1.0);
    let outcomes = slots
        .into_iter()
        .zip(offsets)
        .map(|(slot, &offset)| {
            slot.unwrap_or_else(|| Outcome {
                offset,
                lag: Duration::ZERO,
                capped: false,
                latency: timeout,
                finished: offset + timeout.as_secs_f64(),
                result: Err(Failure::Timeout),
                first_token: None,
                gaps: Vec::new(),
            })
        })
        .collect();
    Ran { outcomes, cpu }
}

/// Closed loop, as `wrk -cN` and perf_analyzer run by default: `in_flight` workers each send
/// a request, wait for its answer and send the next at once, for `span` seconds. Latency is
/// timed from each actual send (a closed loop has no schedule, so a stalled server shows as
/// fewer requests rather than as latency: the price of comparing like with like with those
/// tools). Outcomes are in order of their send.
pub fn run_closed(
    runtime: &tokio::runtime::Runtime,
    client: &Arc<Client>,
    target: &Arc<Prepared>,
    in_flight: usize,
    span: f64,
    timeout: Duration,
    workers: usize,
) -> Ran {
    let cpu_before = Usage::now();
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(span);
    let next_body = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let per_worker = runtime.block_on(async {
        let tasks: Vec<_> = (0..in_flight)
            .map(|_| {
                let (client, target, next_body) = (client.clone(), target.clone(), next_body.clone());
                tokio::spawn(async move {
                    let mut outcomes = Vec::new();
                    loop {
                        let sent = Instant::now();
                        if sent >= end {
                            return outcomes;
                        }
                        let i = next_body.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let result = tokio::time::timeout(timeout, client.send(&target, i))
                            .await
                            .unwrap_or(Err(Failure::Timeout));
                        let done = Instant::now();
                        let (first_token, gaps) = match &result {
                            Ok(Some(tokens)) => timing(tokens, sent),
                            _ => (None, Vec::new()),
                        };
                        outcomes.push(Outcome {
                            offset: sent.duration_since(start).as_secs_f64(),
                            lag: Duration::ZERO,
                            capped: false,
                            latency: done.duration_since(sent),
                            finished: done.duration_since(start).as_secs_f64(),
                            result,
                            first_token,
                            gaps,
                        });
                    }
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            // A worker panics only on a bug; its requests are then missing, not invented.
            all.push(task.await.unwrap_or_default());
        }
        all
    });
    let wall = start.elapsed().as_secs_f64().max(1e-9);
    // Only the runtime's workers do the client's work here.
    let cpu = Usage::now().since(&cpu_before).cpu_s() / wall / workers as f64;
    let mut outcomes: Vec<Outcome> = per_worker.into_iter().flatten().collect();
    outcomes.sort_by(|a, b| a.offset.total_cmp(&b.offset));
    Ran { outcomes, cpu }
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
