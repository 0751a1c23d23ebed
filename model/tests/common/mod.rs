//! What the simulation tests share.

use model::plan::rng::Rng;

/// Gamma(shape, 1) by Marsaglia and Tsang, with the boost for shape < 1.
pub fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        return gamma(rng, shape + 1.0) * rng.open01().powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let (u1, u2) = (rng.open01(), rng.open01());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let v = (1.0 + c * z).powi(3);
        if v > 0.0 && rng.open01().ln() < 0.5 * z * z + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}
