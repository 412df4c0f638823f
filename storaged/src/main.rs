//! `storaged`: parse config, set up tracing, call `storaged::run`.

use std::process::ExitCode;

use metacore::telemetry;

#[tokio::main]
async fn main() -> ExitCode {
    let config = match metacore::Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("storaged: {e}");
            return ExitCode::from(2);
        }
    };
    telemetry::init(config.log_format);
    let (trigger, shutdown) = metacore::shutdown::channel();
    tokio::spawn(async move {
        metacore::shutdown::on_signals().await;
        tracing::info!("stop requested; finishing in-flight writes");
        trigger.fire();
        // Keep the trigger alive: dropping it is also a shutdown, already fired.
        std::future::pending::<()>().await;
    });
    match storaged::run(config, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", telemetry::report(&e));
            ExitCode::FAILURE
        }
    }
}
