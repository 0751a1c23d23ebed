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

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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
}
