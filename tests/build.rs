//! Probes, once per build, what this machine can do, and compiles the
//! tests that need what it lacks as ignored, so the run reports them as
//! skipped with the reason instead of passing without having run:
//!
//! - a PID namespace (`unshare --pid`, as a container runtime makes): the
//!   PID 1 test;
//! - `chromium` and `chromedriver`: the console's browser tests. `.ci/run`
//!   installs both and sets `META_CORE_REQUIRE_BROWSER=1`;
//! - a free loop device and `mkfs.ext4`: the test of a volume that fails
//!   (required with `META_CORE_REQUIRE_FUSE=1`, as CI sets);
//! - `rclone`, and FUSE (`/dev/fuse` and `fusermount3`): the mountd tests.
//!   `.ci/run` installs both and sets `META_CORE_REQUIRE_FUSE=1`, which
//!   makes their absence a build failure rather than a skip;
//! - `podman`, `runc` and `mmdebstrap`: the container tests, which build
//!   the image and run it; `hadolint` and `docker-compose`: the checks of
//!   the Dockerfile and the compose file. `.ci/run` installs them and sets
//!   `META_CORE_REQUIRE_CONTAINER=1`, which makes their absence a build
//!   failure rather than a skip.

use std::process::{Command, Stdio};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=META_CORE_REQUIRE_FUSE");
    println!("cargo::rerun-if-env-changed=META_CORE_REQUIRE_CONTAINER");
    println!("cargo::rerun-if-env-changed=META_CORE_REQUIRE_BROWSER");
    let runs = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let required = |var: &str| std::env::var_os(var).is_some_and(|v| v == "1");

    let rclone = runs("rclone", &["version"]);
    let fuse = rclone && std::path::Path::new("/dev/fuse").exists() && runs("fusermount3", &["-V"]);
    if required("META_CORE_REQUIRE_FUSE") && !fuse {
        panic!("META_CORE_REQUIRE_FUSE=1, but rclone, /dev/fuse or fusermount3 is missing");
    }
    let podman = runs("podman", &["--version"])
        && runs("runc", &["--version"])
        && runs("mmdebstrap", &["--version"]);
    let lint = runs("hadolint", &["--version"]) && runs("docker-compose", &["version"]);
    if required("META_CORE_REQUIRE_CONTAINER") && !(podman && lint) {
        panic!(
            "META_CORE_REQUIRE_CONTAINER=1, but podman, runc, mmdebstrap, hadolint or docker-compose is missing"
        );
    }
    let pid_namespace = runs("unshare", &["--pid", "--fork", "--mount-proc", "true"]);
    let browser = runs("chromium", &["--version"]) && runs("chromedriver", &["--version"]);
    if required("META_CORE_REQUIRE_BROWSER") && !browser {
        panic!("META_CORE_REQUIRE_BROWSER=1, but chromium or chromedriver is missing");
    }
    // A free loop device, and mkfs.ext4 to make the image it backs.
    let loop_ext4 = runs("losetup", &["-f"]) && runs("mkfs.ext4", &["-V"]);
    if required("META_CORE_REQUIRE_FUSE") && !loop_ext4 {
        panic!(
            "META_CORE_REQUIRE_FUSE=1 (CI), but losetup finds no free loop device or mkfs.ext4 is missing"
        );
    }

    // Each cfg, whether the machine has what it stands for, and what a
    // run without it skips.
    let probes = [
        (
            "no_rclone",
            rclone,
            "rclone is not installed: the mountd tests that run it are skipped",
        ),
        (
            "no_fuse",
            fuse,
            "no FUSE here (rclone, /dev/fuse, fusermount3): the mount tests are skipped",
        ),
        (
            "no_podman",
            podman,
            "no podman, runc or mmdebstrap here: the container image tests are skipped",
        ),
        (
            "no_container_lint",
            lint,
            "no hadolint or docker-compose here: the Dockerfile and compose checks are skipped",
        ),
        (
            "no_loop_ext4",
            loop_ext4,
            "no loop device or mkfs.ext4 here: the failing-volume test is skipped",
        ),
        (
            "no_browser",
            browser,
            "no chromium or chromedriver here: the console's browser tests are skipped",
        ),
        (
            "no_pid_namespace",
            pid_namespace,
            "this machine cannot make a PID namespace (unshare --pid): the PID 1 test is skipped",
        ),
    ];
    for (cfg, present, skipped) in probes {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if !present {
            println!("cargo::rustc-cfg={cfg}");
            println!("cargo::warning={skipped}");
        }
    }
}
