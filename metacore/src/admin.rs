//! The admin token: what the mutating admin routes (kv writes, snapshot
//! import and wipe, mounts, watchers, rescans) ask for in
//! `Authorization: Bearer <token>`.
//!
//! The admin routes are closed by default. The token is
//! `META_CORE_ADMIN_TOKEN` when it is set; otherwise it is the one kept in
//! `$META_CORE_PATH/secrets/admin-token` (folder 0700, file 0600), made at
//! the first start of meta-core (random, 256 bits, hex) and read at every
//! later one, the standby's included: it shares the volume. Only
//! `META_CORE_ADMIN_OPEN=true`, an explicit opt-out, restores the
//! original's open admin routes.
//!
//! The token is never logged, printed in a `Debug`, or put in a child's
//! environment: a process that needs it reads it here.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::Config;
use crate::files::{PRIVATE_DIR, PRIVATE_FILE};

/// Longest token read from the file (a longer one is refused).
const MAX_TOKEN: usize = 1024;

/// Whether the admin routes ask for a token, and which.
#[derive(Clone, PartialEq, Eq)]
pub enum AdminAccess {
    /// `META_CORE_ADMIN_OPEN=true`: anyone may call them, as in the
    /// original.
    Open,
    /// Only a request bearing this token.
    Token(AdminToken),
}

impl fmt::Debug for AdminAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open => f.write_str("Open"),
            Self::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

impl AdminAccess {
    /// Whether a request whose `Authorization` header is `header` may call
    /// an admin route.
    pub fn allows(&self, header: Option<&str>) -> bool {
        match self {
            Self::Open => true,
            Self::Token(t) => bearer(header).is_some_and(|given| t.matches(given)),
        }
    }
}

/// The token of a `Bearer` credential (the scheme is case-insensitive,
/// RFC 9110 §11.1).
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// The admin token; its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

impl AdminToken {
    /// Compares without an early exit, so the time taken says nothing
    /// about how much of the token matched.
    pub fn matches(&self, given: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), given.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// The token itself, for a process that must send it (the CLI).
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

/// Where the admin access came from, for the start-up log line (which
/// names the file, never the token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `META_CORE_ADMIN_OPEN=true`.
    OptedOut,
    /// `META_CORE_ADMIN_TOKEN`.
    Environment,
    /// The token file, read as it was.
    File(PathBuf),
    /// The token file, made now.
    Made(PathBuf),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OptedOut => f.write_str(
                "the admin routes are OPEN to anyone (META_CORE_ADMIN_OPEN=true): \
                 mounts, watchers, kv writes, snapshot import and wipe need no token",
            ),
            Self::Environment => f.write_str("the admin token is META_CORE_ADMIN_TOKEN"),
            Self::File(p) => write!(f, "the admin token is in {}", p.display()),
            Self::Made(p) => write!(
                f,
                "made an admin token in {} (mode 0600): admin routes need \
                 `Authorization: Bearer <its content>`; `meta-core admin-token` prints it",
                p.display()
            ),
        }
    }
}

/// Why the admin token could not be had: the process must not serve admin
/// routes it cannot guard.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("cannot {what} {}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{} holds no usable token (empty, longer than {MAX_TOKEN} bytes, or with spaces or \
         control characters): write one token in it, or remove it to have one made",
        path.display()
    )]
    Unusable { path: PathBuf },
    #[error(
        "META_CORE_ADMIN_TOKEN is no usable token (longer than {MAX_TOKEN} bytes, or with \
         spaces or control characters inside)"
    )]
    UnusableEnvironment,
}

/// One word of printable characters, at most [`MAX_TOKEN`] bytes.
fn usable(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_TOKEN
        && !token.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The admin access of `config`: open when opted out, else the
/// environment's token, else the file's, made when there is none.
pub fn resolve(config: &Config) -> Result<(AdminAccess, Source), TokenError> {
    if config.admin_open {
        return Ok((AdminAccess::Open, Source::OptedOut));
    }
    if let Some(t) = &config.admin_token {
        // An env file's trailing newline or space is not part of it.
        let t = t.trim();
        if !usable(t) {
            return Err(TokenError::UnusableEnvironment);
        }
        return Ok((
            AdminAccess::Token(AdminToken(t.to_owned())),
            Source::Environment,
        ));
    }
    let path = config.layout().admin_token_file();
    let (token, made) = read_or_make(&path)?;
    let source = if made {
        Source::Made(path)
    } else {
        Source::File(path)
    };
    Ok((AdminAccess::Token(token), source))
}

/// Reads the token at `path`, or makes one there if there is none. Two
/// processes that race both end with the token of whichever linked its
/// file first: the file is written whole under a temporary name, then
/// linked to `path`, which fails if it exists.
fn read_or_make(path: &Path) -> Result<(AdminToken, bool), TokenError> {
    match read(path) {
        Err(TokenError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
        other => return other.map(|t| (t, false)),
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let io = |what: &'static str, p: &Path| {
        let p = p.to_path_buf();
        move |source| TokenError::Io {
            what,
            path: p,
            source,
        }
    };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(PRIVATE_DIR))
            .map_err(io("set the mode of", dir))?;
    }
    let token = AdminToken(hex(&rand::random::<[u8; 32]>()));
    // A random name: a pid is reused (the supervisor is pid 1 in every
    // container), and a temporary a kill left must not stop the next start.
    let tmp = dir.join(format!(
        ".admin-token.{}.tmp",
        hex(&rand::random::<[u8; 8]>())
    ));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE)
            .open(&tmp)?;
        f.set_permissions(std::fs::Permissions::from_mode(PRIVATE_FILE))?;
        f.write_all(format!("{}\n", token.0).as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", &tmp)(e));
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io("sync", dir))?;
            Ok((token, true))
        }
        // Another process made it first: its token is the one.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read(path).map(|t| (t, false)),
        Err(e) => Err(io("write", path)(e)),
    }
}

/// The token in the file at `path`: one line, surrounding whitespace
/// ignored. A file others may read is used, with a warning.
fn read(path: &Path) -> Result<AdminToken, TokenError> {
    let io = |what: &'static str| {
        let p = path.to_path_buf();
        move |source| TokenError::Io {
            what,
            path: p,
            source,
        }
    };
    let mut f = std::fs::File::open(path).map_err(io("read"))?;
    let mode = f.metadata().map_err(io("read"))?.permissions().mode();
    if mode & 0o077 != 0 {
        tracing::warn!(
            "{} may be read by other users (mode {:o}); `chmod 600` it",
            path.display(),
            mode & 0o777
        );
    }
    let mut text = String::new();
    Read::by_ref(&mut f)
        .take(MAX_TOKEN as u64 + 2)
        .read_to_string(&mut text)
        .map_err(io("read"))?;
    let token = text.trim();
    if !usable(token) {
        return Err(TokenError::Unusable {
            path: path.to_path_buf(),
        });
    }
    Ok(AdminToken(token.to_owned()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(root: &Path, env: &[(&str, &str)]) -> Config {
        let root = root.to_str().unwrap().to_owned();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| {
            if k == "META_CORE_PATH" {
                return Some(root.clone());
            }
            env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
        .unwrap()
    }

    #[test]
    fn a_token_is_made_once_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(dir.path(), &[]);
        let (first, source) = resolve(&c).unwrap();
        let path = dir.path().join("secrets/admin-token");
        assert_eq!(source, Source::Made(path.clone()));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let AdminAccess::Token(t) = &first else {
            panic!("not a token: {first:?}")
        };
        assert_eq!(t.reveal().len(), 64);
        assert!(!format!("{first:?}{source}").contains(t.reveal()));
        let (again, source) = resolve(&c).unwrap();
        assert_eq!((again, source), (first, Source::File(path.clone())));
        // Nothing else is left in the folder.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn the_environment_and_the_opt_out_come_first() {
        let dir = tempfile::tempdir().unwrap();
        let (a, s) = resolve(&config(dir.path(), &[("META_CORE_ADMIN_TOKEN", "s3cret")])).unwrap();
        assert_eq!(s, Source::Environment);
        assert!(a.allows(Some("Bearer s3cret")) && a.allows(Some("bearer  s3cret ")));
        assert!(!a.allows(Some("Bearer s3cre")) && !a.allows(None) && !a.allows(Some("s3cret")));
        let (a, _) = resolve(&config(
            dir.path(),
            &[("META_CORE_ADMIN_TOKEN", "s3cret\n")],
        ))
        .unwrap();
        assert!(
            a.allows(Some("Bearer s3cret")),
            "an env file's newline is not the token's"
        );
        assert!(matches!(
            resolve(&config(
                dir.path(),
                &[("META_CORE_ADMIN_TOKEN", "two words")]
            )),
            Err(TokenError::UnusableEnvironment)
        ));
        let (a, s) = resolve(&config(dir.path(), &[("META_CORE_ADMIN_OPEN", "true")])).unwrap();
        assert_eq!((a.clone(), s), (AdminAccess::Open, Source::OptedOut));
        assert!(a.allows(None));
        assert!(!dir.path().join("secrets").exists());
    }

    #[test]
    fn an_unusable_file_is_an_error_not_an_open_door() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets/admin-token");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        for bad in ["", "  \n", "two words\n"] {
            std::fs::write(&path, bad).unwrap();
            let e = resolve(&config(dir.path(), &[])).unwrap_err();
            assert!(matches!(e, TokenError::Unusable { .. }), "{bad:?}: {e}");
        }
        std::fs::write(&path, " mine\n").unwrap();
        let (a, _) = resolve(&config(dir.path(), &[])).unwrap();
        assert!(a.allows(Some("Bearer mine")));
    }

    #[test]
    fn tokens_compare_whole() {
        let t = AdminToken("secret".into());
        assert!(t.matches("secret"));
        assert!(!t.matches("secreT") && !t.matches("secret2") && !t.matches(""));
    }
}
