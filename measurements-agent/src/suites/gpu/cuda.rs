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

/// A cuBLAS GEMM precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmPrecision {
    /// True FP32 (tensor cores off).
    Fp32,
    /// FP32 inputs on TF32 tensor cores.
    Tf32,
    Fp16,
    Bf16,
}

impl GemmPrecision {
    pub const ALL: [GemmPrecision; 4] =
        [GemmPrecision::Fp32, GemmPrecision::Tf32, GemmPrecision::Fp16, GemmPrecision::Bf16];

    pub fn as_str(self) -> &'static str {
        match self {
            GemmPrecision::Fp32 => "fp32",
            GemmPrecision::Tf32 => "tf32",
            GemmPrecision::Fp16 => "fp16",
            GemmPrecision::Bf16 => "bf16",
        }
    }
}

/// Inputs of a GEMM: column-major `a` (m×k) and `b` (k×n) with entries in ±[0.5, 1) (never
/// zero), from a seeded generator.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn gemm_inputs(m: usize, n: usize, k: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let unit = (state >> 40) as f32 / (1u64 << 24) as f32;
        let magnitude = 0.5 + 0.5 * unit;
        if state & 1 == 0 { magnitude } else { -magnitude }
    };
    ((0..m * k).map(|_| next()).collect(), (0..k * n).map(|_| next()).collect())
}

/// Relative error of `c` (column-major m×n) against an FP64 product of the inputs as the GPU
/// saw them (`a`, `b` after rounding to its precision), on a fixed sample of entries:
/// √Σ(c − ref)² / √Σ ref².
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub fn sampled_relative_error(a: &[f32], b: &[f32], c: &[f32], m: usize, n: usize, k: usize) -> f64 {
    let samples = 64.min(m * n);
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for s in 0..samples {
        let idx = (s * 7919 + 13) % (m * n);
        let (i, j) = (idx % m, idx / m);
        let reference: f64 = (0..k).map(|l| f64::from(a[i + l * m]) * f64::from(b[l + j * k])).sum();
        diff += (f64::from(c[idx]) - reference).powi(2);
        norm += reference.powi(2);
    }
    (diff / norm).sqrt()
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

        pub fn gemm(
            &self,
            _: super::GemmPrecision,
            _: usize,
            _: usize,
            _: usize,
            _: usize,
        ) -> Result<(Vec<f32>, f64), String> {
            Err("no GPU".into())
        }

        pub fn pci_address(&self) -> Option<crate::power::PciAddress> {
            None
        }

        pub fn fp16_gemm_load(&self, _: usize) -> Result<GemmLoad, String> {
            Err("no GPU".into())
        }
    }

    pub struct GemmLoad;

    impl GemmLoad {
        pub fn run_for(&mut self, _: std::time::Duration) -> Result<usize, String> {
            Err("no GPU".into())
        }

        pub fn queue(&mut self, _: usize) -> Result<(), String> {
            Err("no GPU".into())
        }

        pub fn finish(&mut self) -> Result<(), String> {
            Err("no GPU".into())
        }
    }
}

#[cfg(feature = "cuda")]
mod with_cuda {
    use std::sync::Arc;
    use std::time::Instant;

    use cudarc::cublas::sys::{cublasMath_t, cublasOperation_t};
    use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
    use cudarc::driver::sys::{CU_MEMHOSTALLOC_WRITECOMBINED, CUevent_flags};
    use cudarc::driver::{CudaContext, CudaSlice, CudaStream, result};

    use super::{Direction, GemmPrecision, HostMemory, gemm_inputs};

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

    /// C = A·B, column-major, no transposes.
    fn config<T>(m: usize, n: usize, k: usize, alpha: T, beta: T) -> GemmConfig<T> {
        GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: m as i32,
            n: n as i32,
            k: k as i32,
            alpha,
            lda: m as i32,
            ldb: k as i32,
            beta,
            ldc: m as i32,
        }
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

        /// Milliseconds of each of `trials` cuBLAS GEMMs (m×k by k×n, column-major), and the
        /// sampled relative error of the result against FP64.
        pub fn gemm(
            &self,
            precision: GemmPrecision,
            m: usize,
            n: usize,
            k: usize,
            trials: usize,
        ) -> Result<(Vec<f32>, f64), String> {
            // SAFETY: only tries to load the cuBLAS library by name.
            if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                return Err("no cuBLAS library".into());
            }
            let blas = CudaBlas::new(self.stream.clone()).map_err(err)?;
            let math = if precision == GemmPrecision::Tf32 {
                cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH
            } else {
                cublasMath_t::CUBLAS_DEFAULT_MATH
            };
            // SAFETY: the handle is live for `blas`'s lifetime.
            unsafe { cudarc::cublas::sys::cublasSetMathMode(*blas.handle(), math) }.result().map_err(err)?;
            let (a, b) = gemm_inputs(m, n, k, 0x5eed ^ (m * 31 + n * 17 + k) as u64);
            macro_rules! run {
                ($t:ty, $from:expr, $to:expr) => {{
                    let ha: Vec<$t> = a.iter().map(|&x| $from(x)).collect();
                    let hb: Vec<$t> = b.iter().map(|&x| $from(x)).collect();
                    let da = self.stream.clone_htod(&ha).map_err(err)?;
                    let db = self.stream.clone_htod(&hb).map_err(err)?;
                    let mut dc = self.stream.alloc_zeros::<$t>(m * n).map_err(err)?;
                    let one = config(m, n, k, $from(1.0), $from(0.0));
                    let mut times = Vec::with_capacity(trials);
                    for t in 0..trials + 2 {
                        let start = self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
                        // SAFETY: a, b and c are allocated with the sizes the config names.
                        unsafe { blas.gemm(one, &da, &db, &mut dc) }.map_err(err)?;
                        let end = self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
                        if t >= 2 {
                            times.push(start.elapsed_ms(&end).map_err(err)?);
                        }
                    }
                    let hc: Vec<$t> = self.stream.clone_dtoh(&dc).map_err(err)?;
                    let seen_a: Vec<f32> = ha.iter().map(|&x| $to(x)).collect();
                    let seen_b: Vec<f32> = hb.iter().map(|&x| $to(x)).collect();
                    let c: Vec<f32> = hc.iter().map(|&x| $to(x)).collect();
                    (times, super::sampled_relative_error(&seen_a, &seen_b, &c, m, n, k))
                }};
            }
            Ok(match precision {
                GemmPrecision::Fp32 | GemmPrecision::Tf32 => run!(f32, |x: f32| x, |x: f32| x),
                GemmPrecision::Fp16 => run!(half::f16, half::f16::from_f32, |x: half::f16| x.to_f32()),
                GemmPrecision::Bf16 => run!(half::bf16, half::bf16::from_f32, |x: half::bf16| x.to_f32()),
            })
        }

        /// Where the GPU sits on the PCI bus, to find it among NVML's.
        pub fn pci_address(&self) -> Option<crate::power::PciAddress> {
            use cudarc::driver::sys::CUdevice_attribute::{
                CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID,
            };
            let read = |a| self.ctx.attribute(a).ok().and_then(|v| u32::try_from(v).ok());
            Some(crate::power::PciAddress {
                domain: read(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID)?,
                bus: read(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)?,
                device: read(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)?,
            })
        }

        /// FP16 `size`³ cuBLAS GEMMs ready to run back to back (the GPU's busiest work: tensor
        /// cores on every SM), their inputs on the GPU.
        pub fn fp16_gemm_load(&self, size: usize) -> Result<GemmLoad, String> {
            // SAFETY: only tries to load the cuBLAS library by name.
            if !unsafe { cudarc::cublas::sys::is_culib_present() } {
                return Err("no cuBLAS library".into());
            }
            let blas = CudaBlas::new(self.stream.clone()).map_err(err)?;
            let (a, b) = gemm_inputs(size, size, size, 0x90_5eed);
            let a: Vec<half::f16> = a.iter().map(|&x| half::f16::from_f32(x)).collect();
            let b: Vec<half::f16> = b.iter().map(|&x| half::f16::from_f32(x)).collect();
            Ok(GemmLoad {
                a: self.stream.clone_htod(&a).map_err(err)?,
                b: self.stream.clone_htod(&b).map_err(err)?,
                c: self.stream.alloc_zeros::<half::f16>(size * size).map_err(err)?,
                size,
                stream: self.stream.clone(),
                blas,
            })
        }
    }

    /// FP16 GEMMs on the GPU, to load it ([`Gpu::fp16_gemm_load`]).
    pub struct GemmLoad {
        blas: CudaBlas,
        a: CudaSlice<half::f16>,
        b: CudaSlice<half::f16>,
        c: CudaSlice<half::f16>,
        size: usize,
        stream: Arc<CudaStream>,
    }

    impl GemmLoad {
        /// GEMMs back to back for at least `at_least`, synchronised every few so the host sees
        /// the time; how many ran.
        pub fn run_for(&mut self, at_least: std::time::Duration) -> Result<usize, String> {
            let n = self.size;
            let one = config(n, n, n, half::f16::ONE, half::f16::ZERO);
            let start = Instant::now();
            let mut ran = 0;
            while start.elapsed() < at_least {
                for _ in 0..8 {
                    // SAFETY: a, b and c are allocated with the sizes the config names.
                    unsafe { self.blas.gemm(one, &self.a, &self.b, &mut self.c) }.map_err(err)?;
                }
                self.stream.synchronize().map_err(err)?;
                ran += 8;
            }
            Ok(ran)
        }

        /// `count` more GEMMs queued without waiting for them, to keep the GPU busy while the
        /// host reads its power; [`GemmLoad::finish`] waits.
        pub fn queue(&mut self, count: usize) -> Result<(), String> {
            let n = self.size;
            let one = config(n, n, n, half::f16::ONE, half::f16::ZERO);
            for _ in 0..count {
                // SAFETY: a, b and c are allocated with the sizes the config names.
                unsafe { self.blas.gemm(one, &self.a, &self.b, &mut self.c) }.map_err(err)?;
            }
            Ok(())
        }

        /// Waits for every GEMM queued.
        pub fn finish(&mut self) -> Result<(), String> {
            self.stream.synchronize().map_err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampled_reference_sees_a_wrong_product() {
        let (m, n, k) = (8, 5, 16);
        let (a, b) = gemm_inputs(m, n, k, 3);
        assert!(a.iter().chain(&b).all(|x| x.abs() >= 0.5 && x.abs() < 1.0), "never zero");
        let exact: Vec<f32> = (0..m * n)
            .map(|idx| {
                (0..k).map(|l| f64::from(a[idx % m + l * m]) * f64::from(b[l + idx / m * k])).sum::<f64>() as f32
            })
            .collect();
        assert!(sampled_relative_error(&a, &b, &exact, m, n, k) < 1e-7);
        let mut off = exact.clone();
        off.iter_mut().for_each(|c| *c *= 1.01);
        let e = sampled_relative_error(&a, &b, &off, m, n, k);
        assert!((e - 0.01).abs() < 1e-4, "{e}");
    }

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
