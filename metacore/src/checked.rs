//! Checked write inputs. Every write to the store is built from these
//! types, each checked once where the input enters (apid's public edge, or
//! storaged's socket), and storaged's write functions take nothing else:
//! no unchecked field, value, path or key can reach the writer thread, and
//! a bad request never takes the single writer's time.
//!
//! The checks are the record rules of [`crate::record`]: field names are
//! `/`-separated paths without empty, `.` or `..` segments or NUL; retired
//! names (`cid_*`, `midhash256`, `canonical_cid`) and `__fields__` are
//! refused on writes; a `cids/<cid>` member names a valid CID; values carry
//! no NUL.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

use crate::cid::Cid;
use crate::error::ApiError;
use crate::record::{CIDS_PREFIX, FieldError, Fields, Target, check_shape, check_write};
use crate::stream::{EntryFields, StreamName};

/// A field name whose shape is checked: what a read or a delete names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldName(String);

impl FieldName {
    pub fn new(name: impl Into<String>) -> Result<Self, FieldError> {
        let name = name.into();
        check_shape(&name)?;
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One field a write sets: the name checked for writing, the value without
/// NUL, and the CID when the field is a `cids/<cid>` member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedField {
    name: String,
    value: String,
    cid: Option<Cid>,
}

impl CheckedField {
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Result<Self, FieldError> {
        let (name, value) = (name.into(), value.into());
        let cid = check_write(&name, &value)?;
        Ok(Self { name, value, cid })
    }

    /// `cids/<cid> = "true"`: the member that makes `cid` an alias.
    pub fn member(cid: &Cid) -> Self {
        Self {
            name: format!("{CIDS_PREFIX}{cid}"),
            value: "true".into(),
            cid: Some(cid.clone()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    /// The CID of a `cids/` member, `None` for any other field.
    pub fn cid(&self) -> Option<&Cid> {
        self.cid.as_ref()
    }
}

/// The fields of a bulk write (a replace or a merge), every one checked,
/// with the CID of each `cids/` member in field order. On the wire it is
/// the plain map of fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckedFields {
    fields: Fields,
    cids: Vec<Option<Cid>>,
}

impl CheckedFields {
    pub fn check(fields: Fields) -> Result<Self, ApiError> {
        let cids = fields
            .iter()
            .map(|(f, v)| check_write(f, v).map_err(ApiError::from))
            .collect::<Result<_, _>>()?;
        Ok(Self { fields, cids })
    }

    /// Checks every field once, keeping those that pass and, for each that
    /// does not, its value and why (in name order). For a caller that
    /// decides later which fields it writes (a snapshot import, whose plan
    /// leaves unchanged fields alone).
    pub fn partition(fields: Fields) -> (Self, Vec<Refused>) {
        let mut ok = Self::default();
        let mut refused = Vec::new();
        for (f, v) in fields {
            match check_write(&f, &v) {
                Ok(cid) => {
                    ok.fields.insert(f, v);
                    ok.cids.push(cid);
                }
                Err(e) => refused.push(Refused {
                    field: f,
                    value: v,
                    why: e.into(),
                }),
            }
        }
        (ok, refused)
    }

    /// Checks `fields` plus, for a write addressed by CID, that CID's
    /// member (a replace keeps the address it was made through).
    pub fn check_for(target: &Target, mut fields: Fields) -> Result<Self, ApiError> {
        if let Target::Cid(cid) = target {
            fields
                .entry(format!("{CIDS_PREFIX}{cid}"))
                .or_insert_with(|| "true".into());
        }
        Self::check(fields)
    }

    /// Each field with its value and member CID, in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String, Option<&Cid>)> {
        self.fields
            .iter()
            .zip(&self.cids)
            .map(|((f, v), c)| (f, v, c.as_ref()))
    }

    pub fn contains(&self, field: &str) -> bool {
        self.fields.contains_key(field)
    }

    pub fn len(&self) -> usize {
        self.fields.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The fields `keep` says yes to, still checked.
    pub fn subset(&self, mut keep: impl FnMut(&str, &str) -> bool) -> CheckedFields {
        let (fields, cids) = self
            .fields
            .iter()
            .zip(&self.cids)
            .filter(|((f, v), _)| keep(f, v))
            .map(|((f, v), c)| ((f.clone(), v.clone()), c.clone()))
            .unzip();
        CheckedFields { fields, cids }
    }
}

/// A field that failed the write checks, with its value and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub field: String,
    pub value: String,
    pub why: ApiError,
}

impl Serialize for CheckedFields {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.fields.serialize(s)
    }
}

/// A member to add to a field that holds a `|`-separated set: a checked
/// field that is not a `cids/` member, whose value is one non-empty member
/// without `|`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetMember(CheckedField);

impl SetMember {
    pub fn new(field: impl Into<String>, value: impl Into<String>) -> Result<Self, ApiError> {
        let f = CheckedField::new(field, value)?;
        if f.name.starts_with(CIDS_PREFIX) {
            return Err(ApiError::schema(
                "cids/ members are a key-set: write cids/<cid> = \"true\" instead",
            ));
        }
        if f.value.is_empty() {
            return Err(ApiError::schema("a set member is required"));
        }
        if f.value.contains('|') {
            return Err(ApiError::schema(
                "a set member cannot contain '|', the set's separator",
            ));
        }
        Ok(Self(f))
    }

    pub fn field(&self) -> &str {
        &self.0.name
    }

    pub fn value(&self) -> &str {
        &self.0.value
    }
}

/// Longest path accepted in `filePath` of a mint and in a duplicate, in
/// bytes.
pub const MAX_PATH_LEN: usize = 4096;

/// A file's path as a record keeps it (`filePath`, `dup:<rid>/<path>`):
/// 1 to [`MAX_PATH_LEN`] bytes without NUL. On the wire, a string.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct FilePath(String);

impl FilePath {
    pub fn new(path: impl Into<String>) -> Result<Self, ApiError> {
        let path = path.into();
        if path.is_empty() || path.len() > MAX_PATH_LEN || path.contains('\0') {
            return Err(ApiError::schema(format!(
                "a path is 1 to {MAX_PATH_LEN} bytes without NUL"
            )));
        }
        Ok(Self(path))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for FilePath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::new(s).map_err(|e| e.message)
    }
}

impl From<FilePath> for String {
    fn from(p: FilePath) -> String {
        p.0
    }
}

impl fmt::Display for FilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A file's path relative to `FILES_PATH`, as `file:events` carries it and
/// the watcher keys what it has seen: `/`-separated segments, none empty,
/// `.` or `..`, no NUL, at most [`MAX_PATH_LEN`] bytes. It cannot name
/// anything outside `FILES_PATH` once joined to it. On the wire, a string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RelPath(String);

impl RelPath {
    pub fn new(path: impl Into<String>) -> Result<Self, ApiError> {
        let path = path.into();
        let bad = path.is_empty()
            || path.len() > MAX_PATH_LEN
            || path.contains('\0')
            || path
                .split('/')
                .any(|s| s.is_empty() || s == "." || s == "..");
        if bad {
            return Err(ApiError::schema(format!(
                "{path:?}: a path relative to FILES_PATH is 1 to {MAX_PATH_LEN} bytes of \
                 '/'-separated names, none empty, '.' or '..', without NUL"
            )));
        }
        Ok(Self(path))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the path lies under the folder `dir` (itself relative; the
    /// empty string is `FILES_PATH`).
    pub fn is_under(&self, dir: &str) -> bool {
        dir.is_empty()
            || self
                .0
                .strip_prefix(dir)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

impl TryFrom<String> for RelPath {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::new(s).map_err(|e| e.message)
    }
}

impl From<RelPath> for String {
    fn from(p: RelPath) -> String {
        p.0
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Largest stream entry accepted, in bytes of JSON.
pub const MAX_ENTRY_BYTES: usize = 64 * 1024;

/// An entry a client appends to a stream, checked: not to `meta:events`
/// (storaged writes it itself, in the transaction of each change), a
/// non-empty `type`, non-empty names, no NUL, at most [`MAX_ENTRY_BYTES`]
/// of JSON, which it holds ready to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedEntry {
    stream: StreamName,
    fields: EntryFields,
    json: String,
}

impl CheckedEntry {
    pub fn new(stream: StreamName, fields: EntryFields) -> Result<Self, ApiError> {
        if stream == StreamName::Meta {
            return Err(ApiError::schema(
                "meta:events is written by storaged itself, in the transaction of each change",
            ));
        }
        if fields.get("type").is_none_or(|t| t.is_empty()) {
            return Err(ApiError::schema(
                "an entry needs a non-empty \"type\" field",
            ));
        }
        // The type is the SSE `event:` line: a line break would end it.
        if fields.get("type").is_some_and(|t| t.contains(['\r', '\n'])) {
            return Err(ApiError::schema(
                "an entry's \"type\" holds no line break (it is the SSE event name)",
            ));
        }
        if fields
            .iter()
            .any(|(k, v)| k.is_empty() || k.contains('\0') || v.contains('\0'))
        {
            return Err(ApiError::schema(
                "entry field names are non-empty and no name or value contains NUL",
            ));
        }
        let json = serde_json::to_string(&fields)
            .map_err(|e| ApiError::internal(format!("an entry does not serialize: {e}")))?;
        if json.len() > MAX_ENTRY_BYTES {
            return Err(ApiError::schema(format!(
                "an entry is at most {MAX_ENTRY_BYTES} bytes of JSON"
            )));
        }
        Ok(Self {
            stream,
            fields,
            json,
        })
    }

    pub fn stream(&self) -> StreamName {
        self.stream
    }

    pub fn fields(&self) -> &EntryFields {
        &self.fields
    }

    /// The entry as stored: its JSON object.
    pub fn json(&self) -> &str {
        &self.json
    }
}

#[cfg(test)]
#[path = "checked_test.rs"]
mod tests;
