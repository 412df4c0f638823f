//! The image of `docker/Dockerfile`, built and run with the real podman
//! (see `e2e::container` for how it is built without a registry): the
//! supervisor as the entrypoint, the API and `/webdav/` on port 80 inside
//! the container's network, the image's HEALTHCHECK, an orderly
//! rclone mount over FUSE, `podman stop`, and the pair of the compose file: a standby container on
//! the same volumes that takes over when the app container dies.

use std::time::Duration;

use e2e::apid::{Http, free_port};
use e2e::container::{Container, Podman, Volumes};
use e2e::fixtures::random_midhash;
use e2e::raw_http::request_tcp;
use e2e::snapshot;
use e2e::wait::until;
use serde_json::json;

/// How long a container gets to answer (its first start makes the
/// database); a hang guard, the tests wait for conditions.
const START: Duration = Duration::from_secs(120);

/// Podman with the image built, on storage kept in the target folder.
fn podman() -> &'static Podman {
    e2e::container::image(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// Waits until the container's public API, published on `port`, answers
/// `/health` with `ok`.
async fn wait_serving(container: &Container, port: u16) {
    let http = Http::new(port);
    until(
        &format!("{} to answer /health", container.name),
        START,
        || {
            let http = http.clone();
            async move {
                let r = http
                    .try_send(http::Method::GET, "/health", bytes::Bytes::new(), &[])
                    .await
                    .ok()?;
                (r.status == 200 && r.json()["status"] == "ok").then_some(())
            }
        },
    )
    .await;
}

/// Waits until `kv-leader.info` on the volumes names `url`.
async fn wait_info_names(volumes: &Volumes, url: &str) {
    let path = volumes.info_file();
    until(&format!("kv-leader.info to name {url}"), START, || {
        let got = std::fs::read_to_string(&path).ok();
        async move { (got.as_deref().map(str::trim) == Some(url)).then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(no_podman, ignore = "no podman, runc or mmdebstrap on this machine")]
async fn the_image_serves_the_api_and_webdav_on_port_80_and_stops_cleanly() {
    let volumes = Volumes::new();
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(volumes.files().join("watch/clip.bin"), &bytes).expect("write a file");
    let port = free_port();
    let app = tokio::task::block_in_place(|| Container::run(podman(), &volumes, port, &[]));
    wait_serving(&app, port).await;

    // The leader file names the API inside the container's network, and
    // the image's HEALTHCHECK (`meta-core health`) calls it healthy.
    let ip = app.ip();
    wait_info_names(&volumes, &format!("http://{ip}:9000")).await;
    assert!(app.healthy(), "the HEALTHCHECK of a serving leader failed");

    let http = Http::new(port);
    let cid = random_midhash();
    let written = http
        .ok_json(
            "PATCH",
            &format!("/meta/{cid}"),
            &json!({"filePath": "/files/watch/clip.bin", "title": "In a container"}),
        )
        .await;
    let rid = written["hashId"].as_str().expect("hashId").to_owned();

    // Port 80, where the mesh's FUSE views read file bytes: the same API
    // and /webdav/ over FILES_PATH, from the container network.
    let on_80 = format!("{ip}:80");
    let got = request_tcp(&on_80, "GET", "/webdav/watch/clip.bin", None).await;
    assert_eq!(got.status, 200, "GET /webdav/ on port 80: {}", got.text());
    assert!(got.body == bytes, "/webdav/ on port 80 served other bytes");
    let meta = request_tcp(&on_80, "GET", &format!("/api/meta/{cid}"), None).await;
    assert_eq!(
        meta.status,
        200,
        "GET /api/meta on port 80: {}",
        meta.text()
    );
    assert_eq!(meta.json()["metadata"]["title"], "In a container");

    // An rclone mount through the image's rclone and fuse3, with the
    // compose file's /dev/fuse and SYS_ADMIN: made by the admin API,
    // a FUSE mount in the container, written and read over /webdav/ on 80.
    let admin = http
        .clone()
        .with_admin_token(e2e::apid::admin_token(volumes.dir.path(), &[]))
        .admin();
    let made = admin.post_memory_mount("mem").await;
    assert_eq!(made.status, 201, "POST /api/mounts: {}", made.text());
    assert_eq!(made.json()["mount"]["mounted"], true, "{}", made.text());
    let mounts = app.exec(&["cat", "/proc/mounts"]);
    assert!(
        mounts
            .lines()
            .any(|l| l.contains(" /files/corn/mem fuse.rclone ")),
        "no FUSE mount at /files/corn/mem in the container:\n{mounts}"
    );
    let put = request_tcp(
        &on_80,
        "PUT",
        "/webdav/corn/mem/note.txt",
        Some(b"on a mount"),
    )
    .await;
    assert!(
        matches!(put.status, 201 | 204),
        "PUT into the mount: {}",
        put.text()
    );
    let back = request_tcp(&on_80, "GET", "/webdav/corn/mem/note.txt", None).await;
    assert_eq!(back.status, 200, "{}", back.text());
    assert_eq!(back.body, b"on a mount");

    // What `docker logs` shows: every daemon's lines under its name.
    let logs = app.logs();
    for daemon in ["storaged", "apid", "watcherd", "mountd"] {
        assert!(
            logs.contains(&format!("{daemon} | ")),
            "no {daemon} lines in the container's log:\n{logs}"
        );
    }

    // SIGTERM, the image's STOPSIGNAL, is an orderly stop (the mount
    // unmounted on the way): exit 0, the leader file removed, the record
    // committed on the database volume.
    let code = tokio::task::block_in_place(|| app.stop(60));
    assert_eq!(code, 0, "the container's exit code after podman stop");
    assert!(
        !volumes.info_file().exists(),
        "kv-leader.info outlived the orderly stop"
    );
    let rows = snapshot::dump(&volumes.db());
    let record = snapshot::record(&rows, &rid);
    assert_eq!(
        record.get("title").map(String::as_str),
        Some("In a container"),
        "the record on the volume: {record:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(no_podman, ignore = "no podman, runc or mmdebstrap on this machine")]
async fn a_standby_container_takes_over_when_the_app_container_dies() {
    let volumes = Volumes::new();
    let (app_port, standby_port) = (free_port(), free_port());
    let app = tokio::task::block_in_place(|| Container::run(podman(), &volumes, app_port, &[]));
    wait_serving(&app, app_port).await;
    wait_info_names(&volumes, &format!("http://{}:9000", app.ip())).await;
    let cid = random_midhash();
    Http::new(app_port)
        .ok_json(
            "PATCH",
            &format!("/meta/{cid}"),
            &json!({"title": "Before the failover"}),
        )
        .await;

    // The standby, on the same volumes, waits for the leader lock; while
    // it waits it is healthy (so the platform does not restart it).
    let standby = tokio::task::block_in_place(|| {
        Container::run(
            podman(),
            &volumes,
            standby_port,
            &[("ELECTION_RETRY_SECS", "1")],
        )
    });
    until("the standby to say it waits", START, || {
        let logs = standby.logs();
        async move { logs.contains("standby:").then_some(()) }
    })
    .await;
    assert!(
        standby.healthy(),
        "the HEALTHCHECK of a waiting standby failed"
    );
    assert!(
        app.running(),
        "the app container stopped when the standby came"
    );

    // The app container dies (SIGKILL to its supervisor, the kernel takes
    // the whole tree and frees the lock); the standby takes over, names
    // itself in kv-leader.info and serves the same record.
    let standby_url = format!("http://{}:9000", standby.ip());
    let killed = std::time::Instant::now();
    app.kill();
    wait_info_names(&volumes, &standby_url).await;
    // A figure for the docs, not a check: this machine's speed varies.
    eprintln!(
        "kv-leader.info named the standby {:?} after the kill",
        killed.elapsed()
    );
    let http = Http::new(standby_port);
    let meta = http.get_ok(&format!("/api/meta/{cid}")).await;
    assert_eq!(meta["metadata"]["title"], "Before the failover");
    assert!(
        standby.healthy(),
        "the HEALTHCHECK of the new leader failed"
    );
    let code = tokio::task::block_in_place(|| standby.stop(60));
    assert_eq!(code, 0, "the new leader's exit code after podman stop");
}

#[test]
#[cfg_attr(
    no_container_lint,
    ignore = "no hadolint or docker-compose on this machine"
)]
fn the_dockerfile_passes_hadolint() {
    let out = std::process::Command::new("hadolint")
        .arg(e2e::workspace_root().join("docker/Dockerfile"))
        .output()
        .expect("run hadolint");
    assert!(
        out.status.success(),
        "hadolint docker/Dockerfile:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[cfg_attr(
    no_container_lint,
    ignore = "no hadolint or docker-compose on this machine"
)]
fn the_compose_file_is_valid_and_names_the_pair() {
    let compose = |args: &[&str]| {
        let out = std::process::Command::new("docker-compose")
            .arg("-f")
            .arg(e2e::workspace_root().join("docker/compose.yaml"))
            .args(args)
            .output()
            .expect("run docker-compose");
        assert!(
            out.status.success(),
            "docker-compose {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    compose(&["config", "-q"]);
    let sorted = |text: String| {
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    assert_eq!(
        sorted(compose(&["config", "--services"])),
        ["metacore-app", "metacore-standby"]
    );
    assert_eq!(
        sorted(compose(&["config", "--volumes"])),
        ["meta-core", "meta-core-db"]
    );
    // Both containers get the same volumes, FUSE and the database path.
    let full = compose(&["config"]);
    let text = std::fs::read_to_string(e2e::workspace_root().join("docker/compose.yaml"))
        .expect("read compose");
    assert!(
        !text.lines().any(|l| l.starts_with("name:")),
        "a top-level name: fixes the project name the mesh's stacks choose"
    );
    for needle in [
        "META_CORE_DB_PATH: /meta-core-db/meta-core.db",
        "meta-core:/meta-core:rw",
        "meta-core-db:/meta-core-db:rw",
        "/dev/fuse:/dev/fuse",
        "SYS_ADMIN",
        "propagation: rshared",
    ] {
        assert_eq!(
            full.matches(needle).count(),
            2,
            "`{needle}` in both services of:\n{full}"
        );
    }
}
