//! rclone's remote control, called over HTTP on loopback with the
//! credentials mountd made for the running rclone: a JSON body in, rclone's
//! JSON answer (or its `error` text, passwords hidden) out.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::rcd::Rc;

/// A remote-control call: POST `<url>/<method>` with a JSON body and the
/// credentials; the JSON answer, or why it failed.
pub async fn call(rc: &Rc, method: &str, body: &str) -> Result<serde_json::Value, String> {
    call_within(rc, method, body, Duration::from_secs(30)).await
}

/// [`call`], answered within `within`. A refusal reads as rclone's own
/// `error` text.
pub async fn call_within(
    rc: &Rc,
    method: &str,
    body: &str,
    within: Duration,
) -> Result<serde_json::Value, String> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let auth = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", rc.user, rc.pass))
    );
    let req = hyper::Request::post(format!("{}/{method}", rc.url))
        .header("authorization", auth)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .map_err(|e| e.to_string())?;
    let resp = tokio::time::timeout(within, client.request(req))
        .await
        .map_err(|_| format!("{method}: no answer within {within:?}"))?
        .map_err(|e| format!("{method}: {e}"))?;
    let status = resp.status();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("{method}: {e}"))?
        .to_bytes();
    if !status.is_success() {
        let said = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
        return Err(format!("{method}: {}", redact(&said)));
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("{method}: not JSON: {e}"))
}

/// rclone's text with the value of every `pass=` (an SMB connection
/// string's obscured password, which rclone may quote) hidden.
fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("pass=") {
        let (head, tail) = rest.split_at(at + "pass=".len());
        out.push_str(head);
        out.push_str("***");
        // The value: quoted (a doubled quote inside), or up to `,` `:` or
        // a space.
        rest = match tail.chars().next() {
            Some(q @ ('"' | '\'')) => {
                let mut end = tail.len();
                let mut i = 1;
                let b = tail.as_bytes();
                while i < b.len() {
                    if b[i] == q as u8 {
                        if b.get(i + 1) == Some(&(q as u8)) {
                            i += 2;
                            continue;
                        }
                        end = i + 1;
                        break;
                    }
                    i += 1;
                }
                &tail[end..]
            }
            _ => {
                let end = tail.find([',', ':', ' ', '\n']).unwrap_or(tail.len());
                &tail[end..]
            }
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_in_rclone_text_are_hidden() {
        assert_eq!(
            redact(r#"couldn't connect ":smb,host="nas",pass="a""b,c",user="x":share""#),
            r#"couldn't connect ":smb,host="nas",pass=***,user="x":share""#
        );
        assert_eq!(redact("pass=abc:share"), "pass=***:share");
        assert_eq!(redact("nothing here"), "nothing here");
    }
}
