//! Power the node draws, read where its hardware counts energy: RAPL through the kernel's
//! powercap interface for CPU packages and their DRAM (`/sys/class/powercap/intel-rapl:N`, AMD
//! processors too since Linux 5.8), and NVML's energy counter for NVIDIA GPUs (Volta and later;
//! [`Nvml`], in builds with the `cuda` feature). Energy counters, not instantaneous readings:
//! the average over a window is the energy between two reads over the time between them,
//! whatever the sampling.
//!
//! Where there is nothing to read (a VM, a container without `/sys/class/powercap`, a kernel
//! since 5.10 that lets only root read `energy_uj`, a node without an NVIDIA driver or a GPU
//! older than Volta), `open` says why, and the cases that need it are skipped with that reason.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use model::{Measurement, MeasurementStatus, Suite, Unit};

/// Where the kernel publishes powercap zones.
pub const POWERCAP: &str = "/sys/class/powercap";

/// A reading above this is refused as not plausible (the store's bound on a replica's power).
pub const MAX_WATTS: f64 = model::plan::carbon::MAX_WATTS;

/// A set of energy counters read before and after a window: the energy between two reads
/// over the time between them is the average power, whatever happened in between.
pub trait Energy {
    /// What counts, in reasons: `RAPL`, `NVML`.
    const SOURCE: &'static str;

    /// A reading above this is refused as not plausible.
    const MOST_WATTS: f64;

    /// What is counted, e.g. `package-0, package-0 dram`.
    fn describe(&self) -> String;

    /// Every counter, in the counter's own unit.
    fn read(&self) -> Result<Vec<u64>, String>;

    /// Joules counted between two reads; `None` where the counters do not agree with themselves
    /// (one went back, or past its own range).
    fn joules(&self, before: &[u64], after: &[u64]) -> Option<f64>;

    /// The average watts while `work` runs, and for how long it ran (with what `work` gave).
    /// A window over which no counter moved is refused rather than read as 0 W (some virtual
    /// machines publish counters that never advance), as is one of more than `MOST_WATTS`.
    fn during<T>(&self, work: impl FnOnce() -> T) -> (Result<(f64, Duration), String>, T) {
        let before = self.on_update();
        let out = work();
        let after = self.on_update();
        let source = Self::SOURCE;
        let watts = (|| {
            let ((before, from), (after, to)) = (before?, after?);
            let elapsed = to.saturating_duration_since(from);
            let joules = self
                .joules(&before, &after)
                .ok_or_else(|| format!("no {source}: a counter of {} went back or past its range", self.describe()))?;
            if joules <= 0.0 {
                return Err(format!(
                    "no {source}: the energy counters of {} did not advance in {:.1} s",
                    self.describe(),
                    elapsed.as_secs_f64()
                ));
            }
            let watts = joules / elapsed.as_secs_f64().max(1e-9);
            if watts > Self::MOST_WATTS {
                return Err(format!(
                    "no {source}: {watts:.0} W over {:.3} s is not a plausible reading",
                    elapsed.as_secs_f64()
                ));
            }
            Ok((watts, elapsed))
        })();
        (watts, out)
    }

    /// The counters as soon as one of them moves (at most [`ALIGN`] later), and when: a window
    /// that starts and ends on an update holds whole updates of counters that move in steps
    /// (NVML's, every few tens of milliseconds; RAPL's about every millisecond).
    fn on_update(&self) -> Result<(Vec<u64>, Instant), String> {
        let first = self.read()?;
        let began = Instant::now();
        loop {
            let now = self.read()?;
            let at = Instant::now();
            if now != first || at.duration_since(began) >= ALIGN {
                return Ok((now, at));
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

/// The longest [`Energy::on_update`] waits for a counter to move.
pub const ALIGN: Duration = Duration::from_millis(250);

/// The RAPL energy counters of every CPU package (and its DRAM, where counted apart).
#[derive(Debug)]
pub struct Rapl {
    zones: Vec<Zone>,
}

#[derive(Debug)]
struct Zone {
    name: String,
    energy: PathBuf,
    /// The counter wraps to 0 after this many µJ.
    range_uj: u64,
}

impl Rapl {
    /// The package zones under `root` (normally [`POWERCAP`]) and their `dram` subzones; or why
    /// none can be read. A `psys` zone (the whole platform on some laptops) is left out: it
    /// contains the packages, and adding it would count them twice.
    pub fn open(root: &Path) -> Result<Rapl, String> {
        let entries = fs::read_dir(root).map_err(|e| format!("no RAPL: cannot list {}: {e}", root.display()))?;
        let mut tops: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| is_zone(n, 1)))
            .collect();
        tops.sort();
        let mut zones = Vec::new();
        for top in tops {
            let name = read_text(&top.join("name")).unwrap_or_default();
            if !name.starts_with("package") {
                continue;
            }
            zones.push(Zone::at(&top, name.clone())?);
            let mut subs: Vec<PathBuf> =
                fs::read_dir(&top).map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect()).unwrap_or_default();
            subs.retain(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| is_zone(n, 2)));
            subs.sort();
            for sub in subs {
                if read_text(&sub.join("name")).as_deref() == Some("dram") {
                    zones.push(Zone::at(&sub, format!("{name} dram"))?);
                }
            }
        }
        if zones.is_empty() {
            return Err(format!("no RAPL: no package zone under {}", root.display()));
        }
        let rapl = Rapl { zones };
        rapl.read()?;
        Ok(rapl)
    }
}

impl Energy for Rapl {
    const SOURCE: &'static str = "RAPL";
    const MOST_WATTS: f64 = MAX_WATTS;

    /// What is counted, e.g. `package-0, package-0 dram`.
    fn describe(&self) -> String {
        self.zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Every zone's counter, in µJ.
    fn read(&self) -> Result<Vec<u64>, String> {
        self.zones
            .iter()
            .map(|z| {
                let text = fs::read_to_string(&z.energy).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::PermissionDenied {
                        format!(
                            "no RAPL: {} is readable by root only (Linux 5.10 and later); run the agent as root or grant read access",
                            z.energy.display()
                        )
                    } else {
                        format!("no RAPL: cannot read {}: {e}", z.energy.display())
                    }
                })?;
                text.trim().parse::<u64>().map_err(|_| format!("no RAPL: {} is not a count", z.energy.display()))
            })
            .collect()
    }

    /// Joules counted between two reads, each counter unwrapped once where it passed its range
    /// (so a window must be shorter than one wrap: typical ranges are 262 kJ, over 20 minutes
    /// at 200 W per package).
    /// `None` where a counter read beyond its own range (the kernel's figures do not agree).
    fn joules(&self, before: &[u64], after: &[u64]) -> Option<f64> {
        let mut micro: u64 = 0;
        for (z, (b, a)) in self.zones.iter().zip(before.iter().zip(after)) {
            let counted = if a >= b { a - b } else { z.range_uj.checked_sub(*b)?.checked_add(*a)? };
            micro = micro.checked_add(counted)?;
        }
        Some(micro as f64 / 1e6)
    }
}

impl Zone {
    fn at(dir: &Path, name: String) -> Result<Zone, String> {
        let range = read_text(&dir.join("max_energy_range_uj"))
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| format!("no RAPL: {} gives no max_energy_range_uj", dir.display()))?;
        Ok(Zone { name, energy: dir.join("energy_uj"), range_uj: range })
    }
}

/// `intel-rapl:0` is a zone of depth 1, `intel-rapl:0:2` of depth 2.
fn is_zone(name: &str, depth: usize) -> bool {
    name.strip_prefix("intel-rapl:").is_some_and(|rest| {
        let parts: Vec<&str> = rest.split(':').collect();
        parts.len() == depth && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn read_text(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|t| t.trim().to_string())
}

/// The average power of `counter` over a window in `state` (`idle`, `busy`) as a `power` case of
/// `suite`, with `extra` parameters; or, where the window could not be read, the case skipped
/// with the reason.
pub fn case<E: Energy>(
    suite: Suite,
    state: &str,
    counter: &E,
    watts: Result<(f64, Duration), String>,
    extra: &[(&str, String)],
) -> Measurement {
    let (watts, took) = match watts {
        Ok(read) => read,
        Err(reason) => return skipped::<E>(suite, Some(state), &reason, extra),
    };
    let mut read = skipped::<E>(suite, Some(state), "", extra);
    read.parameters.insert("zones".into(), counter.describe());
    read.parameters.insert("window_s".into(), format!("{:.3}", took.as_secs_f64()));
    Measurement { status: MeasurementStatus::Ok, reason: None, stats: Some(model::Stats::single(watts)), ..read }
}

/// Power that could not be read (in `state`, where one window failed), and why.
pub fn skipped<E: Energy>(suite: Suite, state: Option<&str>, reason: &str, extra: &[(&str, String)]) -> Measurement {
    Measurement {
        suite,
        case: model::Case::Power.as_str().into(),
        parameters: parameters::<E>(state, extra),
        unit: Unit::Watts,
        status: MeasurementStatus::Skipped,
        reason: Some(reason.to_string()),
        stats: None,
        floor: None,
        histogram: None,
    }
}

/// What each power case of a suite says, for its progress lines: `power idle → 11.5 W
/// (package-0)` or `power busy not measured: …`.
pub fn said(cases: &[Measurement], zones: &str) -> Vec<String> {
    cases
        .iter()
        .map(|m| {
            let state = m.parameters.get("state").map_or("", String::as_str);
            match (&m.stats, &m.reason) {
                (Some(stats), _) => format!("power {state} → {:.1} W ({zones})", stats.mean),
                (None, reason) => format!("power {state} not measured: {}", reason.as_deref().unwrap_or("no reason")),
            }
        })
        .collect()
}

fn parameters<E: Energy>(state: Option<&str>, extra: &[(&str, String)]) -> BTreeMap<String, String> {
    let mut parameters = BTreeMap::from([("source".to_string(), E::SOURCE.to_ascii_lowercase())]);
    if let Some(state) = state {
        parameters.insert("state".into(), state.into());
    }
    parameters.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    parameters
}

/// Where a GPU sits on the PCI bus (domain, bus, device), to find the GPU CUDA uses among
/// those NVML lists: the two number GPUs differently unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
}

impl std::fmt::Display for PciAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04x}:{:02x}:{:02x}", self.domain, self.bus, self.device)
    }
}

pub use nvml::Nvml;

/// One NVIDIA GPU's energy counter through NVML (libnvidia-ml, loaded at run time):
/// millijoules since the driver was loaded, on Volta and later GPUs.
#[cfg(feature = "cuda")]
mod nvml {
    use nvml_wrapper::error::NvmlError;

    use super::{Energy, PciAddress};

    pub struct Nvml {
        nvml: nvml_wrapper::Nvml,
        index: u32,
        name: String,
        /// The NVIDIA GPUs NVML lists on the node.
        pub count: u32,
    }

    impl std::fmt::Debug for Nvml {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Nvml").field("index", &self.index).field("name", &self.name).finish_non_exhaustive()
        }
    }

    /// `nvmlDeviceGetMigMode`'s "enabled" (nvml.h; the wrapper does not export it).
    const NVML_DEVICE_MIG_ENABLE: u32 = 1;

    impl Nvml {
        /// The GPU at `at` (else the only one), or why its energy cannot be read as this
        /// process's: call it holding a CUDA context on that GPU.
        pub fn open(at: Option<PciAddress>) -> Result<Nvml, String> {
            // A missing library is an error, not a panic, but keep the agent alive either way.
            let nvml = std::panic::catch_unwind(nvml_wrapper::Nvml::init)
                .map_err(|_| "no NVML: libnvidia-ml could not be loaded".to_string())?
                .map_err(|e| format!("no NVML: {e}"))?;
            let count = nvml.device_count().map_err(|e| format!("no NVML: cannot count the GPUs: {e}"))?;
            let index = match at {
                None if count == 1 => 0,
                None if count == 0 => return Err("no NVML: it lists no GPU".into()),
                // Which of them CUDA loads is not known: NVML's first may sit idle meanwhile.
                None => return Err(format!("no NVML: CUDA gave no PCI address to find its GPU among {count}")),
                Some(at) => (0..count)
                    .find(|&i| {
                        nvml.device_by_index(i)
                            .and_then(|d| d.pci_info())
                            .is_ok_and(|p| PciAddress { domain: p.domain, bus: p.bus, device: p.device } == at)
                    })
                    .ok_or_else(|| format!("no NVML: none of its {count} GPUs is at PCI {at}, where CUDA's is"))?,
            };
            let device = nvml.device_by_index(index).map_err(|e| format!("no NVML: GPU {index}: {e}"))?;
            let name = device.name().unwrap_or_else(|_| "NVIDIA GPU".into());
            match device.total_energy_consumption() {
                Ok(_) => {}
                Err(NvmlError::NotSupported) => {
                    return Err(format!("no NVML: {name} has no energy counter (Volta and later GPUs have one)"));
                }
                Err(e) => return Err(format!("no NVML: cannot read the energy of {name}: {e}")),
            }
            // Under MIG the counter is the board's, shared by every instance on it.
            if device.mig_mode().is_ok_and(|mode| mode.current == NVML_DEVICE_MIG_ENABLE) {
                return Err(format!("no NVML: {name} is split by MIG, and its energy counter counts every instance"));
            }
            let nvml = Nvml { nvml, index, name, count };
            match nvml.other_work() {
                Some(reason) => Err(reason),
                None => Ok(nvml),
            }
        }

        /// Why the GPU's power would not be this agent's alone, if it would not: another
        /// compute process on it. The caller holds a CUDA context on the GPU, so it is one of
        /// the processes NVML lists (by host PID, whatever the container's PID namespace).
        pub fn other_work(&self) -> Option<String> {
            let processes = self.nvml.device_by_index(self.index).ok()?.running_compute_processes().ok()?;
            (processes.len() > 1).then(|| {
                format!(
                    "no NVML: {} runs {} other compute process(es), whose power would be counted as this suite's",
                    self.name,
                    processes.len() - 1
                )
            })
        }
    }

    impl Energy for Nvml {
        const SOURCE: &'static str = "NVML";
        const MOST_WATTS: f64 = model::wire::measured::MAX_GPU_WATTS;

        fn describe(&self) -> String {
            format!("GPU {} ({})", self.index, self.name)
        }

        /// The counter in mJ.
        fn read(&self) -> Result<Vec<u64>, String> {
            let device = self.nvml.device_by_index(self.index).map_err(|e| format!("no NVML: {e}"))?;
            let mj = device.total_energy_consumption().map_err(|e| format!("no NVML: {e}"))?;
            Ok(vec![mj])
        }

        /// The counter does not wrap (64 bits of mJ); one that went back was reset by a driver
        /// reload.
        fn joules(&self, before: &[u64], after: &[u64]) -> Option<f64> {
            super::counted(before, after).map(|mj| mj as f64 / 1e3)
        }
    }
}

/// In a build without the `cuda` feature there is no NVML to open.
#[cfg(not(feature = "cuda"))]
mod nvml {
    use super::{Energy, PciAddress};

    #[derive(Debug)]
    pub struct Nvml {
        never: std::convert::Infallible,
        pub count: u32,
    }

    impl Nvml {
        pub fn open(_: Option<PciAddress>) -> Result<Nvml, String> {
            Err("no NVML: this agent was built without the cuda feature".into())
        }

        pub fn other_work(&self) -> Option<String> {
            match self.never {}
        }
    }

    impl Energy for Nvml {
        const SOURCE: &'static str = "NVML";
        const MOST_WATTS: f64 = model::wire::measured::MAX_GPU_WATTS;

        fn describe(&self) -> String {
            match self.never {}
        }

        fn read(&self) -> Result<Vec<u64>, String> {
            match self.never {}
        }

        fn joules(&self, _: &[u64], _: &[u64]) -> Option<f64> {
            match self.never {}
        }
    }
}

/// The sum of what each counter that never wraps counted between two reads; `None` where one
/// went back (reset) or the reads differ in length.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn counted(before: &[u64], after: &[u64]) -> Option<u64> {
    if before.len() != after.len() {
        return None;
    }
    before.iter().zip(after).try_fold(0u64, |sum, (b, a)| sum.checked_add(a.checked_sub(*b)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A powercap tree as the kernel lays it out: two packages, one with DRAM counted apart
    /// and a core subzone (inside the package's count), and a psys zone.
    fn tree(dir: &Path, package0: u64, dram0: u64, package1: u64) {
        let zone = |path: &str, name: &str, energy: u64| {
            let d = dir.join(path);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("name"), format!("{name}\n")).unwrap();
            fs::write(d.join("energy_uj"), format!("{energy}\n")).unwrap();
            fs::write(d.join("max_energy_range_uj"), "262143328850\n").unwrap();
        };
        zone("intel-rapl:0", "package-0", package0);
        zone("intel-rapl:0/intel-rapl:0:0", "core", 1);
        zone("intel-rapl:0/intel-rapl:0:2", "dram", dram0);
        zone("intel-rapl:1", "package-1", package1);
        zone("intel-rapl:2", "psys", 999_999_999);
    }

    #[test]
    fn packages_and_their_dram_are_counted_once_and_wraps_unwound() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path(), 1_000_000, 500_000, 262_143_000_000);
        let rapl = Rapl::open(dir.path()).unwrap();
        assert_eq!(rapl.describe(), "package-0, package-0 dram, package-1");
        let before = rapl.read().unwrap();
        assert_eq!(before, vec![1_000_000, 500_000, 262_143_000_000]);
        // 30 J on package 0, 5 J of its DRAM, and package 1 wrapped past its range: 328,850 µJ
        // to the top, then 671,150 more: 1 J.
        tree(dir.path(), 31_000_000, 5_500_000, 671_150);
        let after = rapl.read().unwrap();
        assert!((rapl.joules(&before, &after).unwrap() - 36.0).abs() < 1e-9, "{:?}", rapl.joules(&before, &after));
        // A counter past its own range is not unwound into a huge figure.
        tree(dir.path(), 31_000_000, 5_500_000, 262_143_328_851);
        let past = rapl.read().unwrap();
        tree(dir.path(), 31_000_000, 5_500_000, 10);
        assert_eq!(rapl.joules(&past, &rapl.read().unwrap()), None);
    }

    #[test]
    fn a_frozen_counter_is_no_reading() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path(), 1_000_000, 500_000, 7);
        let rapl = Rapl::open(dir.path()).unwrap();
        let (watts, out) = rapl.during(|| 42);
        assert_eq!(out, 42, "the work runs whatever the reading");
        let reason = watts.unwrap_err();
        assert!(reason.contains("did not advance"), "{reason}");
        // A counter that moves during the window gives its average.
        let (watts, ()) = rapl.during(|| {
            std::thread::sleep(Duration::from_millis(20));
            tree(dir.path(), 2_000_000, 500_000, 7);
        });
        let (watts, took) = watts.unwrap();
        assert!((watts - 1.0 / took.as_secs_f64()).abs() < 1e-6, "{watts} W over {took:?}");
    }

    #[test]
    fn a_node_without_rapl_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Rapl::open(&dir.path().join("absent")).unwrap_err();
        assert!(missing.starts_with("no RAPL: cannot list"), "{missing}");
        let empty = Rapl::open(dir.path()).unwrap_err();
        assert!(empty.contains("no package zone"), "{empty}");
        // A zone that is not a package alone (a psys) does not count.
        let d = dir.path().join("intel-rapl:0");
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("name"), "psys\n").unwrap();
        assert!(Rapl::open(dir.path()).unwrap_err().contains("no package zone"));
        assert!(!is_zone("intel-rapl", 1) && !is_zone("intel-rapl:x", 1) && is_zone("intel-rapl:10", 1));
        assert!(is_zone("intel-rapl:0:2", 2) && !is_zone("intel-rapl:0:", 2));
    }

    #[test]
    fn counters_that_never_wrap_count_forward_only() {
        assert_eq!(counted(&[1_000, 5], &[3_500, 5]), Some(2_500));
        assert_eq!(counted(&[1_000], &[999]), None, "a driver reload resets NVML's counter");
        assert_eq!(counted(&[1], &[2, 3]), None);
        assert_eq!(counted(&[0, 0], &[u64::MAX, 1]), None, "no overflow into a small sum");
    }

    #[test]
    fn nvml_says_why_it_cannot_count_here_or_counts() {
        match Nvml::open(None) {
            // A GPU node: its counter advances under nothing but time (a GPU draws tens of
            // watts idle), and the reading is plausible.
            Ok(gpu) => {
                let (watts, ()) = gpu.during(|| std::thread::sleep(Duration::from_millis(1500)));
                let (watts, _) = watts.unwrap();
                assert!(watts > 1.0 && watts < 2_000.0, "{watts} W idle on {}", gpu.describe());
            }
            Err(reason) => assert!(reason.starts_with("no NVML: "), "{reason}"),
        }
    }
}
