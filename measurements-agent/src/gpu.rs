//! The CUDA driver, loaded at run time (cudarc with dynamic loading). Without a driver, or in a
//! build without the `cuda` feature, [`open`] says why and the GPU suites record each case as
//! skipped with that reason. The copies are timed with CUDA events on one stream.
//!
//! Not yet proven on a GPU: no GPU was lent to the session that wrote it. `gpu-check.sh`
//! runs it on one.
#![allow(unsafe_code)]

/// Bandwidth from a copy of `bytes` that took `ms` milliseconds (CUDA events report ms).
pub fn bytes_per_second(bytes: usize, ms: f32) -> Option<f64> {
    (ms > 0.0 && ms.is_finite()).then(|| bytes as f64 / (f64::from(ms) / 1e3))
}

/// The usable bandwidth of a PCIe link in one direction, in bytes per second: the per-lane
/// transfer rate (GT/s) × lanes × line coding (128b/130b from 8 GT/s, 8b/10b below).
pub fn pcie_limit(gigatransfers: f64, width: u32) -> Option<f64> {
    if !(gigatransfers > 0.0 && width > 0) {
        return None;
    }
    let coding = if gigatransfers >= 8.0 { 128.0 / 130.0 } else { 8.0 / 10.0 };
    Some(gigatransfers * 1e9 * coding * f64::from(width) / 8.0)
}

/// The current PCIe link of the first NVIDIA display or 3-D controller, from sysfs:
/// (GT/s, lanes). NVML would say the same; sysfs needs no library.
pub fn nvidia_pcie_link() -> Option<(f64, u32)> {
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).ok().map(|s| s.trim().to_string());
    for entry in std::fs::read_dir("/sys/bus/pci/devices").ok()?.flatten() {
        let dir = entry.path();
        let nvidia = read(dir.join("vendor")).as_deref() == Some("0x10de");
        let gpu = read(dir.join("class")).is_some_and(|c| c.starts_with("0x0300") || c.starts_with("0x0302"));
        if nvidia && gpu {
            let speed = read(dir.join("current_link_speed"))?;
            let gts: f64 = speed.split_whitespace().next()?.parse().ok()?;
            let width: u32 = read(dir.join("current_link_width"))?.parse().ok()?;
            return Some((gts, width));
        }
    }
    None
}

/// Where host memory for a copy lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostMemory {
    /// Ordinary `malloc`/`Vec` memory: the driver stages it through a pinned buffer.
    Pageable,
    /// Page-locked, cached.
    Pinned,
    /// Page-locked, write-combined: fast for the GPU to read, slow for the CPU.
    PinnedWriteCombined,
}

impl HostMemory {
    pub const ALL: [HostMemory; 3] = [HostMemory::Pageable, HostMemory::Pinned, HostMemory::PinnedWriteCombined];

    pub fn as_str(self) -> &'static str {
        match self {
            HostMemory::Pageable => "pageable",
            HostMemory::Pinned => "pinned",
            HostMemory::PinnedWriteCombined => "pinned_write_combined",
        }
    }
}

/// A copy's direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HostToDevice,
    DeviceToHost,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::HostToDevice => "h2d",
            Direction::DeviceToHost => "d2h",
        }
    }
}

#[cfg(feature = "cuda")]
pub use with_cuda::*;

#[cfg(not(feature = "cuda"))]
pub use without_cuda::*;

#[cfg(not(feature = "cuda"))]
mod without_cuda {
    use super::{Direction, HostMemory};

    pub struct Gpu;

    pub fn open() -> Result<Gpu, String> {
        Err("this agent was built without the cuda feature".into())
    }

    impl Gpu {
        pub fn name(&self) -> String {
            String::new()
        }

        pub fn copy_ms(&self, _: HostMemory, _: Direction, _: usize, _: usize, _: usize) -> Result<Vec<f32>, String> {
            Err("no GPU".into())
        }

        pub fn alloc_free_ms(&self, _: bool, _: usize, _: usize) -> Result<f64, String> {
            Err("no GPU".into())
        }
    }
}

#[cfg(feature = "cuda")]
mod with_cuda {
    use std::sync::Arc;
    use std::time::Instant;

    use cudarc::driver::sys::{CU_MEMHOSTALLOC_WRITECOMBINED, CUevent_flags};
    use cudarc::driver::{CudaContext, CudaSlice, CudaStream, result};

    use super::{Direction, HostMemory};

    /// The first GPU, with one stream.
    pub struct Gpu {
        ctx: Arc<CudaContext>,
        stream: Arc<CudaStream>,
    }

    /// The first GPU, or why there is none.
    pub fn open() -> Result<Gpu, String> {
        // SAFETY: only tries to load the driver library by name.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("no CUDA driver".into());
        }
        // cudarc panics rather than erring on some loading failures; keep the agent running.
        let ctx = std::panic::catch_unwind(|| CudaContext::new(0))
            .map_err(|_| "no CUDA driver (it could not be loaded)".to_string())?
            .map_err(|e| format!("no usable GPU: {e:?}"))?;
        let stream = ctx.default_stream();
        Ok(Gpu { ctx, stream })
    }

    fn err(e: impl std::fmt::Debug) -> String {
        format!("CUDA error: {e:?}")
    }

    impl Gpu {
        pub fn name(&self) -> String {
            self.ctx.name().unwrap_or_default()
        }

        /// Milliseconds of each of `trials` copies of `bytes` (after `warmup` untimed ones),
        /// each split into `chunks` equal copies issued back to back.
        pub fn copy_ms(
            &self,
            memory: HostMemory,
            direction: Direction,
            bytes: usize,
            chunks: usize,
            trials: usize,
        ) -> Result<Vec<f32>, String> {
            let chunks = chunks.max(1);
            let chunk = bytes / chunks;
            let mut device: CudaSlice<u8> = self.stream.alloc_zeros(bytes).map_err(err)?;
            let mut pageable: Vec<u8>;
            let mut pinned;
            let host: &mut [u8] = match memory {
                HostMemory::Pageable => {
                    pageable = vec![1u8; bytes];
                    &mut pageable
                }
                HostMemory::Pinned | HostMemory::PinnedWriteCombined => {
                    let flags = if memory == HostMemory::Pinned { 0 } else { CU_MEMHOSTALLOC_WRITECOMBINED };
                    // SAFETY: the buffer is written in full below before any copy reads it.
                    pinned = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(bytes, flags) }.map_err(err)?;
                    let slice = pinned.as_mut_slice().map_err(err)?;
                    slice.fill(1);
                    slice
                }
            };
            let once = |host: &mut [u8], device: &mut CudaSlice<u8>| -> Result<(), String> {
                for c in 0..chunks {
                    let range = c * chunk..(c + 1) * chunk;
                    let mut view = device.slice_mut(range.clone());
                    match direction {
                        Direction::HostToDevice => self.stream.memcpy_htod(&host[range], &mut view).map_err(err)?,
                        Direction::DeviceToHost => self.stream.memcpy_dtoh(&view, &mut host[range]).map_err(err)?,
                    }
                }
                Ok(())
            };
            for _ in 0..2 {
                once(host, &mut device)?;
            }
            self.stream.synchronize().map_err(err)?;
            let mut times = Vec::with_capacity(trials);
            for _ in 0..trials {
                let start = self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
                once(host, &mut device)?;
                let end = self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
                times.push(start.elapsed_ms(&end).map_err(err)?);
            }
            Ok(times)
        }

        /// Mean milliseconds to allocate and free `bytes`, `count` times: with `cuMemAlloc` and
        /// `cuMemFree` each time (`pooled` false), or from the stream-ordered pool.
        pub fn alloc_free_ms(&self, pooled: bool, bytes: usize, count: usize) -> Result<f64, String> {
            self.ctx.bind_to_thread().map_err(err)?;
            let start = Instant::now();
            for _ in 0..count {
                if pooled {
                    // SAFETY: the memory is freed (returned to the pool) unread when dropped.
                    let slice: CudaSlice<u8> = unsafe { self.stream.alloc(bytes) }.map_err(err)?;
                    drop(slice);
                } else {
                    // SAFETY: the pointer comes from cuMemAlloc and is freed once, unused.
                    unsafe {
                        let ptr = result::malloc_sync(bytes).map_err(err)?;
                        result::free_sync(ptr).map_err(err)?;
                    }
                }
            }
            self.stream.synchronize().map_err(err)?;
            Ok(start.elapsed().as_secs_f64() * 1e3 / count.max(1) as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_and_link_limits_from_known_inputs() {
        // 256 MiB in 10 ms.
        assert_eq!(bytes_per_second(256 << 20, 10.0), Some(26_843_545_600.0));
        assert_eq!(bytes_per_second(1, 0.0), None);
        // PCIe 5.0 ×16: 32 GT/s × 16 lanes × 128/130 / 8 bits = 63.0 GB/s.
        let gen5 = pcie_limit(32.0, 16).unwrap();
        assert!((gen5 - 63.015_384_6e9).abs() < 1e3, "{gen5}");
        // PCIe 4.0 ×16 is half of that; 3.0 ×8 a quarter of 4.0 ×16; 2.0 uses 8b/10b.
        assert!((pcie_limit(16.0, 16).unwrap() * 2.0 - gen5).abs() < 1.0);
        assert!((pcie_limit(8.0, 8).unwrap() * 4.0 - pcie_limit(16.0, 16).unwrap()).abs() < 1.0);
        assert_eq!(pcie_limit(5.0, 16), Some(8e9));
        assert_eq!(pcie_limit(0.0, 16), None);
    }
}
