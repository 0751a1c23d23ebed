//! What node this is: read from the kernel's own files, no external commands.

use std::fs;

use model::NodeInfo;

/// Operator-given facts the machine cannot tell about itself.
#[derive(Debug, Clone, Default)]
pub struct OperatorFacts {
    pub instance_type: Option<String>,
    pub hourly_usd: Option<f64>,
}

/// Describes this machine.
pub fn node(facts: &OperatorFacts) -> NodeInfo {
    let hostname = hostname();
    NodeInfo {
        node_id: ["/etc/machine-id", "/var/lib/dbus/machine-id"]
            .into_iter()
            .find_map(read_trimmed)
            .unwrap_or_else(|| format!("host-{hostname}")),
        cpu_model: cpu_model().unwrap_or_else(|| std::env::consts::ARCH.to_string()),
        cpu_cores: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        memory_bytes: memory_bytes().unwrap_or(0),
        kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| std::env::consts::OS.to_string()),
        hostname,
        instance_type: facts.instance_type.clone(),
        hourly_usd: facts.hourly_usd,
        gpus: gpus(),
    }
}

/// The node's NVIDIA GPUs from NVML (libnvidia-ml, loaded at run time); none where it is
/// absent or in a build without the `cuda` feature.
#[cfg(feature = "cuda")]
pub fn gpus() -> Vec<model::GpuInfo> {
    use nvml_wrapper::{Nvml, cuda_driver_version_major, cuda_driver_version_minor};
    // A missing library is an error, not a panic, but keep the inventory alive either way.
    let Ok(Ok(nvml)) = std::panic::catch_unwind(Nvml::init) else { return Vec::new() };
    let driver = nvml.sys_driver_version().ok();
    let cuda = nvml
        .sys_cuda_driver_version()
        .ok()
        .map(|v| format!("{}.{}", cuda_driver_version_major(v), cuda_driver_version_minor(v)));
    (0..nvml.device_count().unwrap_or(0))
        .filter_map(|i| nvml.device_by_index(i).ok())
        .map(|d| model::GpuInfo {
            name: d.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
            memory_bytes: d.memory_info().map(|m| m.total).unwrap_or(0),
            driver_version: driver.clone(),
            cuda_version: cuda.clone(),
            pcie_generation: d.current_pcie_link_gen().ok(),
            pcie_width: d.current_pcie_link_width().ok(),
        })
        .collect()
}

#[cfg(not(feature = "cuda"))]
pub fn gpus() -> Vec<model::GpuInfo> {
    Vec::new()
}

/// The node's name: `HEADROOM_NODE_NAME` where the kernel's hostname is a container's (a
/// Kubernetes pod sets it from `spec.nodeName`), else the kernel's.
pub fn hostname() -> String {
    std::env::var("HEADROOM_NODE_NAME")
        .ok()
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .or_else(|| read_trimmed("/proc/sys/kernel/hostname"))
        .unwrap_or_else(|| "unknown-host".into())
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn cpu_model() -> Option<String> {
    let info = fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| matches!(key.trim(), "model name" | "Hardware" | "cpu model"))
        .map(|(_, value)| value.trim().to_string())
}

fn memory_bytes() -> Option<u64> {
    let info = fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_describes_itself() {
        let node = node(&OperatorFacts { instance_type: Some("local".into()), hourly_usd: Some(0.5) });
        assert!(!node.hostname.is_empty());
        assert!(node.cpu_cores >= 1);
        assert!(node.memory_bytes > 64 * 1024 * 1024, "memory {}", node.memory_bytes);
        assert_eq!(node.instance_type.as_deref(), Some("local"));
    }
}
