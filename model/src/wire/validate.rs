//! Rules every uploaded run must meet, whichever door it came through. The error names the
//! offending field by its path, e.g. `measurements[2].stats.p99`.

use std::fmt;

use crate::wire::run::{Measurement, MeasurementStatus, NodeInfo, RunUpload, Stats};

/// At most this many measurements in one run.
pub const MAX_MEASUREMENTS: usize = 10_000;
/// The earliest start a run may have, 2000-01-01 (UTC): no agent measured before it, and each
/// month of runs is a partition of the Postgres store, so a run dated 1970 would make one.
pub const EARLIEST_RUN_MS: i64 = 946_684_800_000;
/// At most this many parameters on one measurement.
pub const MAX_PARAMETERS: usize = 64;
/// At most this many GPUs on one node.
pub const MAX_GPUS: usize = 64;
/// Longest accepted free-text field, in bytes.
pub const MAX_TEXT: usize = 256;
/// Longest accepted histogram encoding, in base64 characters (a latency histogram over 1 ns to
/// 100 s at 3 significant digits compresses to a few KiB).
pub const MAX_HISTOGRAM: usize = 64 * 1024;
/// At most this many histograms in one run (an endpoint sweep stores a few dozen). The server
/// decodes each to check it, about 250 KiB of counts at the widest accepted range.
pub const MAX_HISTOGRAMS: usize = 256;

/// A rejected field and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { field: field.into(), reason: reason.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

impl std::error::Error for FieldError {}

type Check = Result<(), FieldError>;

/// Checks text a person reads in pages and files: at most [`MAX_TEXT`] bytes, no control
/// characters but tab and line breaks, nothing invisible or direction-changing; not blank when
/// `required`.
pub fn text(field: &str, value: &str, required: bool) -> Check {
    if required && value.trim().is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    if value.len() > MAX_TEXT {
        return Err(FieldError::new(field, format!("longer than {MAX_TEXT} bytes")));
    }
    // Postgres text cannot hold NUL; other control characters (but tab and line breaks) only
    // serve to disguise a value in a page or a spreadsheet.
    if let Some(c) = value.chars().find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')) {
        return Err(FieldError::new(field, format!("must not contain control characters (found U+{:04X})", c as u32)));
    }
    // Nor characters that print nothing or turn the text's direction: a model named
    // "mock\u{202E}lmm-4tpg" reads as another in every page that lists it.
    if let Some(c) = value.chars().find(|&c| invisible(c)) {
        return Err(FieldError::new(
            field,
            format!("must not contain invisible or direction-changing characters (found U+{:04X})", c as u32),
        ));
    }
    Ok(())
}

/// Unicode's format characters (category Cf) that hide text or reorder it: zero-width ones,
/// direction marks, embeddings, overrides and isolates, the byte-order mark, tags.
pub(crate) fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

fn finite(field: &str, value: f64) -> Check {
    if value.is_finite() { Ok(()) } else { Err(FieldError::new(field, "must be a finite number")) }
}

impl RunUpload {
    /// Checks every field; the first violation is returned.
    pub fn validate(&self) -> Check {
        if self.run_id.is_nil() {
            return Err(FieldError::new("run_id", "must not be the nil UUID"));
        }
        text("agent_version", &self.agent_version, true)?;
        if self.started_at_ms < EARLIEST_RUN_MS {
            return Err(FieldError::new("started_at_ms", "must be a Unix time in milliseconds, from 2000-01-01 on"));
        }
        if self.finished_at_ms < self.started_at_ms {
            return Err(FieldError::new("finished_at_ms", "must not be before started_at_ms"));
        }
        self.node.validate("node")?;
        if self.measurements.is_empty() {
            return Err(FieldError::new("measurements", "must hold at least one measurement"));
        }
        if self.measurements.len() > MAX_MEASUREMENTS {
            return Err(FieldError::new("measurements", format!("more than {MAX_MEASUREMENTS} entries")));
        }
        if self.measurements.iter().filter(|m| m.histogram.is_some()).count() > MAX_HISTOGRAMS {
            return Err(FieldError::new("measurements", format!("more than {MAX_HISTOGRAMS} histograms")));
        }
        for (i, m) in self.measurements.iter().enumerate() {
            m.validate(&format!("measurements[{i}]"))?;
        }
        Ok(())
    }
}

impl NodeInfo {
    fn validate(&self, at: &str) -> Check {
        text(&format!("{at}.node_id"), &self.node_id, true)?;
        text(&format!("{at}.hostname"), &self.hostname, true)?;
        text(&format!("{at}.cpu_model"), &self.cpu_model, false)?;
        text(&format!("{at}.kernel"), &self.kernel, false)?;
        if self.cpu_cores == 0 {
            return Err(FieldError::new(format!("{at}.cpu_cores"), "must be at least 1"));
        }
        if self.memory_bytes == 0 || self.memory_bytes > i64::MAX as u64 {
            return Err(FieldError::new(format!("{at}.memory_bytes"), "must be positive and at most 2^63 - 1"));
        }
        if let Some(kind) = &self.instance_type {
            text(&format!("{at}.instance_type"), kind, true)?;
        }
        if let Some(price) = self.hourly_usd {
            let field = format!("{at}.hourly_usd");
            finite(&field, price)?;
            if price < 0.0 {
                return Err(FieldError::new(field, "must not be negative"));
            }
        }
        if self.gpus.len() > MAX_GPUS {
            return Err(FieldError::new(format!("{at}.gpus"), format!("more than {MAX_GPUS} entries")));
        }
        for (i, gpu) in self.gpus.iter().enumerate() {
            text(&format!("{at}.gpus[{i}].name"), &gpu.name, true)?;
            if let Some(version) = &gpu.driver_version {
                text(&format!("{at}.gpus[{i}].driver_version"), version, false)?;
            }
            if let Some(version) = &gpu.cuda_version {
                text(&format!("{at}.gpus[{i}].cuda_version"), version, false)?;
            }
        }
        Ok(())
    }
}

impl Measurement {
    fn validate(&self, at: &str) -> Check {
        text(&format!("{at}.case"), &self.case, true)?;
        if self.parameters.len() > MAX_PARAMETERS {
            return Err(FieldError::new(format!("{at}.parameters"), format!("more than {MAX_PARAMETERS} entries")));
        }
        for (key, value) in &self.parameters {
            text(&format!("{at}.parameters.{key}"), key, true)?;
            text(&format!("{at}.parameters.{key}"), value, false)?;
        }
        if let Some(reason) = &self.reason {
            text(&format!("{at}.reason"), reason, false)?;
        }
        match (self.status, &self.stats) {
            (MeasurementStatus::Ok, None) => {
                return Err(FieldError::new(format!("{at}.stats"), "required when status is ok"));
            }
            (MeasurementStatus::Ok, Some(stats)) => stats.validate(&format!("{at}.stats"))?,
            (_, Some(_)) => {
                return Err(FieldError::new(format!("{at}.stats"), "must be absent unless status is ok"));
            }
            (_, None) if self.reason.as_deref().is_none_or(|r| r.trim().is_empty()) => {
                return Err(FieldError::new(format!("{at}.reason"), "required when a case is skipped or failed"));
            }
            (_, None) => {}
        }
        if let Some(floor) = &self.floor {
            text(&format!("{at}.floor.name"), &floor.name, true)?;
            finite(&format!("{at}.floor.value"), floor.value)?;
        }
        if let Some(histogram) = &self.histogram {
            let field = format!("{at}.histogram");
            if self.status != MeasurementStatus::Ok {
                return Err(FieldError::new(field, "must be absent unless status is ok"));
            }
            if histogram.is_empty() || histogram.len() > MAX_HISTOGRAM {
                return Err(FieldError::new(field, format!("must be 1 to {MAX_HISTOGRAM} characters")));
            }
            if !histogram.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')) {
                return Err(FieldError::new(field, "must be base64 text"));
            }
        }
        Ok(())
    }
}

impl Stats {
    fn validate(&self, at: &str) -> Check {
        if self.samples == 0 {
            return Err(FieldError::new(format!("{at}.samples"), "must be at least 1"));
        }
        // Stored as a signed 64-bit integer on both backends.
        if self.samples > i64::MAX as u64 {
            return Err(FieldError::new(format!("{at}.samples"), "must be at most 9223372036854775807"));
        }
        let fields = [
            ("mean", self.mean),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p999", self.p999),
            ("ci95_low", self.ci95_low),
            ("ci95_high", self.ci95_high),
        ];
        for (name, value) in fields {
            finite(&format!("{at}.{name}"), value)?;
        }
        let ordered = [("p90", self.p50, self.p90), ("p99", self.p90, self.p99), ("p999", self.p99, self.p999)];
        for (name, below, value) in ordered {
            if value < below {
                return Err(FieldError::new(format!("{at}.{name}"), "quantiles must not decrease"));
            }
        }
        if self.ci95_low > self.ci95_high {
            return Err(FieldError::new(format!("{at}.ci95_low"), "must not exceed ci95_high"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::run::{Suite, Unit};
    use std::collections::BTreeMap;

    fn stats() -> Stats {
        Stats { samples: 10, mean: 2.0, p50: 2.0, p90: 3.0, p99: 4.0, p999: 5.0, ci95_low: 1.5, ci95_high: 2.5 }
    }

    fn upload() -> RunUpload {
        RunUpload {
            run_id: uuid::Uuid::from_u128(7),
            agent_version: "0.1.0".into(),
            started_at_ms: 1_700_000_000_000,
            finished_at_ms: 1_700_000_001_000,
            node: NodeInfo {
                node_id: "abc".into(),
                hostname: "node-1".into(),
                cpu_model: "cpu".into(),
                cpu_cores: 2,
                memory_bytes: 1 << 30,
                kernel: "6.1".into(),
                instance_type: None,
                hourly_usd: Some(1.5),
                gpus: vec![],
            },
            measurements: vec![Measurement {
                suite: Suite::System,
                case: "memcpy".into(),
                parameters: BTreeMap::new(),
                unit: Unit::BytesPerSecond,
                status: MeasurementStatus::Ok,
                reason: None,
                stats: Some(stats()),
                floor: None,
                histogram: None,
            }],
        }
    }

    fn gpu(driver: Option<&str>, cuda: Option<&str>) -> crate::GpuInfo {
        crate::GpuInfo {
            name: "NVIDIA H200".into(),
            memory_bytes: 141 << 30,
            driver_version: driver.map(Into::into),
            cuda_version: cuda.map(Into::into),
            pcie_generation: None,
            pcie_width: None,
        }
    }

    #[test]
    fn a_well_formed_run_passes() {
        assert_eq!(upload().validate(), Ok(()));
    }

    #[test]
    fn each_violation_names_its_field() {
        type Mutation = Box<dyn Fn(&mut RunUpload)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("run_id", Box::new(|u| u.run_id = uuid::Uuid::nil())),
            ("agent_version", Box::new(|u| u.agent_version = " ".into())),
            ("finished_at_ms", Box::new(|u| u.finished_at_ms = 1)),
            ("node.hostname", Box::new(|u| u.node.hostname.clear())),
            ("node.cpu_cores", Box::new(|u| u.node.cpu_cores = 0)),
            ("node.hourly_usd", Box::new(|u| u.node.hourly_usd = Some(f64::NAN))),
            ("node.gpus[0].driver_version", Box::new(|u| u.node.gpus = vec![gpu(Some("550\u{1b}[2J"), None)])),
            (
                "node.gpus[0].name",
                Box::new(|u| u.node.gpus = vec![crate::GpuInfo { name: "H100\u{202E}001A".into(), ..gpu(None, None) }]),
            ),
            ("node.cpu_model", Box::new(|u| u.node.cpu_model = "EPYC\u{200B}".into())),
            ("node.gpus[0].cuda_version", Box::new(|u| u.node.gpus = vec![gpu(None, Some(&"9".repeat(MAX_TEXT + 1)))])),
            ("measurements", Box::new(|u| u.measurements.clear())),
            ("measurements[0].stats.p99", Box::new(|u| u.measurements[0].stats.as_mut().unwrap().p99 = f64::INFINITY)),
            ("measurements[0].stats.p90", Box::new(|u| u.measurements[0].stats.as_mut().unwrap().p90 = 1.0)),
            ("measurements[0].stats.samples", Box::new(|u| u.measurements[0].stats.as_mut().unwrap().samples = 0)),
            ("measurements[0].stats", Box::new(|u| u.measurements[0].stats = None)),
            ("measurements[0].histogram", Box::new(|u| u.measurements[0].histogram = Some("<svg>".into()))),
            (
                "measurements[0].histogram",
                Box::new(|u| u.measurements[0].histogram = Some("A".repeat(MAX_HISTOGRAM + 1))),
            ),
            (
                "measurements",
                Box::new(|u| {
                    let m = Measurement { histogram: Some("SElTVA==".into()), ..u.measurements[0].clone() };
                    u.measurements = vec![m; MAX_HISTOGRAMS + 1];
                }),
            ),
            (
                "measurements[0].reason",
                Box::new(|u| {
                    u.measurements[0].status = MeasurementStatus::Skipped;
                    u.measurements[0].stats = None;
                }),
            ),
        ];
        for (field, mutate) in cases {
            let mut run = upload();
            mutate(&mut run);
            let err = run.validate().expect_err(field);
            assert_eq!(err.field, field, "{err}");
        }
    }

    #[test]
    fn enum_names_round_trip_and_unknown_names_list_the_choices() {
        for suite in Suite::ALL {
            assert_eq!(Suite::parse(suite.as_str()), Ok(*suite));
            assert_eq!(serde_json::to_string(suite).unwrap(), format!("\"{suite}\""));
        }
        let err = Unit::parse("furlongs").unwrap_err();
        assert!(err.contains("furlongs") && err.contains("bytes_per_second"), "{err}");
    }
}
