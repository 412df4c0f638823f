//! Per-daemon logs: each child's output, line by line, appended to
//! `<log dir>/<daemon>.log` and echoed to the supervisor's stdout as
//! `<daemon> | <line>` (what `docker logs` shows), or with `LOG_FORMAT=json`
//! as JSON lines that carry `"daemon"`.
//!
//! Rotation by size: when a write would take the file past
//! `META_CORE_LOG_MAX_BYTES`, `<daemon>.log` becomes `<daemon>.log.1`, the
//! older ones shift up to `META_CORE_LOG_KEEP`, and the oldest is removed.
//! SIGHUP reopens every file (for an external logrotate that moved them).

mod queue;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use metacore::layout::Daemon;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use self::queue::{Dequeue, Queue, queue};

/// A line longer than this is cut into pieces of this size.
pub(crate) const MAX_LINE: usize = 16 * 1024;

/// One daemon's log file.
#[derive(Debug)]
pub(crate) struct LogFile {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    max_bytes: u64,
    keep: u32,
}

impl LogFile {
    pub(crate) fn open(dir: &Path, daemon: Daemon, max_bytes: u64, keep: u32) -> io::Result<Self> {
        let mut log = Self {
            path: path_of(dir, daemon),
            file: None,
            size: 0,
            max_bytes,
            keep,
        };
        log.reopen()?;
        Ok(log)
    }

    /// Closes and opens the file again (append), wherever it went.
    pub(crate) fn reopen(&mut self) -> io::Result<()> {
        self.file = None;
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(file);
        Ok(())
    }

    /// Appends one line (without its newline), rotating first when needed.
    pub(crate) fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let len = line.len() as u64 + 1;
        if self.size > 0 && self.size + len > self.max_bytes {
            self.rotate()?;
        }
        if self.file.is_none() {
            self.reopen()?;
        }
        let Some(file) = self.file.as_mut() else {
            return Err(io::Error::other("the log file is not open"));
        };
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        file.write_all(&buf)?;
        self.size += len;
        Ok(())
    }

    /// Shifts the files up and starts a new one. A file someone else
    /// removed or moved meanwhile is not an error: the new file is opened
    /// whatever happened to the old one.
    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        let gone_is_fine = |r: io::Result<()>| match r {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
        let shifted = if self.keep == 0 {
            gone_is_fine(std::fs::remove_file(&self.path))
        } else {
            let numbered = |n: u32| PathBuf::from(format!("{}.{n}", self.path.display()));
            let _ = std::fs::remove_file(numbered(self.keep));
            (1..self.keep)
                .rev()
                .try_for_each(|n| gone_is_fine(std::fs::rename(numbered(n), numbered(n + 1))))
                .and_then(|()| gone_is_fine(std::fs::rename(&self.path, numbered(1))))
        };
        let reopened = self.reopen();
        shifted.and(reopened)
    }
}

/// `<dir>/<daemon>.log`.
pub(crate) fn path_of(dir: &Path, daemon: Daemon) -> PathBuf {
    dir.join(format!("{}.log", daemon.name()))
}

/// Lines waiting for a writer thread; past this, lines are dropped (and
/// counted) rather than stalling the supervisor or the daemons.
pub(crate) const QUEUE_LINES: usize = 2048;

enum FileMsg {
    Line(Daemon, Vec<u8>),
    /// Look at the reopen flag now.
    Wake,
}

/// The daemons' logs. The files and stdout are written by two threads of
/// their own, fed through bounded queues: a stdout nobody drains or a
/// stalled disk must not freeze the supervisor (its reaping, health checks
/// and signals run on one thread) nor, through full pipes, the daemons.
/// What does not fit in a queue is dropped, and the count is written in
/// its place once the writer catches up.
#[derive(Debug, Clone)]
pub(crate) struct Logs {
    /// To the file writer thread: every daemon's lines, in order.
    files: Queue<FileMsg>,
    /// To the stdout writer thread, and how lines are echoed.
    echo: (Queue<Vec<u8>>, Echo),
    /// Lines dropped since the file writer last caught up.
    dropped_file: Arc<AtomicU64>,
    /// Lines dropped since the stdout writer last caught up.
    dropped_echo: Arc<AtomicU64>,
    /// Set by SIGHUP, read by the file writer before each line.
    reopen: Arc<AtomicBool>,
}

impl std::fmt::Debug for FileMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileMsg::Line(d, l) => write!(f, "Line({}, {} bytes)", d.name(), l.len()),
            FileMsg::Wake => f.write_str("Wake"),
        }
    }
}

impl Logs {
    /// Opens (creates) every daemon's file and starts the writer threads.
    pub(crate) fn open(
        dir: &Path,
        daemons: &[Daemon],
        max_bytes: u64,
        keep: u32,
        echo: Echo,
    ) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::new();
        for &d in daemons {
            files.push((d, LogFile::open(dir, d, max_bytes, keep)?));
        }
        let dropped_file = Arc::new(AtomicU64::new(0));
        let (files_tx, files_rx) = queue();
        let (dropped, reopen) = (dropped_file.clone(), Arc::new(AtomicBool::new(false)));
        let flag = reopen.clone();
        std::thread::Builder::new()
            .name("log-files".into())
            .spawn(move || write_files(files, files_rx, &dropped, &flag))?;
        let dropped_echo = Arc::new(AtomicU64::new(0));
        let (echo_tx, echo_rx) = queue();
        let dropped = dropped_echo.clone();
        std::thread::Builder::new()
            .name("log-echo".into())
            .spawn(move || write_echo(echo_rx, &dropped))?;
        Ok(Self {
            files: files_tx,
            echo: (echo_tx, echo),
            dropped_file,
            dropped_echo,
            reopen,
        })
    }

    /// Closes and opens every file again (SIGHUP).
    pub(crate) fn reopen_all(&self) {
        // A flag, not a message that could be dropped or wait for room: the
        // writer looks at it before every line, and the wake-up only makes
        // an idle writer look now.
        self.reopen.store(true, Ordering::SeqCst);
        let _ = self.files.try_send(FileMsg::Wake);
    }

    /// Queues one line of `daemon`'s for its file and for stdout.
    pub(crate) fn line(&self, daemon: Daemon, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if self
            .files
            .try_send(FileMsg::Line(daemon, line.to_vec()))
            .is_err()
        {
            self.dropped_file.fetch_add(1, Ordering::Relaxed);
        }
        let (echo, style) = &self.echo;
        if echo.try_send(style.line(daemon, line)).is_err() {
            self.dropped_echo.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Copies `output` to the log line by line until the pipe closes (the
    /// process and everything it started have exited).
    pub(crate) fn pump(&self, daemon: Daemon, mut output: pipe::Receiver) {
        let logs = self.clone();
        tokio::spawn(async move {
            let mut pending: Vec<u8> = Vec::new();
            let mut buf = vec![0u8; 8192];
            loop {
                let n = match output.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                pending.extend_from_slice(&buf[..n]);
                split_lines(&mut pending, |line| logs.line(daemon, line));
            }
            if !pending.is_empty() {
                logs.line(daemon, &pending);
            }
        });
    }
}

/// Takes the complete lines out of `pending` (without their newline),
/// cutting a line longer than [`MAX_LINE`] into pieces of that size; what
/// is left is the start of a line still to come.
pub(crate) fn split_lines(pending: &mut Vec<u8>, mut emit: impl FnMut(&[u8])) {
    let mut start = 0;
    loop {
        let rest = &pending[start..];
        match rest.iter().take(MAX_LINE + 1).position(|&b| b == b'\n') {
            Some(at) => {
                emit(&rest[..at]);
                start += at + 1;
            }
            None if rest.len() > MAX_LINE => {
                emit(&rest[..MAX_LINE]);
                start += MAX_LINE;
            }
            None => break,
        }
    }
    pending.drain(..start);
}

/// How a daemon's line is echoed on the supervisor's stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Echo {
    /// `storaged | <line>`.
    Prefixed,
    /// One JSON object a line, for log shippers (`LOG_FORMAT=json`): a
    /// daemon's JSON line gets `"daemon":"<name>"` as its first member,
    /// any other line becomes `{"daemon":"<name>","message":"<line>"}`.
    Json,
}

impl Echo {
    /// The echoed line, newline included.
    pub(crate) fn line(self, daemon: Daemon, line: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(line.len() + 32);
        match self {
            Echo::Prefixed => {
                out.extend_from_slice(daemon.name().as_bytes());
                out.extend_from_slice(b" | ");
                out.extend_from_slice(line);
            }
            Echo::Json => match line.strip_prefix(b"{") {
                Some(members)
                    if line.ends_with(b"}")
                        && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok() =>
                {
                    out.extend_from_slice(format!("{{\"daemon\":\"{}\"", daemon.name()).as_bytes());
                    if members.trim_ascii_start() != b"}" {
                        out.push(b',');
                    }
                    out.extend_from_slice(members);
                }
                _ => {
                    let message = String::from_utf8_lossy(line);
                    #[derive(serde::Serialize)]
                    struct Plain<'a> {
                        daemon: Daemon,
                        message: &'a str,
                    }
                    let plain = Plain {
                        daemon,
                        message: &message,
                    };
                    // Two strings: serializing them cannot fail.
                    let _ = serde_json::to_writer(&mut out, &plain);
                }
            },
        }
        out.push(b'\n');
        out
    }
}

/// The file writer thread: until every sender is gone.
fn write_files(
    mut files: Vec<(Daemon, LogFile)>,
    rx: Dequeue<FileMsg>,
    dropped: &AtomicU64,
    reopen: &AtomicBool,
) {
    while let Some(msg) = rx.recv() {
        if reopen.swap(false, Ordering::SeqCst) {
            for (d, f) in &mut files {
                if let Err(e) = f.reopen() {
                    tracing::warn!("cannot reopen the log of {}: {e}", d.name());
                }
            }
        }
        match msg {
            FileMsg::Wake => {}
            FileMsg::Line(daemon, line) => {
                let Some((_, file)) = files.iter_mut().find(|(d, _)| *d == daemon) else {
                    continue;
                };
                let lost = dropped.swap(0, Ordering::Relaxed);
                let mut written = Ok(());
                if lost > 0 {
                    let note =
                        format!("[meta-core] {lost} lines dropped: the log writer fell behind");
                    written = file.write_line(note.as_bytes());
                }
                if let Err(e) = written.and_then(|()| file.write_line(&line)) {
                    tracing::warn!("cannot write the log of {}: {e}", daemon.name());
                }
            }
        }
    }
}

/// The stdout writer thread: blocking writes are its whole job.
fn write_echo(rx: Dequeue<Vec<u8>>, dropped: &AtomicU64) {
    let mut out = io::stdout();
    while let Some(line) = rx.recv() {
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let _ = writeln!(
                out,
                "[meta-core] {lost} lines dropped: stdout is not being read fast enough"
            );
        }
        let _ = out.write_all(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_the_newest_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFile::open(dir.path(), Daemon::Apid, 100, 2).unwrap();
        for i in 0..30 {
            log.write_line(format!("line {i:03} of the log").as_bytes())
                .unwrap(); // 20 bytes a line
        }
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("apid.log").lines().last(), Some("line 029 of the log"));
        assert!(read("apid.log").len() <= 100);
        assert_eq!(
            read("apid.log.1").lines().last(),
            Some("line 024 of the log")
        );
        assert_eq!(
            read("apid.log.2").lines().last(),
            Some("line 019 of the log")
        );
        assert!(
            !dir.path().join("apid.log.3").exists(),
            "only `keep` rotated files"
        );
        for name in ["apid.log", "apid.log.1", "apid.log.2"] {
            assert_eq!(
                read(name).lines().count(),
                5,
                "{name}: 5 lines of 20 bytes fit in 100"
            );
        }
    }

    #[test]
    fn a_log_removed_by_someone_else_is_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFile::open(dir.path(), Daemon::Apid, 100, 2).unwrap();
        log.write_line(b"0123456789 0123456789 0123456789 0123456789")
            .unwrap();
        std::fs::remove_file(dir.path().join("apid.log")).unwrap();
        for i in 0..3 {
            log.write_line(format!("{i} 0123456789 0123456789 0123456789 012345").as_bytes())
                .unwrap();
        }
        let now = std::fs::read_to_string(dir.path().join("apid.log")).unwrap();
        assert!(
            now.ends_with("2 0123456789 0123456789 0123456789 012345\n"),
            "{now:?}"
        );
    }

    #[test]
    fn long_lines_are_cut_and_partial_lines_wait() {
        let mut lines: Vec<usize> = Vec::new();
        let mut pending = vec![b'a'; MAX_LINE];
        split_lines(&mut pending, |l| lines.push(l.len()));
        assert!(
            lines.is_empty(),
            "a line of exactly MAX_LINE may still end in the next read"
        );
        pending.push(b'\n');
        pending.extend(vec![b'b'; 2 * MAX_LINE + 10]);
        pending.extend(b"\nshort\npart");
        split_lines(&mut pending, |l| lines.push(l.len()));
        assert_eq!(lines, [MAX_LINE, MAX_LINE, MAX_LINE, 10, 5]);
        assert_eq!(pending, b"part");
    }

    #[test]
    fn json_echo_names_the_daemon_and_stays_json() {
        let line =
            |l: &str| String::from_utf8(Echo::Json.line(Daemon::Storaged, l.as_bytes())).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&line(r#"{"level":"INFO","message":"ready"}"#)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"daemon": "storaged", "level": "INFO", "message": "ready"})
        );
        assert_eq!(line("{}"), "{\"daemon\":\"storaged\"}\n");
        let v: serde_json::Value = serde_json::from_str(&line("panicked at \"x\" {oops")).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"daemon": "storaged", "message": "panicked at \"x\" {oops"})
        );
        let plain = String::from_utf8(Echo::Prefixed.line(Daemon::Apid, b"hello")).unwrap();
        assert_eq!(plain, "apid | hello\n");
    }

    #[test]
    fn appends_to_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("storaged.log"), "before\n").unwrap();
        let mut log = LogFile::open(dir.path(), Daemon::Storaged, 1 << 20, 3).unwrap();
        log.write_line(b"after").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("storaged.log")).unwrap(),
            "before\nafter\n"
        );
    }
}
