//! Spend over the next twelve months at each deployment's growth, and when it crosses a budget.
//!
//! A deployment serving r requests a month now, growing by g a month (the Planner's growth
//! input), serves in month m after the report's
//!
//! > rₘ = r · (1 + g)ᵐ
//!
//! Serving priced per request costs its price × rₘ. A fleet priced by the replica keeps pace
//! with its volume: where the n replicas the volume needs are known (sized from the service and
//! SLO, or entered), month m runs ⌈n · (1 + g)ᵐ⌉ plus today's idle ones (the spare capacity
//! kept as it is); where they are not, today's replicas scaled with the volume, ⌈R · (1 + g)ᵐ⌉.
//! Scaling the need with the volume errs high: a larger fleet holds the same SLO at a higher
//! utilisation (M/G/c's economy of scale), which re-sizing each month would count, at twelve
//! sizings a deployment. Each month is a billing month of 730 hours at the price of the catalog
//! version the report was built with, and training adds its monthly cost unchanged.

use crate::FieldError;

/// Months forecast.
pub const MONTHS: u32 = 12;

/// Growth a month accepted: from −99 % (a volume nearly gone) to +100 % (×4,096 in a year).
pub const GROWTH_RANGE: (f64, f64) = (-0.99, 1.0);

/// Checks a monthly growth rate (a fraction: 0.05 is 5 % a month).
pub fn growth(field: &str, g: f64) -> Result<f64, FieldError> {
    if g.is_finite() && (GROWTH_RANGE.0..=GROWTH_RANGE.1).contains(&g) {
        Ok(g)
    } else {
        Err(FieldError::new(field, "must be a fraction a month between -0.99 and 1 (0.05 is 5 % a month)"))
    }
}

/// rₘ = r · (1 + g)ᵐ.
pub fn volume(requests_per_month: f64, g: f64, month: u32) -> f64 {
    requests_per_month * (1.0 + g).powi(month as i32)
}

/// ⌈n · (1 + g)ᵐ⌉: `n` replicas kept in step with the volume (the product's last bits of
/// rounding are not a replica more); at least one while `n` is. `None` past `u32::MAX`.
pub fn scaled(n: u32, g: f64, month: u32) -> Option<u32> {
    if n == 0 {
        return Some(0);
    }
    let x = (f64::from(n) * (1.0 + g).powi(month as i32) * (1.0 - 1e-12)).ceil().max(1.0);
    (x <= f64::from(u32::MAX)).then_some(x as u32)
}

/// The first month (1-based) whose spend is over `budget`, if any.
pub fn first_over(spend: &[i64], budget: i64) -> Option<u32> {
    spend.iter().position(|s| *s > budget).map(|i| i as u32 + 1)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn five_percent_a_month_is_about_eighty_percent_in_a_year() {
        assert!((volume(1_000_000.0, 0.05, 12) / 1_000_000.0 - 1.795_856).abs() < 1e-6);
        assert_eq!(scaled(4, 0.0, 12), Some(4), "no growth, no new replica");
        assert_eq!(scaled(4, 0.05, 1), Some(5), "4.2 replicas are 5");
        assert_eq!(scaled(10, 0.1, 1), Some(11), "11.000000000000002 is 11");
        assert_eq!(scaled(4, -0.99, 12), Some(1), "a shrinking fleet keeps one");
        assert_eq!(scaled(0, 0.5, 3), Some(0));
        assert_eq!(scaled(u32::MAX / 2, 1.0, 2), None, "past what a count holds");
        assert_eq!(first_over(&[90, 100, 101, 99], 100), Some(3));
        assert_eq!(first_over(&[90, 100], 100), None, "at the budget is within it");
        assert!(growth("g", 1.5).is_err() && growth("g", f64::NAN).is_err() && growth("g", -1.0).is_err());
    }

    proptest! {
        #[test]
        fn a_growing_fleet_never_shrinks_and_always_covers_its_volume(
            n in 1u32..10_000,
            g in 0.0f64..1.0,
            month in 0u32..13,
        ) {
            let now = scaled(n, g, month).unwrap();
            let next = scaled(n, g, month + 1).unwrap();
            prop_assert!(next >= now);
            // Never fewer replicas per request than today.
            prop_assert!(f64::from(now) >= f64::from(n) * (1.0 + g).powi(month as i32) * (1.0 - 1e-9));
            // And not a whole replica more than that.
            prop_assert!(f64::from(now) < f64::from(n) * (1.0 + g).powi(month as i32) + 1.0);
        }

        #[test]
        fn the_first_month_over_is_over_and_none_before_it_is(
            spend in prop::collection::vec(0i64..1_000_000, 1..13),
            budget in 0i64..1_000_000,
        ) {
            match first_over(&spend, budget) {
                Some(m) => {
                    prop_assert!(spend[m as usize - 1] > budget);
                    prop_assert!(spend[..m as usize - 1].iter().all(|s| *s <= budget));
                }
                None => prop_assert!(spend.iter().all(|s| *s <= budget)),
            }
        }
    }
}
