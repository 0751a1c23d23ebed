//! Input checks shared by the planning functions: each failure names the field.

use crate::FieldError;

/// The error every planning function returns: which input, and why.
pub type ModelError = FieldError;

pub fn finite(field: &str, value: f64) -> Result<f64, ModelError> {
    if value.is_finite() { Ok(value) } else { Err(FieldError::new(field, "must be a finite number")) }
}

pub fn non_negative(field: &str, value: f64) -> Result<f64, ModelError> {
    if finite(field, value)? < 0.0 { Err(FieldError::new(field, "must not be negative")) } else { Ok(value) }
}

pub fn positive(field: &str, value: f64) -> Result<f64, ModelError> {
    if finite(field, value)? <= 0.0 { Err(FieldError::new(field, "must be greater than zero")) } else { Ok(value) }
}

/// A probability strictly between 0 and 1.
pub fn open_unit(field: &str, value: f64) -> Result<f64, ModelError> {
    if finite(field, value)? <= 0.0 || value >= 1.0 {
        Err(FieldError::new(field, "must be strictly between 0 and 1"))
    } else {
        Ok(value)
    }
}

/// A number within [low, high].
pub fn between(field: &str, value: f64, low: f64, high: f64) -> Result<f64, ModelError> {
    if (low..=high).contains(&finite(field, value)?) {
        Ok(value)
    } else {
        Err(FieldError::new(field, format!("must be between {low} and {high}")))
    }
}

/// A utilization cap: above 0 and below 1, since a queue at full utilization never drains.
pub fn utilization_cap(field: &str, value: f64) -> Result<f64, ModelError> {
    if positive(field, value)? >= 1.0 {
        Err(FieldError::new(field, "must be below 1: a queue planned at full utilization grows without bound"))
    } else {
        Ok(value)
    }
}
