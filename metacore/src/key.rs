//! Raw keys a client may write: the KV browser's writes and the rows other
//! services keep in the store (`udl:`, `btmagnet:`, `searchcov:`, `nzb:`,
//! ...). A `file:<rid>/<field>` key is a record field, so the record rules
//! apply to it (checks, events, aliases, root index); the prefixes storaged
//! maintains itself cannot be written or deleted this way. Reads take any
//! key: a key no write accepts is simply absent.

use crate::checked::{CheckedField, FieldName};
use crate::error::ApiError;
use crate::record::field_key;
use crate::rid::Rid;

/// Longest raw key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 2048;

/// Prefixes storaged maintains; raw writes and deletes are refused.
pub const RESERVED_PREFIXES: &[&str] = &[
    "idx:",
    "ev:",
    "evhwm:",
    "cid:",
    "dup:",
    "meta-core:",
    "seen:",
];

/// A key a raw write or delete may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WritableKey {
    /// `file:<rid>/<field>`: one field of a record.
    Record { rid: Rid, field: FieldName },
    /// Any other key outside the reserved prefixes.
    Plain(String),
}

impl WritableKey {
    pub fn parse(key: &str) -> Result<Self, ApiError> {
        if key.is_empty() || key.len() > MAX_KEY_LEN || key.contains('\0') {
            return Err(ApiError::schema(format!(
                "a key is 1 to {MAX_KEY_LEN} bytes without NUL"
            )));
        }
        if let Some(rest) = key.strip_prefix("file:") {
            let (rid, field) = rest.split_once('/').ok_or_else(|| {
                ApiError::schema(format!("{key:?}: record keys are file:<rid>/<field>"))
            })?;
            let rid = Rid::parse(rid).map_err(|e| ApiError::schema(format!("{key:?}: {e}")))?;
            let field = FieldName::new(field).map_err(|e| ApiError::schema(e.to_string()))?;
            return Ok(WritableKey::Record { rid, field });
        }
        if let Some(p) = RESERVED_PREFIXES.iter().find(|p| key.starts_with(**p)) {
            return Err(ApiError::schema(format!(
                "keys under {p} are maintained by storaged and cannot be written directly"
            )));
        }
        Ok(WritableKey::Plain(key.to_owned()))
    }

    /// The key as stored.
    pub fn key(&self) -> String {
        match self {
            WritableKey::Record { rid, field } => field_key(*rid, field.as_str()),
            WritableKey::Plain(k) => k.clone(),
        }
    }
}

/// A checked raw write: a record field under the record rules, or a plain
/// key with a value without NUL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyWrite {
    Record { rid: Rid, field: CheckedField },
    Plain { key: String, value: String },
}

impl KeyWrite {
    pub fn new(key: &str, value: impl Into<String>) -> Result<Self, ApiError> {
        let value = value.into();
        match WritableKey::parse(key)? {
            WritableKey::Record { rid, field } => Ok(KeyWrite::Record {
                rid,
                field: CheckedField::new(field.into_string(), value)?,
            }),
            WritableKey::Plain(key) => {
                if value.contains('\0') {
                    return Err(ApiError::schema("a value cannot contain NUL"));
                }
                Ok(KeyWrite::Plain { key, value })
            }
        }
    }

    /// The key as stored.
    pub fn key(&self) -> String {
        match self {
            KeyWrite::Record { rid, field } => field_key(*rid, field.name()),
            KeyWrite::Plain { key, .. } => key.clone(),
        }
    }

    pub fn value(&self) -> &str {
        match self {
            KeyWrite::Record { field, .. } => field.value(),
            KeyWrite::Plain { value, .. } => value,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    const RID: &str = "01JKR8XW5T4QMV7AHNJ2DEFGHK";

    #[test]
    fn keys_are_classified() {
        let k = WritableKey::parse(&format!("file:{RID}/title")).unwrap();
        assert!(matches!(&k, WritableKey::Record { field, .. } if field.as_str() == "title"));
        assert_eq!(k.key(), format!("file:{RID}/title"));
        assert_eq!(
            WritableKey::parse("udl:u/x").unwrap(),
            WritableKey::Plain("udl:u/x".into())
        );
        for bad in [
            "",
            "a\0b",
            "file:nope/x",
            &format!("file:{RID}"),
            &format!("file:{RID}/a//b"),
            "idx:count/roots",
            "cid:b",
            "meta-core:schema-version",
        ] {
            assert!(WritableKey::parse(bad).is_err(), "{bad:?}");
        }
        assert!(WritableKey::parse(&"k".repeat(MAX_KEY_LEN + 1)).is_err());
    }

    #[test]
    fn writes_follow_the_record_rules() {
        let e = KeyWrite::new(&format!("file:{RID}/cid_x"), "1").unwrap_err();
        assert_eq!(e.code, ErrorCode::DeprecatedField);
        assert!(KeyWrite::new("udl:u/x", "a\0").is_err());
        let w = KeyWrite::new("udl:u/x", "v").unwrap();
        assert_eq!((w.key(), w.value()), ("udl:u/x".to_owned(), "v"));
    }
}
