//! Human formatting shared by server-rendered and hydrated pages, so both print the same.

/// Bytes in binary units: `1.5 GiB`.
pub fn bytes(value: f64) -> String {
    scaled(value, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB", "PiB"])
}

/// A rate in decimal units per second: `12.3 GB/s`.
pub fn bytes_per_second(value: f64) -> String {
    scaled(value, 1000.0, &["B/s", "kB/s", "MB/s", "GB/s", "TB/s"])
}

fn scaled(value: f64, step: f64, units: &[&str]) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    let mut scaled = value;
    let mut unit = 0;
    while scaled.abs() >= step && unit + 1 < units.len() {
        scaled /= step;
        unit += 1;
    }
    if unit == 0 { format!("{scaled:.0} {}", units[0]) } else { format!("{scaled:.1} {}", units[unit]) }
}

/// A Unix time in milliseconds as `2026-11-30 13:05 UTC`.
pub fn utc_minute(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// An instant as ISO 8601 in UTC to the second: `2026-12-02T14:05:09Z`.
pub fn utc_iso(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

use crate::calendar::civil_from_days;

/// US dollars as money, the one formatter every page, chart axis and export uses: cents from
/// $1 up (`$1,234.57`), and below a dollar at least three significant digits (`$0.0110`,
/// `$0.000123`), so a cost per request is never rounded to whole cents.
pub fn usd(value: f64) -> String {
    if !(value * 100.0).is_finite() {
        return "—".to_string();
    }
    let v = value.abs();
    // Three significant digits below a dollar: the first is at 10^floor(log10 v). Rounding can
    // carry into a new leading digit ($0.09996 → $0.1000), which keeps three anyway; an amount
    // that rounds to a dollar is shown in cents.
    let below_a_dollar = (v > 0.0 && v < 1.0).then(|| {
        let digits = (2 - v.log10().floor() as i32).clamp(2, 15) as usize;
        format!("{v:.digits$}")
    });
    let body = match below_a_dollar {
        _ if v == 0.0 => "0.00".to_string(),
        Some(text) if !text.starts_with('1') => text,
        _ => {
            let cents = (v * 100.0).round();
            format!("{}.{:02}", grouped((cents / 100.0).trunc()), (cents % 100.0) as u64)
        }
    };
    let sign = if value < 0.0 && body.bytes().any(|b| (b'1'..=b'9').contains(&b)) { "−" } else { "" };
    format!("{sign}${body}")
}

/// A whole number with thousands grouped: `1,234,567`.
pub fn grouped(value: f64) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    let digits = format!("{:.0}", value.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if value < 0.0 && digits != "0" { format!("−{out}") } else { out }
}

/// A count that may be huge, in words people read: `1.2 million`, `3.4 billion`.
pub fn count(value: f64) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    let v = value.abs();
    let (scaled, word) = if v >= 1e12 {
        (value / 1e12, " trillion")
    } else if v >= 1e9 {
        (value / 1e9, " billion")
    } else if v >= 1e6 {
        (value / 1e6, " million")
    } else {
        return grouped(value);
    };
    format!("{scaled:.2}{word}")
}

/// A duration with the unit that keeps it readable: `140 ns`, `12.5 µs`, `3.20 ms`, `1.50 s`.
pub fn seconds(value: f64) -> String {
    if !value.is_finite() {
        return "—".to_string();
    }
    let v = value.abs();
    let (scaled, unit) = if v >= 1.0 || v == 0.0 {
        (value, "s")
    } else if v >= 1e-3 {
        (value * 1e3, "ms")
    } else if v >= 1e-6 {
        (value * 1e6, "µs")
    } else {
        (value * 1e9, "ns")
    };
    let decimals = if scaled.abs() >= 100.0 {
        0
    } else if scaled.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{scaled:.decimals$} {unit}")
}

/// An accuracy change in percentage points: `+0.28 pt`, `−1.50 pt`.
pub fn points(delta: f64) -> String {
    if !delta.is_finite() {
        return "—".to_string();
    }
    let pt = delta * 100.0;
    if pt < 0.0 { format!("−{:.2} pt", -pt) } else { format!("+{pt:.2} pt") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_match_known_instants() {
        assert_eq!(utc_minute(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_minute(951_782_400_000), "2000-02-29 00:00 UTC");
        assert_eq!(utc_minute(1_796_043_900_000), "2026-11-30 13:05 UTC");
    }

    #[test]
    fn sizes_pick_the_largest_whole_unit() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(1536.0), "1.5 KiB");
        assert_eq!(bytes(25.0 * 1024.0 * 1024.0 * 1024.0), "25.0 GiB");
        assert_eq!(bytes_per_second(12.34e9), "12.3 GB/s");
        assert_eq!(bytes(f64::NAN), "—");
    }

    #[test]
    fn money_is_grouped_and_keeps_small_amounts_readable() {
        assert_eq!(usd(1234567.4), "$1,234,567.40");
        assert_eq!(usd(1234.565), "$1,234.57");
        assert_eq!(usd(0.5), "$0.500");
        assert_eq!(usd(0.011), "$0.0110");
        assert_eq!(usd(0.016), "$0.0160");
        assert_eq!(usd(0.999), "$0.999");
        assert_eq!(usd(0.9996), "$1.00");
        assert_eq!(usd(12_345.678), "$12,345.68");
        assert_eq!(usd(0.000_123_4), "$0.000123");
        assert_eq!(usd(-12.0), "−$12.00");
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(usd(f64::NAN), "—");
        assert_eq!(usd(1e307), "—");
        assert_eq!(grouped(999.0), "999");
        assert_eq!(grouped(1000.0), "1,000");
        assert_eq!(grouped(-1_000_000.0), "−1,000,000");
        assert_eq!(count(120_000_000.0), "120.00 million");
        assert_eq!(count(5_400.0), "5,400");
    }

    #[test]
    fn durations_and_points_carry_their_unit() {
        assert_eq!(seconds(1.4e-7), "140 ns");
        assert_eq!(seconds(1.25e-5), "12.5 µs");
        assert_eq!(seconds(3.2e-3), "3.20 ms");
        assert_eq!(seconds(1.5), "1.50 s");
        assert_eq!(points(-0.015), "−1.50 pt");
        assert_eq!(points(0.0028), "+0.28 pt");
    }

    /// The number a formatted amount shows, read back.
    fn shown(text: &str) -> f64 {
        let negative = text.starts_with('−');
        let digits: String = text.chars().filter(|c| c.is_ascii_digit() || *c == '.').collect();
        let v: f64 = digits.parse().unwrap();
        if negative { -v } else { v }
    }

    proptest::proptest! {
        #[test]
        fn money_shows_cents_from_a_dollar_and_three_significant_digits_below(
            mantissa in 1.0f64..10.0, exponent in -9i32..13, negative: bool
        ) {
            let value = mantissa * 10f64.powi(exponent) * if negative { -1.0 } else { 1.0 };
            let text = usd(value);
            let back = shown(&text);
            proptest::prop_assert!(text.starts_with(if negative { "−$" } else { "$" }), "{text}");
            if value.abs() >= 0.9995 {
                // Whole cents, grouped thousands, two decimals.
                proptest::prop_assert!(text.ends_with(|c: char| c.is_ascii_digit()));
                proptest::prop_assert_eq!(text.split('.').nth(1).map(str::len), Some(2), "{}", text);
                proptest::prop_assert!((back - value).abs() <= 0.005 + value.abs() * 1e-15, "{value} → {text}");
            } else {
                let significant = text.trim_start_matches(['−', '$', '0', '.']).len();
                proptest::prop_assert!(significant >= 3, "{value} → {text}");
                proptest::prop_assert!((back - value).abs() <= 0.005 * value.abs() * 1.000_001, "{value} → {text}");
            }
        }
    }
}
