//! Summary statistics of a benchmark's samples.

use model::Stats;

/// Mean, nearest-rank quantiles and a 95% confidence interval of the mean (Student's t).
/// Panics on an empty slice: every benchmark takes at least one sample.
pub fn summarize(samples: &[f64]) -> Stats {
    assert!(!samples.is_empty(), "summarize needs at least one sample");
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let mean = sorted.iter().sum::<f64>() / n as f64;
    let variance = if n > 1 { sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
    let half_width = t95(n.saturating_sub(1)) * (variance / n as f64).sqrt();
    let quantile = |q: f64| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    Stats {
        samples: n as u64,
        mean,
        p50: quantile(0.50),
        p90: quantile(0.90),
        p99: quantile(0.99),
        p999: quantile(0.999),
        ci95_low: mean - half_width,
        ci95_high: mean + half_width,
    }
}

/// Two-sided 95% quantile of Student's t with `df` degrees of freedom.
pub fn t95(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => 0.0,
        1..=30 => TABLE[df - 1],
        31..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_interval_of_a_known_sample() {
        let samples: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summarize(&samples);
        assert_eq!((s.p50, s.p90, s.p99, s.p999), (50.0, 90.0, 99.0, 100.0));
        assert!((s.mean - 50.5).abs() < 1e-12);
        // sd of 1..=100 is 29.011; half width = 1.984 * 29.011 / 10 ≈ 5.76 (t at df 99 ≈ 1.98).
        assert!((s.ci95_high - s.mean - 5.744).abs() < 0.02, "{s:?}");
    }

    #[test]
    fn one_sample_has_a_zero_width_interval() {
        let s = summarize(&[3.0]);
        assert_eq!((s.p50, s.p999, s.ci95_low, s.ci95_high), (3.0, 3.0, 3.0, 3.0));
    }
}
