//! When each request of a step is sent: an open-loop schedule fixed before the step starts, so
//! a slow response never delays the next send (no coordinated omission).

use std::path::PathBuf;

use model::plan::rng::Rng;

/// How requests arrive.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// Exponential gaps: independent users.
    Poisson,
    /// Equal gaps.
    Constant,
    /// Gamma-distributed gaps with this coefficient of variation (above 1 is burstier than
    /// Poisson, below 1 smoother).
    Gamma(f64),
    /// Offsets in seconds from the start, replayed as they are (one step).
    Trace(Vec<f64>),
}

impl Arrivals {
    /// `poisson`, `constant`, `gamma:CV` or `trace:FILE`; errors name the argument.
    pub fn parse(text: &str) -> Result<Arrivals, String> {
        match text.split_once(':') {
            None if text == "poisson" => Ok(Arrivals::Poisson),
            None if text == "constant" => Ok(Arrivals::Constant),
            Some(("gamma", cv)) => match cv.parse::<f64>() {
                Ok(cv) if cv.is_finite() && (0.05..=20.0).contains(&cv) => Ok(Arrivals::Gamma(cv)),
                _ => Err(format!("--arrivals gamma:CV needs a CV between 0.05 and 20, not '{cv}'")),
            },
            Some(("trace", path)) => {
                let path = PathBuf::from(path);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("--arrivals trace:{}: cannot read it: {e}", path.display()))?;
                parse_trace(&text).map(Arrivals::Trace).map_err(|e| format!("--arrivals trace:{}: {e}", path.display()))
            }
            _ => Err(format!("--arrivals must be poisson, constant, gamma:CV or trace:FILE, not '{text}'")),
        }
    }

    pub fn label(&self) -> String {
        match self {
            Arrivals::Poisson => "poisson".into(),
            Arrivals::Constant => "constant".into(),
            Arrivals::Gamma(cv) => format!("gamma:{cv}"),
            Arrivals::Trace(offsets) => format!("trace ({} requests)", offsets.len()),
        }
    }

    /// Send offsets in seconds over `[0, span)` at `rate` per second (a trace ignores both).
    pub fn schedule(&self, rate: f64, span: f64, rng: &mut Rng) -> Vec<f64> {
        if let Arrivals::Trace(offsets) = self {
            return offsets.clone();
        }
        let mut offsets = Vec::with_capacity((rate * span * 1.1) as usize + 16);
        let mut t = match self {
            // Start the process in its stationary state, not with a request at 0.
            Arrivals::Constant => rng.open01() / rate,
            _ => 0.0,
        };
        loop {
            t += match self {
                Arrivals::Poisson => rng.exp(rate),
                Arrivals::Constant => {
                    if offsets.is_empty() {
                        0.0
                    } else {
                        1.0 / rate
                    }
                }
                Arrivals::Gamma(cv) => {
                    let shape = 1.0 / (cv * cv);
                    gamma(shape, rng) / (shape * rate)
                }
                Arrivals::Trace(_) => unreachable!("handled above"),
            };
            if t >= span {
                return offsets;
            }
            offsets.push(t);
        }
    }
}

/// Offsets in seconds, one per line (a header line and a second column are allowed: the first
/// number on each line is taken); they must be finite, non-negative and in order.
pub fn parse_trace(text: &str) -> Result<Vec<f64>, String> {
    let mut offsets = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let first = line.split([',', ';', '\t']).next().unwrap_or("").trim();
        if first.is_empty() || first.starts_with('#') {
            continue;
        }
        let value: f64 = match first.parse() {
            Ok(v) => v,
            Err(_) if i == 0 => continue, // a header
            Err(_) => return Err(format!("line {}: '{first}' is not an offset in seconds", i + 1)),
        };
        if !value.is_finite() || value < 0.0 {
            return Err(format!("line {}: offset {first} is negative or not finite", i + 1));
        }
        if offsets.last().is_some_and(|last| value < *last) {
            return Err(format!("line {}: offset {first} comes before the line above it", i + 1));
        }
        offsets.push(value);
    }
    if offsets.is_empty() {
        return Err("holds no offsets".into());
    }
    Ok(offsets)
}

/// Gamma(shape, 1) by Marsaglia and Tsang (shape < 1 through the boost u^(1/shape)).
fn gamma(shape: f64, rng: &mut Rng) -> f64 {
    if shape < 1.0 {
        return gamma(shape + 1.0, rng) * rng.open01().powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = rng.open01();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

fn normal(rng: &mut Rng) -> f64 {
    (-2.0 * rng.open01().ln()).sqrt() * (std::f64::consts::TAU * rng.open01()).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(arrivals: &Arrivals, rate: f64) -> (f64, f64) {
        let offsets = arrivals.schedule(rate, 20_000.0 / rate, &mut Rng::seeded(7));
        let gaps: Vec<f64> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        (mean * rate, sd / mean)
    }

    #[test]
    fn each_process_has_its_rate_and_burstiness() {
        for (arrivals, cv) in [
            (Arrivals::Poisson, 1.0),
            (Arrivals::Constant, 0.0),
            (Arrivals::Gamma(2.0), 2.0),
            (Arrivals::Gamma(0.5), 0.5),
        ] {
            let (mean, measured_cv) = gaps(&arrivals, 50.0);
            assert!((mean - 1.0).abs() < 0.05, "{arrivals:?}: mean gap × rate {mean}");
            assert!((measured_cv - cv).abs() < 0.08, "{arrivals:?}: cv {measured_cv}");
        }
    }

    #[test]
    fn traces_must_be_ordered_non_negative_offsets() {
        assert_eq!(parse_trace("offset_s\n0\n0.5,GET\n1.25\n").unwrap(), vec![0.0, 0.5, 1.25]);
        assert!(parse_trace("0\n-1\n").unwrap_err().contains("line 2: offset -1 is negative"));
        assert!(parse_trace("1\n0.5\n").unwrap_err().contains("before the line above"));
        assert!(parse_trace("0\nsoon\n").unwrap_err().contains("line 2"));
        assert!(parse_trace("header\n").unwrap_err().contains("no offsets"));
        assert!(Arrivals::parse("gamma:0").unwrap_err().contains("gamma:CV"));
        assert!(Arrivals::parse("bursty").unwrap_err().contains("poisson, constant"));
    }
}
