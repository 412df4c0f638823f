//! The units a mount's settings are written in: Go durations (`24h`,
//! `5m`, as the original's `time.ParseDuration` read them) and rclone's
//! sizes (`50G`).

/// A Go duration (`24h`, `5m`, `1h30m`, `500ms`, `0`), in nanoseconds.
pub fn go_duration_ns(text: &str) -> Option<u64> {
    if text == "0" {
        return Some(0);
    }
    let mut rest = text;
    let mut total: u64 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(digits);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale: u64 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && frac.is_empty() {
            return None;
        }
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut part = whole.checked_mul(scale)?;
        if !frac.is_empty() {
            let frac = &frac[..frac.len().min(9)];
            let f: u64 = frac.parse().ok()?;
            part = part.checked_add(f * scale / 10u64.pow(frac.len() as u32))?;
        }
        total = total.checked_add(part)?;
        rest = tail;
    }
    Some(total)
}

/// `raw` trimmed, when it is a Go duration.
pub fn duration(raw: &str) -> Option<&str> {
    let v = raw.trim();
    go_duration_ns(v).map(|_| v)
}

/// `raw` trimmed, when it is in rclone's size form: `off`, or a number
/// with an optional unit letter (`b k M G T P E`, either case), as `50G`
/// or `1.5T`.
pub fn size(raw: &str) -> Option<&str> {
    let v = raw.trim();
    let number = v.trim_end_matches(|c: char| "bBkKmMgGtTpPeE".contains(c));
    let ok = v == "off"
        || (!number.is_empty()
            && v.len() - number.len() <= 1
            && number.len() <= 20
            && number.split('.').count() <= 2
            && number.split('.').all(|p| !p.is_empty())
            && number.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
    ok.then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_read_as_go_reads_them() {
        let s = 1_000_000_000u64;
        assert_eq!(go_duration_ns("24h"), Some(24 * 3600 * s));
        assert_eq!(go_duration_ns("5m"), Some(300 * s));
        assert_eq!(go_duration_ns("1h30m"), Some(5400 * s));
        assert_eq!(go_duration_ns("1.5s"), Some(1_500_000_000));
        assert_eq!(go_duration_ns("500ms"), Some(500_000_000));
        assert_eq!(go_duration_ns("0"), Some(0));
        for bad in ["", "5", "h", "5d", "-5m", "1..5s", "99999999999999999999h"] {
            assert_eq!(go_duration_ns(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_are_rclones() {
        for good in ["50G", "1.5T", "500M", "off", "1024", "10k"] {
            assert!(size(good).is_some(), "{good}");
        }
        for bad in ["", "G", "lots", "1.2.3G", "5GB", "-1G"] {
            assert!(size(bad).is_none(), "{bad}");
        }
    }
}
