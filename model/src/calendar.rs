//! The one calendar: days, dates and the length of a month, used by the model, the reports
//! and the price catalog alike, so a month is never 730 hours in one place and 30.4375 days in
//! another, and a date that does not exist is refused everywhere.

use std::fmt;

/// Hours in a billing month: 8,760 hours a year over 12, the convention cloud price sheets
/// use for monthly figures.
pub const HOURS_PER_MONTH: f64 = 730.0;
/// Days in a billing month (30.42).
pub const DAYS_PER_MONTH: f64 = HOURS_PER_MONTH / 24.0;
/// Seconds in a billing month.
pub const SECONDS_PER_MONTH: f64 = HOURS_PER_MONTH * 3600.0;

/// A calendar day (proleptic Gregorian), from 1970-01-01 on, written `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// Days since 1970-01-01.
    days: i32,
}

/// Why text is not a [`Date`].
pub const DATE_SHAPE: &str = "must be a date like 2026-11-30";

impl Date {
    /// The first day [`Date`] holds.
    pub const EPOCH: Date = Date { days: 0 };
    /// The last day [`Date`] holds, 9999-12-31 (what [`Date::parse`] reads and a date input shows).
    pub const LAST: Date = Date { days: 2_932_896 };

    /// Reads `YYYY-MM-DD`: exactly four, two and two ASCII digits, a month of 1–12 and a day
    /// that exists in it (29 February only in leap years), from 1970 to 9999.
    pub fn parse(text: &str) -> Result<Date, String> {
        let b = text.as_bytes();
        let shaped = b.len() == 10
            && b.iter().enumerate().all(|(i, c)| if i == 4 || i == 7 { *c == b'-' } else { c.is_ascii_digit() });
        if !shaped {
            return Err(format!("“{}” {DATE_SHAPE}", text.chars().take(40).collect::<String>()));
        }
        let num = |r: std::ops::Range<usize>| text[r].bytes().fold(0u32, |n, c| n * 10 + u32::from(c - b'0'));
        let (year, month, day) = (num(0..4), num(5..7), num(8..10));
        if year < 1970 {
            return Err(format!("“{text}” is before 1970"));
        }
        if !(1..=12).contains(&month) {
            return Err(format!("“{text}” has no month {month}"));
        }
        if !(1..=days_in_month(year, month)).contains(&day) {
            return Err(format!(
                "“{text}” is not a day: {} has {} days",
                month_name(month),
                days_in_month(year, month)
            ));
        }
        Ok(Date::from_ymd(year, month, day))
    }

    /// Days since 1970-01-01 to the date (Howard Hinnant's `days_from_civil`), for a valid
    /// year, month and day.
    fn from_ymd(year: u32, month: u32, day: u32) -> Date {
        let y = i64::from(year) - i64::from(month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (i64::from(month) + 9) % 12;
        let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        Date { days: (era * 146_097 + doe - 719_468) as i32 }
    }

    /// The day a Unix time in milliseconds falls on (UTC); times before 1970 are 1970-01-01.
    pub fn from_unix_ms(unix_ms: i64) -> Date {
        let days = unix_ms.div_euclid(86_400_000).clamp(0, i64::from(Date::LAST.days));
        Date { days: days as i32 }
    }

    /// Days since 1970-01-01.
    pub fn days_since_epoch(self) -> i32 {
        self.days
    }

    /// Year, month (1–12) and day.
    pub fn ymd(self) -> (i64, u32, u32) {
        civil_from_days(i64::from(self.days))
    }

    /// Whole days from `self` to `later` (negative when `later` is earlier).
    pub fn days_until(self, later: Date) -> i64 {
        i64::from(later.days) - i64::from(self.days)
    }

    /// The first day of the month `months` calendar months before the one `self` is in (its
    /// own month's first day for 0); 1970-01-01 at the earliest.
    pub fn first_of_month_back(self, months: u32) -> Date {
        let (year, month, _) = self.ymd();
        let index = (year * 12 + i64::from(month) - 1 - i64::from(months)).max(1970 * 12);
        Date::from_ymd(index.div_euclid(12) as u32, (index.rem_euclid(12) + 1) as u32, 1)
    }

    /// The calendar month `months` after the one `self` is in, as `YYYY-MM`.
    pub fn month_after(self, months: u32) -> String {
        let (year, month, _) = self.ymd();
        let index = year * 12 + i64::from(month) - 1 + i64::from(months);
        format!("{:04}-{:02}", index.div_euclid(12), index.rem_euclid(12) + 1)
    }

    /// Unix time in milliseconds of the date's first instant (UTC).
    pub fn unix_ms(self) -> i64 {
        i64::from(self.days) * 86_400_000
    }

    /// The first and last day of the calendar month before the one `self` is in.
    pub fn previous_month(self) -> (Date, Date) {
        let (year, month, _) = self.ymd();
        let (year, month) = if month == 1 { (year - 1, 12) } else { (year, month - 1) };
        // January 1970 has no month before it that a Date holds: it is its own.
        let (year, month) = if year < 1970 { (1970, 1) } else { (year as u32, month) };
        (Date::from_ymd(year, month, 1), Date::from_ymd(year, month, days_in_month(year, month)))
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (year, month, day) = self.ymd();
        write!(f, "{year:04}-{month:02}-{day:02}")
    }
}

/// Days in `month` (1–12) of `year`.
pub fn days_in_month(year: u32, month: u32) -> u32 {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 0,
    }
}

fn month_name(month: u32) -> &'static str {
    const NAMES: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    NAMES.get(month.wrapping_sub(1) as usize).copied().unwrap_or("that month")
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
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
    fn months_back_cross_years_and_stop_at_1970() {
        let day = Date::parse("2026-03-17").unwrap();
        assert_eq!(day.first_of_month_back(0).to_string(), "2026-03-01");
        assert_eq!(day.first_of_month_back(3).to_string(), "2025-12-01");
        assert_eq!(day.first_of_month_back(26).to_string(), "2024-01-01");
        assert_eq!(day.first_of_month_back(10_000), Date::EPOCH);
        assert_eq!(Date::parse("2026-12-01").unwrap().unix_ms(), 1_796_083_200_000);
        assert_eq!(Date::from_unix_ms(1_796_083_200_000 - 1).to_string(), "2026-11-30");
    }

    #[test]
    fn dates_that_exist_are_read_and_others_are_refused() {
        assert_eq!(Date::parse("1970-01-01").unwrap(), Date::EPOCH);
        assert_eq!(Date::parse("2000-02-29").unwrap().days_since_epoch(), 11_016);
        assert_eq!(Date::parse("2026-11-30").unwrap().to_string(), "2026-11-30");
        for bad in ["2026-02-29", "2026-02-31", "2026-13-01", "2026-00-10", "2026-04-31", "1969-12-31", "1900-02-29"] {
            assert!(Date::parse(bad).is_err(), "{bad}");
        }
        // Shapes integer parsers let through.
        for bad in ["+026-01-01", "2026-+1-01", "2026-1-01", "2026-01-1 ", " 2026-01-01", "２０２６-01-01", ""] {
            assert!(Date::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Date::parse("2026-02-30").unwrap_err(), "“2026-02-30” is not a day: February has 28 days");
        assert_eq!(Date::parse("2024-02-29").unwrap().to_string(), "2024-02-29");
    }

    #[test]
    fn every_day_round_trips_through_its_text() {
        for days in (0..2_932_896).step_by(7).chain([2_932_896]) {
            let date = Date { days };
            assert_eq!(Date::parse(&date.to_string()), Ok(date), "{days}");
        }
    }

    #[test]
    fn a_month_is_the_same_length_everywhere() {
        let nov = Date::parse("2026-11-30").unwrap();
        assert_eq!(
            (nov.month_after(0), nov.month_after(1), nov.month_after(14)),
            ("2026-11".into(), "2026-12".into(), "2028-01".into())
        );
        assert_eq!(HOURS_PER_MONTH, 730.0);
        assert_eq!(DAYS_PER_MONTH * 24.0, HOURS_PER_MONTH);
        assert_eq!(SECONDS_PER_MONTH, 730.0 * 3600.0);
        let start = Date::parse("2026-01-01").unwrap();
        // A year of billing months is a calendar year of 365 days.
        assert!((start.days_until(Date::parse("2027-01-01").unwrap()) as f64 - DAYS_PER_MONTH * 12.0).abs() < 1e-9);
    }

    #[test]
    fn the_previous_month_is_whole() {
        let (from, to) = Date::parse("2026-03-15").unwrap().previous_month();
        assert_eq!((from.to_string(), to.to_string()), ("2026-02-01".into(), "2026-02-28".into()));
        let (from, to) = Date::parse("2026-01-03").unwrap().previous_month();
        assert_eq!((from.to_string(), to.to_string()), ("2025-12-01".into(), "2025-12-31".into()));
        assert_eq!(Date::from_unix_ms(1_796_043_900_000).to_string(), "2026-11-30");
        assert_eq!(Date::EPOCH.previous_month().0, Date::EPOCH);
        assert_eq!(Date::from_unix_ms(i64::MAX).to_string(), "9999-12-31");
        assert_eq!(Date::parse("9999-12-31"), Ok(Date::LAST));
    }
}
