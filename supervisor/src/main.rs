//! `meta-core`: not built yet; see the issue that introduces it.

fn main() {
    eprintln!("meta-core is not part of this build yet");
    std::process::exit(2);
}
