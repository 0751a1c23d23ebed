//! Power the node draws, read where its hardware counts energy: RAPL through the kernel's
//! powercap interface for CPU packages and their DRAM (`/sys/class/powercap/intel-rapl:N`, AMD
//! processors too since Linux 5.8). Energy counters, not instantaneous readings: the average
//! over a window is the energy between two reads over the time between them, whatever the
//! sampling.
//!
//! Where there is nothing to read (a VM, a container without `/sys/class/powercap`, or a
//! kernel since 5.10 that lets only root read `energy_uj`), [`Rapl::open`] says why, and the
//! cases that need it are skipped with that reason.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the kernel publishes powercap zones.
pub const POWERCAP: &str = "/sys/class/powercap";

/// A reading above this is refused as not plausible (the store's bound on a replica's power).
pub const MAX_WATTS: f64 = model::plan::carbon::MAX_WATTS;

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

    /// What is counted, e.g. `package-0, package-0 dram`.
    pub fn describe(&self) -> String {
        self.zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Every zone's counter, in µJ.
    pub fn read(&self) -> Result<Vec<u64>, String> {
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
    pub fn joules(&self, before: &[u64], after: &[u64]) -> Option<f64> {
        let mut micro: u64 = 0;
        for (z, (b, a)) in self.zones.iter().zip(before.iter().zip(after)) {
            let counted = if a >= b { a - b } else { z.range_uj.checked_sub(*b)?.checked_add(*a)? };
            micro = micro.checked_add(counted)?;
        }
        Some(micro as f64 / 1e6)
    }

    /// The average watts while `work` runs, and for how long it ran (with what `work` gave).
    /// A window over which no counter moved is refused rather than read as 0 W (some virtual
    /// machines publish counters that never advance), as is one of more than [`MAX_WATTS`].
    pub fn during<T>(&self, work: impl FnOnce() -> T) -> (Result<(f64, Duration), String>, T) {
        let before = self.read();
        let start = Instant::now();
        let out = work();
        let elapsed = start.elapsed();
        let watts = (|| {
            let (before, after) = (before?, self.read()?);
            let joules = self.joules(&before, &after).ok_or_else(|| {
                format!("no RAPL: a counter of {} read beyond its max_energy_range_uj", self.describe())
            })?;
            if joules <= 0.0 {
                return Err(format!(
                    "no RAPL: the energy counters of {} did not advance in {:.1} s",
                    self.describe(),
                    elapsed.as_secs_f64()
                ));
            }
            let watts = joules / elapsed.as_secs_f64().max(1e-9);
            if watts > MAX_WATTS {
                return Err(format!(
                    "no RAPL: {watts:.0} W over {:.3} s is not a plausible reading",
                    elapsed.as_secs_f64()
                ));
            }
            Ok((watts, elapsed))
        })();
        (watts, out)
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
}
