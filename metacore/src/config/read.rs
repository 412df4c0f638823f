//! Reading the environment: a variable's value parsed and checked against
//! its row of the [`settings`](super::settings) table, or a
//! [`ConfigError`] naming it, the value and what was expected.

use std::path::PathBuf;
use std::time::Duration;

use super::ConfigError;
use super::settings::{Default, META_CORE_CORS_ORIGINS, Setting};

/// Reads variables through a lookup function, so tests need not touch the
/// process environment.
pub(super) struct Reader<F: Fn(&str) -> Option<String>>(pub(super) F);

impl<F: Fn(&str) -> Option<String>> Reader<F> {
    /// The value when set and non-empty.
    pub(super) fn raw(&self, s: &Setting) -> Option<String> {
        self.0(s.var).filter(|v| !v.trim().is_empty())
    }

    /// The value, or the row's text default.
    pub(super) fn text(&self, s: &Setting) -> String {
        self.raw(s).unwrap_or_else(|| match s.default {
            Default::Text(t) => t.to_owned(),
            _ => String::new(),
        })
    }

    pub(super) fn path(&self, s: &Setting) -> PathBuf {
        PathBuf::from(self.text(s))
    }

    /// The error for `value` of `s`.
    pub(super) fn bad(s: &Setting, value: String) -> ConfigError {
        ConfigError {
            var: s.var,
            value,
            expected: s.expected(),
        }
    }

    /// A number within the row's bounds (the default when unset).
    pub(super) fn num<T: TryFrom<u64>>(&self, s: &Setting) -> Result<T, ConfigError> {
        let (Default::Num(default), Some((min, max))) = (s.default, s.bounds) else {
            unreachable!("{} is a number with bounds (the table's tests)", s.var);
        };
        let n = match self.raw(s) {
            None => default,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => n,
                _ => return Err(Self::bad(s, v)),
            },
        };
        T::try_from(n).map_err(|_| Self::bad(s, n.to_string()))
    }

    pub(super) fn millis(&self, s: &Setting) -> Result<Duration, ConfigError> {
        self.num(s).map(Duration::from_millis)
    }

    /// A comma-separated list of TCP ports, empty when unset; each once.
    pub(super) fn ports(&self, s: &Setting) -> Result<Vec<u16>, ConfigError> {
        let Some(list) = self.raw(s) else {
            return Ok(Vec::new());
        };
        let mut ports = Vec::new();
        for item in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match item.parse::<u16>() {
                Ok(p) if p > 0 && !ports.contains(&p) => ports.push(p),
                _ => return Err(Self::bad(s, list)),
            }
        }
        Ok(ports)
    }

    pub(super) fn bool(&self, s: &Setting) -> Result<bool, ConfigError> {
        let default = s.default == Default::Text("true");
        match self.raw(s).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) => match v.as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(Self::bad(s, v)),
            },
        }
    }
}

/// `META_CORE_CORS_ORIGINS`: unset or `*`, any origin; else a comma list
/// of origins (`scheme://host[:port]`, no path), compared in lower case.
pub(super) fn cors_origins(raw: Option<String>) -> Result<Option<Vec<String>>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    if raw.trim() == "*" {
        return Ok(None);
    }
    let bad = || ConfigError {
        var: META_CORE_CORS_ORIGINS.var,
        value: raw.clone(),
        expected: META_CORE_CORS_ORIGINS.expected(),
    };
    let mut list = Vec::new();
    for o in raw.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let o = o.trim_end_matches('/').to_ascii_lowercase();
        let rest = o
            .strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
            .ok_or_else(bad)?;
        if rest.is_empty() || rest.contains(['/', '?', '#', ' ', '*']) {
            return Err(bad());
        }
        list.push(o);
    }
    if list.is_empty() {
        return Err(bad());
    }
    Ok(Some(list))
}
