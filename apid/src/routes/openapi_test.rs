//! `docs/openapi.json` held against the types apid answers with: a sample
//! of each operation's answer type, serialized as the handler serializes it,
//! must validate against the documented 200 schema, strictly (an object
//! that lists its properties may not carry one the document does not
//! name), and every documented JSON answer must have its sample here.

use std::collections::BTreeSet;

use metacore::api::storaged::{ImportConflict, ImportCounts, ImportMode};
use metacore::api::supervisor::SupervisorStatus;
use metacore::cid::Cid;
use metacore::record::Fields;
use metacore::rid::Rid;
use metacore::urls::Urls;
use serde::Serialize;
use serde_json::{Value, json};

use super::DOCUMENT;
use crate::routes::bootstrap::{PublicHealth, PublicStatus, leader_info};
use crate::routes::editor::{
    BatchResponse, BatchResult, Cleared, EditorDeleted, EditorList, EditorProperty,
    EditorPropertyWritten, EditorWritten, ListItem, Tuple, Tuples,
};
use crate::routes::kv::{
    KvDeleted, KvFind, KvFindMatch, KvHash, KvInfo, KvKeys, KvSearch, KvTree, KvValue,
};
use crate::routes::meta::{
    CidDocument, DataPath, HashIds, MetaDeleted, MetaMerged, MetaWritten, Metadata,
    PropertyWritten, Record, SetAdded,
};
use crate::routes::snapshot::{
    FileReport, ImportReport, Includes, Manifest, PluginReport, SCHEMA_VERSION, WipeResult,
};
use crate::routes::stats::{ApiStats, FileTotals};

const RID: &str = "01M8N10DTXEQRADXEPK8EBGMCQ";
const CID: &str = "bagacbabaec7v3fu2ygzh3e2sybg3fbzmisry2hbtpmck6vx3yftea6vzq35r4";

fn doc() -> Value {
    serde_json::from_str(DOCUMENT).expect("docs/openapi.json is JSON")
}

/// A schema with its `$ref` followed.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("a local reference");
            resolve(doc, doc.pointer(pointer).expect("the reference resolves"))
        }
        None => schema,
    }
}

fn type_matches(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        other => panic!("unknown JSON type {other}"),
    }
}

/// The property names a schema (and the parts of its `allOf`) declares.
fn declared<'a>(doc: &'a Value, schema: &'a Value, out: &mut BTreeSet<&'a str>) {
    let schema = resolve(doc, schema);
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        out.extend(props.keys().map(String::as_str));
    }
    for part in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        declared(doc, part, out);
    }
}

/// Checks `v` against `schema`; the first mismatch, with where it is.
fn check(doc: &Value, v: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let s = resolve(doc, schema);
    let fail = |why: String| Err(format!("{at}: {why} (value {v})"));
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_matches(v, t),
            Value::Array(ts) => ts.iter().any(|t| type_matches(v, t.as_str().unwrap_or(""))),
            _ => false,
        };
        if !ok {
            return fail(format!("not of type {t}"));
        }
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        return fail(format!("not the constant {c}"));
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return fail(format!("not one of {e:?}"));
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        return fail(format!("below the minimum {min}"));
    }
    if let Some(parts) = s.get("anyOf").and_then(Value::as_array)
        && !parts.iter().any(|p| check(doc, v, p, at).is_ok())
    {
        return fail("matches no schema of anyOf".into());
    }
    if let Some(parts) = s.get("oneOf").and_then(Value::as_array) {
        let n = parts
            .iter()
            .filter(|p| check(doc, v, p, at).is_ok())
            .count();
        if n != 1 {
            return fail(format!("matches {n} schemas of oneOf, not exactly one"));
        }
    }
    if let Some(parts) = s.get("allOf").and_then(Value::as_array) {
        for p in parts {
            check_loose(doc, v, p, at)?;
        }
    }
    if let Some(items) = s.get("items")
        && let Some(list) = v.as_array()
    {
        for (i, x) in list.iter().enumerate() {
            check(doc, x, items, &format!("{at}[{i}]"))?;
        }
    }
    if let Some(obj) = v.as_object() {
        check_object(doc, obj, s, at, true)?;
    }
    Ok(())
}

/// [`check`] for a part of an `allOf`: the other parts may declare the
/// properties this one does not.
fn check_loose(doc: &Value, v: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let s = resolve(doc, schema);
    match v.as_object() {
        Some(obj) => {
            let mut without_props = s.clone();
            if let Some(o) = without_props.as_object_mut() {
                o.remove("properties");
                o.remove("required");
            }
            check(doc, v, &without_props, at)?;
            check_object(doc, obj, s, at, false)
        }
        None => check(doc, v, s, at),
    }
}

fn check_object(
    doc: &Value,
    obj: &serde_json::Map<String, Value>,
    s: &Value,
    at: &str,
    strict: bool,
) -> Result<(), String> {
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let r = r.as_str().unwrap_or("");
        if !obj.contains_key(r) {
            return Err(format!("{at}: the required {r:?} is missing"));
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    let mut names = BTreeSet::new();
    declared(doc, s, &mut names);
    for (k, x) in obj {
        let here = format!("{at}.{k}");
        match props.and_then(|p| p.get(k)) {
            Some(p) => check(doc, x, p, &here)?,
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => return Err(format!("{here}: not allowed")),
                Some(Value::Bool(true)) => {}
                Some(extra) => check(doc, x, extra, &here)?,
                None if strict && !names.is_empty() && !names.contains(k.as_str()) => {
                    return Err(format!("{here}: not in the document"));
                }
                None => {}
            },
        }
    }
    Ok(())
}

/// The documented schema of an operation's 200 JSON answer.
fn answer_schema<'a>(doc: &'a Value, path: &str, method: &str) -> &'a Value {
    let op = &doc["paths"][path][method];
    assert!(op.is_object(), "{method} {path} is not documented");
    &op["responses"]["200"]["content"]["application/json"]["schema"]
}

fn sample<T: Serialize>(value: T) -> Value {
    serde_json::to_value(value).expect("an answer serializes")
}

fn rid() -> Rid {
    Rid::parse(RID).expect("a valid RID")
}

fn flat() -> Fields {
    [("title", "Inception"), ("fileinfo/duration", "8878.5")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn urls() -> Urls {
    let config = metacore::Config::from_lookup(|_| None).expect("the default config");
    Urls::from_config(&config)
}

fn supervisor() -> SupervisorStatus {
    serde_json::from_value(json!({
        "role": "leader", "pid": 1, "uptimeMs": 5, "leaderUrl": "http://10.0.0.1:9000",
        "logDir": "/meta-core/logs",
        "daemons": [{
            "name": "storaged", "pid": 7, "state": "running", "ready": true, "uptimeMs": 5,
            "restarts": 1, "failures": 0, "nextStartInMs": null,
            "lastExit": {"code": null, "signal": 9, "at": 1, "reason": "killed by SIGKILL"}
        }, {
            "name": "apid", "pid": null, "state": "backoff", "ready": false, "uptimeMs": null,
            "restarts": 0, "failures": 1, "nextStartInMs": 10, "lastExit": null
        }]
    }))
    .expect("a supervisor status")
}

/// Every documented JSON answer with samples of its type.
fn samples() -> Vec<(&'static str, &'static str, Vec<Value>)> {
    let report = |plugin: Option<PluginReport>, error: Option<String>| ImportReport {
        mode: ImportMode::Merge,
        conflict: ImportConflict::Source,
        dry_run: false,
        total_files: 1,
        files_ok: u64::from(error.is_none()),
        files_failed: u64::from(error.is_some()),
        files: vec![FileReport {
            hash_id: RID.into(),
            counts: ImportCounts::default(),
            error,
        }],
        plugin_output: plugin,
    };
    let status = |supervisor| PublicStatus {
        status: "ok",
        redis: true,
        service_name: "meta-core".into(),
        version: "1".into(),
        uptime_seconds: 3,
        file_count: 2,
        leader: leader_info(&urls()),
        supervisor,
    };
    let stats = |files: Option<FileTotals>| ApiStats {
        records: 2,
        redis_keys: 40,
        redis_memory: 4096,
        identities: 0,
        udl_users: files.map(|_| 1),
        swept_at: 0,
        sweeping: files.is_none(),
        files,
    };
    let record = |metadata| Record {
        hash_id: rid(),
        metadata,
    };
    let nested = Metadata::Nested(crate::nested::nest(&flat()));
    let cid = Cid::parse(CID).expect("a valid CID");
    let doc = |canonical: Option<String>| CidDocument {
        cid: cid.clone(),
        metadata: Metadata::Flat(flat()),
        cids: vec![CID.into()],
        canonical_cid: canonical,
        duplicates: vec!["/files/copy.mkv".into()],
    };
    let tuples = |files| Tuples {
        files,
        count: 1,
        total_size: 10,
    };
    let tuple = || Tuple {
        hash_id: rid(),
        file_path: "/files/a.mkv".into(),
        size_byte: 10,
        mtime_nano: 1,
    };
    let written = || PropertyWritten {
        success: true,
        hash_id: rid(),
        property: "title".into(),
    };
    let kv_value = |exists: bool| KvValue {
        key: "udl:u/x".into(),
        kind: if exists { "string" } else { "" },
        value: if exists { "v".into() } else { String::new() },
        exists,
    };
    vec![
        (
            "/health",
            "get",
            vec![sample(PublicHealth {
                status: "degraded",
                redis: false,
                timestamp: "2026-12-01T09:00:00Z".into(),
                leader: leader_info(&urls()),
            })],
        ),
        (
            "/status",
            "get",
            vec![sample(status(None)), sample(status(Some(supervisor())))],
        ),
        ("/leader", "get", vec![sample(leader_info(&urls()))]),
        ("/urls", "get", vec![sample(urls())]),
        (
            "/api/stats",
            "get",
            vec![
                sample(stats(None)),
                sample(stats(Some(FileTotals {
                    count: 1,
                    total_size: 10,
                }))),
            ],
        ),
        (
            "/meta",
            "get",
            vec![sample(HashIds {
                hash_ids: vec![rid()],
                count: 1,
            })],
        ),
        (
            "/api/metadata/hash-ids",
            "get",
            vec![sample(HashIds {
                hash_ids: vec![],
                count: 0,
            })],
        ),
        (
            "/meta/{hash}",
            "get",
            vec![
                sample(record(Metadata::Flat(flat()))),
                sample(record(nested.clone())),
            ],
        ),
        (
            "/api/metadata/{hashId}",
            "get",
            vec![sample(record(nested))],
        ),
        (
            "/meta/{hash}",
            "put",
            vec![sample(MetaWritten {
                success: true,
                hash_id: rid(),
            })],
        ),
        (
            "/meta/{hash}",
            "patch",
            vec![sample(MetaMerged {
                success: true,
                hash_id: rid(),
                updated: 2,
            })],
        ),
        (
            "/meta/{hash}",
            "delete",
            vec![sample(MetaDeleted {
                success: true,
                hash_id: rid(),
                deleted: 3,
            })],
        ),
        ("/meta/{hash}/{key}", "put", vec![sample(written())]),
        ("/meta/{hash}/{key}", "delete", vec![sample(written())]),
        (
            "/meta/{hash}/_add/{key}",
            "post",
            vec![sample(SetAdded {
                success: true,
                hash_id: rid(),
                property: "tags".into(),
                added: true,
            })],
        ),
        (
            "/api/meta/{cid}",
            "get",
            vec![sample(doc(None)), sample(doc(Some(CID.into())))],
        ),
        (
            "/data/{hash}/path",
            "get",
            vec![sample(DataPath {
                hash_id: rid(),
                path: "/files/a.mkv".into(),
                exists: true,
            })],
        ),
        (
            "/api/files/tuples",
            "get",
            vec![sample(tuples(None)), sample(tuples(Some(vec![tuple()])))],
        ),
        (
            "/api/metadata/list",
            "get",
            vec![sample(EditorList {
                count: 1,
                items: vec![ListItem {
                    hash_id: rid(),
                    title: "Inception".into(),
                    file_name: "a.mkv".into(),
                    file_path: "/files/a.mkv".into(),
                    kind: "movie".into(),
                    year: "2010".into(),
                }],
                total: 1,
            })],
        ),
        (
            "/api/metadata/batch",
            "post",
            vec![sample(BatchResponse {
                status: "completed",
                total: 2,
                success: 1,
                errors: 1,
                results: vec![
                    BatchResult {
                        hash_id: RID.into(),
                        status: "ok",
                        error: None,
                    },
                    BatchResult {
                        hash_id: "unknown".into(),
                        status: "error",
                        error: Some("Missing hash ID".into()),
                    },
                ],
            })],
        ),
        (
            "/api/metadata/clear",
            "post",
            vec![sample(Cleared {
                status: "ok",
                message: "Metadata cleared",
                deleted_count: 4,
            })],
        ),
        (
            "/api/metadata/{hashId}",
            "put",
            vec![sample(EditorWritten {
                status: "ok",
                hash_id: rid(),
                message: "Metadata updated",
            })],
        ),
        (
            "/api/metadata/{hashId}",
            "delete",
            vec![sample(EditorDeleted {
                status: "ok",
                hash_id: rid(),
                deleted_keys: 3,
            })],
        ),
        (
            "/api/metadata/{hashId}/property",
            "get",
            vec![sample(EditorProperty {
                hash_id: rid(),
                property: "title".into(),
                value: "Inception".into(),
            })],
        ),
        (
            "/api/metadata/{hashId}/property",
            "put",
            vec![sample(EditorPropertyWritten {
                status: "ok",
                hash_id: rid(),
                property: "title".into(),
                value: "Inception".into(),
                message: "Property updated",
            })],
        ),
        (
            "/api/kv/info",
            "get",
            vec![sample(KvInfo {
                prefix: "file:",
                file_count: 2,
                key_count: 2,
                total_size: 10,
                memory_usage: "1.50M".into(),
            })],
        ),
        (
            "/api/kv/keys",
            "get",
            vec![sample(KvKeys {
                keys: vec![format!("file:{RID}")],
                has_more: false,
                cursor: "0".into(),
            })],
        ),
        (
            "/api/kv/tree",
            "get",
            vec![sample(KvTree {
                prefix: "file:".into(),
                delimiter: "/".into(),
                branches: vec![format!("file:{RID}/")],
                leaves: vec![],
                cursor: String::new(),
                has_more: false,
            })],
        ),
        (
            "/api/kv/search",
            "get",
            vec![sample(KvSearch {
                contains: "title".into(),
                keys: vec![format!("file:{RID}/title")],
                truncated: false,
            })],
        ),
        (
            "/api/kv/find",
            "get",
            vec![sample(KvFind {
                contains: "incep".into(),
                fields: vec!["title".into()],
                matches: vec![KvFindMatch {
                    key: format!("file:{RID}/title"),
                    value: "Inception".into(),
                    entry_path: format!("file:{RID}"),
                    field: "title".into(),
                }],
                truncated: true,
            })],
        ),
        (
            "/api/kv/key/{key}",
            "get",
            vec![sample(KvHash {
                key: format!("file:{RID}"),
                kind: "hash",
                value: flat(),
            })],
        ),
        (
            "/api/kv/value",
            "get",
            vec![sample(kv_value(true)), sample(kv_value(false))],
        ),
        ("/api/kv/value", "put", vec![sample(kv_value(true))]),
        (
            "/api/kv/value",
            "delete",
            vec![sample(KvDeleted {
                key: "udl:u/x".into(),
                deleted: true,
            })],
        ),
        (
            "/api/snapshot/import",
            "post",
            vec![
                sample(report(None, None)),
                sample(report(
                    Some(PluginReport {
                        written: 1,
                        skipped: 2,
                    }),
                    Some("deprecated_field: retired".into()),
                )),
            ],
        ),
        (
            "/api/snapshot/wipe",
            "post",
            vec![sample(WipeResult {
                metadata_deleted: 5,
            })],
        ),
    ]
}

#[test]
fn every_answer_type_matches_its_documented_schema() {
    let d = doc();
    for (path, method, values) in samples() {
        let schema = answer_schema(&d, path, method);
        assert!(!schema.is_null(), "{method} {path}: no JSON 200 schema");
        for v in values {
            if let Err(why) = check(&d, &v, schema, &format!("{method} {path}")) {
                panic!("{why}");
            }
        }
    }
}

#[test]
fn every_documented_json_answer_has_a_sample() {
    let d = doc();
    let covered: BTreeSet<(String, String)> = samples()
        .into_iter()
        .map(|(p, m, _)| (p.to_owned(), m.to_owned()))
        .collect();
    for (path, item) in d["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let json = &op["responses"]["200"]["content"]["application/json"]["schema"];
            let is_the_document = path == "/api/openapi.json";
            if json.is_object() && !is_the_document {
                assert!(
                    covered.contains(&(path.clone(), method.clone())),
                    "{method} {path} answers JSON but has no sample here"
                );
            }
        }
    }
}

#[test]
fn the_manifest_matches_its_documented_schema() {
    let d = doc();
    let schema = json!({"$ref": "#/components/schemas/SnapshotManifest"});
    for plugin in [None, Some(true)] {
        let m = sample(Manifest {
            schema_version: SCHEMA_VERSION,
            generated_at: "2026-12-01T09:00:00Z".into(),
            source_host: "host".into(),
            file_count: 3,
            includes: Includes {
                metadata: true,
                plugin_output: plugin,
            },
        });
        check(&d, &m, &schema, "manifest.json").unwrap_or_else(|why| panic!("{why}"));
    }
}

#[test]
fn the_checker_finds_what_the_document_does_not_say() {
    let d = doc();
    let schema = answer_schema(&d, "/meta/{hash}", "put");
    let ok = json!({"success": true, "hashId": RID});
    assert!(check(&d, &ok, schema, "x").is_ok());
    for bad in [
        json!({"success": true}),
        json!({"success": false, "hashId": RID}),
        json!({"success": true, "hashId": RID, "extra": 1}),
        json!({"success": true, "hashId": 7}),
    ] {
        assert!(check(&d, &bad, schema, "x").is_err(), "{bad}");
    }
}
