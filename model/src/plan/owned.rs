//! Hardware you own, priced by the hour so it compares with the cloud's.
//!
//! A server bought for P and used for a life of L months (its amortisation, the same idea as a
//! training spread over the requests it serves), drawing W watts on average from a facility
//! whose power usage effectiveness is E (the facility's energy over the IT load's: cooling,
//! conversion) at e dollars a kWh, and costing h a month to host and support (rack space,
//! network, support contract, staff time), costs an hour
//!
//! > P ÷ (L·H) + W ÷ 1000 · E · e + h ÷ H  (H = 730 hours a month)
//!
//! each part shown. Nothing is assumed about resale value or financing: enter the price net of
//! what you expect to sell it for, or with the interest paid.

use serde::{Deserialize, Serialize};

use crate::FieldError;
use crate::plan::checks::{ModelError, non_negative, positive};
use crate::units::{HOURS_PER_MONTH, UsdPerHour};

/// A facility's power usage effectiveness is at least 1 (all of it reaches the IT load); the
/// worst data rooms measured are near 3.
pub const PUE_RANGE: (f64, f64) = (1.0, 5.0);
/// The longest life accepted: 20 years.
pub const MAX_LIFE_MONTHS: f64 = 240.0;

/// Where the power figure came from: the page and exports say which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PowerSource {
    /// The datasheet's rated (maximum) power: an upper bound.
    Rated,
    /// Measured on the node (RAPL for CPU packages and DRAM; NVML for GPUs is not read yet).
    Measured,
    /// Entered without saying.
    Entered,
}

impl PowerSource {
    /// How pages and exports say where a power figure came from.
    pub fn describe(self) -> &'static str {
        match self {
            PowerSource::Rated => "rated, an upper bound",
            PowerSource::Measured => "measured",
            PowerSource::Entered => "entered",
        }
    }
}

/// Inputs of [`owned_cost`], for one server (one replica).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OwnedInput {
    /// P: what the server cost, net of resale.
    pub purchase_usd: f64,
    /// L: the months it serves.
    pub life_months: f64,
    /// W: its average draw.
    pub power_watts: f64,
    pub power_source: PowerSource,
    /// e: dollars per kWh.
    pub electricity_usd_per_kwh: f64,
    /// E: the facility's power usage effectiveness (1 or more).
    pub pue: f64,
    /// h: hosting and support a month.
    pub hosting_usd_per_month: f64,
}

/// Result of [`owned_cost`]: the hourly cost and its parts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OwnedCost {
    /// P ÷ (L·H).
    pub amortization_hourly_usd: UsdPerHour,
    /// W ÷ 1000 · E · e.
    pub energy_hourly_usd: UsdPerHour,
    /// h ÷ H.
    pub hosting_hourly_usd: UsdPerHour,
    /// Their sum: comparable with an instance's hourly price.
    pub hourly_usd: UsdPerHour,
    /// kWh a month the facility draws for it: W ÷ 1000 · E · H.
    pub facility_kwh_per_month: f64,
    pub power_source: PowerSource,
}

/// What one owned server costs an hour, in parts.
pub fn owned_cost(input: &OwnedInput) -> Result<OwnedCost, ModelError> {
    non_negative("purchase_usd", input.purchase_usd)?;
    if positive("life_months", input.life_months)? > MAX_LIFE_MONTHS {
        return Err(FieldError::new("life_months", format!("must be at most {MAX_LIFE_MONTHS} months")));
    }
    // The facility's kWh in an hour: W ÷ 1000 · E (the same energy the emissions count).
    let facility_kwh = crate::plan::carbon::facility_kwh(input.power_watts, input.pue, 1.0)?;
    non_negative("electricity_usd_per_kwh", input.electricity_usd_per_kwh)?;
    non_negative("hosting_usd_per_month", input.hosting_usd_per_month)?;
    let amortization = input.purchase_usd / (input.life_months * HOURS_PER_MONTH);
    let energy = facility_kwh * input.electricity_usd_per_kwh;
    let hosting = input.hosting_usd_per_month / HOURS_PER_MONTH;
    Ok(OwnedCost {
        amortization_hourly_usd: UsdPerHour(amortization),
        energy_hourly_usd: UsdPerHour(energy),
        hosting_hourly_usd: UsdPerHour(hosting),
        hourly_usd: UsdPerHour(amortization + energy + hosting),
        facility_kwh_per_month: facility_kwh * HOURS_PER_MONTH,
        power_source: input.power_source,
    })
}

/// The servers a fleet buys and what they cost over their life ([`fleet_over`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OwnedFleet {
    pub servers: u32,
    pub months: u32,
    pub total_usd: f64,
}

/// Owning enough servers for the most replicas needed over `months` (the list's last figure
/// past its end, [`crate::plan::purchase::needed`]), as bought servers run busy or not: how
/// many, and what they cost over those months at `cost`.
pub fn fleet_over(replicas_by_month: &[u32], months: u32, cost: &OwnedCost) -> OwnedFleet {
    let needed = |m| crate::plan::purchase::needed(replicas_by_month, m);
    let servers = (0..months as usize).map(needed).max().unwrap_or(0);
    let total_usd = f64::from(servers) * cost.hourly_usd.0 * HOURS_PER_MONTH * f64::from(months);
    OwnedFleet { servers, months, total_usd }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn server() -> OwnedInput {
        OwnedInput {
            purchase_usd: 26_280.0,
            life_months: 36.0,
            power_watts: 500.0,
            power_source: PowerSource::Rated,
            electricity_usd_per_kwh: 0.10,
            pue: 1.5,
            hosting_usd_per_month: 73.0,
        }
    }

    #[test]
    fn a_server_bought_for_three_years_by_the_hour() {
        let c = owned_cost(&server()).unwrap();
        // $26,280 over 36 × 730 = 26,280 hours is $1 an hour; 0.5 kW × 1.5 × $0.10 = $0.075;
        // $73 a month over 730 hours is $0.10.
        assert!((c.amortization_hourly_usd.0 - 1.0).abs() < 1e-12);
        assert!((c.energy_hourly_usd.0 - 0.075).abs() < 1e-12);
        assert!((c.hosting_hourly_usd.0 - 0.10).abs() < 1e-12);
        assert!((c.hourly_usd.0 - 1.175).abs() < 1e-12);
        assert!((c.facility_kwh_per_month - 547.5).abs() < 1e-9);
        assert_eq!(c.power_source, PowerSource::Rated);
    }

    #[test]
    fn a_fleet_is_bought_for_its_peak() {
        let c = owned_cost(&server()).unwrap();
        // 2 replicas, then 3, then 5 past the list: 36 months need 5 servers.
        let fleet = fleet_over(&[2, 3, 5], 36, &c);
        assert_eq!(fleet.servers, 5);
        assert!((fleet.total_usd - 5.0 * 1.175 * 730.0 * 36.0).abs() < 1e-6);
        assert_eq!(fleet_over(&[2, 3, 5], 2, &c).servers, 3);
        let empty = fleet_over(&[], 12, &c);
        assert_eq!((empty.servers, empty.total_usd), (0, 0.0));
    }

    #[test]
    fn every_bad_input_is_named() {
        let field = |f: &dyn Fn(&mut OwnedInput)| {
            let mut i = server();
            f(&mut i);
            owned_cost(&i).unwrap_err().field
        };
        assert_eq!(field(&|i| i.purchase_usd = -1.0), "purchase_usd");
        assert_eq!(field(&|i| i.life_months = 0.0), "life_months");
        assert_eq!(field(&|i| i.life_months = 241.0), "life_months");
        assert_eq!(field(&|i| i.power_watts = f64::NAN), "power_watts");
        assert_eq!(field(&|i| i.electricity_usd_per_kwh = -0.1), "electricity_usd_per_kwh");
        assert_eq!(field(&|i| i.pue = 0.9), "pue");
        assert_eq!(field(&|i| i.hosting_usd_per_month = f64::INFINITY), "hosting_usd_per_month");
    }

    proptest! {
        /// The parts add up to the hourly cost, and each input moves only its own part, in
        /// proportion.
        #[test]
        fn the_parts_add_up_and_each_follows_its_input(
            price in 0.0f64..1e6, life in 1.0f64..240.0, watts in 0.0f64..10_000.0,
            kwh in 0.0f64..1.0, pue in 1.0f64..5.0, hosting in 0.0f64..10_000.0, k in 0.1f64..10.0,
        ) {
            let input = OwnedInput { purchase_usd: price, life_months: life, power_watts: watts,
                power_source: PowerSource::Entered, electricity_usd_per_kwh: kwh, pue, hosting_usd_per_month: hosting };
            let c = owned_cost(&input).unwrap();
            let sum = c.amortization_hourly_usd.0 + c.energy_hourly_usd.0 + c.hosting_hourly_usd.0;
            prop_assert!((c.hourly_usd.0 - sum).abs() <= 1e-12 * sum.max(1.0));
            let more = owned_cost(&OwnedInput { power_watts: watts * k, ..input }).unwrap();
            prop_assert!((more.energy_hourly_usd.0 - k * c.energy_hourly_usd.0).abs() <= 1e-9 * more.energy_hourly_usd.0.max(1e-9));
            prop_assert_eq!(more.amortization_hourly_usd, c.amortization_hourly_usd);
            prop_assert_eq!(more.hosting_hourly_usd, c.hosting_hourly_usd);
            // A longer life spreads the price thinner.
            let longer = owned_cost(&OwnedInput { life_months: (life * 1.5).min(240.0), ..input }).unwrap();
            prop_assert!(longer.amortization_hourly_usd.0 <= c.amortization_hourly_usd.0);
        }
    }
}
