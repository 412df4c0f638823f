//! Links the `meta-core` binary as a static PIE where the toolchain allows it.
//!
//! Every operator command (`meta-core status`, `logs`, `restart`) is a fresh
//! process, and on this glibc a dynamically linked one spends about 0.3 ms
//! in the loader (libgcc_s, libm, libc, symbol binding) before `main`: a
//! third of the whole `status` call. A static PIE starts at `main`.
//!
//! rustc's own switch for it, `-C target-feature=+crt-static`, applies to a
//! whole build and breaks proc-macros unless every build passes `--target`,
//! which would move the binaries out of `target/release`. So this script
//! does what that switch does, for this one binary: it hands the linker
//! `-static-pie` and a directory of one-line linker scripts that stand for
//! the libraries rustc names (`-lgcc_s` becomes libgcc_eh + libgcc, `-lc`
//! the static libc, ...). storaged and apid stay dynamic: they are long
//! lived and pay the loader once.
//!
//! Packed relative relocations (DT_RELR) are kept either way: the dynamic
//! fallback's 5,000 relative relocations take 1.3 KiB instead of 120 KiB.
//!
//! Falls back to a dynamic link, with a build warning, when a static
//! library is missing (no libc6-dev) or `META_CORE_DYNAMIC=1` asks for it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries rustc's link line names for std on linux-gnu, and the
/// static archives that replace each.
const STATIC_FOR: &[(&str, &[&str])] = &[
    ("gcc_s", &["libgcc_eh.a", "libgcc.a"]),
    ("c", &["libc.a"]),
    ("m", &["libm.a"]),
    ("util", &["libutil.a"]),
    ("rt", &["librt.a"]),
    ("pthread", &["libpthread.a"]),
    ("dl", &["libdl.a"]),
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=META_CORE_DYNAMIC");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rustc-link-arg-bin=meta-core=-Wl,-z,pack-relative-relocs");

    let target = std::env::var("TARGET").unwrap_or_default();
    if !target.ends_with("-linux-gnu") || std::env::var_os("META_CORE_DYNAMIC").is_some() {
        return;
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    match write_scripts(&out.join("static-libs")) {
        Ok(dir) => {
            println!("cargo:rustc-link-arg-bin=meta-core=-L{}", dir.display());
            println!("cargo:rustc-link-arg-bin=meta-core=-static-pie");
        }
        Err(missing) => println!(
            "cargo:warning=meta-core is linked dynamically: {missing} not found \
             (install libc6-dev for the static link)"
        ),
    }
}

/// One linker script per library, naming its static archives by absolute
/// path, or the first archive the C compiler cannot find.
fn write_scripts(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{} ({e})", dir.display()))?;
    for (lib, archives) in STATIC_FOR {
        let mut paths = Vec::new();
        for archive in *archives {
            paths.push(locate(archive).ok_or_else(|| (*archive).to_string())?);
        }
        let script = format!("INPUT({})\n", paths.join(" "));
        let file = dir.join(format!("lib{lib}.a"));
        std::fs::write(&file, script).map_err(|e| format!("{} ({e})", file.display()))?;
    }
    Ok(dir.to_path_buf())
}

/// Where the C compiler finds `archive`; it echoes the bare name back when
/// it has none.
fn locate(archive: &str) -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_string();
    Path::new(&path).is_absolute().then_some(path)
}
