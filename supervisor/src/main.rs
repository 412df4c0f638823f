//! `meta-core`: see the crate documentation.

fn main() -> std::process::ExitCode {
    supervisor::cli::main()
}
