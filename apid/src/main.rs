//! `apid`: parse config, set up tracing, call `apid::run`.

use std::process::ExitCode;

use metacore::telemetry;

#[tokio::main]
async fn main() -> ExitCode {
    let config = match metacore::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("apid: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init(config.log_format);
    let (trigger, shutdown) = metacore::shutdown::channel();
    tokio::spawn(async move {
        metacore::shutdown::on_signals().await;
        tracing::info!("stop requested; finishing in-flight requests");
        trigger.fire();
        std::future::pending::<()>().await;
    });
    match apid::run(config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", telemetry::report(&e));
            ExitCode::FAILURE
        }
    }
}
