//! Shared-memory request/response slots between two processes: a file in `/dev/shm` mapped by
//! both, one slot per client thread. The request tensor is produced in the slot and read there
//! by the server (zero-copy); only a request id, a batch size and two sequence numbers change
//! hands per call. A side waits for the other either by busy-polling the sequence number or by
//! sleeping on it with a futex.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::thread::futex;
use serde::{Deserialize, Serialize};

use super::os::SharedRegion;
use super::wire::{CLASSES, FEATURES, logits_into};

/// How a waiting side learns that the other has written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// Poll the sequence number (yielding now and then so one core can still serve both ends).
    Spin,
    /// Sleep in the kernel until woken (futex on the shared sequence number).
    Futex,
}

impl Wait {
    pub fn as_str(self) -> &'static str {
        match self {
            Wait::Spin => "busy_poll",
            Wait::Futex => "futex",
        }
    }
}

/// Sequence number that tells the server's slot thread to stop.
const CLOSE: u32 = u32::MAX;
// The request's sequence number, id and batch share one cache line, and the response's
// sequence number sits in the line where its logits begin: a call moves as few lines between
// the cores as the protocol allows (one each way for a batch of one).
const REQ_SEQ: usize = 0;
const REQUEST_ID_LO: usize = 4;
const REQUEST_ID_HI: usize = 8;
const BATCH: usize = 12;
const RESP_SEQ: usize = 64;
const RESPONSE: usize = 68;
const DATA: usize = 4096;
/// Polls between yields while spinning.
const SPINS_PER_YIELD: u64 = 4096;

/// What a client asks the server for; the server picks the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attach {
    pub slots: usize,
    pub max_batch: usize,
    pub wait: Wait,
}

/// The layout both processes agree on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Layout {
    pub path: PathBuf,
    pub slots: usize,
    /// Most samples one request may carry.
    pub max_batch: usize,
    pub wait: Wait,
}

impl Layout {
    /// Logits follow the response sequence number; large batches run on past the first page.
    fn response_offset(&self) -> usize {
        RESPONSE
    }

    fn data_offset(&self) -> usize {
        DATA + round_up((RESPONSE + self.max_batch * CLASSES * 4).saturating_sub(DATA), 4096)
    }

    fn stride(&self) -> usize {
        self.data_offset() + round_up(self.max_batch * FEATURES * 4, 4096)
    }

    pub fn bytes(&self) -> usize {
        self.stride() * self.slots
    }
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// Where to put the shared file: tmpfs when there is one, so it is memory and not disk.
pub fn shm_dir() -> PathBuf {
    let dev_shm = Path::new("/dev/shm");
    if dev_shm.is_dir() { dev_shm.to_path_buf() } else { std::env::temp_dir() }
}

/// The new value of `word`, or [`CLOSE`] once `deadline` (if any) has passed.
fn wait_for_change(word: &AtomicU32, old: u32, wait: Wait, deadline: Option<std::time::Instant>) -> u32 {
    let mut spins = 0u64;
    loop {
        let now = word.load(Ordering::Acquire);
        if now != old {
            return now;
        }
        match wait {
            Wait::Spin => {
                std::hint::spin_loop();
                spins += 1;
                if spins.is_multiple_of(SPINS_PER_YIELD) {
                    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                        return CLOSE;
                    }
                    std::thread::yield_now();
                }
            }
            Wait::Futex => {
                // A spurious or timed-out return loops back to the check; the timeout lets a
                // slot whose client vanished notice it is closed.
                let timeout = rustix::time::Timespec { tv_sec: 1, tv_nsec: 0 };
                let _ = futex::wait(word, futex::Flags::empty(), old, Some(&timeout));
                if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                    return CLOSE;
                }
            }
        }
    }
}

fn publish(word: &AtomicU32, value: u32, wait: Wait) {
    word.store(value, Ordering::Release);
    if wait == Wait::Futex {
        let _ = futex::wake(word, futex::Flags::empty(), 1);
    }
}

/// The client end: maps the file the server created (and removes it when done).
pub struct ShmClients {
    region: Arc<SharedRegion>,
    layout: Layout,
    _file: File,
}

impl ShmClients {
    pub fn open(layout: Layout) -> std::io::Result<ShmClients> {
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&layout.path)?;
        let region = Arc::new(SharedRegion::map(&file)?);
        if region.len() < layout.bytes() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "shared file is smaller than its layout",
            ));
        }
        Ok(ShmClients { region, layout, _file: file })
    }

    /// The client of slot `slot`, with `tensor` produced in the slot once.
    pub fn client(&self, slot: usize, tensor: &[f32]) -> ShmClient {
        assert!(slot < self.layout.slots && tensor.len() <= self.layout.max_batch * FEATURES);
        let base = slot * self.layout.stride();
        // SAFETY: the slot is new and not yet published to its server, so nothing else reads or
        // writes its data while it is filled.
        #[allow(unsafe_code)]
        let data = unsafe { self.region.f32s_mut(base + self.layout.data_offset(), tensor.len()) };
        data.copy_from_slice(tensor);
        ShmClient {
            region: self.region.clone(),
            base,
            response: base + self.layout.response_offset(),
            batch: tensor.len() / FEATURES,
            seq: self.region.atomic_u32(base + REQ_SEQ).load(Ordering::Acquire),
            wait: self.layout.wait,
            expect_first: tensor[..FEATURES].iter().step_by(CLASSES).sum(),
        }
    }
}

impl Drop for ShmClients {
    fn drop(&mut self) {
        for slot in 0..self.layout.slots {
            publish(self.region.atomic_u32(slot * self.layout.stride() + REQ_SEQ), CLOSE, self.layout.wait);
        }
        let _ = std::fs::remove_file(&self.layout.path);
    }
}

/// One in-flight request at a time through one slot.
pub struct ShmClient {
    region: Arc<SharedRegion>,
    base: usize,
    response: usize,
    batch: usize,
    seq: u32,
    wait: Wait,
    expect_first: f32,
}

impl ShmClient {
    pub fn call(&mut self, request_id: u64) -> anyhow::Result<()> {
        let r = &self.region;
        self.seq = if self.seq >= CLOSE - 1 { 1 } else { self.seq + 1 };
        r.atomic_u32(self.base + REQUEST_ID_LO).store(request_id as u32, Ordering::Relaxed);
        r.atomic_u32(self.base + REQUEST_ID_HI).store((request_id >> 32) as u32, Ordering::Relaxed);
        r.atomic_u32(self.base + BATCH).store(self.batch as u32, Ordering::Relaxed);
        let previous = r.atomic_u32(self.base + RESP_SEQ).load(Ordering::Acquire);
        publish(r.atomic_u32(self.base + REQ_SEQ), self.seq, self.wait);
        let mut answered = previous;
        while answered != self.seq {
            answered = wait_for_change(r.atomic_u32(self.base + RESP_SEQ), answered, self.wait, None);
        }
        let first = r.f32s(self.response, 1)[0];
        anyhow::ensure!(
            (first - self.expect_first).abs() <= 1e-3 * self.expect_first.abs().max(1.0),
            "shared-memory server answered {first}, expected {}",
            self.expect_first
        );
        Ok(())
    }
}

/// The server end: creates the file of `layout` (it must not exist; owner-only), then serves
/// one thread per slot until the client closes it or `longest` has passed.
pub fn create_and_serve(
    layout: &Layout,
    longest: std::time::Duration,
) -> std::io::Result<Vec<std::thread::JoinHandle<()>>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&layout.path)?;
    file.set_len(layout.bytes() as u64)?;
    let region = Arc::new(SharedRegion::map(&file)?);
    let deadline = Some(std::time::Instant::now() + longest);
    let stride = layout.stride();
    let response = layout.response_offset();
    let data = layout.data_offset();
    let max_batch = layout.max_batch;
    (0..layout.slots)
        .map(|slot| {
            let region = region.clone();
            let wait = layout.wait;
            let base = slot * stride;
            // Read before the thread starts, so a request published right after `serve`
            // returns is not mistaken for the starting point.
            let mut last = region.atomic_u32(base + REQ_SEQ).load(Ordering::Acquire);
            std::thread::Builder::new().name(format!("shm-slot-{slot}")).spawn(move || {
                loop {
                    let seq = wait_for_change(region.atomic_u32(base + REQ_SEQ), last, wait, deadline);
                    if seq == CLOSE {
                        return;
                    }
                    last = seq;
                    let batch = (region.atomic_u32(base + BATCH).load(Ordering::Relaxed) as usize).min(max_batch);
                    // SAFETY: the client published this request and waits for the answer, so the
                    // server owns the response bytes until it publishes; the request and the
                    // response areas of a slot do not overlap.
                    #[allow(unsafe_code)]
                    let answer = unsafe { region.f32s_mut(base + response, batch * CLASSES) };
                    logits_into(region.f32s(base + data, batch * FEATURES), batch, answer);
                    publish(region.atomic_u32(base + RESP_SEQ), seq, wait);
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suites::transport::wire::tensor;

    #[test]
    fn round_trips_through_a_slot_in_both_wait_modes() {
        for wait in [Wait::Spin, Wait::Futex] {
            let dir = tempfile::tempdir().unwrap();
            let layout = Layout { path: dir.path().join("slots"), slots: 2, max_batch: 8, wait };
            let threads = create_and_serve(&layout, std::time::Duration::from_secs(60)).unwrap();
            let clients = ShmClients::open(layout).unwrap();
            let mut a = clients.client(0, &tensor(8));
            let mut b = clients.client(1, &tensor(1));
            for id in 0..500 {
                a.call(id).unwrap();
                b.call(id).unwrap();
            }
            drop(clients);
            for t in threads {
                t.join().unwrap();
            }
        }
    }
}

#[cfg(test)]
mod limits {
    use super::*;

    #[test]
    fn an_attachment_ends_at_its_deadline_and_never_opens_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout { path: dir.path().join("slots"), slots: 1, max_batch: 1, wait: Wait::Spin };
        let threads = create_and_serve(&layout, std::time::Duration::from_millis(50)).unwrap();
        for t in threads {
            t.join().unwrap(); // returns once the deadline passed, without a client
        }
        assert!(create_and_serve(&layout, std::time::Duration::from_secs(1)).is_err(), "the file exists already");
    }
}
