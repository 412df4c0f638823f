use super::*;

#[test]
fn the_heartbeat_written_is_read_back() {
    let now = SystemTime::now();
    let ms = now.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    assert_eq!(parse_rfc3339_ms(&rfc3339(now)), Some(ms));
}

/// Written byte for byte as when they were `json!` maps (keys in name
/// order).
#[test]
fn the_own_file_and_a_neighbour_are_written_as_before() {
    let own = OwnEntry {
        api_url: "http://h:9000/api",
        base_url: "http://h:9000",
        capabilities: &["meta-core"],
        hostname: "h",
        last_heartbeat: "2026-12-03T10:00:00Z".into(),
        name: "meta-core",
        pid: 7,
        started_at: "2026-12-03T09:00:00Z",
        status: "running",
        version: "0.1.0",
        webdav_url: "http://h:9000/webdav",
    };
    let before = serde_json::json!({
        "apiUrl": "http://h:9000/api",
        "baseUrl": "http://h:9000",
        "capabilities": ["meta-core"],
        "hostname": "h",
        "lastHeartbeat": "2026-12-03T10:00:00Z",
        "name": "meta-core",
        "pid": 7,
        "startedAt": "2026-12-03T09:00:00Z",
        "status": "running",
        "version": "0.1.0",
        "webdavUrl": "http://h:9000/webdav",
    });
    assert_eq!(
        serde_json::to_vec_pretty(&own).unwrap(),
        serde_json::to_vec_pretty(&before).unwrap()
    );

    let mut fields = Map::new();
    fields.insert("baseUrl".into(), "http://other:8080/x".into());
    fields.insert("hostname".into(), "other".into());
    fields.insert("capabilities".into(), serde_json::json!(["sorter"]));
    let entry = Entry {
        file: "sorter-other.json".into(),
        name: "sorter".into(),
        last_heartbeat_ms: 1_500,
        stale: true,
        fields,
    };
    let before = serde_json::json!({
        "addr": "other:8080",
        "baseUrl": "http://other:8080/x",
        "caps": ["sorter"],
        "instance": "other",
        "lastSeen": 1.5,
        "name": "sorter",
        "resources": [],
        "status": "stale",
        "version": "",
    });
    assert_eq!(
        serde_json::to_string(&entry.neighbor()).unwrap(),
        serde_json::to_string(&before).unwrap()
    );
}

#[test]
fn names_are_one_path_segment() {
    assert_eq!(segment("meta-core"), "meta-core");
    assert_eq!(segment("../etc/x y"), ".._etc_x_y");
}
