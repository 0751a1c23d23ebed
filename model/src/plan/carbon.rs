//! Carbon: the emissions of serving, from the power the replicas draw and the grid that feeds
//! them (location-based, as the GHG Protocol's scope 2 and Cloud Carbon Footprint count it).
//!
//! R replicas drawing W watts each on average, in a facility of power usage effectiveness E,
//! on a grid emitting I grams of CO2e per kWh, over H hours, draw and emit
//!
//! > energy = R · W ÷ 1000 · E · H   kWh
//! > emissions = energy · I   g CO2e
//!
//! and, serving N requests in those hours, g CO2e per 1,000 requests = emissions ÷ N · 1000.
//! Idle replicas draw power too, so the provisioned replicas count, not the busy fraction.
//! W is the figure the page and exports label: measured on the node (RAPL today; NVML later), the
//! datasheet's rated power (an upper bound) or entered. Embodied emissions (making the servers)
//! are not counted.

use serde::{Deserialize, Serialize};

use crate::FieldError;
use crate::plan::checks::{ModelError, between, non_negative};
use crate::plan::owned::{PUE_RANGE, PowerSource};
use crate::units::HOURS_PER_MONTH;

/// The dirtiest grids measured emit about 1,000 g a kWh (coal); twice that is refused as a typo.
pub const MAX_GRID_G_PER_KWH: f64 = 2_000.0;
/// A replica drawing more than 100 kW (ten 8-GPU servers) is refused as a typo.
pub const MAX_WATTS: f64 = 100_000.0;
/// Most replicas a carbon figure is computed for (the queueing model's bound).
pub const MAX_REPLICAS: f64 = 1e6;

/// Inputs of [`carbon`], for a month of serving.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CarbonInput {
    /// R: replicas running through the month (busy or idle).
    pub replicas: f64,
    /// W: one replica's average draw.
    pub power_watts: f64,
    pub power_source: PowerSource,
    /// E: the facility's power usage effectiveness.
    pub pue: f64,
    /// I: the grid's emissions, g CO2e per kWh.
    pub grid_g_co2e_per_kwh: f64,
    /// N: requests served in the month.
    pub requests_per_month: f64,
}

/// Result of [`carbon`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Carbon {
    /// kWh the facility draws for the replicas in a month: R · W ÷ 1000 · E · 730.
    pub facility_kwh_per_month: f64,
    /// kg CO2e a month.
    pub co2e_kg_per_month: f64,
    /// Wh per request (none when no request is served).
    pub wh_per_request: Option<f64>,
    /// g CO2e per 1,000 requests (none when no request is served).
    pub co2e_g_per_1000_requests: Option<f64>,
    pub power_source: PowerSource,
}

/// The energy and emissions of a month of serving.
pub fn carbon(input: &CarbonInput) -> Result<Carbon, ModelError> {
    between("replicas", input.replicas, 0.0, MAX_REPLICAS)?;
    non_negative("requests_per_month", input.requests_per_month)?;
    let kwh = facility_kwh(input.power_watts, input.pue, input.replicas * HOURS_PER_MONTH)?;
    let grams = co2e_g(kwh, input.grid_g_co2e_per_kwh)?;
    let per = |total: f64| (input.requests_per_month > 0.0).then(|| total / input.requests_per_month);
    Ok(Carbon {
        facility_kwh_per_month: kwh,
        co2e_kg_per_month: grams / 1000.0,
        wh_per_request: per(kwh * 1000.0),
        co2e_g_per_1000_requests: per(grams * 1000.0),
        power_source: input.power_source,
    })
}

/// kWh a facility draws for `replica_hours` of replicas drawing `power_watts` each:
/// W ÷ 1000 · E · hours.
pub fn facility_kwh(power_watts: f64, pue: f64, replica_hours: f64) -> Result<f64, ModelError> {
    between("power_watts", power_watts, 0.0, MAX_WATTS)?;
    between("pue", pue, PUE_RANGE.0, PUE_RANGE.1)?;
    non_negative("replica_hours", replica_hours)?;
    Ok(power_watts / 1000.0 * pue * replica_hours)
}

/// Grams of CO2e of `kwh` drawn from a grid emitting `grid_g_co2e_per_kwh`.
pub fn co2e_g(kwh: f64, grid_g_co2e_per_kwh: f64) -> Result<f64, ModelError> {
    non_negative("kwh", kwh)?;
    grid_intensity("grid_g_co2e_per_kwh", grid_g_co2e_per_kwh)?;
    Ok(kwh * grid_g_co2e_per_kwh)
}

/// Checks a grid's emissions factor, naming `field`.
pub fn grid_intensity(field: &str, g_per_kwh: f64) -> Result<f64, ModelError> {
    if !(0.0..=MAX_GRID_G_PER_KWH).contains(&g_per_kwh) {
        return Err(FieldError::new(field, format!("must be between 0 and {MAX_GRID_G_PER_KWH} g CO2e per kWh")));
    }
    Ok(g_per_kwh)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn fleet() -> CarbonInput {
        CarbonInput {
            replicas: 4.0,
            power_watts: 500.0,
            power_source: PowerSource::Measured,
            pue: 1.2,
            grid_g_co2e_per_kwh: 400.0,
            requests_per_month: 10_512_000.0,
        }
    }

    #[test]
    fn four_replicas_for_a_month() {
        let c = carbon(&fleet()).unwrap();
        // 4 × 0.5 kW × 1.2 × 730 h = 1,752 kWh; × 400 g = 700.8 kg; over 10,512,000 requests
        // that is 0.1667 Wh and 66.67 g per 1,000.
        assert!((c.facility_kwh_per_month - 1752.0).abs() < 1e-9);
        assert!((c.co2e_kg_per_month - 700.8).abs() < 1e-9);
        assert!((c.wh_per_request.unwrap() - 1752.0 * 1000.0 / 10_512_000.0).abs() < 1e-12);
        assert!((c.co2e_g_per_1000_requests.unwrap() - 700_800.0 / 10_512.0).abs() < 1e-9);
        assert_eq!(c.power_source, PowerSource::Measured);
        let none = carbon(&CarbonInput { requests_per_month: 0.0, ..fleet() }).unwrap();
        assert_eq!((none.wh_per_request, none.co2e_g_per_1000_requests), (None, None));
        assert_eq!(none.co2e_kg_per_month, c.co2e_kg_per_month);
    }

    #[test]
    fn every_bad_input_is_named() {
        let field = |f: &dyn Fn(&mut CarbonInput)| {
            let mut i = fleet();
            f(&mut i);
            carbon(&i).unwrap_err().field
        };
        assert_eq!(field(&|i| i.replicas = -1.0), "replicas");
        assert_eq!(field(&|i| i.replicas = f64::NAN), "replicas");
        assert_eq!(field(&|i| i.power_watts = f64::INFINITY), "power_watts");
        assert_eq!(field(&|i| i.power_watts = 200_000.0), "power_watts");
        assert_eq!(field(&|i| i.pue = 0.5), "pue");
        assert_eq!(field(&|i| i.grid_g_co2e_per_kwh = -1.0), "grid_g_co2e_per_kwh");
        assert_eq!(field(&|i| i.grid_g_co2e_per_kwh = f64::NAN), "grid_g_co2e_per_kwh");
        assert_eq!(field(&|i| i.grid_g_co2e_per_kwh = 5000.0), "grid_g_co2e_per_kwh");
        assert_eq!(field(&|i| i.requests_per_month = f64::NAN), "requests_per_month");
    }

    proptest! {
        /// Emissions follow each of replicas, power, PUE and the grid in proportion; the figure
        /// per 1,000 requests times the thousands of requests is the month's; a cleaner grid
        /// never emits more.
        #[test]
        fn emissions_are_proportional_and_add_up(
            replicas in 0.0f64..1000.0, watts in 0.0f64..20_000.0, pue in 1.0f64..2.5,
            grid in 0.0f64..1000.0, requests in 1.0f64..1e12, k in 0.1f64..2.0,
        ) {
            let input = CarbonInput { replicas, power_watts: watts, power_source: PowerSource::Entered, pue,
                grid_g_co2e_per_kwh: grid, requests_per_month: requests };
            let c = carbon(&input).unwrap();
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12);
            prop_assert!(close(c.co2e_g_per_1000_requests.unwrap() * requests / 1000.0, c.co2e_kg_per_month * 1000.0));
            prop_assert!(close(c.co2e_kg_per_month * 1000.0, c.facility_kwh_per_month * grid));
            let more = carbon(&CarbonInput { replicas: replicas * k, ..input }).unwrap();
            prop_assert!(close(more.co2e_kg_per_month, k * c.co2e_kg_per_month));
            let more = carbon(&CarbonInput { power_watts: watts * k, ..input }).unwrap();
            prop_assert!(close(more.co2e_kg_per_month, k * c.co2e_kg_per_month));
            let more = carbon(&CarbonInput { pue: (pue * k).clamp(1.0, 5.0), ..input }).unwrap();
            prop_assert!(close(more.facility_kwh_per_month * pue, c.facility_kwh_per_month * (pue * k).clamp(1.0, 5.0)));
            let cleaner = carbon(&CarbonInput { grid_g_co2e_per_kwh: grid * k.min(1.0), ..input }).unwrap();
            prop_assert!(cleaner.co2e_kg_per_month <= c.co2e_kg_per_month);
            // Energy does not depend on the grid.
            prop_assert_eq!(cleaner.facility_kwh_per_month, c.facility_kwh_per_month);
        }
    }
}
