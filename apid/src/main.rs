//! `apid`: not built yet; see the issue that introduces it.

fn main() {
    eprintln!("apid is not part of this build yet");
    std::process::exit(2);
}
