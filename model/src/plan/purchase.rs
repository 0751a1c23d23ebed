//! Buying the replicas: on demand, committed for a term, or on spot. "Should we commit?"
//!
//! **Commitments** (reserved instances, savings plans, committed-use discounts) charge their
//! hourly price c for every hour of the term, used or not; on demand charges o for each hour a
//! replica runs. With n_m replicas needed in month m of a term of T months (the scenario's
//! volume and growth), each running a share h of the hours (1: always on; less where the fleet
//! is scaled down at night), committing k replicas costs, over the term,
//!
//! > C(k) = k·c·H·T + Σ_m max(n_m − k, 0)·o·H·h  (H hours a month)
//!
//! The k-th committed replica takes over the on-demand hours of the months where n_m ≥ k, so
//! C(k) − C(k − 1) = H·(c·T − o·h·#{m : n_m ≥ k}), which grows with k (C is convex). It pays
//! off while h·#{m : n_m ≥ k} ÷ T > c ÷ o: **c ÷ o is the break-even utilisation**, the share
//! of the term's hours a committed replica must otherwise have run on demand, and the best
//! commitment is the largest k that beats it (none where c ≥ o·h; a replica at the
//! break-even, within rounding, saves nothing and is not committed).
//!
//! **Spot** charges s an hour but is taken back r times per hour running, each interruption
//! losing L hours of the replica's work (its replacement and warm-up, or the batch redone). Of
//! each hour paid, r·L is lost, so a useful hour costs s ÷ (1 − r·L): s plus the interruptions'
//! expected cost s·r·L ÷ (1 − r·L). Spot is cheaper than on demand while s ÷ (1 − r·L) < o, and
//! makes no progress at all once r·L ≥ 1.

use serde::{Deserialize, Serialize};

use crate::FieldError;
use crate::plan::checks::{ModelError, non_negative, positive};
use crate::plan::queue::MAX_REPLICAS;
use crate::units::{HOURS_PER_MONTH, Usd, UsdPerHour, UsdPerMonth};

/// The longest term and horizon accepted: ten years.
pub const MAX_MONTHS: u32 = 120;
/// The most commitment offers compared at once.
pub const MAX_OFFERS: usize = 8;

/// A commitment offer: `hourly` for every hour of `term_months`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CommitmentOffer {
    /// What the page and exports call it ("1-year", "3-year savings plan", …).
    pub name: String,
    pub term_months: u32,
    /// c: the effective hourly price over the term (upfront payments spread over its hours).
    pub hourly_usd: UsdPerHour,
}

/// A spot offer and how often it is taken back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SpotOffer {
    /// s.
    pub hourly_usd: UsdPerHour,
    /// r: interruptions per hour a replica runs.
    pub interruptions_per_hour: f64,
    /// L: hours of a replica's work each interruption loses.
    pub hours_lost_per_interruption: f64,
}

/// Inputs of [`purchase`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PurchaseInput {
    /// o: the on-demand price of one replica.
    pub on_demand_hourly_usd: UsdPerHour,
    /// n_m: replicas needed in each month from now; months past the list need its last figure.
    pub replicas_by_month: Vec<u32>,
    /// h: the share of hours a needed replica runs, in (0, 1].
    pub running_share: f64,
    #[serde(default)]
    pub commitments: Vec<CommitmentOffer>,
    #[serde(default)]
    pub spot: Option<SpotOffer>,
}

/// One commitment offer at its best size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CommitmentPlan {
    pub name: String,
    pub term_months: u32,
    /// c ÷ o: the share of the term's hours above which a committed replica beats on demand.
    pub break_even_utilization: f64,
    /// k: replicas to commit (0: do not commit), each saving something.
    pub replicas: u32,
    /// C(k): committed replicas for the whole term, plus on demand above them.
    pub term_cost_usd: Usd,
    /// C(0): everything on demand over the same months.
    pub on_demand_term_cost_usd: Usd,
    /// C(0) − C(k), never negative.
    pub saving_usd: Usd,
    /// C(k) ÷ T.
    pub monthly_average_usd: UsdPerMonth,
}

/// Spot, per replica-hour of useful work.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SpotPlan {
    /// r·L: the share of paid hours lost to interruptions.
    pub lost_share: f64,
    /// s ÷ (1 − r·L); `None` when r·L ≥ 1 (no progress is ever made).
    pub useful_hourly_usd: Option<UsdPerHour>,
    /// The interruptions' expected cost per useful hour, s·r·L ÷ (1 − r·L).
    pub interruption_hourly_usd: Option<UsdPerHour>,
    /// 1 − useful hourly ÷ o (negative where spot costs more than on demand).
    pub saving_fraction: Option<f64>,
    /// The same over the first month's replicas: (o − useful hourly)·n₀·H·h.
    pub first_month_saving_usd: Option<UsdPerMonth>,
}

/// Result of [`purchase`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PurchasePlan {
    /// Each offer, in the order given.
    pub commitments: Vec<CommitmentPlan>,
    pub spot: Option<SpotPlan>,
}

/// n_m: the replicas `replicas_by_month` needs in `month`, holding its last figure past its
/// end (0 for an empty list).
pub fn needed(replicas_by_month: &[u32], month: usize) -> u32 {
    replicas_by_month.get(month).or(replicas_by_month.last()).copied().unwrap_or(0)
}

/// Replica-hours over the first `months`, each needed replica running every hour:
/// Σ n_m × H. On demand costs this at its hourly price.
pub fn replica_hours(replicas_by_month: &[u32], months: usize) -> f64 {
    (0..months).map(|m| f64::from(needed(replicas_by_month, m))).sum::<f64>() * HOURS_PER_MONTH
}

impl PurchaseInput {
    /// n_m of this input.
    fn needed(&self, month: usize) -> u32 {
        needed(&self.replicas_by_month, month)
    }

    fn validate(&self) -> Result<(), ModelError> {
        positive("on_demand_hourly_usd", self.on_demand_hourly_usd.0)?;
        if self.replicas_by_month.is_empty() || self.replicas_by_month.len() > MAX_MONTHS as usize {
            return Err(FieldError::new("replicas_by_month", format!("must hold 1 to {MAX_MONTHS} months")));
        }
        if self.replicas_by_month.iter().any(|&n| n > MAX_REPLICAS) {
            return Err(FieldError::new("replicas_by_month", format!("each month must be at most {MAX_REPLICAS}")));
        }
        if positive("running_share", self.running_share)? > 1.0 {
            return Err(FieldError::new("running_share", "must be at most 1 (always on)"));
        }
        if self.commitments.len() > MAX_OFFERS {
            return Err(FieldError::new("commitments", format!("at most {MAX_OFFERS} offers")));
        }
        for c in &self.commitments {
            let hidden = |ch: char| ch.is_control() || crate::wire::validate::invisible(ch);
            if c.name.trim().is_empty() || c.name.chars().count() > 64 || c.name.chars().any(hidden) {
                return Err(FieldError::new("commitments.name", "must be 1 to 64 printable characters"));
            }
            if !(1..=MAX_MONTHS).contains(&c.term_months) {
                return Err(FieldError::new("commitments.term_months", format!("must be 1 to {MAX_MONTHS}")));
            }
            non_negative("commitments.hourly_usd", c.hourly_usd.0)?;
        }
        if let Some(s) = &self.spot {
            non_negative("spot.hourly_usd", s.hourly_usd.0)?;
            non_negative("spot.interruptions_per_hour", s.interruptions_per_hour)?;
            non_negative("spot.hours_lost_per_interruption", s.hours_lost_per_interruption)?;
        }
        Ok(())
    }
}

/// The best size of each commitment offer and what spot costs per useful hour.
pub fn purchase(input: &PurchaseInput) -> Result<PurchasePlan, ModelError> {
    input.validate()?;
    let o = input.on_demand_hourly_usd.0;
    let h = input.running_share;
    let commitments = input
        .commitments
        .iter()
        .map(|offer| {
            let term = offer.term_months as usize;
            let c = offer.hourly_usd.0;
            let mut needs: Vec<u32> = (0..term).map(|m| input.needed(m)).collect();
            needs.sort_unstable_by(|a, b| b.cmp(a));
            // months(k) = #{m : n_m ≥ k}: with needs in decreasing order, the k-th replica is
            // needed in the months up to the last whose need is at least k.
            let months = |k: u32| needs.partition_point(|&n| n >= k) as f64;
            // The largest k whose months of need beat the break-even (months(k) falls with k),
            // by more than rounding: at 16.8 hours a day, h = 0.7000000000000001 would otherwise
            // "beat" 30 % off and commit every replica to save a trillionth of a dollar.
            let most = needs.first().copied().unwrap_or(0);
            let (mut low, mut high) = (0u32, most);
            while low < high {
                let mid = low + (high - low).div_ceil(2);
                if o * h * months(mid) > c * term as f64 * (1.0 + 1e-9) {
                    low = mid;
                } else {
                    high = mid - 1;
                }
            }
            let k = low;
            let cost = |k: u32| -> f64 {
                let on_demand: f64 = needs.iter().map(|&n| f64::from(n.saturating_sub(k))).sum();
                HOURS_PER_MONTH * (f64::from(k) * c * term as f64 + on_demand * o * h)
            };
            let (committed, on_demand) = (cost(k), cost(0));
            CommitmentPlan {
                name: offer.name.clone(),
                term_months: offer.term_months,
                break_even_utilization: c / o,
                replicas: k,
                term_cost_usd: Usd(committed),
                on_demand_term_cost_usd: Usd(on_demand),
                saving_usd: Usd((on_demand - committed).max(0.0)),
                monthly_average_usd: UsdPerMonth(committed / term as f64),
            }
        })
        .collect();
    let spot = input.spot.map(|s| {
        let lost = s.interruptions_per_hour * s.hours_lost_per_interruption;
        let useful = (lost < 1.0).then(|| s.hourly_usd.0 / (1.0 - lost));
        SpotPlan {
            lost_share: lost,
            useful_hourly_usd: useful.map(UsdPerHour),
            interruption_hourly_usd: useful.map(|u| UsdPerHour(u - s.hourly_usd.0)),
            saving_fraction: useful.map(|u| 1.0 - u / o),
            first_month_saving_usd: useful
                .map(|u| UsdPerMonth((o - u) * f64::from(input.needed(0)) * HOURS_PER_MONTH * h)),
        }
    });
    Ok(PurchasePlan { commitments, spot })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn input(needs: Vec<u32>, share: f64, c: f64, term: u32) -> PurchaseInput {
        PurchaseInput {
            on_demand_hourly_usd: UsdPerHour(1.0),
            replicas_by_month: needs,
            running_share: share,
            commitments: vec![CommitmentOffer { name: "1-year".into(), term_months: term, hourly_usd: UsdPerHour(c) }],
            spot: None,
        }
    }

    #[test]
    fn a_steady_fleet_commits_every_replica_and_a_growing_one_its_base() {
        // Four replicas all year at 60 % of on demand: commit all four, save 40 %.
        let plan = purchase(&input(vec![4], 1.0, 0.6, 12)).unwrap();
        let c = &plan.commitments[0];
        assert_eq!((c.replicas, c.break_even_utilization), (4, 0.6));
        let hours = HOURS_PER_MONTH * 12.0;
        assert!((c.on_demand_term_cost_usd.0 - 4.0 * hours).abs() < 1e-6);
        assert!((c.saving_usd.0 - 0.4 * 4.0 * hours).abs() < 1e-6);
        // 2 replicas for 4 months, then 3 for 4, then 6 for 4: the third replica is needed 8 of
        // 12 months (67 % > 60 %), the fourth 4 of 12 (33 %): commit three.
        let needs = vec![2, 2, 2, 2, 3, 3, 3, 3, 6, 6, 6, 6];
        assert_eq!(purchase(&input(needs.clone(), 1.0, 0.6, 12)).unwrap().commitments[0].replicas, 3);
        // Run half the hours (scaled down at night): a committed replica is used 50 % < 60 %.
        assert_eq!(purchase(&input(needs, 0.5, 0.6, 12)).unwrap().commitments[0].replicas, 0);
        // A term longer than the list holds the last month's need.
        assert_eq!(purchase(&input(vec![1, 5], 1.0, 0.6, 36)).unwrap().commitments[0].replicas, 5);
    }

    #[test]
    fn spot_costs_its_lost_hours() {
        let mut i = input(vec![10], 1.0, 0.6, 12);
        // Two interruptions a day, 30 minutes lost each: 1/24 · 0.5 of the hours are lost.
        i.spot = Some(SpotOffer {
            hourly_usd: UsdPerHour(0.35),
            interruptions_per_hour: 2.0 / 24.0,
            hours_lost_per_interruption: 0.5,
        });
        let s = purchase(&i).unwrap().spot.unwrap();
        let useful = 0.35 / (1.0 - 1.0 / 24.0);
        assert!((s.useful_hourly_usd.unwrap().0 - useful).abs() < 1e-12);
        assert!((s.saving_fraction.unwrap() - (1.0 - useful)).abs() < 1e-12);
        assert!((s.first_month_saving_usd.unwrap().0 - (1.0 - useful) * 10.0 * HOURS_PER_MONTH).abs() < 1e-9);
        i.spot = Some(SpotOffer { interruptions_per_hour: 4.0, ..i.spot.unwrap() });
        let s = purchase(&i).unwrap().spot.unwrap();
        assert_eq!((s.useful_hourly_usd, s.saving_fraction), (None, None), "r·L = 2: never done");
    }

    #[test]
    fn every_bad_input_is_named() {
        let good = input(vec![3], 1.0, 0.6, 12);
        let field = |f: &dyn Fn(&mut PurchaseInput)| {
            let mut i = good.clone();
            f(&mut i);
            purchase(&i).unwrap_err().field
        };
        assert_eq!(field(&|i| i.on_demand_hourly_usd = UsdPerHour(f64::NAN)), "on_demand_hourly_usd");
        assert_eq!(field(&|i| i.replicas_by_month.clear()), "replicas_by_month");
        assert_eq!(field(&|i| i.replicas_by_month = vec![1; 121]), "replicas_by_month");
        assert_eq!(field(&|i| i.running_share = 1.5), "running_share");
        assert_eq!(field(&|i| i.running_share = 0.0), "running_share");
        assert_eq!(field(&|i| i.commitments[0].term_months = 0), "commitments.term_months");
        assert_eq!(field(&|i| i.commitments[0].hourly_usd = UsdPerHour(-1.0)), "commitments.hourly_usd");
        assert_eq!(field(&|i| i.commitments[0].name = "\u{0}".into()), "commitments.name");
        assert_eq!(field(&|i| i.commitments[0].name = "1-year\u{202E}raey-3".into()), "commitments.name");
        assert_eq!(field(&|i| i.commitments = vec![i.commitments[0].clone(); 9]), "commitments");
        assert_eq!(
            field(&|i| {
                i.spot = Some(SpotOffer {
                    hourly_usd: UsdPerHour(0.3),
                    interruptions_per_hour: f64::INFINITY,
                    hours_lost_per_interruption: 0.1,
                })
            }),
            "spot.interruptions_per_hour"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The threshold rule's commitment costs what the cheapest of every possible size costs,
        /// and saves exactly what it says against all on demand.
        #[test]
        fn the_commitment_is_the_cheapest_size(
            needs in proptest::collection::vec(0u32..40, 1..40),
            share in 0.05f64..=1.0, c in 0.0f64..1.5, term in 1u32..48, o in 0.01f64..20.0,
        ) {
            // c is the commitment's price as a share of on demand's.
            let mut i = input(needs, share, c * o, term);
            i.on_demand_hourly_usd = UsdPerHour(o);
            let plan = &purchase(&i).unwrap().commitments[0];
            let cost = |k: u32| -> f64 {
                (0..term as usize).map(|m| {
                    let n = i.needed(m);
                    f64::from(k) * c * o + f64::from(n.saturating_sub(k)) * share * o
                }).sum::<f64>() * HOURS_PER_MONTH
            };
            let most = i.replicas_by_month.iter().copied().max().unwrap();
            let best = (0..=most + 2).map(cost).fold(f64::INFINITY, f64::min);
            // The rule leaves out replicas within rounding of the break-even.
            let tolerance = 1e-7 * best.max(1.0);
            prop_assert!((plan.term_cost_usd.0 - best).abs() <= tolerance, "{plan:?} vs {best}");
            prop_assert!((plan.term_cost_usd.0 - cost(plan.replicas)).abs() <= tolerance);
            prop_assert!((plan.on_demand_term_cost_usd.0 - cost(0)).abs() <= tolerance);
            prop_assert!(plan.saving_usd.0 >= 0.0);
            // No cheaper than on demand for the share of hours run: never commit.
            if c >= share {
                prop_assert_eq!(plan.replicas, 0);
            }
        }

        /// Spot's useful hour costs at least its price, more with every interruption.
        #[test]
        fn spot_is_dearer_with_more_interruptions(
            s in 0.0f64..2.0, r in 0.0f64..1.0, l in 0.0f64..2.0, more in 0.0f64..1.0,
        ) {
            let i = PurchaseInput { commitments: vec![], ..input(vec![2], 1.0, 0.6, 12) };
            let at = |r: f64| {
                let mut i = i.clone();
                i.spot = Some(SpotOffer { hourly_usd: UsdPerHour(s), interruptions_per_hour: r, hours_lost_per_interruption: l });
                purchase(&i).unwrap().spot.unwrap()
            };
            let (a, b) = (at(r), at(r + more));
            if let (Some(x), Some(y)) = (a.useful_hourly_usd, b.useful_hourly_usd) {
                prop_assert!(x.0 >= s && y.0 >= x.0, "{a:?} {b:?}");
            }
            prop_assert_eq!(a.useful_hourly_usd.is_some(), r * l < 1.0);
        }
    }
}
