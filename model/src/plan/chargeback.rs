//! Chargeback: what each team pays for serving, including the capacity nobody used.
//!
//! A deployment provisioned with R replicas whose volume needs n at its latency SLO (sized by
//! [`crate::plan::queue::size_replicas`] at the peak rate, or entered) leaves
//!
//! > idle = max(R − n, 0) replicas
//!
//! and its serving cost S splits into *used* S·(R − idle)/R and *idle* S·idle/R (exact: the
//! server prices idle replicas by the replica-hour). Who pays for the idle part is a stated
//! policy ([`IdlePolicy`]):
//!
//! - **owner**: each deployment's team pays its own idle replicas: what a team provisions, it
//!   pays for, which is what makes over-provisioning visible where it is decided;
//! - **proportional**: the idle cost of all deployments is pooled and shared in proportion to
//!   each deployment's used serving cost (OpenCost's default for shared idle), so a team's
//!   charge follows what it served. Where nothing was used (every deployment idle), the pool is
//!   shared in proportion to serving cost.
//!
//! Money is integer micro-dollars; [`share`] splits a pool exactly (largest remainder), so the
//! charges add up to the pool to the micro-dollar and the report's total is unchanged by the
//! policy.

use serde::{Deserialize, Serialize};

/// Who pays for idle capacity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum IdlePolicy {
    /// Each deployment's team pays its own idle replicas.
    #[default]
    Owner,
    /// The pooled idle cost is shared in proportion to used serving cost.
    Proportional,
}

impl IdlePolicy {
    pub fn name(self) -> &'static str {
        match self {
            IdlePolicy::Owner => "owner",
            IdlePolicy::Proportional => "proportional",
        }
    }

    /// What the policy means, in the words the exports print beside it.
    pub fn describe(self) -> &'static str {
        match self {
            IdlePolicy::Owner => "idle replicas are charged to the team that provisioned them",
            IdlePolicy::Proportional => {
                "idle replicas of all deployments are pooled and shared in proportion to each deployment's used serving cost"
            }
        }
    }
}

/// Replicas provisioned beyond what the volume needs.
pub fn idle_replicas(provisioned: u32, needed: u32) -> u32 {
    provisioned.saturating_sub(needed)
}

/// Splits `pool` (≥ 0) in proportion to `weights` (each ≥ 0) exactly: every part is
/// ⌊pool·wᵢ/W⌋, and the micro-dollars left over go one each to the largest remainders (ties
/// to the earlier weight). The parts add up to `pool`; each is within 1 of pool·wᵢ/W. All
/// weights zero (or none): `None`.
pub fn share(pool: i64, weights: &[i64]) -> Option<Vec<i64>> {
    let total: i128 = weights.iter().map(|w| i128::from((*w).max(0))).sum();
    if total == 0 {
        return None;
    }
    let pool = i128::from(pool.max(0));
    let mut parts = Vec::with_capacity(weights.len());
    let mut remainders = Vec::with_capacity(weights.len());
    for (i, w) in weights.iter().enumerate() {
        let exact = pool * i128::from((*w).max(0));
        parts.push((exact / total) as i64);
        remainders.push((exact % total, i));
    }
    let given: i128 = parts.iter().map(|p| i128::from(*p)).sum();
    let mut left = (pool - given) as usize;
    // Largest remainder first; ties to the earlier weight.
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, i) in remainders {
        if left == 0 {
            break;
        }
        parts[i] += 1;
        left -= 1;
    }
    Some(parts)
}

/// One deployment's serving cost over the period, split into used and idle (micro-dollars).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    pub used: i64,
    pub idle: i64,
}

/// The idle cost each deployment is charged under `policy`, in the order of `lines`. The
/// charges add up to the lines' idle cost exactly.
pub fn charge_idle(lines: &[Line], policy: IdlePolicy) -> Vec<i64> {
    match policy {
        IdlePolicy::Owner => lines.iter().map(|l| l.idle).collect(),
        IdlePolicy::Proportional => {
            let pool: i64 = lines.iter().map(|l| l.idle).sum();
            let used: Vec<i64> = lines.iter().map(|l| l.used).collect();
            let serving: Vec<i64> = lines.iter().map(|l| l.used.saturating_add(l.idle)).collect();
            share(pool, &used).or_else(|| share(pool, &serving)).unwrap_or_else(|| vec![0; lines.len()])
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_pool_shared_by_one_to_three_gives_a_quarter_and_three_quarters() {
        assert_eq!(share(100, &[1, 3]), Some(vec![25, 75]));
        // 10 in thirds: 3.33… each, the one left over to the first of the equal remainders.
        assert_eq!(share(10, &[1, 1, 1]), Some(vec![4, 3, 3]));
        assert_eq!(share(10, &[0, 0]), None);
    }

    #[test]
    fn owners_pay_their_own_idle_and_the_pool_follows_use_otherwise() {
        let lines = [Line { used: 300, idle: 100 }, Line { used: 100, idle: 0 }, Line { used: 0, idle: 0 }];
        assert_eq!(charge_idle(&lines, IdlePolicy::Owner), vec![100, 0, 0]);
        assert_eq!(charge_idle(&lines, IdlePolicy::Proportional), vec![75, 25, 0]);
        // Nothing used: the pool follows serving cost.
        let idle_only = [Line { used: 0, idle: 30 }, Line { used: 0, idle: 10 }];
        assert_eq!(charge_idle(&idle_only, IdlePolicy::Proportional), vec![30, 10]);
        assert_eq!(idle_replicas(4, 6), 0);
        assert_eq!(idle_replicas(6, 4), 2);
    }

    proptest! {
        #[test]
        fn shares_add_up_to_the_pool_and_are_each_within_a_micro_dollar_of_proportional(
            pool in 0i64..1_000_000_000_000_000,
            weights in prop::collection::vec(0i64..1_000_000_000_000, 1..40),
        ) {
            let total: i128 = weights.iter().map(|w| i128::from(*w)).sum();
            match share(pool, &weights) {
                None => prop_assert_eq!(total, 0),
                Some(parts) => {
                    prop_assert_eq!(parts.iter().map(|p| i128::from(*p)).sum::<i128>(), i128::from(pool));
                    for (p, w) in parts.iter().zip(&weights) {
                        let exact = i128::from(pool) * i128::from(*w);
                        // |p·W − pool·w| < W, i.e. within one micro-dollar of the exact share.
                        prop_assert!((i128::from(*p) * total - exact).abs() < total, "{} of {} for {}", p, pool, w);
                        prop_assert!(*p >= 0);
                    }
                }
            }
        }

        #[test]
        fn no_policy_changes_what_is_charged_in_all(
            lines in prop::collection::vec((0i64..1_000_000_000_000, 0i64..1_000_000_000_000), 1..30),
        ) {
            let lines: Vec<Line> = lines.into_iter().map(|(used, idle)| Line { used, idle }).collect();
            let idle: i64 = lines.iter().map(|l| l.idle).sum();
            for policy in [IdlePolicy::Owner, IdlePolicy::Proportional] {
                let charged = charge_idle(&lines, policy);
                prop_assert_eq!(charged.len(), lines.len());
                prop_assert_eq!(charged.iter().sum::<i64>(), idle);
            }
            // Proportional: a deployment that used more is never charged less.
            let charged = charge_idle(&lines, IdlePolicy::Proportional);
            if lines.iter().any(|l| l.used > 0) {
                for (a, ca) in lines.iter().zip(&charged) {
                    for (b, cb) in lines.iter().zip(&charged) {
                        if a.used > b.used {
                            prop_assert!(ca >= cb);
                        }
                    }
                }
            }
        }
    }
}
