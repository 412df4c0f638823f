//! `meta-core backup <file>`: asks storaged, which owns the database, for
//! a consistent copy of it written to `<file>` while writes go on
//! (`POST /backup` on storaged's socket, `docs/operations.md`), and says
//! what it wrote. The one operator command that needs an async runtime: it
//! uses storaged's typed client, and the call takes as long as the copy.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use metacore::Config;
use metacore::api::storaged::{BackupDone, BackupRequest, StoragedClient};
use metacore::error::ErrorCode;
use metacore::layout::Daemon;
use metacore::socket::client::ClientError;

/// How long the CLI waits for the copy: hours of margin over what a large
/// store takes (its size read at disk speed, twice: copy and check).
pub(crate) const BACKUP_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// `meta-core backup <file>`; `<file>` relative to the current folder.
pub(super) fn backup(config: &Config, file: &Path) -> ExitCode {
    let path = match absolute(file) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("meta-core: cannot resolve {}: {e}", file.display());
            return ExitCode::FAILURE;
        }
    };
    let socket = config.layout().socket(Daemon::Storaged);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("meta-core: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let client = StoragedClient::new(&socket);
    let req = BackupRequest { path };
    let answer = runtime.block_on(async {
        client.handshake().await?;
        match tokio::time::timeout(BACKUP_TIMEOUT, client.backup(&req)).await {
            Ok(r) => r.map(Some),
            Err(_) => Ok(None),
        }
    });
    match answer {
        Ok(Some(done)) => {
            println!("{}", render(&done));
            ExitCode::SUCCESS
        }
        Ok(None) => {
            eprintln!(
                "meta-core: storaged did not finish the backup within {} min; stopped waiting \
                 (see `meta-core logs storaged` for what became of it)",
                BACKUP_TIMEOUT.as_secs() / 60
            );
            ExitCode::FAILURE
        }
        Err(ClientError::Unavailable { .. }) => {
            eprintln!(
                "meta-core: storaged is not running: nothing answers on {} (start meta-core \
                 first, with the same META_CORE_RUN_DIR)",
                socket.display()
            );
            ExitCode::FAILURE
        }
        Err(ClientError::Api(e)) => {
            eprintln!("meta-core: backup failed: {}", e.message);
            // A target refused as named is a command line to correct.
            if e.code == ErrorCode::BadRequest {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("meta-core: backup failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `file` against the current folder when it is relative (storaged runs
/// elsewhere and is sent an absolute path). Not resolved further: storaged
/// checks the folder, links and all.
fn absolute(file: &Path) -> std::io::Result<PathBuf> {
    if file.is_absolute() {
        return Ok(file.to_owned());
    }
    Ok(std::env::current_dir()?.join(file))
}

/// `backed up 123,456 rows, 45.6 MiB to /x/y.db in 812 ms`.
pub(crate) fn render(d: &BackupDone) -> String {
    format!(
        "backed up {} rows, {} to {} in {}",
        thousands(d.rows),
        size(d.bytes),
        d.path.display(),
        duration(d.elapsed_ms)
    )
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in the largest binary unit under which the figure stays >= 1.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `812 ms`, `12.3 s`, `4 min 05 s`.
fn duration(ms: u64) -> String {
    match ms {
        0..10_000 => format!("{ms} ms"),
        10_000..120_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{} min {:02} s", ms / 60_000, ms % 60_000 / 1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_reads_as_a_sentence() {
        let done = BackupDone {
            path: "/x/y.db".into(),
            rows: 123_456,
            bytes: 47_814_246,
            elapsed_ms: 812,
        };
        assert_eq!(
            render(&done),
            "backed up 123,456 rows, 45.6 MiB to /x/y.db in 812 ms"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(8192), "8.0 KiB");
        assert_eq!(size(3 << 30), "3.0 GiB");
        assert_eq!(duration(12_345), "12.3 s");
        assert_eq!(duration(245_000), "4 min 05 s");
    }

    #[test]
    fn a_relative_file_is_taken_from_the_current_folder() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(absolute(Path::new("b.db")).unwrap(), here.join("b.db"));
        assert_eq!(
            absolute(Path::new("/abs/b.db")).unwrap(),
            PathBuf::from("/abs/b.db")
        );
    }
}
