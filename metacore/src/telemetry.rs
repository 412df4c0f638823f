//! Tracing set-up shared by every binary: text or JSON lines on stderr
//! (`LOG_FORMAT`), filtered by `RUST_LOG` (default `info`).
//!
//! `RUST_LOG` takes comma-separated `target=level` directives and a bare
//! level for the rest (`warn,storaged=debug`): tracing-subscriber's
//! `Targets`, which needs no regex engine, so each process maps a few
//! hundred KiB less code. Span and field filters are not supported; a
//! value that does not parse is reported and `info` is used.

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// The filter `RUST_LOG` asks for, or `info` and why not.
fn filter(rust_log: Option<&str>) -> (Targets, Option<String>) {
    let default = Targets::new().with_default(LevelFilter::INFO);
    match rust_log.map(str::trim).filter(|s| !s.is_empty()) {
        None => (default, None),
        Some(s) => match s.parse::<Targets>() {
            Ok(t) => (t, None),
            Err(e) => (
                default,
                Some(format!(
                    "RUST_LOG={s:?} is not a filter ({e}); logging at info"
                )),
            ),
        },
    }
}

/// Installs the global subscriber; a second call is a no-op.
pub fn init(format: LogFormat) {
    let (targets, bad) = filter(std::env::var("RUST_LOG").ok().as_deref());
    let builder = tracing_subscriber::fmt()
        .with_max_level(LevelFilter::TRACE)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .finish()
            .with(targets)
            .try_init(),
        LogFormat::Text => builder.with_ansi(false).finish().with(targets).try_init(),
    };
    if let Some(why) = bad {
        tracing::warn!("{why}");
    }
}

/// Prints an error and its whole `source()` chain, one cause a line.
pub fn report(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str("\n  caused by: ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use tracing::Level;

    use super::*;

    #[test]
    fn rust_log_directives_and_their_errors() {
        let (t, bad) = filter(Some("warn,storaged=debug"));
        assert!(bad.is_none());
        assert!(t.would_enable("storaged::engine", &Level::DEBUG));
        assert!(!t.would_enable("apid", &Level::INFO));
        let (t, bad) = filter(None);
        assert!(
            bad.is_none()
                && t.would_enable("apid", &Level::INFO)
                && !t.would_enable("apid", &Level::DEBUG)
        );
        let (t, bad) = filter(Some("storaged=loud"));
        assert!(bad.is_some_and(|b| b.contains("storaged=loud")));
        assert!(
            t.would_enable("storaged", &Level::INFO),
            "a bad filter falls back to info"
        );
    }
}
