//! `storaged`: the shared daemon entry point around `storaged::run`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    metacore::daemon::main("storaged", storaged::run).await
}
