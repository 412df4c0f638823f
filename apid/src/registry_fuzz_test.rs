//! Property tests of the registry's reader: whatever another service
//! leaves in `services/` (any bytes, a valid entry with a byte changed,
//! members of any type) is an entry or skipped, never a panic; an entry
//! shows as a service and a neighbour; a heartbeat written is read back.
//! `cargo test -p apid fuzz`.

use std::path::Component;

use metacore::testing::cases;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::json;

use super::*;

fn registry(dir: &Path) -> Registry {
    Registry {
        dir: dir.to_owned(),
        own: dir.join("meta-core-h.json"),
        name: "meta-core".into(),
        version: "1".into(),
        urls: Urls {
            hostname: "h".into(),
            base_url: "http://h:9000".into(),
            api_url: "http://h:9000/api".into(),
            redis_url: String::new(),
            webdav_url: "http://h:9000/webdav".into(),
            webdav_url_internal: "http://h:9000/webdav".into(),
        },
        started: rfc3339(SystemTime::now()),
        heartbeat: Duration::from_secs(1),
        stale_after: Duration::from_secs(60),
        dead_after: Duration::from_secs(300),
        cleanup_every: Duration::from_secs(1),
        warned: Mutex::new(HashMap::new()),
        listing: tokio::sync::Mutex::new(None),
    }
}

/// A time from the epoch to the end of year 9999.
fn time() -> impl Strategy<Value = SystemTime> {
    (0..253_402_300_800_000u64).prop_map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
}

/// Any JSON value, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "(https?://)?[a-z:/.0-9]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{0,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A registry file as a service of the mesh writes one, its members of
/// any type now and then.
fn entry_file() -> impl Strategy<Value = Vec<u8>> {
    let member = prop::sample::select(vec![
        "name",
        "lastHeartbeat",
        "baseUrl",
        "api",
        "hostname",
        "status",
        "version",
        "capabilities",
    ]);
    (
        any::<String>(),
        time(),
        prop::collection::btree_map(member, value(), 0..6),
        any::<bool>(),
    )
        .prop_map(|(name, beat, others, pretty)| {
            let mut doc = json!({"name": name, "lastHeartbeat": rfc3339(beat)});
            for (k, v) in others {
                doc[k] = v;
            }
            if pretty {
                serde_json::to_vec_pretty(&doc)
            } else {
                serde_json::to_vec(&doc)
            }
            .expect("a document serializes")
        })
}

/// A file written half or with a byte changed: a service's heartbeat
/// caught mid-write, or a damaged disk.
fn damaged(mut bytes: Vec<u8>, at: Index, with: u8, cut: bool) -> Vec<u8> {
    if bytes.is_empty() {
        return bytes;
    }
    let i = at.index(bytes.len());
    if cut {
        bytes.truncate(i);
    } else {
        bytes[i] = with;
    }
    bytes
}

/// Reads `bytes` as a registry file and checks what an entry holds.
fn read_as_registry_file(bytes: &[u8]) -> Result<Option<Entry>, TestCaseError> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let reg = registry(dir.path());
    let path = dir.path().join("other-host.json");
    std::fs::write(&path, bytes).expect("the file is written");
    let entry = reg.read(&path);
    if let Some(e) = &entry {
        prop_assert!(bytes.len() as u64 <= MAX_FILE_BYTES);
        prop_assert_eq!(Some(e.name.as_str()), e.fields["name"].as_str());
        let beat = e.fields["lastHeartbeat"]
            .as_str()
            .and_then(parse_rfc3339_ms);
        prop_assert_eq!(beat, Some(e.last_heartbeat_ms));
        prop_assert!(e.service()["status"].is_string());
        let n = serde_json::to_value(e.neighbor()).expect("a neighbour serializes");
        prop_assert_eq!(&n["name"], &Value::String(e.name.clone()));
        prop_assert!(n["caps"].is_array());
    }
    Ok(entry)
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_bytes_in_a_registry_file_are_an_entry_or_skipped(
        bytes in prop::collection::vec(any::<u8>(), 0..4096),
    ) {
        read_as_registry_file(&bytes)?;
    }

    #[test]
    fn any_text_in_a_registry_file_is_an_entry_or_skipped(s in any::<String>()) {
        read_as_registry_file(s.as_bytes())?;
    }

    #[test]
    fn a_registry_file_as_services_write_it_is_an_entry_or_skipped(file in entry_file()) {
        let entry = read_as_registry_file(&file)?;
        let doc: Value = serde_json::from_slice(&file).expect("it is JSON");
        let readable = doc["name"].is_string()
            && doc["lastHeartbeat"].as_str().and_then(parse_rfc3339_ms).is_some();
        prop_assert_eq!(entry.is_some(), readable);
    }

    #[test]
    fn a_damaged_registry_file_is_an_entry_or_skipped(
        file in entry_file(),
        at in any::<Index>(),
        with in any::<u8>(),
        cut in any::<bool>(),
    ) {
        read_as_registry_file(&damaged(file, at, with, cut))?;
    }

    #[test]
    fn a_registry_file_over_the_limit_is_skipped(file in entry_file(), pad in 0..1024usize) {
        let mut big = file.clone();
        let over = (MAX_FILE_BYTES as usize + 1 + pad).saturating_sub(file.len());
        big.extend(std::iter::repeat_n(b' ', over));
        prop_assert!(read_as_registry_file(&big)?.is_none());
    }

    #[test]
    fn every_heartbeat_written_is_read_back(t in time()) {
        let ms = t.duration_since(UNIX_EPOCH).expect("after the epoch").as_millis() as u64;
        prop_assert_eq!(parse_rfc3339_ms(&rfc3339(t)), Some(ms));
    }

    #[test]
    fn any_service_and_host_name_make_one_file_name(name in any::<String>(), host in any::<String>()) {
        let file = format!("{}-{}.json", segment(&name), segment(&host));
        let mut parts = Path::new(&file).components();
        prop_assert!(matches!(parts.next(), Some(Component::Normal(_))), "{}", file);
        prop_assert!(parts.next().is_none(), "{}", file);
        prop_assert_eq!(segment(&name).chars().count(), name.chars().count());
    }
}
