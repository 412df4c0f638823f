//! The rules of the mounts API's bodies (their types are in
//! [`metacore::api::mountd`]): what a new mount needs, what an update may
//! change, and how a stored mount becomes the `fs` string rclone mounts.
//!
//! Members the route does not take are ignored and JSON `null` reads as
//! absent, as the original's Go decoder read them; every member it does
//! take is checked, and a bad one is a 400 naming it.

use metacore::api::mountd::{MountConfig, MountUpdate, NewMount};
use metacore::error::ApiError;

use crate::units;

/// Shortest polling interval; shorter ones are raised to it.
pub const MIN_POLLING_MS: u64 = 5_000;
/// The polling interval when none is given.
pub const DEFAULT_POLLING_MS: u64 = 30_000;
/// Longest polling interval (a day).
const MAX_POLLING_MS: u64 = 86_400_000;

fn bad(member: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("{member}: {why}"))
}

/// A Go duration as given (trimmed), or a 400 naming `member`.
fn check_duration(member: &str, raw: &str) -> Result<String, ApiError> {
    units::duration(raw)
        .map(str::to_owned)
        .ok_or_else(|| bad(member, "not a duration (`24h`, `5m`, `1h30m`, `90s`)"))
}

/// An rclone size as given (trimmed), or a 400 naming `cacheMaxSize`.
fn check_size(raw: &str) -> Result<String, ApiError> {
    units::size(raw)
        .map(str::to_owned)
        .ok_or_else(|| bad("cacheMaxSize", "not a size (`50G`, `500M`, `off`)"))
}

/// Text of at most `max` bytes without control characters.
fn plain(member: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max {
        return Err(bad(member, format!("longer than {max} bytes")));
    }
    if value.chars().any(char::is_control) {
        return Err(bad(member, "contains a control character"));
    }
    Ok(())
}

/// Takes a required member, trimmed and non-empty.
fn required(member: &str, value: Option<&String>, max: usize) -> Result<String, ApiError> {
    let v = value.map(|v| v.trim()).unwrap_or_default();
    if v.is_empty() {
        return Err(bad(member, "required"));
    }
    plain(member, v, max)?;
    Ok(v.to_owned())
}

fn optional(member: &str, value: Option<&String>, max: usize) -> Result<String, ApiError> {
    let v = value.map(|v| v.trim()).unwrap_or_default();
    plain(member, v, max)?;
    Ok(v.to_owned())
}

/// On-the-fly backends a mount may name. The others (`:local`, `:sftp`,
/// ...) would let whoever may call the API mount any path of the host, or
/// any server, that the operator never configured: a local folder is
/// mounted through a remote of rclone's configuration.
const ON_THE_FLY: &[&str] = &["memory"];

/// A configured remote's name (`gdrive`, `gdrive:`) or the on-the-fly
/// `:memory:`, without its trailing colon.
pub fn check_remote(raw: &str) -> Result<String, ApiError> {
    let name = raw.trim().strip_suffix(':').unwrap_or(raw.trim());
    if let Some(backend) = name.strip_prefix(':') {
        return if ON_THE_FLY.contains(&backend) {
            Ok(name.to_owned())
        } else {
            Err(bad(
                "rcloneRemote",
                format!(
                    "the on-the-fly backend {name:?} is not allowed (only :memory:): \
                     configure a remote in rclone's configuration and name it"
                ),
            ))
        };
    }
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['-', ' '])
        && !name.ends_with(' ')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-+@ ".contains(&b));
    if ok {
        Ok(name.to_owned())
    } else {
        Err(bad(
            "rcloneRemote",
            "not a remote name (letters, digits, `_.-+@` and spaces, at most 64)",
        ))
    }
}

/// A path inside the remote: no `..`, no control characters.
fn check_remote_path(raw: &str) -> Result<String, ApiError> {
    let path = raw.trim();
    plain("rclonePath", path, 1024)?;
    if path.split('/').any(|part| part == "..") {
        return Err(bad("rclonePath", "contains .."));
    }
    Ok(path.to_owned())
}

fn check_host(raw: &str) -> Result<String, ApiError> {
    let host = required("smbServer", Some(&raw.to_owned()), 253)?;
    if host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b".-_:[]%".contains(&b))
    {
        Ok(host)
    } else {
        Err(bad("smbServer", "not a host name or address"))
    }
}

fn check_share(raw: Option<&String>) -> Result<String, ApiError> {
    let share = required("smbShare", raw, 255)?;
    if share.contains(['/', '\\']) || share == "." || share == ".." {
        return Err(bad("smbShare", "one share name, without `/` or `\\`"));
    }
    Ok(share)
}

fn polling_ms(ms: u64) -> Result<u64, ApiError> {
    if ms > MAX_POLLING_MS {
        return Err(bad(
            "pollingIntervalMs",
            format!("at most {MAX_POLLING_MS} (a day)"),
        ));
    }
    Ok(ms.max(MIN_POLLING_MS))
}

/// Applies the members of `u` given to `m`, every one checked first
/// (nothing changes when one is bad).
pub fn apply(u: &MountUpdate, m: &mut MountConfig) -> Result<(), ApiError> {
    let size = u.cache_max_size.as_deref().map(check_size).transpose()?;
    let age = u
        .cache_max_age
        .as_deref()
        .map(|v| check_duration("cacheMaxAge", v))
        .transpose()?;
    let dir = u
        .dir_cache_time
        .as_deref()
        .map(|v| check_duration("dirCacheTime", v))
        .transpose()?;
    let interval = u.polling_interval_ms.map(polling_ms).transpose()?;
    if let Some(v) = size {
        m.cache_max_size = v;
    }
    if let Some(v) = age {
        m.cache_max_age = v;
    }
    if let Some(v) = dir {
        m.dir_cache_time = v;
    }
    if let Some(v) = interval {
        m.polling_interval_ms = v;
    }
    if let Some(v) = u.polling_enabled {
        m.polling_enabled = v;
    }
    Ok(())
}

/// A new mount, checked: its configuration (no id or path yet) and the
/// SMB password to obscure, if one was given.
pub struct Checked {
    pub config: MountConfig,
    pub smb_password: Option<String>,
}

impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked")
            .field("config", &self.config)
            .field("smb_password", &self.smb_password.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// A new mount checked by the rules above: its configuration, or a 400
/// naming the first bad member.
pub fn check(new: &NewMount) -> Result<Checked, ApiError> {
    let name = required("name", new.name.as_ref(), 128)?;
    if crate::config::sanitize_name(&name).is_none() {
        return Err(bad(
            "name",
            "needs a letter or digit (it names the mount's folder)",
        ));
    }
    let kind = required("type", new.kind.as_ref(), 16)?;
    let enabled = new.enabled.unwrap_or(true);
    let mut c = MountConfig {
        id: String::new(),
        name,
        kind: kind.clone(),
        enabled,
        desired_mounted: enabled,
        mount_path: String::new(),
        smb_server: String::new(),
        smb_share: String::new(),
        smb_username: String::new(),
        smb_password_obscured: String::new(),
        smb_domain: String::new(),
        rclone_remote: String::new(),
        rclone_path: String::new(),
        cache_max_size: "50G".into(),
        cache_max_age: "24h".into(),
        dir_cache_time: "5m".into(),
        polling_enabled: true,
        polling_interval_ms: DEFAULT_POLLING_MS,
    };
    let mut password = None;
    match kind.as_str() {
        "rclone" => {
            c.rclone_remote =
                check_remote(&required("rcloneRemote", new.rclone_remote.as_ref(), 70)?)?;
            c.rclone_path = check_remote_path(new.rclone_path.as_deref().unwrap_or(""))?;
        }
        "smb" => {
            c.smb_server = check_host(new.smb_server.as_deref().unwrap_or(""))?;
            c.smb_share = check_share(new.smb_share.as_ref())?;
            c.smb_username = optional("smbUsername", new.smb_username.as_ref(), 256)?;
            c.smb_domain = optional("smbDomain", new.smb_domain.as_ref(), 256)?;
            if let Some(p) = new.smb_password.as_deref().filter(|p| !p.is_empty()) {
                if p.len() > 256 || p.contains('\0') {
                    return Err(bad("smbPassword", "at most 256 bytes, no NUL"));
                }
                password = Some(p.to_owned());
            }
        }
        "nfs" => {
            return Err(bad(
                "type",
                "nfs mounts are not supported; use smb or rclone",
            ));
        }
        other => {
            return Err(bad(
                "type",
                format!("{other:?} is not a mount type (smb or rclone)"),
            ));
        }
    }
    apply(&new.tuning, &mut c)?;
    Ok(Checked {
        config: c,
        smb_password: password,
    })
}

/// Checks a mount as `mounts.json` holds it (a hand-edited file is read
/// as given) by the rules of a new one: why it will not be mounted.
pub fn check_stored(m: &MountConfig) -> Result<(), String> {
    let checked = match m.kind.as_str() {
        "rclone" => check_remote(&m.rclone_remote)
            .and_then(|_| check_remote_path(&m.rclone_path))
            .map(|_| ()),
        "smb" => check_host(&m.smb_server)
            .and_then(|_| check_share(Some(&m.smb_share)))
            .and_then(|_| optional("smbUsername", Some(&m.smb_username), 256))
            .and_then(|_| optional("smbDomain", Some(&m.smb_domain), 256))
            .and_then(|_| plain("smbPasswordObscured", &m.smb_password_obscured, 1024))
            .map(|_| ()),
        other => Err(bad("type", format!("{other:?} is not a mount type"))),
    };
    checked
        .and_then(|()| check_size(&m.cache_max_size).map(|_| ()))
        .and_then(|()| check_duration("cacheMaxAge", &m.cache_max_age).map(|_| ()))
        .and_then(|()| check_duration("dirCacheTime", &m.dir_cache_time).map(|_| ()))
        .map_err(|e| e.message)
}

/// A connection-string value, quoted as rclone reads it (`"` doubled).
fn quoted(v: &str) -> String {
    format!("\"{}\"", v.replace('"', "\"\""))
}

/// What rclone mounts for `m`: `remote:path`, or an on-the-fly SMB
/// backend (`:smb,host=...,pass=<obscured>:share`).
pub fn fs_string(m: &MountConfig) -> String {
    if m.kind == "smb" {
        let mut s = format!(":smb,host={}", quoted(&m.smb_server));
        for (key, value) in [
            ("user", &m.smb_username),
            ("pass", &m.smb_password_obscured),
            ("domain", &m.smb_domain),
        ] {
            if !value.is_empty() {
                s.push_str(&format!(",{key}={}", quoted(value)));
            }
        }
        format!("{s}:{}", m.smb_share)
    } else {
        format!("{}:{}", m.rclone_remote, m.rclone_path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(json: &str) -> Result<Checked, ApiError> {
        check(&serde_json::from_str::<NewMount>(json).unwrap())
    }

    #[test]
    fn a_new_rclone_mount_takes_the_defaults() {
        let c = new(r#"{"name":"Films","type":"rclone","rcloneRemote":"gdrive:","rclonePath":"media/films","extra":1,"pollingIntervalMs":null}"#)
            .unwrap()
            .config;
        assert_eq!(c.rclone_remote, "gdrive");
        assert_eq!(fs_string(&c), "gdrive:media/films");
        assert!(c.enabled && c.desired_mounted);
        assert_eq!(
            (c.cache_max_size.as_str(), c.polling_interval_ms),
            ("50G", 30_000)
        );
        let c = new(r#"{"name":"m","type":"rclone","rcloneRemote":":memory:","pollingIntervalMs":10,"enabled":false}"#)
            .unwrap()
            .config;
        assert_eq!(fs_string(&c), ":memory:");
        assert_eq!(c.polling_interval_ms, MIN_POLLING_MS);
        assert!(!c.desired_mounted);
    }

    #[test]
    fn bad_members_are_named() {
        for (body, member) in [
            (r#"{"type":"rclone","rcloneRemote":"a"}"#, "name"),
            (
                r#"{"name":"///","type":"rclone","rcloneRemote":"a"}"#,
                "name",
            ),
            (r#"{"name":"a","type":"nfs"}"#, "type"),
            (r#"{"name":"a","type":"ftp"}"#, "type"),
            (r#"{"name":"a","type":"rclone"}"#, "rcloneRemote"),
            (
                r#"{"name":"a","type":"rclone","rcloneRemote":"a,b"}"#,
                "rcloneRemote",
            ),
            (
                r#"{"name":"a","type":"rclone","rcloneRemote":"a","rclonePath":"x/../y"}"#,
                "rclonePath",
            ),
            (r#"{"name":"a","type":"smb","smbShare":"s"}"#, "smbServer"),
            (
                r#"{"name":"a","type":"smb","smbServer":"nas","smbShare":"a/b"}"#,
                "smbShare",
            ),
            (
                r#"{"name":"a","type":"smb","smbServer":"n\"as","smbShare":"s"}"#,
                "smbServer",
            ),
            (
                r#"{"name":"a","type":"rclone","rcloneRemote":"a","cacheMaxAge":"5d"}"#,
                "cacheMaxAge",
            ),
            (
                r#"{"name":"a","type":"rclone","rcloneRemote":"a","cacheMaxSize":"lots"}"#,
                "cacheMaxSize",
            ),
            (
                r#"{"name":"a","type":"rclone","rcloneRemote":"a","pollingIntervalMs":999999999999}"#,
                "pollingIntervalMs",
            ),
        ] {
            let e = new(body).err().unwrap_or_else(|| panic!("{body} taken"));
            assert!(e.message.starts_with(member), "{body}: {}", e.message);
        }
    }

    #[test]
    fn smb_becomes_a_quoted_connection_string() {
        let mut c = new(r#"{"name":"nas","type":"smb","smbServer":"192.168.1.5","smbShare":"media","smbUsername":"me, \"x\"","smbPassword":"p","smbDomain":"WG"}"#)
            .unwrap();
        assert_eq!(c.smb_password.as_deref(), Some("p"));
        c.config.smb_password_obscured = "OBSC".into();
        assert_eq!(
            fs_string(&c.config),
            r#":smb,host="192.168.1.5",user="me, ""x""",pass="OBSC",domain="WG":media"#
        );
    }

    #[test]
    fn an_update_changes_all_or_nothing() {
        let mut c = new(r#"{"name":"a","type":"rclone","rcloneRemote":"a"}"#)
            .unwrap()
            .config;
        let before = c.clone();
        let u: MountUpdate =
            serde_json::from_str(r#"{"cacheMaxSize":"1T","dirCacheTime":"never"}"#).unwrap();
        assert!(apply(&u, &mut c).is_err());
        assert_eq!(c, before);
        let u: MountUpdate = serde_json::from_str(
            r#"{"cacheMaxSize":"1.5T","dirCacheTime":"1m","pollingEnabled":false}"#,
        )
        .unwrap();
        apply(&u, &mut c).unwrap();
        assert_eq!(
            (
                c.cache_max_size.as_str(),
                c.dir_cache_time.as_str(),
                c.polling_enabled
            ),
            ("1.5T", "1m", false)
        );
    }
}
