//! Units as types: dollars, seconds, rates and bytes are distinct, so a formula cannot add
//! dollars to seconds. On the wire each is a plain number (`#[serde(transparent)]`).

use std::ops::{Add, Div, Mul, Sub};

use serde::{Deserialize, Serialize};

pub use crate::calendar::{HOURS_PER_MONTH, SECONDS_PER_MONTH};

macro_rules! quantity {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(pub f64);

        impl Add for $name {
            type Output = $name;
            fn add(self, other: $name) -> $name {
                $name(self.0 + other.0)
            }
        }

        impl Sub for $name {
            type Output = $name;
            fn sub(self, other: $name) -> $name {
                $name(self.0 - other.0)
            }
        }

        impl Mul<f64> for $name {
            type Output = $name;
            fn mul(self, factor: f64) -> $name {
                $name(self.0 * factor)
            }
        }

        impl Div<f64> for $name {
            type Output = $name;
            fn div(self, divisor: f64) -> $name {
                $name(self.0 / divisor)
            }
        }

        /// The ratio of two amounts of the same unit is a plain number.
        impl Div for $name {
            type Output = f64;
            fn div(self, other: $name) -> f64 {
                self.0 / other.0
            }
        }
    };
}

quantity!(
    /// US dollars.
    Usd
);
quantity!(
    /// US dollars per hour (an instance's price).
    UsdPerHour
);
quantity!(
    /// US dollars per month.
    UsdPerMonth
);
quantity!(
    /// Seconds of time.
    Seconds
);
quantity!(
    /// Events (requests, batches) per second.
    PerSecond
);
quantity!(
    /// Events (requests, retrains) per month.
    PerMonth
);
quantity!(
    /// Bytes; fractional where a precision packs two values in a byte.
    Bytes
);

/// A cost per event times events per month is a monthly spend.
impl Mul<PerMonth> for Usd {
    type Output = UsdPerMonth;
    fn mul(self, rate: PerMonth) -> UsdPerMonth {
        UsdPerMonth(self.0 * rate.0)
    }
}

/// A monthly spend spread over monthly events is a cost per event.
impl Div<PerMonth> for UsdPerMonth {
    type Output = Usd;
    fn div(self, rate: PerMonth) -> Usd {
        Usd(self.0 / rate.0)
    }
}

/// An hourly price over an hourly volume is a cost per event.
impl Div<PerSecond> for UsdPerHour {
    type Output = Usd;
    fn div(self, rate: PerSecond) -> Usd {
        Usd(self.0 / (rate.0 * 3600.0))
    }
}

impl UsdPerHour {
    /// Running all month.
    pub fn per_month(self) -> UsdPerMonth {
        UsdPerMonth(self.0 * HOURS_PER_MONTH)
    }
}

impl PerSecond {
    /// The same rate counted per month.
    pub fn per_month(self) -> PerMonth {
        PerMonth(self.0 * SECONDS_PER_MONTH)
    }
}
