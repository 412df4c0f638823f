//! The image of `docker/Dockerfile`, built and run with the real podman, as
//! a machine with no image registry can: a Debian bookworm base made by
//! `mmdebstrap --variant=minbase` from the machine's own apt sources and
//! `podman import`ed, then the Dockerfile built on it with the binaries
//! this build left in `target/` (the target `prebuilt`, which takes them
//! from the `bin` build context), so no toolchain image is needed.
//!
//! Podman runs on storage of its own in the folder the test names (the
//! suite's `CARGO_TARGET_TMPDIR`: the base and its layers kept there
//! between runs), with a `containers.conf` of its
//! own: `runc` as the runtime, default ulimits a VM's hard limits allow
//! (`nofile=20000`, `nproc=32768`), cgroupfs and file events (no systemd).
//! [`Container`]s are removed when their handle drops, their log printed
//! when the test is panicking.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use crate::daemon::bin_dir;

/// The base image the Dockerfile's `BASE` argument is given.
const BASE: &str = "localhost/metacore-base:bookworm";
/// The image the tests run.
pub const IMAGE: &str = "localhost/meta-core:e2e";
/// The five binaries the image holds.
const BINARIES: [&str; 5] = ["meta-core", "storaged", "apid", "watcherd", "mountd"];

/// Podman on the tests' own storage and configuration.
#[derive(Debug, Clone)]
pub struct Podman {
    home: PathBuf,
    /// Its run state (`--runroot`, `tmp_dir`), on /run.
    run: PathBuf,
}

impl Podman {
    fn new(home: &Path) -> Self {
        let home = home.join("e2e-podman");
        std::fs::create_dir_all(&home).expect("make the podman test home");
        // Podman's run state belongs on a tmpfs, so a reboot forgets the
        // containers it had (as /run does for the system's podman): one
        // folder of /run per storage, named once and kept in `run-dir`
        // (the storage remembers it and refuses another).
        let named = home.join("run-dir");
        let run = match std::fs::read_to_string(&named) {
            Ok(path) => PathBuf::from(path.trim()),
            Err(_) => {
                let run = PathBuf::from(format!(
                    "/run/metacore-e2e-podman-{:016x}",
                    rand::random::<u64>()
                ));
                std::fs::write(&named, run.to_string_lossy().as_bytes())
                    .expect("keep the run folder's name");
                run
            }
        };
        std::fs::write(
            home.join("containers.conf"),
            format!(
                "[containers]\n\
                 default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n\
                 [network]\n\
                 network_backend = \"netavark\"\n\
                 [engine]\n\
                 runtime = \"runc\"\n\
                 cgroup_manager = \"cgroupfs\"\n\
                 events_logger = \"file\"\n\
                 tmp_dir = \"{}\"\n",
                run.join("tmp").display()
            ),
        )
        .expect("write containers.conf");
        Self { home, run }
    }

    /// `podman <args>` on the tests' storage.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("podman");
        cmd.env("CONTAINERS_CONF", self.home.join("containers.conf"))
            .arg("--root")
            .arg(self.home.join("storage"))
            .arg("--runroot")
            .arg(self.run.join("runroot"))
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `podman <args>`; its output, whatever its status.
    pub fn output(&self, args: &[&str]) -> Output {
        self.command()
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run podman {args:?}: {e}"))
    }

    /// Runs `podman <args>`, which must succeed; its stdout, trimmed.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.output(args);
        assert!(
            out.status.success(),
            "podman {args:?} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// `podman inspect -f <format> <name>`.
    pub fn inspect(&self, name: &str, format: &str) -> String {
        self.ok(&["inspect", "-f", format, name])
    }
}

/// The image, built once per test process with podman's storage under
/// `home` (the first caller's): the podman it lives in.
pub fn image(home: &Path) -> &'static Podman {
    static BUILT: OnceLock<Podman> = OnceLock::new();
    BUILT.get_or_init(|| {
        let podman = Podman::new(home);
        remove_leftovers(&podman);
        ensure_base(&podman);
        build_image(&podman);
        podman
    })
}

/// Removes the containers an earlier test process left (one killed before
/// its handles dropped), so their mounts do not pile up in the storage.
fn remove_leftovers(podman: &Podman) {
    let names = podman.ok(&[
        "ps",
        "-a",
        "--filter",
        "name=^metacore-e2e-",
        "--format",
        "{{.Names}}",
    ]);
    for name in names.lines().filter(|n| !n.is_empty()) {
        let _ = podman.output(&["rm", "-f", "-t", "0", name]);
    }
}

/// Imports the minbase bookworm base unless the storage has it.
fn ensure_base(podman: &Podman) {
    if podman.output(&["image", "exists", BASE]).status.success() {
        return;
    }
    let tar = podman.home.join("bookworm-minbase.tar");
    let partial = tar.with_extension("tar.partial");
    let out = Command::new("mmdebstrap")
        .args(["--variant=minbase", "--format=tar", "--quiet", "bookworm"])
        .arg(&partial)
        .stdin(Stdio::null())
        .output()
        .expect("run mmdebstrap");
    assert!(
        out.status.success(),
        "mmdebstrap --variant=minbase bookworm failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &tar).expect("keep the base tarball");
    podman.ok(&["import", "-q", tar.to_str().expect("a UTF-8 path"), BASE]);
    // The tarball is in the storage now.
    let _ = std::fs::remove_file(&tar);
}

/// Builds the Dockerfile on the base with this build's binaries.
fn build_image(podman: &Podman) {
    let bin = podman.home.join("bin");
    let _ = std::fs::remove_dir_all(&bin);
    std::fs::create_dir_all(&bin).expect("make the binaries context");
    for name in BINARIES {
        let from = bin_dir().join(name);
        let to = bin.join(name);
        // Without their debug info the debug binaries are a sixth of the size.
        let stripped = Command::new("strip")
            .arg("-o")
            .arg(&to)
            .arg(&from)
            .status()
            .is_ok_and(|s| s.success());
        if !stripped {
            std::fs::copy(&from, &to)
                .unwrap_or_else(|e| panic!("copy {} (built?): {e}", from.display()));
        }
    }
    let root = crate::workspace_root();
    let context = format!("bin={}", bin.display());
    let dockerfile = root.join("docker/Dockerfile");
    podman.ok(&[
        "build",
        "-q",
        // The docker format keeps HEALTHCHECK (OCI images have none).
        "--format",
        "docker",
        "-f",
        dockerfile.to_str().expect("a UTF-8 path"),
        "--build-arg",
        &format!("BASE={BASE}"),
        "--target",
        "prebuilt",
        "--build-context",
        &context,
        "-t",
        IMAGE,
        root.to_str().expect("a UTF-8 path"),
    ]);
    // Layers of earlier builds that no tag names any more.
    let _ = podman.output(&["image", "prune", "-f"]);
}

/// The volumes of one meta-core deployment, as host folders.
#[derive(Debug)]
pub struct Volumes {
    pub dir: tempfile::TempDir,
}

impl Volumes {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temp dir");
        for sub in ["meta-core", "files/watch", "meta-core-db"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("make a volume");
        }
        Self { dir }
    }

    pub fn meta_core(&self) -> PathBuf {
        self.dir.path().join("meta-core")
    }

    pub fn files(&self) -> PathBuf {
        self.dir.path().join("files")
    }

    pub fn db(&self) -> PathBuf {
        self.dir.path().join("meta-core-db/meta-core.db")
    }

    pub fn info_file(&self) -> PathBuf {
        self.meta_core().join("locks/kv-leader.info")
    }

    /// The `-v` and `-e` arguments that mount them as the compose file
    /// does (the database on a volume of its own).
    fn args(&self) -> Vec<String> {
        let root = self.dir.path().display();
        vec![
            "-v".into(),
            format!("{root}/meta-core:/meta-core"),
            "-v".into(),
            format!("{root}/files:/files"),
            "-v".into(),
            format!("{root}/meta-core-db:/meta-core-db"),
            "-e".into(),
            "META_CORE_DB_PATH=/meta-core-db/meta-core.db".into(),
        ]
    }
}

impl Default for Volumes {
    fn default() -> Self {
        Self::new()
    }
}

/// One running container of the image, removed when dropped.
#[derive(Debug)]
pub struct Container {
    podman: Podman,
    pub name: String,
}

impl Container {
    /// `podman run -d` of the image in `podman` on `volumes`, publishing
    /// its port 9000 on `127.0.0.1:<host_port>`, with `env` added.
    pub fn run(podman: &Podman, volumes: &Volumes, host_port: u16, env: &[(&str, &str)]) -> Self {
        let podman = podman.clone();
        let name = format!(
            "metacore-e2e-{}-{}",
            std::process::id(),
            crate::fixtures::random_rid().to_string().to_lowercase()
        );
        let mut args: Vec<String> = vec![
            "run".into(),
            "-d".into(),
            "--name".into(),
            name.clone(),
            // No systemd timer runs it here; `podman healthcheck run` does.
            "--health-interval=disable".into(),
            "-p".into(),
            format!("127.0.0.1:{host_port}:9000"),
            // What the compose file gives it for the rclone mounts.
            "--device".into(),
            "/dev/fuse".into(),
            "--cap-add".into(),
            "SYS_ADMIN".into(),
        ];
        args.extend(volumes.args());
        for (k, v) in env {
            args.push("-e".into());
            args.push(format!("{k}={v}"));
        }
        args.push(IMAGE.into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        podman.ok(&args);
        Self { podman, name }
    }

    pub fn podman(&self) -> &Podman {
        &self.podman
    }

    /// Its address on the container network.
    pub fn ip(&self) -> String {
        let ip = self
            .podman
            .inspect(&self.name, "{{.NetworkSettings.IPAddress}}");
        assert!(!ip.is_empty(), "{} has no IP address", self.name);
        ip
    }

    /// `podman exec <name> <args>`, which must succeed; its stdout.
    pub fn exec(&self, args: &[&str]) -> String {
        let mut all = vec!["exec", self.name.as_str()];
        all.extend_from_slice(args);
        self.podman.ok(&all)
    }

    /// What `podman logs` shows (stdout and stderr together).
    pub fn logs(&self) -> String {
        let out = self.podman.output(&["logs", &self.name]);
        let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
        s.push_str(&String::from_utf8_lossy(&out.stderr));
        s
    }

    /// `podman healthcheck run`: whether the image's HEALTHCHECK passes.
    pub fn healthy(&self) -> bool {
        self.podman
            .output(&["healthcheck", "run", &self.name])
            .status
            .success()
    }

    /// `podman stop` (SIGTERM, the image's STOPSIGNAL; SIGKILL only after
    /// `grace_secs`); the exit code the container stopped with.
    pub fn stop(&self, grace_secs: u32) -> i64 {
        self.podman
            .ok(&["stop", "-t", &grace_secs.to_string(), &self.name]);
        self.exit_code()
    }

    /// `podman kill` (SIGKILL to its PID 1, the supervisor).
    pub fn kill(&self) {
        self.podman.ok(&["kill", &self.name]);
    }

    pub fn exit_code(&self) -> i64 {
        self.podman
            .inspect(&self.name, "{{.State.ExitCode}}")
            .parse()
            .expect("an exit code")
    }

    pub fn running(&self) -> bool {
        self.podman.inspect(&self.name, "{{.State.Running}}") == "true"
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- podman logs {} ---\n{}", self.name, self.logs());
        }
        let _ = self.podman.output(&["rm", "-f", "-t", "0", &self.name]);
    }
}
