//! The wall clock, read one way everywhere: Unix milliseconds; and times
//! other programs write (RFC 3339) read into the same milliseconds, on the
//! one calendar every parser here counts with.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is set before it).
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Unix milliseconds of an RFC 3339 time (`Z` or a `±hh:mm` offset, with
/// or without a fraction), read as tolerantly as the services of the mesh
/// write it: `T`, `t` or a space between date and time, and no offset at
/// all (Python's `isoformat` of a naive time) read as UTC. `None` for
/// anything else, and for a time before the epoch.
pub fn parse_rfc3339_ms(s: &str) -> Option<u64> {
    let (date, rest) = s.trim().split_once(['T', 't', ' '])?;
    let (year, month, day) = calendar_date(date)?;
    let (time, offset_s) = split_offset(rest)?;
    let (secs_of_day, ms) = time_of_day(time)?;
    let days = days_from_civil(year, month, day)?;
    let secs = days
        .checked_mul(86_400)?
        .checked_add(secs_of_day)?
        .checked_sub(offset_s)?;
    u64::try_from(secs.checked_mul(1000)?.checked_add(ms)?).ok()
}

/// Days in `month` (1-12) of `year`, Gregorian (year 0 is a leap year, as
/// Go's `time` counts); 0 for a number that is no month.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        _ => 0,
    }
}

/// Gregorian leap years.
fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// One or more ASCII digits and nothing else.
fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `Y-M-D` (digits only), checked against the calendar.
fn calendar_date(date: &str) -> Option<(i64, u32, u32)> {
    if !date.split('-').all(all_digits) {
        return None;
    }
    let mut d = date.splitn(3, '-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    (day >= 1 && day <= days_in_month(year, month)).then_some((year, month, day))
}

/// The time of day and its offset east of UTC in seconds: `Z`, `±hh:mm`,
/// or none (UTC).
fn split_offset(rest: &str) -> Option<(&str, i64)> {
    if let Some(time) = rest.strip_suffix(['Z', 'z']) {
        return Some((time, 0));
    }
    let Some(at) = rest.rfind(['+', '-']) else {
        return Some((rest, 0));
    };
    let (time, offset) = rest.split_at(at);
    let sign = if offset.starts_with('-') { -1 } else { 1 };
    let (hours, minutes) = offset[1..].split_once(':')?;
    if !all_digits(hours) || !all_digits(minutes) {
        return None;
    }
    let (hours, minutes): (i64, i64) = (hours.parse().ok()?, minutes.parse().ok()?);
    let secs = hours
        .checked_mul(3600)?
        .checked_add(minutes.checked_mul(60)?)?;
    Some((time, sign * secs))
}

/// `hh:mm:ss` with an optional fraction: the seconds into the day and the
/// milliseconds of the fraction (digits past the third are dropped). A
/// leap second (`:60`) is taken.
fn time_of_day(time: &str) -> Option<(i64, i64)> {
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    if !hms.split(':').all(all_digits) {
        return None;
    }
    let mut t = hms.splitn(3, ':');
    let hour: i64 = t.next()?.parse().ok()?;
    let minute: i64 = t.next()?.parse().ok()?;
    let second: i64 = t.next()?.parse().ok()?;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let ms = match fraction {
        "" => 0,
        f if all_digits(f) => format!("{f:0<3}")[..3].parse().ok()?,
        _ => return None,
    };
    Some((hour * 3600 + minute * 60 + second, ms))
}

/// Days since 1970-01-01 of a calendar date (Howard Hinnant's
/// `days_from_civil`); `None` past what an `i64` holds.
fn days_from_civil(year: i64, month: u32, day: u32) -> Option<i64> {
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * i64::from(m) + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era.checked_mul(146_097)?
        .checked_add(day_of_era)?
        .checked_sub(719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_as_the_mesh_writes_them() {
        let base = 1_764_600_000_000u64; // 2025-12-01T14:40:00Z
        for (text, ms) in [
            ("2025-12-01T14:40:00Z", base),
            ("2025-12-01T14:40:00.5Z", base + 500),
            ("2025-12-01T14:40:00.123456789Z", base + 123),
            ("2025-12-01T15:40:00+01:00", base),
            ("2025-12-01T09:10:00-05:30", base),
            ("2025-12-01t14:40:00z", base),
            ("2025-12-01 14:40:00", base),
            ("  2025-12-01T14:40:00Z\n", base),
            ("2025-12-01T14:40:00", base),
            ("1970-01-01T00:00:00Z", 0),
            ("2024-02-29T00:00:00Z", 1_709_164_800_000),
            ("2000-02-29T00:00:00Z", 951_782_400_000),
            ("2026-12-01T14:51:20.250+00:00", 1_796_136_680_250),
            ("2016-12-31T23:59:60Z", 1_483_228_800_000),
        ] {
            assert_eq!(parse_rfc3339_ms(text), Some(ms), "{text}");
        }
    }

    #[test]
    fn what_is_no_rfc3339_time_is_none() {
        for bad in [
            "",
            "yesterday",
            "2025-13-01T00:00:00Z",
            "2025-00-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2025-04-31T00:00:00Z",
            "2025-12-00T00:00:00Z",
            "2025-12-01",
            "2025-12-01T1:2Z",
            "2025-12-01T24:00:00Z",
            "2025-12-01T00:60:00Z",
            "2025-12-01T00:00:61Z",
            "2025-12-01T00:00:00.x1Z",
            "2025-12-01T-1:00:00Z",
            "2025-12-01T00:00:00+1x:00",
            "2025-12-01T00:00:00+0100",
            "2025-12-01T00:00:00+99999999999999999:00",
            "2025-12-01T00:00:00-99999999999999999:00",
            "+2025-12-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "99999999999999999-01-01T00:00:00Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn months_have_their_days() {
        assert_eq!(days_in_month(2025, 1), 31);
        assert_eq!(days_in_month(2025, 2), 28);
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
        assert_eq!(days_in_month(0, 2), 29);
        assert_eq!(days_in_month(2025, 11), 30);
        assert_eq!(days_in_month(2025, 0), 0);
        assert_eq!(days_in_month(2025, 13), 0);
    }
}
