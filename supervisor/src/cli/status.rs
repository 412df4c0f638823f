//! `meta-core status`: the supervisor's status as the operator reads it.

use metacore::api::supervisor::{DaemonStatus, SupervisorStatus};

/// "850ms", "42s", "3m 12s", "5h 02m", "3d 04h".
pub(crate) fn human(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0 => format!("{ms}ms"),
        1..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// The status as the operator reads it.
pub(crate) fn render_status(s: &SupervisorStatus, now_ms: u64) -> String {
    let mut out = format!(
        "meta-core {} (pid {}, up {})",
        s.role.as_str(),
        s.pid,
        human(s.uptime_ms)
    );
    if let Some(url) = &s.leader_url {
        out.push_str(&format!(", leader {url}"));
    }
    out.push_str(&format!(", logs in {}\n", s.log_dir));
    let rows: Vec<[String; 7]> = s.daemons.iter().map(|d| row(d, now_ms)).collect();
    let header = [
        "DAEMON",
        "PID",
        "STATE",
        "READY",
        "UPTIME",
        "RESTARTS",
        "LAST EXIT",
    ]
    .map(String::from);
    let mut widths = header.clone().map(|h| h.len());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    for r in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(widths).enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for d in &s.daemons {
        if let Some(why) = &d.degraded {
            out.push_str(&format!("{} is degraded: {why}\n", d.name));
        }
    }
    out
}

fn row(d: &DaemonStatus, now_ms: u64) -> [String; 7] {
    let state = match d.next_start_in_ms {
        Some(ms) => format!("{} (next start in {})", d.state.as_str(), human(ms)),
        None => d.state.as_str().to_owned(),
    };
    let last = match &d.last_exit {
        Some(e) => format!("{}, {} ago", e.reason, human(now_ms.saturating_sub(e.at))),
        None => "-".into(),
    };
    [
        d.name.to_string(),
        d.pid.map_or("-".into(), |p| p.to_string()),
        state,
        if d.ready { "yes" } else { "no" }.into(),
        d.uptime_ms.map_or("-".into(), human),
        d.restarts.to_string(),
        last,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_human_wrote_them() {
        assert_eq!(human(850), "850ms");
        assert_eq!(human(42_000), "42s");
        assert_eq!(human(192_000), "3m 12s");
        assert_eq!(human(5 * 3_600_000 + 120_000), "5h 02m");
    }
}
