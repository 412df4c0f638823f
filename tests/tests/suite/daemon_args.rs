//! Every daemon binary reads its command line before it touches anything:
//! `--help` and `--version` answer and exit 0, anything else is refused
//! with exit 2 and the usage, and none of them opens a file or binds a
//! port.

use std::process::Stdio;
use std::time::Duration;

use e2e::apid::free_port;

const DAEMONS: [&str; 4] = ["storaged", "apid", "watcherd", "mountd"];

/// Runs `name args` with its paths and port in a fresh folder; its exit
/// code, stdout and stderr, and whether the folder is still empty.
async fn run(name: &str, args: &[&str]) -> (i32, String, String, bool) {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cmd = e2e::process::command(name);
    cmd.args(args)
        .env("META_CORE_PATH", dir.path().join("meta-core"))
        .env("META_CORE_RUN_DIR", dir.path().join("run"))
        .env("FILES_PATH", dir.path().join("files"))
        .env("META_CORE_LOG_DIR", dir.path().join("logs"))
        .env("META_CORE_HTTP_HOST", "127.0.0.1")
        .env("META_CORE_HTTP_PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = tokio::process::Command::from(cmd)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(10), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{name} {args:?} did not exit: it started instead"))
        .unwrap();
    // Nothing bound the port meanwhile, nothing was created.
    assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_ok());
    let empty = std::fs::read_dir(dir.path()).unwrap().next().is_none();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        empty,
    )
}

#[tokio::test]
async fn help_and_version_answer_and_exit() {
    for name in DAEMONS {
        for flag in ["--help", "-h"] {
            let (code, out, _, empty) = run(name, &[flag]).await;
            assert_eq!(code, 0, "{name} {flag}");
            assert!(
                out.contains(&format!("Usage: {name}")),
                "{name} {flag}: {out}"
            );
            assert!(empty, "{name} {flag} created files");
        }
        for flag in ["--version", "-V"] {
            let (code, out, _, empty) = run(name, &[flag]).await;
            assert_eq!(code, 0, "{name} {flag}");
            assert_eq!(out.trim(), format!("{name} {}", env!("CARGO_PKG_VERSION")));
            assert!(empty, "{name} {flag} created files");
        }
    }
}

#[tokio::test]
async fn an_unknown_argument_is_refused_before_anything_is_opened() {
    for name in DAEMONS {
        for args in [&["--port", "1"][..], &["run"], &["--help", "extra"]] {
            let (code, out, err, empty) = run(name, args).await;
            assert_eq!(code, 2, "{name} {args:?}: {out}{err}");
            assert!(
                err.contains("unexpected argument"),
                "{name} {args:?}: {err}"
            );
            assert!(
                err.contains(&format!("Usage: {name}")),
                "{name} {args:?}: {err}"
            );
            assert!(empty, "{name} {args:?} created files");
        }
    }
}
