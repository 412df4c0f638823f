//! Reading the environment: a variable's value parsed and checked, or a
//! [`ConfigError`] naming it, the value and what was expected. What each
//! variable means and defaults to is in `Config::from_lookup`.

use std::time::Duration;

use super::ConfigError;

/// Reads variables through a lookup function, so tests need not touch the
/// process environment.
pub(super) struct Reader<F: Fn(&str) -> Option<String>>(pub(super) F);

impl<F: Fn(&str) -> Option<String>> Reader<F> {
    /// The value when set and non-empty.
    pub(super) fn raw(&self, var: &str) -> Option<String> {
        self.0(var).filter(|v| !v.trim().is_empty())
    }

    pub(super) fn string(&self, var: &str, default: &str) -> String {
        self.raw(var).unwrap_or_else(|| default.to_owned())
    }

    pub(super) fn parse<T: std::str::FromStr>(
        &self,
        var: &'static str,
        default: T,
        expected: &'static str,
        ok: impl Fn(&T) -> bool,
    ) -> Result<T, ConfigError> {
        match self.raw(var) {
            None => Ok(default),
            Some(v) => match v.trim().parse::<T>() {
                Ok(x) if ok(&x) => Ok(x),
                _ => Err(ConfigError {
                    var,
                    value: v,
                    expected,
                }),
            },
        }
    }

    /// A comma-separated list of TCP ports, empty when unset; each once.
    pub(super) fn ports(&self, var: &'static str) -> Result<Vec<u16>, ConfigError> {
        let Some(list) = self.raw(var) else {
            return Ok(Vec::new());
        };
        let bad = || ConfigError {
            var,
            value: list.clone(),
            expected: "comma-separated TCP ports (1-65535), each once",
        };
        let mut ports = Vec::new();
        for item in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match item.parse::<u16>() {
                Ok(p) if p > 0 && !ports.contains(&p) => ports.push(p),
                _ => return Err(bad()),
            }
        }
        Ok(ports)
    }

    pub(super) fn millis(&self, var: &'static str, default: u64) -> Result<Duration, ConfigError> {
        self.parse(var, default, "a positive number of milliseconds", |v| {
            *v > 0
        })
        .map(Duration::from_millis)
    }

    pub(super) fn bool(&self, var: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.raw(var).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) => match v.as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(ConfigError {
                    var,
                    value: v,
                    expected: "true or false",
                }),
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
        var: "META_CORE_CORS_ORIGINS",
        value: raw.clone(),
        expected: "* or a comma-separated list of origins (http://host[:port], https://...)",
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
