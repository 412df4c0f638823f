//! Per-daemon logs: each child's output, line by line, appended to
//! `<log dir>/<daemon>.log` and echoed to the supervisor's stdout as
//! `<daemon> | <line>` (what `docker logs` shows).
//!
//! Rotation by size: when a write would take the file past
//! `META_CORE_LOG_MAX_BYTES`, `<daemon>.log` becomes `<daemon>.log.1`, the
//! older ones shift up to `META_CORE_LOG_KEEP`, and the oldest is removed.
//! SIGHUP reopens every file (for an external logrotate that moved them).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use metacore::layout::Daemon;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

/// A line longer than this is cut into pieces of this size.
pub const MAX_LINE: usize = 16 * 1024;

/// One daemon's log file.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    file: Option<File>,
    size: u64,
    max_bytes: u64,
    keep: u32,
}

impl LogFile {
    pub fn open(dir: &Path, daemon: Daemon, max_bytes: u64, keep: u32) -> io::Result<Self> {
        let mut log = Self { path: path_of(dir, daemon), file: None, size: 0, max_bytes, keep };
        log.reopen()?;
        Ok(log)
    }

    /// Closes and opens the file again (append), wherever it went.
    pub fn reopen(&mut self) -> io::Result<()> {
        self.file = None;
        let file = OpenOptions::new().create(true).append(true).open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(file);
        Ok(())
    }

    /// Appends one line (without its newline), rotating first when needed.
    pub fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        let len = line.len() as u64 + 1;
        if self.size > 0 && self.size + len > self.max_bytes {
            self.rotate()?;
        }
        if self.file.is_none() {
            self.reopen()?;
        }
        let file = self.file.as_mut().expect("opened above");
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line);
        buf.push(b'\n');
        file.write_all(&buf)?;
        self.size += len;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        if self.keep == 0 {
            std::fs::remove_file(&self.path)?;
        } else {
            let numbered = |n: u32| PathBuf::from(format!("{}.{n}", self.path.display()));
            let _ = std::fs::remove_file(numbered(self.keep));
            for n in (1..self.keep).rev() {
                if numbered(n).exists() {
                    std::fs::rename(numbered(n), numbered(n + 1))?;
                }
            }
            std::fs::rename(&self.path, numbered(1))?;
        }
        self.reopen()
    }
}

/// `<dir>/<daemon>.log`.
pub fn path_of(dir: &Path, daemon: Daemon) -> PathBuf {
    dir.join(format!("{}.log", daemon.name()))
}

/// Every daemon's log file, shared by its output pumps and the SIGHUP handler.
#[derive(Debug, Clone)]
pub struct Logs {
    files: Arc<Vec<(Daemon, Arc<Mutex<LogFile>>)>>,
    echo: bool,
}

impl Logs {
    pub fn open(dir: &Path, daemons: &[Daemon], max_bytes: u64, keep: u32, echo: bool) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut files = Vec::new();
        for &d in daemons {
            files.push((d, Arc::new(Mutex::new(LogFile::open(dir, d, max_bytes, keep)?))));
        }
        Ok(Self { files: Arc::new(files), echo })
    }

    fn file(&self, daemon: Daemon) -> Arc<Mutex<LogFile>> {
        self.files.iter().find(|(d, _)| *d == daemon).map(|(_, f)| f.clone()).expect("a log file per daemon")
    }

    pub fn reopen_all(&self) {
        for (d, f) in self.files.iter() {
            if let Err(e) = f.lock().expect("log lock").reopen() {
                tracing::warn!("cannot reopen the log of {}: {e}", d.name());
            }
        }
    }

    /// Writes one line of `daemon`'s to its file and to stdout.
    pub fn line(&self, daemon: Daemon, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Err(e) = self.file(daemon).lock().expect("log lock").write_line(line) {
            tracing::warn!("cannot write the log of {}: {e}", daemon.name());
        }
        if self.echo {
            let mut out = Vec::with_capacity(line.len() + 16);
            out.extend_from_slice(daemon.name().as_bytes());
            out.extend_from_slice(b" | ");
            out.extend_from_slice(line);
            out.push(b'\n');
            let _ = io::stdout().lock().write_all(&out);
        }
    }

    /// Copies `output` to the log line by line until the pipe closes (the
    /// process and everything it started have exited).
    pub fn pump(&self, daemon: Daemon, mut output: pipe::Receiver) -> tokio::task::JoinHandle<()> {
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
                let mut start = 0;
                while let Some(at) = pending[start..].iter().position(|&b| b == b'\n') {
                    logs.line(daemon, &pending[start..start + at]);
                    start += at + 1;
                }
                pending.drain(..start);
                while pending.len() >= MAX_LINE {
                    let rest = pending.split_off(MAX_LINE);
                    logs.line(daemon, &pending);
                    pending = rest;
                }
            }
            if !pending.is_empty() {
                logs.line(daemon, &pending);
            }
        })
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
            log.write_line(format!("line {i:03} of the log").as_bytes()).unwrap(); // 20 bytes a line
        }
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("apid.log").lines().last(), Some("line 029 of the log"));
        assert!(read("apid.log").len() <= 100);
        assert_eq!(read("apid.log.1").lines().last(), Some("line 024 of the log"));
        assert_eq!(read("apid.log.2").lines().last(), Some("line 019 of the log"));
        assert!(!dir.path().join("apid.log.3").exists(), "only `keep` rotated files");
        for name in ["apid.log", "apid.log.1", "apid.log.2"] {
            assert_eq!(read(name).lines().count(), 5, "{name}: 5 lines of 20 bytes fit in 100");
        }
    }

    #[test]
    fn appends_to_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("storaged.log"), "before\n").unwrap();
        let mut log = LogFile::open(dir.path(), Daemon::Storaged, 1 << 20, 3).unwrap();
        log.write_line(b"after").unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("storaged.log")).unwrap(), "before\nafter\n");
    }
}
