//! What every daemon binary's `main` does, once: read the configuration
//! (a malformed value exits 2 naming it), set up tracing, turn SIGTERM and
//! SIGINT into the shutdown signal, run the daemon, and map its result to
//! the exit status (an error is logged with its causes and exits 1).

use std::future::Future;
use std::process::ExitCode;

use crate::Config;
use crate::shutdown::{self, Shutdown};
use crate::telemetry;

/// Runs a daemon's `run(config, shutdown)` as the process's main.
pub async fn main<F, Fut, E>(name: &str, run: F) -> ExitCode
where
    F: FnOnce(Config, Shutdown) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::error::Error + 'static,
{
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init(config.log_format);
    let (trigger, shutdown) = shutdown::channel();
    tokio::spawn(async move {
        shutdown::on_signals().await;
        tracing::info!("stop requested; finishing in-flight work");
        trigger.fire();
        // Keep the trigger alive: dropping it is also a shutdown, already fired.
        std::future::pending::<()>().await;
    });
    match run(config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", telemetry::report(&e));
            ExitCode::FAILURE
        }
    }
}
