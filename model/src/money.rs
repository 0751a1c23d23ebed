//! Money as integer micro-dollars: parsed from decimal text exactly, summed without drift,
//! rounded once when shown.

/// One millionth of a US dollar.
pub type MicroUsd = i64;

pub const MICROS_PER_USD: i64 = 1_000_000;

/// Reads `98.32`, `0.000123` or `12` as micro-dollars, exactly. At most six decimals; no sign,
/// exponent or thousands separator.
pub fn parse_usd(text: &str) -> Result<MicroUsd, String> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err("enter an amount in USD, e.g. 1.006".into());
    }
    if !whole.bytes().all(|b| b.is_ascii_digit()) || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("“{text}” is not an amount in USD (digits and one decimal point)"));
    }
    if fraction.len() > 6 {
        return Err(format!("“{text}” has more than 6 decimal places"));
    }
    let whole: i64 =
        if whole.is_empty() { 0 } else { whole.parse().map_err(|_| format!("“{text}” is too large"))? };
    let fraction: i64 = format!("{fraction:0<6}").parse().unwrap_or(0);
    whole
        .checked_mul(MICROS_PER_USD)
        .and_then(|w| w.checked_add(fraction))
        .ok_or_else(|| format!("“{text}” is too large"))
}

/// Micro-dollars as the shortest exact decimal with at least two decimals: `98.32`, `0.000123`.
pub fn format_usd(micros: MicroUsd) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let m = micros.unsigned_abs();
    let (whole, fraction) = (m / MICROS_PER_USD as u64, m % MICROS_PER_USD as u64);
    let mut digits = format!("{fraction:06}");
    while digits.len() > 2 && digits.ends_with('0') {
        digits.pop();
    }
    format!("{sign}{whole}.{digits}")
}

/// Micro-dollars rounded to whole cents (half away from zero), as text: `1825.00`. What finance
/// files show; the exact amount is [`format_usd`].
pub fn format_cents(micros: MicroUsd) -> String {
    let cents = cents(micros);
    let sign = if cents < 0 { "-" } else { "" };
    let c = cents.unsigned_abs();
    format!("{sign}{}.{:02}", c / 100, c % 100)
}

/// Micro-dollars rounded to whole cents (half away from zero).
pub fn cents(micros: MicroUsd) -> i64 {
    let (whole, rest) = (micros / 10_000, micros % 10_000);
    whole
        + if rest >= 5_000 {
            1
        } else if rest <= -5_000 {
            -1
        } else {
            0
        }
}

/// Micro-dollars as dollars, for charts and the planning model.
pub fn to_usd(micros: MicroUsd) -> f64 {
    micros as f64 / MICROS_PER_USD as f64
}

/// Dollars to micro-dollars, rounded half away from zero; `None` when not finite or too large.
pub fn from_usd(usd: f64) -> Option<MicroUsd> {
    let m = (usd * MICROS_PER_USD as f64).round();
    (m.is_finite() && m.abs() < 9.0e18).then_some(m as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn amounts_parse_exactly() {
        assert_eq!(parse_usd("98.32"), Ok(98_320_000));
        assert_eq!(parse_usd("0.000123"), Ok(123));
        assert_eq!(parse_usd("12"), Ok(12_000_000));
        assert_eq!(parse_usd(".5"), Ok(500_000));
        assert!(parse_usd("-1").is_err());
        assert!(parse_usd("1e3").is_err());
        assert!(parse_usd("1,000").is_err());
        assert!(parse_usd("0.0000001").unwrap_err().contains("6 decimal"));
        assert!(parse_usd("").is_err());
        assert!(parse_usd("99999999999999999").unwrap_err().contains("too large"));
    }

    #[test]
    fn amounts_format_shortest_exact() {
        assert_eq!(format_usd(98_320_000), "98.32");
        assert_eq!(format_usd(123), "0.000123");
        assert_eq!(format_usd(1_006_000), "1.006");
        assert_eq!(format_usd(-5_000_000), "-5.00");
    }

    proptest! {
        #[test]
        fn format_then_parse_is_the_identity(m in 0i64..1_000_000_000_000) {
            prop_assert_eq!(parse_usd(&format_usd(m)), Ok(m));
        }
    }

    #[test]
    fn cents_round_half_away_from_zero() {
        assert_eq!(format_cents(1_825_000_000), "1825.00");
        assert_eq!(format_cents(4_999), "0.00");
        assert_eq!(format_cents(5_000), "0.01");
        assert_eq!(format_cents(-5_000), "-0.01");
        assert_eq!(format_cents(-4_999), "0.00");
        assert_eq!(format_cents(123_456_789), "123.46");
        assert_eq!(cents(i64::MAX), i64::MAX / 10_000 + 1);
    }
}
