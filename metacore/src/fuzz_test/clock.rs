//! RFC 3339 times as other services write them (`lastHeartbeat` in the
//! registry's files).

use proptest::prelude::*;

use super::mutation;
use crate::clock::parse_rfc3339_ms;
use crate::testing::cases;

/// The calendar date of a day since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, the inverse of what the parser counts with).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `ms` written as RFC 3339 in UTC with milliseconds.
fn utc(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, frac) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{frac:03}Z")
}

/// Times from the epoch to the end of year 9999.
fn instant() -> impl Strategy<Value = u64> {
    0..253_402_300_800_000u64
}

/// An RFC 3339 time and its instant, some of the ways the mesh writes
/// one: the separator, the fraction and the offset varied.
fn written() -> impl Strategy<Value = (u64, String)> {
    (
        // A day past the epoch to a day before year 9999 ends: the wall
        // clock of any offset stays in what `utc` writes.
        86_400_000..253_402_214_400_000u64,
        prop::sample::select(vec!['T', 't', ' ']),
        0..3u8,
        -1439..=1439i64,
        any::<bool>(),
    )
        .prop_map(|(instant, sep, frac, offset_min, zulu)| {
            let offset = if zulu { 0 } else { offset_min };
            let ms = if frac == 0 {
                instant - instant % 1000
            } else {
                instant
            };
            let wall = utc((ms as i64 + offset * 60_000) as u64);
            let (date, time) = (&wall[..10], &wall[11..wall.len() - 1]);
            let time = match frac {
                0 => time[..8].to_owned(),
                1 => time.to_owned(),
                // Digits past the milliseconds are dropped.
                _ => format!("{time}999"),
            };
            let zone = match (zulu, offset < 0) {
                (true, _) => "Z".to_owned(),
                (false, neg) => format!(
                    "{}{:02}:{:02}",
                    if neg { '-' } else { '+' },
                    offset.abs() / 60,
                    offset.abs() % 60
                ),
            };
            (ms, format!("{date}{sep}{time}{zone}"))
        })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_text_is_a_time_or_none(s in any::<String>()) {
        if let Some(ms) = parse_rfc3339_ms(&s) {
            prop_assert_eq!(parse_rfc3339_ms(&utc(ms)), Some(ms));
        }
    }

    #[test]
    fn every_time_written_in_utc_reads_back(ms in instant()) {
        prop_assert_eq!(parse_rfc3339_ms(&utc(ms)), Some(ms));
    }

    #[test]
    fn a_time_with_any_offset_separator_and_fraction_reads_as_its_instant(
        (ms, text) in written(),
    ) {
        prop_assert_eq!(parse_rfc3339_ms(&text), Some(ms), "{}", text);
    }

    #[test]
    fn a_time_with_one_mutation_is_a_time_or_none((_, text) in written(), m in mutation()) {
        if let Some(ms) = parse_rfc3339_ms(&m.apply(&text)) {
            prop_assert_eq!(parse_rfc3339_ms(&utc(ms)), Some(ms));
        }
    }
}
