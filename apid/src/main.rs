//! `apid`: the shared daemon entry point around `apid::run`.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    metacore::daemon::main("apid", apid::run).await
}
