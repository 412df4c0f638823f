//! `mountd`: parse the configuration, set up tracing, run.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    metacore::daemon::main("mountd", mountd::run).await
}
