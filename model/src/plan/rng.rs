//! A small, seeded, portable random source (xoshiro256**), so Monte Carlo results are the
//! same in the browser, on the server and in tests.

/// xoshiro256** seeded through SplitMix64.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in the open interval (0, 1): safe to pass to inverse CDFs and logarithms.
    pub fn open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Exponential with the given rate.
    pub fn exp(&mut self, rate: f64) -> f64 {
        -self.open01().ln() / rate
    }

    /// Gamma(shape, 1) by Marsaglia and Tsang, with the boost for shape < 1.
    pub fn gamma(&mut self, shape: f64) -> f64 {
        // Past this its spread is a millionth of its mean or less, so the mean stands for it (and
        // an infinite shape would make the acceptance test NaN, never passing).
        if shape.is_nan() || shape >= 1e12 {
            return shape;
        }
        if shape < 1.0 {
            return self.gamma(shape + 1.0) * self.open01().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let (u1, u2) = (self.open01(), self.open01());
            let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
            let v = (1.0 + c * z).powi(3);
            if v > 0.0 && self.open01().ln() < 0.5 * z * z + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_moments_and_reproducibility() {
        let mut a = Rng::seeded(42);
        let mut b = Rng::seeded(42);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| a.open01()).collect();
        assert!(xs.iter().zip((0..n).map(|_| b.open01())).all(|(x, y)| *x == y));
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        assert!((var - 1.0 / 12.0).abs() < 0.002, "{var}");
        assert!(xs.iter().all(|x| *x > 0.0 && *x < 1.0));
    }
}
