//! `meta-core logs`: the last lines of a daemon's log file, read from the
//! file itself (so it works while the supervisor is down), and with `-f`
//! what is appended after, across rotations.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use metacore::Config;
use metacore::layout::Daemon;

/// `meta-core logs <daemon> [-f] [-n N]`.
pub(super) fn logs(config: &Config, daemon: Daemon, follow: bool, lines: usize) -> ExitCode {
    let path = crate::logs::path_of(&config.log_dir, daemon);
    let mut out = io::stdout().lock();
    let opened = match File::open(&path) {
        Ok(mut f) => match print_tail(&mut f, lines, &mut out) {
            Ok(end) => Some((f, end)),
            Err(e) => {
                eprintln!("meta-core: cannot read {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound && follow => None,
        Err(e) => {
            eprintln!("meta-core: cannot read {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    };
    if !follow {
        return ExitCode::SUCCESS;
    }
    drop(out);
    follow_file(&path, opened)
}

/// Writes the last `n` lines of `f`; returns the offset of its end.
fn print_tail(f: &mut File, n: usize, out: &mut impl Write) -> io::Result<u64> {
    let end = f.seek(SeekFrom::End(0))?;
    let mut start = end;
    let mut newlines = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    // Walk back until n + 1 newlines are behind us (the last byte is
    // usually the last line's own newline).
    'back: while start > 0 {
        let len = chunk.len().min(start as usize);
        start -= len as u64;
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut chunk[..len])?;
        for (i, &b) in chunk[..len].iter().enumerate().rev() {
            if b == b'\n' && start + i as u64 + 1 != end {
                newlines += 1;
                if newlines == n {
                    start += i as u64 + 1;
                    break 'back;
                }
            }
        }
    }
    if n == 0 {
        return Ok(end);
    }
    f.seek(SeekFrom::Start(start))?;
    io::copy(&mut f.take(end - start), out)?;
    out.flush()?;
    Ok(end)
}

/// Prints what is appended to `path`, starting with the file already
/// open at `pos`, and follows it across rotations: when another file (or a
/// shorter one) is at the path, the open one is read to its end once more,
/// then the new one from its start.
fn follow_file(path: &Path, opened: Option<(File, u64)>) -> ExitCode {
    let mut current = opened;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if let Some((f, pos)) = current.as_mut()
            && copy_new(f, pos, &mut buf).is_err()
        {
            return ExitCode::SUCCESS; // the reader went away
        }
        let replaced = match (std::fs::metadata(path), &current) {
            (Ok(meta), Some((f, pos))) => {
                f.metadata().map(|m| m.ino()).ok() != Some(meta.ino()) || meta.len() < *pos
            }
            (Ok(_), None) => true,
            (Err(_), _) => false,
        };
        if replaced && let Ok(f) = File::open(path) {
            // What was appended to the old file since the read above.
            if let Some((old, pos)) = current.as_mut()
                && copy_new(old, pos, &mut buf).is_err()
            {
                return ExitCode::SUCCESS;
            }
            current = Some((f, 0));
            continue;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Copies what `f` holds past `pos` to stdout; an error means stdout is gone.
fn copy_new(f: &mut File, pos: &mut u64, buf: &mut [u8]) -> io::Result<()> {
    f.seek(SeekFrom::Start(*pos))?;
    loop {
        match f.read(buf) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => {
                let mut out = io::stdout().lock();
                out.write_all(&buf[..n])?;
                out.flush()?;
                *pos += n as u64;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_prints_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        let text: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &text).unwrap();
        let mut out = Vec::new();
        let end = print_tail(&mut File::open(&p).unwrap(), 3, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "line 99997\nline 99998\nline 99999\n"
        );
        assert_eq!(end, text.len() as u64);
        let mut out = Vec::new();
        print_tail(&mut File::open(&p).unwrap(), 200_000, &mut out).unwrap();
        assert_eq!(
            out.len(),
            text.len(),
            "asking for more lines than there are prints the file"
        );
    }
}
