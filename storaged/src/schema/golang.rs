//! The parts of Go's standard library that the original service's
//! `ClassifyValue` leaned on, re-implemented as far as "no error" goes:
//! `strconv.ParseFloat(s, 64)`, and `time.Parse` with the RFC 3339 and
//! `2006-01-02` layouts.
//!
//! The original service was written in Go and classified values with those
//! functions, so a value is a float or a timestamp string exactly when Go
//! would have parsed it. Rust's own parsers accept a different set (see
//! each section), hence this module. The one known difference from Go
//! (hex-float rounding at the overflow edge) is noted where it arises.

use metacore::clock::days_in_month;

// ---- Go's strconv.ParseFloat(s, 64), as far as "no error" goes ----------
//
// Rust's `f64` parse differs from Go's: it accepts `+nan`/`-nan` (Go does
// not), and refuses `_` separators and hex floats (Go accepts `1_000` and
// `0x1p-2`); Go also reports an error for a literal too large for an f64
// (`1e400`), where Rust returns infinity. So the syntax is checked here the
// way Go's `readFloat` does, and Rust's parse is used only to tell whether
// a decimal literal is in range.

/// Whether `strconv.ParseFloat(s, 64)` succeeds: `inf`, `infinity` (either
/// with a sign) or unsigned `nan`, any case; otherwise a decimal or `0x`
/// hex literal in Go's syntax whose value does not overflow. Underflow is
/// no error in Go (`1e-400` is 0), so it is none here.
pub(super) fn parses_float(s: &str) -> bool {
    if special(s) {
        return true;
    }
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let hex = b.len() > i + 2 && b[i] == b'0' && b[i + 1].eq_ignore_ascii_case(&b'x');
    if hex {
        i += 2;
    }
    let mantissa_start = i;
    let (mut dot, mut digits, mut underscores) = (false, false, false);
    while let Some(&c) = b.get(i) {
        match c {
            b'_' => underscores = true,
            b'.' if !dot => dot = true,
            b'0'..=b'9' => digits = true,
            c if hex && c.is_ascii_hexdigit() => digits = true,
            _ => break,
        }
        i += 1;
    }
    if !digits {
        return false;
    }
    let mantissa = &s[mantissa_start..i];
    let exp_char = if hex { b'p' } else { b'e' };
    let mut exponent = "";
    if b.get(i).is_some_and(|c| c.eq_ignore_ascii_case(&exp_char)) {
        i += 1;
        let exp_start = i;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !b.get(i).is_some_and(u8::is_ascii_digit) {
            return false;
        }
        while let Some(&c) = b.get(i)
            && (c.is_ascii_digit() || c == b'_')
        {
            underscores |= c == b'_';
            i += 1;
        }
        exponent = &s[exp_start..i];
    } else if hex {
        // Go's hex floats must have a `p` exponent: `0x10` is no float.
        return false;
    }
    if i != b.len() || (underscores && !underscore_ok(s)) {
        return false;
    }
    if hex {
        hex_is_finite(mantissa, exponent)
    } else {
        s.replace('_', "").parse::<f64>().is_ok_and(f64::is_finite)
    }
}

/// Go's `special`, required to consume the whole string.
fn special(s: &str) -> bool {
    let (body, signed) = match s.strip_prefix(['+', '-']) {
        Some(rest) => (rest, true),
        None => (s, false),
    };
    body.eq_ignore_ascii_case("inf")
        || body.eq_ignore_ascii_case("infinity")
        || (!signed && body.eq_ignore_ascii_case("nan"))
}

/// Go's `underscoreOK`: each `_` sits between two digits, or between a
/// base prefix and a digit.
fn underscore_ok(s: &str) -> bool {
    let b = s.strip_prefix(['+', '-']).unwrap_or(s).as_bytes();
    let mut saw = b'^';
    let mut hex = false;
    let mut rest = b;
    if let [b'0', p, tail @ ..] = b
        && matches!(p.to_ascii_lowercase(), b'b' | b'o' | b'x')
    {
        saw = b'0';
        hex = p.eq_ignore_ascii_case(&b'x');
        rest = tail;
    }
    for &c in rest {
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// Whether a hex literal (mantissa digits with `_` and at most one `.`,
/// exponent with optional sign and `_`) is below 2^1024, where Go reports
/// overflow. Decided by the position of the leading 1 bit; a value within
/// half an ULP of 2^1024, which Go rounds up to an overflow, counts as
/// finite here.
fn hex_is_finite(mantissa: &str, exponent: &str) -> bool {
    let (negative, exp_digits) = match exponent.strip_prefix(['+', '-']) {
        Some(d) => (exponent.starts_with('-'), d),
        None => (false, exponent),
    };
    let exp = exp_digits
        .bytes()
        .filter(u8::is_ascii_digit)
        .fold(0i64, |e, d| {
            e.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    let exp = if negative { -exp } else { exp };
    let digits = mantissa.bytes().filter(|&c| c != b'_');
    let int_digits = digits.clone().take_while(|&c| c != b'.').count();
    let mut values = digits
        .filter(|&c| c != b'.')
        .map(|c| (c as char).to_digit(16).unwrap_or(0));
    let Some(zeros) = values.clone().position(|d| d != 0) else {
        return true; // zero
    };
    let leading = values.nth(zeros).unwrap_or(1);
    // The leading digit's top bit is worth 2^(4 * (whole hex digits from
    // it, minus one) + its bit length - 1 + exponent).
    let whole_from_leading = int_digits as i64 - zeros as i64;
    let top_bit = 4 * (whole_from_leading - 1) + (32 - i64::from(leading.leading_zeros())) - 1;
    top_bit.saturating_add(exp) < 1024
}

// ---- Go's time.Parse(time.RFC3339, s) and time.Parse("2006-01-02", s) ---
//
// The layout `2006-01-02T15:04:05Z07:00`, parsed the way Go's general
// parser does (its RFC 3339 fast path accepts a subset of the same):
// - year, month, day, minute and second are fixed-width; the hour takes
//   one or two digits (`T5:04:05` parses in Go);
// - month 1-12, day valid for the month and year (Gregorian leap years),
//   hour 0-23, minute 0-59, second 0-59: Go refuses a leap second `60`,
//   and so does this;
// - an optional fraction, `.` or `,` then at least one digit, any length;
// - `Z` (uppercase only), or `+hh:mm`/`-hh:mm` with hh <= 24 and
//   mm <= 60: Go's offset range check uses `>`, not `>=`;
// - `T` uppercase only, nothing after the zone.
//
// That grammar is Go's, not the tolerant reading of `metacore::clock`
// (which takes a leap second, `t`, a space, no zone): only the calendar
// is shared.

pub(super) fn is_date(v: &str) -> bool {
    date(v.as_bytes()).is_some_and(<[u8]>::is_empty)
}

pub(super) fn is_rfc3339(v: &str) -> bool {
    date(v.as_bytes())
        .and_then(|rest| rest.strip_prefix(b"T"))
        .and_then(clock)
        .is_some_and(zone_ok)
}

/// A `YYYY-MM-DD` calendar date at the start of `s`; returns the rest.
fn date(s: &[u8]) -> Option<&[u8]> {
    let (year, s) = digits(s, 4)?;
    let (month, s) = digits(s.strip_prefix(b"-")?, 2)?;
    let (day, s) = digits(s.strip_prefix(b"-")?, 2)?;
    (1..=days_in_month(i64::from(year), month))
        .contains(&day)
        .then_some(s)
}

/// `H:MM:SS` or `HH:MM:SS` with an optional fraction; returns the rest.
fn clock(s: &[u8]) -> Option<&[u8]> {
    let (hour, s) = match s {
        [a, b, ..] if a.is_ascii_digit() && b.is_ascii_digit() => digits(s, 2)?,
        _ => digits(s, 1)?,
    };
    let (minute, s) = digits(s.strip_prefix(b":")?, 2)?;
    let (second, s) = digits(s.strip_prefix(b":")?, 2)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    match s {
        [b'.' | b',', d, ..] if d.is_ascii_digit() => {
            let n = s[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            Some(&s[1 + n..])
        }
        _ => Some(s),
    }
}

/// `Z`, or a `±hh:mm` offset within Go's ranges, and nothing after it.
fn zone_ok(s: &[u8]) -> bool {
    let [b'+' | b'-', hh @ .., b':', m1, m2] = s else {
        return s == b"Z";
    };
    match (digits(hh, 2), digits(&[*m1, *m2], 2)) {
        (Some((h, rest)), Some((m, _))) => rest.is_empty() && h <= 24 && m <= 60,
        _ => false,
    }
}

/// Exactly `n` ASCII digits at the start of `s` as a number, and the rest.
fn digits(s: &[u8], n: usize) -> Option<(u32, &[u8])> {
    let (head, rest) = s.split_at_checked(n)?;
    head.iter().all(u8::is_ascii_digit).then(|| {
        let value = head.iter().fold(0, |acc, d| acc * 10 + u32::from(d - b'0'));
        (value, rest)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts `parses(v) == expected` for each value, naming the one that
    /// fails.
    fn check(parses: fn(&str) -> bool, expected: bool, values: &[&str]) {
        for v in values {
            assert_eq!(parses(v), expected, "value {v:?}");
        }
    }

    #[test]
    fn go_float_syntax_parses() {
        check(
            parses_float,
            true,
            &[
                "1.5",
                "-0.25",
                "1e5",
                "1E-3",
                ".5",
                "5.",
                "+.5e+2",
                "1_000",
                "1_000.5",
                "1e1_0",
                "Inf",
                "+Inf",
                "-inf",
                "infinity",
                "-Infinity",
                "NaN",
                "nan",
                "0x1p-2",
                "0X1.8P+1",
                "0x_1p0",
                "0x1p1023",
                "1e-400",
                "0e99999",
            ],
        );
    }

    #[test]
    fn what_go_refuses_as_float_does_not_parse() {
        check(
            parses_float,
            false,
            &[
                "+NaN", "-nan", "infinit", "infx", "inf ", " 1.5", "1.5 ", "1.2.3", "1e", "e5",
                ".", "-", "1__0", "_1", "1_", "1_.5", "1._5", "0x10", "0x", "0x1p", "0b101",
                // Out of range: Go's ParseFloat reports ErrRange.
                "1e400", "-1e400", "0x1p1024", "0x1p2000",
            ],
        );
    }

    #[test]
    fn rfc3339_date_times_parse() {
        check(
            is_rfc3339,
            true,
            &[
                "2023-06-01T12:34:56Z",
                "2023-06-01T12:34:56+02:00",
                "2023-06-01T12:34:56.123456789-07:30",
                "2023-06-01T12:34:56.1234567891234Z",
                "2023-06-01T12:34:56,5Z",
                "2024-02-29T00:00:00Z",
                "2023-12-31T23:59:59Z",
                "2023-06-01T1:02:03Z",       // Go's hour takes one digit
                "2023-06-01T12:00:00+24:00", // Go's offset check is `>`
                "2023-06-01T12:00:00-00:60",
            ],
        );
        check(
            is_rfc3339,
            false,
            &[
                "2023-06-01T24:00:00Z",
                "2023-06-01T12:60:00Z",
                "2023-06-01T12:00:60Z", // no leap second
                "2023-06-01T12:00:00",  // no zone
                "2023-06-01t12:00:00Z",
                "2023-06-01T12:00:00z",
                "2023-06-01 12:00:00Z",
                "2023-06-01T12:00:00+0200",
                "2023-06-01T12:00:00+02",
                "2023-06-01T12:00:00+25:00",
                "2023-06-01T12:00:00+02:61",
                "2023-06-01T12:00:00.Z",
                "2023-06-01T12:00Z",
                "2023-06-01T12:00:00Z ",
                "2023-02-29T12:00:00Z",
            ],
        );
    }

    #[test]
    fn calendar_dates_parse() {
        check(
            is_date,
            true,
            &[
                "2023-06-01",
                "2024-02-29",
                "2000-02-29",
                "0000-01-01",
                "9999-12-31",
            ],
        );
        check(
            is_date,
            false,
            &[
                "2023-02-29",
                "1900-02-29",
                "2023-02-30",
                "2023-04-31",
                "2023-13-01",
                "2023-00-10",
                "2023-06-00",
                "2023-6-1",
                "23-06-01",
                "2023/06/01",
                "2023-06-01x",
            ],
        );
    }
}
