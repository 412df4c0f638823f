//! What another user of the host can reach of a running tree (issue 26,
//! security): nothing private, checked as that user. A thread of this test
//! drops to `nobody` (its own credentials only: Linux keeps them per
//! thread) and tries every socket, every private file and every daemon's
//! environment (where rclone's remote-control credentials are); what the
//! mesh's other services read stays readable to it. And no secret is in
//! any log, at the most verbose level.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use e2e::daemon::test_dir;
use e2e::fixtures::random_rid;
use e2e::supervisor::{Launch, MetaCore, descendants};
use rustix::thread::{Gid, Uid, set_thread_groups, set_thread_res_gid, set_thread_res_uid};
use serde_json::json;

/// `nobody` on Debian.
const NOBODY: u32 = 65534;

/// What one attempt as `nobody` came to.
#[derive(Debug)]
struct Attempt {
    what: String,
    allowed: bool,
}

/// On a thread of its own, as `nobody` with no groups: reads each of
/// `files` and connects to each of `sockets`.
fn as_nobody(files: Vec<PathBuf>, sockets: Vec<PathBuf>) -> Vec<Attempt> {
    std::thread::spawn(move || {
        // Groups and gid first: once the uid is not 0 they cannot change.
        set_thread_groups(&[]).expect("drop the groups");
        let gid = Gid::from_raw(NOBODY);
        set_thread_res_gid(gid, gid, gid).expect("become group nogroup");
        let uid = Uid::from_raw(NOBODY);
        set_thread_res_uid(uid, uid, uid).expect("become nobody");
        let mut out = Vec::new();
        for f in files {
            out.push(Attempt {
                allowed: std::fs::read(&f).is_ok(),
                what: format!("read {}", f.display()),
            });
        }
        for s in sockets {
            out.push(Attempt {
                allowed: UnixStream::connect(&s).is_ok(),
                what: format!("connect to {}", s.display()),
            });
        }
        out
    })
    .join()
    .expect("the unprivileged thread")
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

async fn a_busy_tree(dir: &Path, log: &str) -> MetaCore {
    let mut mc = Launch::in_dir(dir, "run")
        .env("RUST_LOG", log)
        .env(
            "RCLONE_CONFIG",
            &dir.join("rclone.conf").display().to_string(),
        )
        .spawn();
    mc.wait_all_ready().await;
    // A write (so the WAL exists), admin calls with the token, a mount
    // (so rclone runs with its credentials and mounts).
    let rid = random_rid();
    mc.ok_json("PATCH", &format!("/meta/{rid}"), &json!({"title": "T"}))
        .await;
    assert_eq!(mc.admin().get("/api/watchers").await.status, 200);
    #[cfg(not(no_fuse))]
    {
        let r = mc.admin().post_memory_mount("mem").await;
        assert_eq!(r.status, 201, "{}", r.text());
    }
    mc
}

#[tokio::test]
async fn another_user_reaches_no_socket_no_private_file_and_no_daemons_environment() {
    let dir = test_dir();
    // The test dir is open to traverse, as a volume's root would be: only
    // the tree's own modes keep the other user out.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mc = a_busy_tree(dir.path(), "info").await;
    let root = mc.meta_core_path();

    let mut private: Vec<PathBuf> = files_under(&root)
        .into_iter()
        .filter(|p| !p.starts_with(root.join("services")) && *p != mc.info_file())
        .collect();
    let sockets: Vec<PathBuf> = std::fs::read_dir(mc.run_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    assert!(sockets.len() >= 5, "every daemon's socket: {sockets:?}");
    assert!(private.iter().any(|p| p.ends_with("secrets/admin-token")));
    assert!(private.iter().any(|p| p.ends_with("db/meta-core.db-wal")));
    private.extend(
        files_under(mc.run_dir())
            .into_iter()
            .filter(|p| !sockets.contains(p)),
    );
    let pids = descendants(mc.process.pid());
    #[cfg(not(no_fuse))]
    assert!(
        pids.len() >= 6,
        "the supervisor, four daemons, rclone: {pids:?}"
    );
    private.extend(
        pids.iter()
            .map(|p| PathBuf::from(format!("/proc/{p}/environ"))),
    );
    let public: Vec<PathBuf> = std::iter::once(mc.info_file())
        .chain(files_under(&root.join("services")))
        .collect();

    let attempts = as_nobody(private.clone(), sockets);
    let reached: Vec<&str> = attempts
        .iter()
        .filter(|a| a.allowed)
        .map(|a| a.what.as_str())
        .collect();
    assert!(reached.is_empty(), "nobody could: {reached:#?}");
    // The control: what the mesh's services read, nobody reads too (so the
    // refusals above are the modes', not an unreachable folder's).
    let read = as_nobody(public, Vec::new());
    let refused: Vec<&str> = read
        .iter()
        .filter(|a| !a.allowed)
        .map(|a| a.what.as_str())
        .collect();
    assert!(refused.is_empty(), "nobody could not: {refused:#?}");
}

#[tokio::test]
async fn no_secret_is_in_any_log_at_the_most_verbose_level() {
    let dir = test_dir();
    let mut mc = a_busy_tree(dir.path(), "trace").await;
    let token = mc.admin().admin_token().expect("a token").to_owned();
    // rclone's remote-control password, from its environment.
    #[cfg(not(no_fuse))]
    let rc_pass = {
        let rclone = descendants(mc.process.pid())
            .into_iter()
            .find(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "rclone")
            })
            .expect("rclone runs");
        let env = std::fs::read(format!("/proc/{rclone}/environ")).unwrap();
        let env = String::from_utf8_lossy(&env).into_owned();
        env.split('\0')
            .find_map(|kv| kv.strip_prefix("RCLONE_RC_PASS=").map(str::to_owned))
            .expect("RCLONE_RC_PASS in rclone's environment")
    };
    // A wrong token is not logged either.
    let wrong = "Bearer not-the-token-0123456789abcdef";
    let r = mc
        .send("GET", "/api/watchers", "", &[("authorization", wrong)])
        .await;
    assert_eq!(r.status, 401);
    mc.process.sigterm();
    assert!(mc.process.wait_exit().await.success());

    let mut logs = files_under(&mc.log_dir());
    logs.extend(
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "stderr")),
    );
    let mut secrets = vec![token.clone(), "not-the-token-0123456789abcdef".to_owned()];
    #[cfg(not(no_fuse))]
    secrets.push(rc_pass);
    let mut lines = 0;
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap();
        lines += text.lines().count();
        for s in &secrets {
            assert!(
                !text.contains(s.as_str()),
                "{} holds a secret ({} characters)",
                log.display(),
                s.len()
            );
        }
    }
    // The logs did say a lot: trace level reached every daemon.
    assert!(lines > 50, "{lines} lines in {logs:?}");
    for daemon in ["storaged", "apid", "watcherd", "mountd"] {
        assert!(
            logs.iter().any(|l| l.ends_with(format!("{daemon}.log"))),
            "{daemon}'s log in {logs:?}"
        );
    }
}

/// The writes anyone may send: the mesh's own calls (the `/meta` surface,
/// the editor's record routes, `POST /file/cid`, WebDAV) and a search,
/// which is a read sent as `POST`. Everything else that changes anything
/// is an admin route, which `admin_access` shows answers 401 without the
/// token; a new route that writes must be added here on purpose.
const OPEN_WRITES: [&str; 13] = [
    "PUT /meta/{hash}",
    "PATCH /meta/{hash}",
    "DELETE /meta/{hash}",
    "PUT /meta/{hash}/{key}",
    "DELETE /meta/{hash}/{key}",
    "POST /meta/{hash}/_add/{key}",
    "POST /file/cid",
    "PUT /webdav/{path}",
    "DELETE /webdav/{path}",
    "POST /api/metadata/search",
    "PUT /api/metadata/{hashId}",
    "DELETE /api/metadata/{hashId}",
    "PUT /api/metadata/{hashId}/property",
];

#[test]
fn every_write_outside_the_mesh_perimeter_needs_the_admin_token() {
    let doc = e2e::openapi::document();
    let mut open = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            if matches!(method.as_str(), "get" | "head" | "options" | "parameters") {
                continue;
            }
            if op.get("security").is_none_or(|s| s == &json!([])) {
                open.push(format!("{} {path}", method.to_uppercase()));
            }
        }
    }
    open.sort();
    let mut want: Vec<String> = OPEN_WRITES.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(open, want, "the writes open to anyone");
}
