//! Probes, once per build, what this machine can do, and compiles the
//! tests that need what it lacks as ignored, so the run reports them as
//! skipped with the reason instead of passing without having run:
//!
//! - a PID namespace (`unshare --pid`, as a container runtime makes): the
//!   PID 1 test;
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
    println!("cargo::rustc-check-cfg=cfg(no_pid_namespace)");
    println!("cargo::rustc-check-cfg=cfg(no_rclone)");
    println!("cargo::rustc-check-cfg=cfg(no_fuse)");
    println!("cargo::rustc-check-cfg=cfg(no_podman)");
    println!("cargo::rustc-check-cfg=cfg(no_container_lint)");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=META_CORE_REQUIRE_FUSE");
    println!("cargo::rerun-if-env-changed=META_CORE_REQUIRE_CONTAINER");
    let runs = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let rclone = runs("rclone", "version");
    let fuse = rclone && std::path::Path::new("/dev/fuse").exists() && runs("fusermount3", "-V");
    if std::env::var_os("META_CORE_REQUIRE_FUSE").is_some_and(|v| v == "1") && !fuse {
        panic!("META_CORE_REQUIRE_FUSE=1, but rclone, /dev/fuse or fusermount3 is missing");
    }
    if !rclone {
        println!("cargo::rustc-cfg=no_rclone");
        println!(
            "cargo::warning=rclone is not installed: the mountd tests that run it are skipped"
        );
    }
    if !fuse {
        println!("cargo::rustc-cfg=no_fuse");
        println!(
            "cargo::warning=no FUSE here (rclone, /dev/fuse, fusermount3): the mount tests are skipped"
        );
    }
    let podman =
        runs("podman", "--version") && runs("runc", "--version") && runs("mmdebstrap", "--version");
    let lint = runs("hadolint", "--version") && runs("docker-compose", "version");
    if std::env::var_os("META_CORE_REQUIRE_CONTAINER").is_some_and(|v| v == "1")
        && !(podman && lint)
    {
        panic!(
            "META_CORE_REQUIRE_CONTAINER=1, but podman, runc, mmdebstrap, hadolint or docker-compose is missing"
        );
    }
    if !lint {
        println!("cargo::rustc-cfg=no_container_lint");
        println!(
            "cargo::warning=no hadolint or docker-compose here: the Dockerfile and compose checks are skipped"
        );
    }
    if !podman {
        println!("cargo::rustc-cfg=no_podman");
        println!(
            "cargo::warning=no podman, runc or mmdebstrap here: the container image tests are skipped"
        );
    }
    let can = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !can {
        println!("cargo::rustc-cfg=no_pid_namespace");
        println!(
            "cargo::warning=this machine cannot make a PID namespace (unshare --pid): the PID 1 test is skipped"
        );
    }
}
