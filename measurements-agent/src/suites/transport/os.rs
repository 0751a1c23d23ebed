//! The few operating-system calls the suites need that have no safe wrapper: process resource
//! usage, a shared memory mapping, and a timer registered with a runtime. Everything unsafe in
//! the agent is here.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU32;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::io::unix::AsyncFd;

/// CPU time and context switches of this whole process so far (`getrusage(RUSAGE_SELF)`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

impl Usage {
    pub fn now() -> Usage {
        let mut raw = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes a whole `rusage` into the pointer it is given.
        let usage = unsafe {
            libc::getrusage(libc::RUSAGE_SELF, raw.as_mut_ptr());
            raw.assume_init()
        };
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        Usage {
            user_s: seconds(usage.ru_utime),
            system_s: seconds(usage.ru_stime),
            voluntary_switches: usage.ru_nvcsw as u64,
            involuntary_switches: usage.ru_nivcsw as u64,
        }
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
            voluntary_switches: self.voluntary_switches.saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self.involuntary_switches.saturating_sub(earlier.involuntary_switches),
        }
    }

    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

/// A file mapped shared and writable into this process; other processes mapping the same file
/// see the same bytes.
pub struct SharedRegion {
    map: memmap2::MmapMut,
}

impl SharedRegion {
    pub fn map(file: &File) -> std::io::Result<SharedRegion> {
        // SAFETY: the mapping is shared with the peer process on purpose; every access that can
        // race goes through atomics (`atomic_u32`), and bulk data is only read or written by the
        // side that owns the slot at that moment, as the slot's sequence numbers say.
        let map = unsafe { memmap2::MmapMut::map_mut(file)? };
        Ok(SharedRegion { map })
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The 4-byte-aligned word at `offset` as an atomic.
    pub fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.map.len(), "atomic at {offset} outside the region");
        // SAFETY: in bounds and aligned (the mapping is page-aligned); AtomicU32 has the layout
        // of u32 and allows shared mutation through `&`.
        unsafe { &*(self.map.as_ptr().add(offset) as *const AtomicU32) }
    }

    /// `len` f32 values at `offset`, for the side that owns them now.
    pub fn f32s(&self, offset: usize, len: usize) -> &[f32] {
        assert!(offset.is_multiple_of(4) && offset + len * 4 <= self.map.len(), "f32s outside the region");
        // SAFETY: in bounds and aligned; the slot protocol gives this side exclusive use.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(offset) as *const f32, len) }
    }

    /// `len` f32 values at `offset`, writable, for the side that owns them now.
    ///
    /// # Safety
    /// The region is shared (between threads and, through the file, processes), so the compiler
    /// cannot see who else holds these bytes. The caller must own them by the slot protocol for
    /// as long as the slice lives, and hold no other slice (`f32s` or `f32s_mut`) that overlaps it.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn f32s_mut(&self, offset: usize, len: usize) -> &mut [f32] {
        assert!(offset.is_multiple_of(4) && offset + len * 4 <= self.map.len(), "f32s outside the region");
        // SAFETY: in bounds and aligned (checked above); exclusive use is the caller's promise.
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr().add(offset) as *mut f32, len) }
    }
}

/// A timerfd in the current runtime: sleeps to the microsecond (tokio's own timers are a
/// millisecond coarse), and the wake-up is one more event on that runtime's own epoll rather
/// than another thread's (the endpoint suite's load lanes).
pub struct Alarm(AsyncFd<OwnedFd>);

impl Alarm {
    /// Panics outside a tokio runtime with I/O enabled.
    pub fn new() -> std::io::Result<Alarm> {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        let fd = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC)?;
        // SAFETY: `fd` is an open timerfd, moved into the `AsyncFd`, which is `Alarm`'s private
        // field: nothing here takes it out (`into_inner`) or replaces it (`get_mut`), so it
        // stays open, and the same descriptor, until the `AsyncFd` drops and closes it.
        let registered = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
        Ok(Alarm(registered.map_err(|e| e.into_parts().1)?))
    }

    /// Returns at `when` (at once if it has passed).
    pub async fn until(&self, when: Instant) -> std::io::Result<()> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        let wait = when.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return Ok(());
        }
        let zero = Timespec { tv_sec: 0, tv_nsec: 0 };
        // Both parts of `wait` are in range: seconds from a schedule of at most a day, and
        // nanoseconds below a billion.
        let value = Timespec { tv_sec: wait.as_secs() as i64, tv_nsec: i64::from(wait.subsec_nanos()) };
        timerfd_settime(
            self.0.get_ref(),
            TimerfdTimerFlags::empty(),
            &Itimerspec { it_interval: zero, it_value: value },
        )?;
        loop {
            let mut ready = self.0.readable().await?;
            let mut expirations = [0u8; 8];
            match rustix::io::read(self.0.get_ref(), &mut expirations[..]) {
                Ok(_) => {
                    // Drained: the next wait starts from not ready, without a read that fails.
                    ready.clear_ready();
                    return Ok(());
                }
                Err(rustix::io::Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}
