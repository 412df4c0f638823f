//! `meta-core health`: the container's health check (`HEALTHCHECK CMD
//! ["meta-core", "health"]`), with nothing else in the image (no shell, no
//! curl). Healthy (exit 0) is a standby whose supervisor answers (a standby
//! is doing its job by waiting), or a leader whose public API answers
//! `GET /health` with status `ok`; anything else exits 1 and says why on
//! stderr, which is what `docker inspect` shows of a failed check.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::ExitCode;
use std::time::Duration;

use metacore::Config;
use metacore::api::supervisor::Role;

use crate::control::client::ControlClient;
use crate::leader::Probe;

/// The most the public API's answer may take: a check that hangs is as
/// bad as one that fails.
const TIMEOUT: Duration = Duration::from_secs(3);

pub(crate) fn health(config: &Config) -> ExitCode {
    let client = ControlClient::new(&config.layout().supervisor_socket());
    let status = match client.status() {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "unhealthy: no supervisor answers on {}: {e}",
                client.socket().display()
            );
            return ExitCode::FAILURE;
        }
    };
    match status.role {
        Role::Standby => {
            println!(
                "healthy: standby, waiting for the leader lock (leader {})",
                status.leader_url.as_deref().unwrap_or("unknown")
            );
            return ExitCode::SUCCESS;
        }
        Role::Leader => {}
        other => {
            eprintln!("unhealthy: the supervisor is {}", other.as_str());
            return ExitCode::FAILURE;
        }
    }
    let probe = Probe::of(config);
    match public_health(&probe) {
        Ok((200, word)) if word == "ok" => {
            println!("healthy: leader, the API on {probe} answers ok");
            ExitCode::SUCCESS
        }
        Ok((code, word)) => {
            eprintln!("unhealthy: the API on {probe} answers {code} {word:?}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("unhealthy: the API on {probe} does not answer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The status code of the public `GET /health` and its `status` word.
fn public_health(probe: &Probe) -> Result<(u16, String), String> {
    let addr = probe.socket_addr().map_err(|e| e.to_string())?;
    let mut tcp = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(TIMEOUT))
        .and_then(|()| tcp.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| e.to_string())?;
    tcp.write_all(&crate::http1::request("GET", "/health", "meta-core"))
        .map_err(|e| e.to_string())?;
    let mut answer = Vec::new();
    tcp.take(crate::http1::MAX_ANSWER)
        .read_to_end(&mut answer)
        .map_err(|e| e.to_string())?;
    let (code, body) = crate::http1::parse(&answer)?;
    let word = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["status"].as_str().map(str::to_owned))
        .unwrap_or_default();
    Ok((code, word))
}
