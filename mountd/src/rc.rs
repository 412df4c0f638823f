//! rclone's remote control, called over HTTP on loopback with the
//! credentials mountd made for the running rclone: one method per call
//! mountd makes, each over rclone's own request and answer shapes (which
//! stay here: rclone's API is not ours), a refusal read as rclone's
//! `error` text with passwords hidden.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};

/// How long a call waits for its answer when the caller names no bound.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Where to reach the running rclone.
#[derive(Clone)]
pub struct Rc {
    pub url: String,
    pub(crate) user: String,
    pub(crate) pass: String,
    /// Which start of rclone this is (1 for the first): a mount made by
    /// an earlier one died with it.
    pub generation: u64,
}

impl std::fmt::Debug for Rc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rc")
            .field("url", &self.url)
            .field("user", &self.user)
            .field("pass", &"<redacted>")
            .field("generation", &self.generation)
            .finish()
    }
}

/// The body of the calls that take no argument.
#[derive(Debug, Serialize)]
struct NoArgs {}

/// `core/obscure`'s argument.
#[derive(Serialize)]
struct Clear<'a> {
    clear: &'a str,
}

/// `core/obscure`'s answer.
#[derive(Debug, Deserialize)]
struct Obscured {
    obscured: String,
}

/// A remote's section of rclone's configuration, the member read (of
/// `config/get`, and of each remote of `config/dump`). A remote that is
/// not configured, or a section that is not an object or whose `type` is
/// not a string, reads with `kind` empty: one odd section does not make
/// the whole listing fail.
#[derive(Debug, Default, Deserialize)]
#[serde(from = "serde_json::Value")]
pub struct RemoteConfig {
    pub kind: String,
}

impl From<serde_json::Value> for RemoteConfig {
    fn from(section: serde_json::Value) -> Self {
        let kind = section.get("type").and_then(serde_json::Value::as_str);
        Self {
            kind: kind.unwrap_or_default().to_owned(),
        }
    }
}

/// `config/get`'s argument.
#[derive(Serialize)]
struct Name<'a> {
    name: &'a str,
}

/// `operations/fsinfo`'s argument.
#[derive(Serialize)]
struct Fs<'a> {
    fs: &'a str,
}

/// What `operations/fsinfo` says of an `fs`, the members read.
#[derive(Debug, Default, Deserialize)]
pub struct FsInfo {
    #[serde(rename = "Root", default)]
    pub root: String,
    #[serde(rename = "Features", default)]
    pub features: Features,
}

#[derive(Debug, Default, Deserialize)]
pub struct Features {
    #[serde(rename = "IsLocal", default)]
    pub is_local: bool,
}

/// `operations/list`'s argument: the top folder of `fs`, its folders
/// only.
#[derive(Serialize)]
struct List<'a> {
    fs: &'a str,
    remote: &'a str,
    opt: ListOpt,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListOpt {
    dirs_only: bool,
}

/// `mount/mount`'s argument.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount<'a> {
    pub fs: &'a str,
    pub mount_point: &'a str,
    /// Always `mount` (rclone's FUSE mount).
    pub mount_type: &'static str,
    pub vfs_opt: VfsOpt<'a>,
    pub mount_opt: MountOpt,
}

/// rclone's VFS options, as `mount/mount` spells them; durations in
/// nanoseconds, modes as numbers.
#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct VfsOpt<'a> {
    pub cache_mode: &'static str,
    pub cache_max_size: &'a str,
    pub cache_max_age: u64,
    pub dir_cache_time: u64,
    pub umask: u32,
    pub dir_perms: u32,
    pub file_perms: u32,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MountOpt {
    pub allow_other: bool,
}

/// `mount/unmount`'s argument.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Unmount<'a> {
    mount_point: &'a Path,
}

impl Rc {
    /// `rc/noop`: whether rclone answers, within `within`.
    pub async fn noop(&self, within: Duration) -> Result<(), String> {
        let _: IgnoredAny = self.call("rc/noop", &NoArgs {}, within).await?;
        Ok(())
    }

    /// `core/obscure`: `clear` obscured as rclone obscures passwords.
    pub async fn obscure(&self, clear: &str) -> Result<String, String> {
        let o: Obscured = self
            .call("core/obscure", &Clear { clear }, CALL_TIMEOUT)
            .await?;
        Ok(o.obscured)
    }

    /// `config/dump`: every remote of rclone's configuration, by name.
    pub async fn remotes(&self) -> Result<BTreeMap<String, RemoteConfig>, String> {
        self.call("config/dump", &NoArgs {}, CALL_TIMEOUT).await
    }

    /// `config/get`: the remote `name` as rclone.conf holds it now.
    pub async fn remote(&self, name: &str, within: Duration) -> Result<RemoteConfig, String> {
        self.call("config/get", &Name { name }, within).await
    }

    /// `fscache/clear`: rclone builds every remote anew from rclone.conf
    /// at its next use.
    pub async fn clear_fs_cache(&self, within: Duration) -> Result<(), String> {
        let _: IgnoredAny = self.call("fscache/clear", &NoArgs {}, within).await?;
        Ok(())
    }

    /// `operations/fsinfo`: what rclone says `fs` is.
    pub async fn fs_info(&self, fs: &str, within: Duration) -> Result<FsInfo, String> {
        self.call("operations/fsinfo", &Fs { fs }, within).await
    }

    /// `operations/list` of the top folder of `fs`, folders only: whether
    /// the remote answers.
    pub async fn list_top(&self, fs: &str, within: Duration) -> Result<(), String> {
        let list = List {
            fs,
            remote: "",
            opt: ListOpt { dirs_only: true },
        };
        let _: IgnoredAny = self.call("operations/list", &list, within).await?;
        Ok(())
    }

    /// `mount/mount`.
    pub async fn mount(&self, mount: &Mount<'_>, within: Duration) -> Result<(), String> {
        let _: IgnoredAny = self.call("mount/mount", mount, within).await?;
        Ok(())
    }

    /// `mount/unmount` of the mount at `point` (rclone knows its mounts by
    /// the folder they were mounted on).
    pub async fn unmount(&self, point: &Path, within: Duration) -> Result<(), String> {
        let body = Unmount { mount_point: point };
        let _: IgnoredAny = self.call("mount/unmount", &body, within).await?;
        Ok(())
    }

    /// POST `<url>/<method>` with `body` as JSON and the credentials; the
    /// answer as `T`, answered within `within`, or why not (a refusal in
    /// rclone's own `error` text).
    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: &str,
        body: &B,
        within: Duration,
    ) -> Result<T, String> {
        let body = serde_json::to_vec(body).map_err(|e| format!("{method}: {e}"))?;
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
        let auth = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD
                .encode(format!("{}:{}", self.user, self.pass))
        );
        let req = hyper::Request::post(format!("{}/{method}", self.url))
            .header("authorization", auth)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
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
            let said = serde_json::from_slice::<Refused>(&bytes)
                .map(|r| r.error)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
            return Err(format!("{method}: {}", redact(&said)));
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| format!("{method}: not the answer expected: {e}"))
    }
}

/// rclone's answer to a call it refused, the member read.
#[derive(Deserialize)]
struct Refused {
    error: String,
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
    fn the_bodies_are_spelled_as_rclone_reads_them() {
        let mount = Mount {
            fs: "gdrive:media",
            mount_point: "/files/corn/films",
            mount_type: "mount",
            vfs_opt: VfsOpt {
                cache_mode: "full",
                cache_max_size: "50G",
                cache_max_age: 1,
                dir_cache_time: 2,
                umask: 0o022,
                dir_perms: 0o777,
                file_perms: 0o666,
            },
            mount_opt: MountOpt { allow_other: true },
        };
        assert_eq!(
            serde_json::to_value(&mount).unwrap(),
            serde_json::json!({
                "fs": "gdrive:media",
                "mountPoint": "/files/corn/films",
                "mountType": "mount",
                "vfsOpt": {
                    "CacheMode": "full", "CacheMaxSize": "50G", "CacheMaxAge": 1,
                    "DirCacheTime": 2, "Umask": 18, "DirPerms": 511, "FilePerms": 438,
                },
                "mountOpt": { "AllowOther": true },
            })
        );
        let list = List {
            fs: "a:",
            remote: "",
            opt: ListOpt { dirs_only: true },
        };
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            r#"{"fs":"a:","remote":"","opt":{"dirsOnly":true}}"#
        );
        let unmount = Unmount {
            mount_point: Path::new("/files/corn/films"),
        };
        assert_eq!(
            serde_json::to_string(&unmount).unwrap(),
            r#"{"mountPoint":"/files/corn/films"}"#
        );
        assert_eq!(serde_json::to_string(&NoArgs {}).unwrap(), "{}");
    }

    #[test]
    fn rclones_answers_read_with_what_they_lack_as_empty() {
        let info: FsInfo =
            serde_json::from_str(r#"{"Root":"/srv","Features":{"IsLocal":true},"Name":"x"}"#)
                .unwrap();
        assert!(info.features.is_local && info.root == "/srv");
        let none: RemoteConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(none.kind, "", "a remote not configured");
        let dump: BTreeMap<String, RemoteConfig> = serde_json::from_str(
            r#"{"gdrive":{"type":"drive","token":"x"},"odd":"text","typed":{"type":7}}"#,
        )
        .unwrap();
        let kinds: Vec<(&str, &str)> = dump
            .iter()
            .map(|(n, c)| (n.as_str(), c.kind.as_str()))
            .collect();
        assert_eq!(kinds, [("gdrive", "drive"), ("odd", ""), ("typed", "")]);
    }

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
