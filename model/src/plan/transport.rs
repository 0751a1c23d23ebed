//! Which transport to call an inference service with: from measured CPU seconds and latency
//! per request for each transport and payload size, the cores each transport needs at the
//! target rate and what they cost.
//!
//! cores = CPU seconds per request (client + server) × requests per second + cores that spin
//! whatever the rate (a busy-polling server); monthly core cost
//! = cores × price per core-hour × hours per month. The recommendation is the cheapest
//! transport whose latency meets the budget; shared memory only where both ends share a node.

use serde::{Deserialize, Serialize};

use crate::FieldError;
use crate::plan::checks::{ModelError, non_negative, positive};
use crate::units::{PerSecond, Seconds, UsdPerHour, UsdPerMonth};

/// Where the two ends run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    SameNode,
    CrossNode,
}

/// One transport as measured at the payload size in question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TransportMeasurement {
    /// e.g. `http_json`, `grpc_protobuf`, `unix_socket`, `shared_memory`.
    pub transport: String,
    /// Client plus server CPU time per request.
    pub cpu_seconds_per_request: Seconds,
    pub latency_p99_s: Seconds,
    /// False for transports that need both ends on one node (shared memory, Unix sockets).
    pub works_across_nodes: bool,
    /// Where the two ends ran when this was measured (`same_core`, `different_cores`,
    /// `cross_node`): a blocking wake-up costs far more across cores than on one.
    #[serde(default)]
    pub measured_placement: Option<String>,
    /// Cores kept busy whatever the rate: a busy-polling server spins a whole core between
    /// requests, which per-request CPU measured in a closed loop does not show.
    #[serde(default)]
    pub spinning_cores: f64,
}

/// Inputs of [`advise_transport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TransportInput {
    pub requests_per_second: PerSecond,
    pub placement: Placement,
    /// Price of one core for an hour.
    pub core_hour_usd: UsdPerHour,
    /// Latency the transport may add at p99.
    pub latency_budget_p99_s: Seconds,
    pub measurements: Vec<TransportMeasurement>,
}

/// One transport's cost at the target rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TransportCost {
    pub transport: String,
    pub cores: f64,
    pub monthly_core_usd: UsdPerMonth,
    pub latency_p99_s: Seconds,
    /// Why it cannot be chosen, if it cannot.
    pub excluded: Option<String>,
}

/// Result of [`advise_transport`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TransportAdvice {
    /// Cheapest first.
    pub options: Vec<TransportCost>,
    pub recommended: Option<String>,
    pub reason: String,
}

pub fn advise_transport(input: &TransportInput) -> Result<TransportAdvice, ModelError> {
    let rate = positive("requests_per_second", input.requests_per_second.0)?;
    non_negative("core_hour_usd", input.core_hour_usd.0)?;
    positive("latency_budget_p99_s", input.latency_budget_p99_s.0)?;
    if input.measurements.is_empty() {
        return Err(FieldError::new("measurements", "must hold at least one transport"));
    }
    let mut options = Vec::with_capacity(input.measurements.len());
    for (i, m) in input.measurements.iter().enumerate() {
        non_negative(&format!("measurements[{i}].cpu_seconds_per_request"), m.cpu_seconds_per_request.0)?;
        positive(&format!("measurements[{i}].latency_p99_s"), m.latency_p99_s.0)?;
        non_negative(&format!("measurements[{i}].spinning_cores"), m.spinning_cores)?;
        let cores = m.cpu_seconds_per_request.0 * rate + m.spinning_cores;
        let excluded = if input.placement == Placement::CrossNode && !m.works_across_nodes {
            Some("needs both ends on one node".to_string())
        } else if m.latency_p99_s.0 > input.latency_budget_p99_s.0 {
            Some(format!(
                "p99 {:.1} µs exceeds the budget of {:.1} µs",
                m.latency_p99_s.0 * 1e6,
                input.latency_budget_p99_s.0 * 1e6
            ))
        } else {
            None
        };
        options.push(TransportCost {
            transport: m.transport.clone(),
            cores,
            monthly_core_usd: (input.core_hour_usd * cores).per_month(),
            latency_p99_s: m.latency_p99_s,
            excluded,
        });
    }
    options.sort_by(|a, b| a.monthly_core_usd.0.total_cmp(&b.monthly_core_usd.0));
    let eligible: Vec<&TransportCost> = options.iter().filter(|o| o.excluded.is_none()).collect();
    let (recommended, reason) = match eligible.as_slice() {
        [] => (None, "No measured transport meets the latency budget for this placement.".to_string()),
        [only] => (
            Some(only.transport.clone()),
            format!("{} is the only transport within the budget.", transport_name(&only.transport)),
        ),
        [best, next, ..] => (
            Some(best.transport.clone()),
            format!(
                "{} needs {:.2} cores ({} a month) at this rate, {} a month less than {}.",
                transport_name(&best.transport),
                best.cores,
                crate::format::usd(best.monthly_core_usd.0),
                crate::format::usd(next.monthly_core_usd.0 - best.monthly_core_usd.0),
                transport_name(&next.transport)
            ),
        ),
    };
    let placements: Vec<&str> = {
        let mut p: Vec<&str> = input.measurements.iter().filter_map(|m| m.measured_placement.as_deref()).collect();
        p.sort_unstable();
        p.dedup();
        p
    };
    let reason = match placements.as_slice() {
        [] => {
            format!("{reason} The figures do not say where the two ends ran; the advice assumes it matches production.")
        }
        [one] => format!("{reason} It assumes the ends run as they were measured: {}.", one.replace('_', " ")),
        many => format!("{reason} The figures mix placements ({}); compare like with like.", many.join(", ")),
    };
    Ok(TransportAdvice { options, recommended, reason })
}

/// A transport as people say it: `shared_memory (futex)` is "shared memory, futex wait".
pub fn transport_name(id: &str) -> String {
    let (base, wait) = match id.split_once(" (") {
        Some((base, rest)) => (base, Some(rest.trim_end_matches(')'))),
        None => (id, None),
    };
    let base = match base {
        "http_json" => "HTTP + JSON",
        "grpc_protobuf" => "gRPC + protobuf",
        "grpc_protobuf_packed" => "gRPC + protobuf (packed floats)",
        "grpc_protobuf_bytes" => "gRPC + protobuf (raw bytes)",
        "unix_socket" => "Unix domain socket",
        "shared_memory" => "shared memory",
        other => return other.replace('_', " "),
    };
    match wait {
        Some("futex") => format!("{base}, futex wait"),
        Some("busy_poll" | "spin") => format!("{base}, busy polling"),
        Some(other) => format!("{base}, {} wait", other.replace('_', " ")),
        None => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The recommendation is eligible and no eligible transport is cheaper; options are
        /// sorted by cost and cost is proportional to CPU time.
        #[test]
        fn the_recommendation_is_the_cheapest_eligible(
            rps in 1.0..1e5f64, cross in any::<bool>(), budget_us in 10.0..1000.0f64,
            specs in proptest::collection::vec((1.0..200.0f64, 5.0..2000.0f64, any::<bool>()), 1..6),
        ) {
            let input = TransportInput {
                requests_per_second: PerSecond(rps),
                placement: if cross { Placement::CrossNode } else { Placement::SameNode },
                core_hour_usd: UsdPerHour(0.05),
                latency_budget_p99_s: Seconds(budget_us * 1e-6),
                measurements: specs.iter().enumerate().map(|(i, (cpu, p99, across))| measured(&format!("t{i}"), *cpu, *p99, *across)).collect(),
            };
            let advice = advise_transport(&input).unwrap();
            prop_assert!(advice.options.windows(2).all(|w| w[0].monthly_core_usd.0 <= w[1].monthly_core_usd.0));
            match &advice.recommended {
                Some(name) => {
                    let chosen = advice.options.iter().find(|o| &o.transport == name).unwrap();
                    prop_assert!(chosen.excluded.is_none());
                    prop_assert!(advice.options.iter().filter(|o| o.excluded.is_none()).all(|o| o.monthly_core_usd.0 >= chosen.monthly_core_usd.0));
                }
                None => prop_assert!(advice.options.iter().all(|o| o.excluded.is_some())),
            }
        }
    }

    fn measured(name: &str, cpu_us: f64, p99_us: f64, cross: bool) -> TransportMeasurement {
        TransportMeasurement {
            transport: name.into(),
            cpu_seconds_per_request: Seconds(cpu_us * 1e-6),
            latency_p99_s: Seconds(p99_us * 1e-6),
            works_across_nodes: cross,
            measured_placement: Some("different_cores".into()),
            spinning_cores: 0.0,
        }
    }

    #[test]
    fn a_busy_polling_server_costs_a_core_at_any_rate() {
        let busy = TransportMeasurement { spinning_cores: 1.0, ..measured("shm_busy_poll", 0.1, 1.0, false) };
        let input = |rate: f64| TransportInput {
            requests_per_second: PerSecond(rate),
            placement: Placement::SameNode,
            core_hour_usd: UsdPerHour(0.04),
            latency_budget_p99_s: Seconds(500e-6),
            measurements: vec![busy.clone(), measured("shm_futex", 10.0, 30.0, false)],
        };
        // At 1,000 requests/s the futex costs 0.01 cores, the spinning server a whole one.
        let low = advise_transport(&input(1_000.0)).unwrap();
        assert_eq!(low.recommended.as_deref(), Some("shm_futex"));
        let spinning = low.options.iter().find(|o| o.transport == "shm_busy_poll").unwrap();
        assert!((spinning.cores - 1.0001).abs() < 1e-9, "{}", spinning.cores);
        // At 200,000 requests/s the futex needs 2 cores and the spinning one is cheaper.
        assert_eq!(advise_transport(&input(200_000.0)).unwrap().recommended.as_deref(), Some("shm_busy_poll"));
    }

    #[test]
    fn shared_memory_wins_on_one_node_and_is_excluded_across_nodes() {
        let mut input = TransportInput {
            requests_per_second: PerSecond(20_000.0),
            placement: Placement::SameNode,
            core_hour_usd: UsdPerHour(0.04),
            latency_budget_p99_s: Seconds(500e-6),
            measurements: vec![
                measured("http_json", 95.0, 400.0, true),
                measured("grpc_protobuf", 40.0, 250.0, true),
                measured("shared_memory", 4.0, 30.0, false),
            ],
        };
        let advice = advise_transport(&input).unwrap();
        assert_eq!(advice.recommended.as_deref(), Some("shared_memory"));
        assert!(advice.reason.contains("as they were measured: different cores"), "{}", advice.reason);
        // 95 µs × 20 000/s = 1.9 cores; × 0.04 USD × 730 h = 55.48 USD a month.
        let http = advice.options.iter().find(|o| o.transport == "http_json").unwrap();
        assert!((http.cores - 1.9).abs() < 1e-9);
        assert!((http.monthly_core_usd.0 - 55.48).abs() < 1e-6);
        input.placement = Placement::CrossNode;
        let advice = advise_transport(&input).unwrap();
        assert_eq!(advice.recommended.as_deref(), Some("grpc_protobuf"));
        assert!(advice.options.iter().any(|o| o.transport == "shared_memory" && o.excluded.is_some()));
    }

    #[test]
    fn transports_are_named_in_words() {
        assert_eq!(transport_name("http_json"), "HTTP + JSON");
        assert_eq!(transport_name("shared_memory (futex)"), "shared memory, futex wait");
        assert_eq!(transport_name("shared_memory (busy_poll)"), "shared memory, busy polling");
        assert_eq!(transport_name("unix_socket"), "Unix domain socket");
        assert_eq!(transport_name("new_thing"), "new thing");
    }
}
