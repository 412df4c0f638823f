//! Test data: field maps, random identifiers, and CIDs of every rank taken
//! from the golden vectors (`metacore/tests/data/cid-rank-vectors.json`,
//! the vendored copy of `shared/data/cid-rank-vectors.json`).

use metacore::checked::{
    CheckedEntry, CheckedField, CheckedFields, FieldName, FilePath, SetMember,
};
use metacore::key::{KeyWrite, WritableKey};
use metacore::stream::EntryFields;
use metacore::{Cid, Fields, Rid, StreamName, Target};
use serde_json::Value;

/// A field map from pairs.
pub fn fields(pairs: &[(&str, &str)]) -> Fields {
    metacore::record::fields_of(pairs)
}

/// A RID no one has used: 128 random bits.
pub fn random_rid() -> Rid {
    Rid::from_u128(rand::random())
}

/// A midhash256 CID (rank 10) of random bytes.
pub fn random_midhash() -> Cid {
    Cid::midhash256(&rand::random())
}

/// The `cids/<cid>` member field of a CID.
pub fn member(cid: &Cid) -> String {
    format!("cids/{cid}")
}

const VECTORS: &str = include_str!("../../metacore/tests/data/cid-rank-vectors.json");

/// The CID and pinned rank of the golden vector `name`.
pub fn vector(name: &str) -> (Cid, u8) {
    let v: Value = serde_json::from_str(VECTORS).expect("the vectors are JSON");
    let item = v["vectors"]
        .as_array()
        .expect("a vectors array")
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no vector named {name}"));
    let cid = Cid::parse(item["cid"].as_str().expect("a cid string")).expect("a valid CID");
    (cid, item["rank"].as_u64().expect("a rank") as u8)
}

/// A dag-pb CID (rank 40).
pub fn dag_pb() -> Cid {
    vector("ipfs-dagpb").0
}

/// A sha2-256 CID with the raw codec (rank 30).
pub fn sha2_256() -> Cid {
    vector("sha2-256-raw-codec").0
}

/// A BitTorrent v2 CID (rank 20).
pub fn btih_v2() -> Cid {
    vector("btih-v2-file").0
}

/// A midhash256 CID (rank 10).
pub fn midhash() -> Cid {
    vector("midhash256-codec-eq-mh").0
}

/// A URL locator (rank 5).
pub fn url_locator() -> Cid {
    vector("url-locator").0
}

/// The error envelope a call was answered with; panics on success or on a
/// transport failure.
pub fn api_error<T: std::fmt::Debug>(
    r: Result<T, metacore::socket::client::ClientError>,
) -> metacore::ApiError {
    match r {
        Err(metacore::socket::client::ClientError::Api(e)) => e,
        other => panic!("expected an error envelope, got {other:?}"),
    }
}

/// A test's record address, from its text (a RID or a CID the test made).
pub fn target(s: &str) -> Target {
    s.parse()
        .unwrap_or_else(|e| panic!("{s:?} is not a target: {e}"))
}

/// Fields a test writes, checked as apid checks them before sending.
pub fn checked(fields: Fields) -> CheckedFields {
    CheckedFields::check(fields).unwrap_or_else(|e| panic!("test fields are refused: {e}"))
}

/// A field name a test reads or deletes.
pub fn field_name(field: &str) -> FieldName {
    FieldName::new(field).unwrap_or_else(|e| panic!("{field:?} is refused: {e}"))
}

/// One field a test sets.
pub fn field_write(name: &str, value: &str) -> CheckedField {
    CheckedField::new(name, value).unwrap_or_else(|e| panic!("{name:?} is refused: {e}"))
}

/// A member a test adds to a `|` set.
pub fn set_member(name: &str, value: &str) -> SetMember {
    SetMember::new(name, value).unwrap_or_else(|e| panic!("{name:?} {value:?} is refused: {e}"))
}

/// A path a test records.
pub fn file_path(p: &str) -> FilePath {
    FilePath::new(p).unwrap_or_else(|e| panic!("{p:?} is refused: {e}"))
}

/// A raw key write a test makes.
pub fn key_write(key: &str, value: &str) -> KeyWrite {
    KeyWrite::new(key, value).unwrap_or_else(|e| panic!("{key:?} is refused: {e}"))
}

/// A raw key a test deletes.
pub fn writable(key: &str) -> WritableKey {
    WritableKey::parse(key).unwrap_or_else(|e| panic!("{key:?} is refused: {e}"))
}

/// An entry a test appends to `stream`.
pub fn stream_entry(stream: StreamName, fields: EntryFields) -> CheckedEntry {
    CheckedEntry::new(stream, fields).unwrap_or_else(|e| panic!("the entry is refused: {e}"))
}
