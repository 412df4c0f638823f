//! The wire types of storaged's read routes beyond single records and
//! ranges: the key-space tree (`GET /kv/tree`), search (`POST /search`)
//! and the schema (`GET /schema`, `POST /schema/rescan`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::wire::MAX_PAGE;
use super::wire::RecordFields;

/// `GET /kv/tree`: one level of the key space under `prefix`, S3 style
/// (see [`KvTreePage`]), from the key `start` on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KvTreeQuery {
    #[serde(default)]
    pub prefix: String,
    /// Empty: every key is a leaf.
    #[serde(default)]
    pub delimiter: String,
    /// A page's `next`; below the prefix, the prefix.
    pub start: Option<String>,
    /// Entries (branches and leaves) at most; 1 to [`MAX_PAGE`].
    pub max: u32,
}

/// One level of the key space: `branches` are `prefix + segment +
/// delimiter` for the keys that have the delimiter after the prefix,
/// `leaves` the other keys, both in key order. Costs one index seek per
/// entry, however many keys a branch holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KvTreePage {
    pub branches: Vec<String>,
    pub leaves: Vec<String>,
    /// Pass as `start` for the next page; absent when nothing is left.
    /// Past a leaf it is the leaf and U+0001 (no key holds NUL, so no key
    /// sorts between), past a branch the first string after the branch's
    /// keys.
    pub next: Option<String>,
}

/// One filter of a search (the original's shape).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchFilter {
    #[serde(default)]
    pub property: String,
    #[serde(default)]
    pub values: Vec<String>,
    #[serde(default)]
    pub exact: bool,
}

/// `POST /search`: records passing `query` and every filter, in RID order,
/// at most `limit`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub filters: Vec<SearchFilter>,
    pub limit: u32,
}

/// The results of a [`SearchQuery`], with the number of records searched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchPage {
    pub results: Vec<RecordFields>,
    pub total: u64,
    /// The answer stopped before `limit` at its byte bound (16 MiB of
    /// field names and values).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// What `GET /schema` says about one field path (the original's
/// `FieldSchema`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldSchema {
    /// The single primitive of every value, `undefined` when every value
    /// is undefined, `mixed` otherwise.
    #[serde(rename = "type")]
    pub type_: String,
    /// Set only when one hint covers every typed value of a non-mixed field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// `language-code` when values of the path came from per-language keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_hint: Option<String>,
    /// Values per label: the value's hint if it had one, else its primitive.
    pub breakdown: BTreeMap<String, u64>,
}

/// `GET /schema`: every counted field path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaFields {
    pub fields: BTreeMap<String, FieldSchema>,
}

/// `POST /schema/rescan`: the counters rebuilt from every stored value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaRescanned {
    /// Values counted.
    pub values: u64,
    pub fields: BTreeMap<String, FieldSchema>,
}
