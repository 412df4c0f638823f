//! The record model shared by every process: what a field name may be, which
//! names are retired, how a `{hash}` addresses a record (a RID or a CID), and
//! the row keys a record owns (`file:<rid>/<field>`, `cid:<cid>`,
//! `dup:<rid>/<path>`, `idx:roots/<rid>`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::cid::{Cid, CidError};
use crate::error::{ApiError, ErrorCode};
use crate::rid::Rid;

/// A record's fields, flat: `fileinfo/duration` → `"8878.5"`.
pub type Fields = BTreeMap<String, String>;

/// Fields from `(name, value)` pairs (tests, tools, fixtures).
pub fn fields_of(pairs: &[(&str, &str)]) -> Fields {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Longest field name accepted, in bytes.
pub const MAX_FIELD_LEN: usize = 1024;

/// The field name the original reserved for its own bookkeeping: never
/// stored, refused on single-field writes, dropped from bulk writes.
pub const RESERVED_FIELD: &str = "__fields__";

/// The key-set of a record's CIDs.
pub const CIDS_PREFIX: &str = "cids/";

/// A record's whole key range is `[file:<rid>/, file:<rid>0)`.
pub fn record_start(rid: Rid) -> String {
    format!("file:{rid}/")
}

pub fn record_end(rid: Rid) -> String {
    format!("file:{rid}0")
}

pub fn field_key(rid: Rid, field: &str) -> String {
    format!("file:{rid}/{field}")
}

pub fn alias_key(cid: &str) -> String {
    format!("cid:{cid}")
}

pub fn root_key(rid: Rid) -> String {
    format!("idx:roots/{rid}")
}

pub fn dup_start(rid: Rid) -> String {
    format!("dup:{rid}/")
}

pub fn dup_end(rid: Rid) -> String {
    format!("dup:{rid}0")
}

/// Why a field name or value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    #[error("field name is empty")]
    Empty,
    #[error("field name is longer than {MAX_FIELD_LEN} bytes")]
    TooLong,
    #[error("field {0:?} contains a NUL byte")]
    Nul(String),
    #[error("field {0:?} has an empty segment (leading, trailing or double '/')")]
    EmptySegment(String),
    #[error("field {0:?} has a '.' or '..' segment")]
    DotSegment(String),
    #[error("field {0:?} is reserved")]
    Reserved(String),
    #[error(
        "field {0:?} is retired: write a cids/<cid> member instead (cid_*, midhash256 and canonical_cid are no longer stored)"
    )]
    Deprecated(String),
    #[error("field {field:?} names an invalid CID: {err}")]
    BadCid { field: String, err: CidError },
    #[error("the value of {0:?} contains a NUL byte")]
    NulValue(String),
}

impl From<FieldError> for ApiError {
    fn from(e: FieldError) -> Self {
        let code = match e {
            FieldError::Deprecated(_) => ErrorCode::DeprecatedField,
            _ => ErrorCode::SchemaViolation,
        };
        ApiError::new(code, e.to_string())
    }
}

/// Whether a field name is one the contract retired.
pub fn is_deprecated(field: &str) -> bool {
    field.starts_with("cid_") || field == "midhash256" || field == "canonical_cid"
}

/// Checks the shape of a field name: non-empty, bounded, no NUL, no empty,
/// `.` or `..` segment. Does not judge retired names (see [`check_write`]).
pub fn check_shape(field: &str) -> Result<(), FieldError> {
    if field.is_empty() {
        return Err(FieldError::Empty);
    }
    if field.len() > MAX_FIELD_LEN {
        return Err(FieldError::TooLong);
    }
    if field.contains('\0') {
        return Err(FieldError::Nul(field.to_owned()));
    }
    for seg in field.split('/') {
        if seg.is_empty() {
            return Err(FieldError::EmptySegment(field.to_owned()));
        }
        if seg == "." || seg == ".." {
            return Err(FieldError::DotSegment(field.to_owned()));
        }
    }
    Ok(())
}

/// Everything a write checks of one field and its value. Returns the CID
/// when the field is a `cids/<cid>` member.
pub fn check_write(field: &str, value: &str) -> Result<Option<Cid>, FieldError> {
    check_shape(field)?;
    if is_deprecated(field) {
        return Err(FieldError::Deprecated(field.to_owned()));
    }
    if field == RESERVED_FIELD {
        return Err(FieldError::Reserved(field.to_owned()));
    }
    if value.contains('\0') {
        return Err(FieldError::NulValue(field.to_owned()));
    }
    cid_member(field)
}

/// The CID of a `cids/<cid>` member field, `None` for any other field.
pub fn cid_member(field: &str) -> Result<Option<Cid>, FieldError> {
    match field.strip_prefix(CIDS_PREFIX) {
        None => Ok(None),
        Some(rest) => Cid::parse(rest)
            .map(Some)
            .map_err(|err| FieldError::BadCid {
                field: field.to_owned(),
                err,
            }),
    }
}

/// How a request names a record: by root, or by any registered CID.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Rid(Rid),
    Cid(Cid),
}

impl Target {
    /// A RID if it parses as one, else a CID, else a 400 that says both.
    pub fn parse(hash: &str) -> Result<Self, ApiError> {
        if let Ok(rid) = Rid::parse(hash) {
            return Ok(Target::Rid(rid));
        }
        match Cid::parse(hash) {
            Ok(cid) => Ok(Target::Cid(cid)),
            Err(e) => Err(ApiError::schema(format!(
                "{hash:?} is neither a RID (26 Crockford Base32 characters) nor a CID ({e})"
            ))),
        }
    }

    /// The 404 for this target when no record answers to it.
    pub fn not_found(&self) -> ApiError {
        match self {
            Target::Rid(r) => {
                ApiError::new(ErrorCode::UnknownRoot, format!("no record for root {r}"))
            }
            Target::Cid(c) => {
                ApiError::new(ErrorCode::UnknownCid, format!("no record for CID {c}"))
            }
        }
    }
}

impl FromStr for Target {
    type Err = ApiError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

crate::serde_as_text!(Target);

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Rid(r) => r.fmt(f),
            Target::Cid(c) => c.fmt(f),
        }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({self})")
    }
}

/// The first string after every string that starts with `prefix`, or
/// `None` when there is none (a prefix of only `\u{10FFFF}`).
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        let mut next = c as u32 + 1;
        // Skip the surrogate gap.
        if (0xD800..0xE000).contains(&next) {
            next = 0xE000;
        }
        if let Some(n) = char::from_u32(next) {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end("file:").as_deref(), Some("file;"));
        assert_eq!(prefix_end("a/").as_deref(), Some("a0"));
        assert_eq!(prefix_end("").as_deref(), None);
        assert_eq!(prefix_end("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(prefix_end("x\u{10FFFF}").as_deref(), Some("y"));
    }

    #[test]
    fn shapes() {
        for ok in [
            "title",
            "fileinfo/streamdetails/video/0/codec",
            "titles/eng/Le ∕ Film",
            "a.b",
            "..a",
        ] {
            assert_eq!(check_shape(ok), Ok(()), "{ok}");
        }
        assert_eq!(check_shape(""), Err(FieldError::Empty));
        for empty in ["/a", "a/", "a//b"] {
            assert!(
                matches!(check_shape(empty), Err(FieldError::EmptySegment(_))),
                "{empty}"
            );
        }
        for dot in ["a/../b", "."] {
            assert!(
                matches!(check_shape(dot), Err(FieldError::DotSegment(_))),
                "{dot}"
            );
        }
        assert!(matches!(check_shape("a\0b"), Err(FieldError::Nul(_))));
        assert_eq!(
            check_shape(&"x".repeat(MAX_FIELD_LEN + 1)),
            Err(FieldError::TooLong)
        );
    }

    #[test]
    fn deprecated_fields_match_the_original_list() {
        for f in [
            "cid_midhash256",
            "cid_sha2-256",
            "cid_btih_v2",
            "cid_crc32",
            "midhash256",
            "canonical_cid",
        ] {
            let e = check_write(f, "x").unwrap_err();
            assert!(matches!(e, FieldError::Deprecated(_)), "{f}");
            assert_eq!(ApiError::from(e).code, ErrorCode::DeprecatedField);
        }
        for f in ["cids", "cidrank", "filePath", "title/cid_x"] {
            assert!(check_write(f, "x").is_ok(), "{f}");
        }
    }

    #[test]
    fn cid_members_must_be_valid() {
        let good = "cids/bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        assert!(check_write(good, "true").unwrap().is_some());
        assert!(matches!(
            check_write("cids/not-a-cid", "true"),
            Err(FieldError::BadCid { .. })
        ));
        assert!(matches!(
            check_write(&format!("{good}/x"), "true"),
            Err(FieldError::BadCid { .. })
        ));
        assert!(matches!(
            check_write("title", "a\0"),
            Err(FieldError::NulValue(_))
        ));
        assert!(matches!(
            check_write("__fields__", "x"),
            Err(FieldError::Reserved(_))
        ));
    }

    #[test]
    fn targets() {
        assert!(matches!(
            Target::parse("01JKR8XW5T4QMV7AHNJ2DEFGHK"),
            Ok(Target::Rid(_))
        ));
        assert!(matches!(
            Target::parse("bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
            Ok(Target::Cid(_))
        ));
        let e = Target::parse("../etc").unwrap_err();
        assert_eq!(e.code, ErrorCode::SchemaViolation);
        let t: Target = "01JKR8XW5T4QMV7AHNJ2DEFGHK".parse().unwrap();
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"01JKR8XW5T4QMV7AHNJ2DEFGHK\"");
        assert_eq!(serde_json::from_str::<Target>(&json).unwrap(), t);
        assert!(serde_json::from_str::<Target>("\"nope\"").is_err());
    }

    #[test]
    fn record_range_holds_exactly_its_keys() {
        let r = Rid::parse("01JKR8XW5T4QMV7AHNJ2DEFGHK").unwrap();
        let (s, e) = (record_start(r), record_end(r));
        for f in ["a", "zzz", "~", "ü/ß"] {
            let k = field_key(r, f);
            assert!(k >= s && k < e, "{k}");
        }
        assert!(format!("file:{r}0/x") >= e);
    }
}
