//! CPU-heavy work (password hashing, fitting an LLM engine) on tokio's blocking pool, a few at
//! a time per kind of work, so that it never stalls the async runtime that serves everything
//! else and a burst of it queues instead of taking every core and thread.

use std::sync::OnceLock;

use tokio::sync::Semaphore;

/// One kind of work's limit (see [`Limited::run`]).
pub struct Limited {
    permits: OnceLock<Semaphore>,
}

impl Limited {
    pub const fn new() -> Self {
        Limited { permits: OnceLock::new() }
    }

    /// Runs `work` on the blocking pool once one of this kind's permits is free (one per core,
    /// between 1 and 8). A kind is a `static`.
    pub async fn run<T: Send + 'static>(&'static self, work: impl FnOnce() -> T + Send + 'static) -> anyhow::Result<T> {
        let permits = self.permits.get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(2, usize::from);
            Semaphore::new(cores.clamp(1, 8))
        });
        // The permit goes with the work: a caller that hangs up while it runs frees the permit
        // only when the work ends, so no more than the limit ever run at once.
        let permit = permits.acquire().await?;
        Ok(tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work()
        })
        .await?)
    }
}

impl Default for Limited {
    fn default() -> Self {
        Self::new()
    }
}
