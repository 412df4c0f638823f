use super::*;
use std::collections::HashMap;

fn cfg(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|k| map.get(k).cloned())
}

#[test]
fn defaults_are_the_seeds() {
    let c = cfg(&[]).unwrap();
    assert_eq!(c.meta_core_path, PathBuf::from("/meta-core"));
    assert_eq!(c.files_path, PathBuf::from("/files"));
    assert_eq!(c.db_path, PathBuf::from("/meta-core/db/meta-core.db"));
    assert_eq!(
        (c.db_cache_mb, c.db_reader_cache_mb, c.db_readers),
        (64, 16, 8)
    );
    assert_eq!(
        (c.http_host.as_str(), c.http_port, c.api_port),
        ("0.0.0.0", 9000, 8180)
    );
    assert_eq!(c.health_check_interval, Duration::from_secs(5));
    assert_eq!(c.debounce, Duration::from_secs(30));
    assert_eq!(c.election_retry, Duration::from_secs(5));
    assert_eq!(c.sse_keepalive, Duration::from_secs(30));
    assert_eq!(c.http_write_stall, Duration::from_secs(10));
    assert_eq!((c.stream_retention, c.stream_trim_every), (100_000, 10_000));
    assert_eq!((c.sse_queue, c.sse_max_followers), (256, 10_000));
    assert_eq!(
        (
            c.http_max_connections_per_client,
            c.sse_max_followers_per_client
        ),
        (1024, 128)
    );
    assert_eq!(c.sse_batch, Duration::from_millis(10));
    assert_eq!(c.dav_copy_max_bytes, 4 << 30);
    assert_eq!(c.dav_copy_reserve_bytes, 1 << 30);
    assert!(cfg(&[("META_CORE_DAV_COPY_MAX_BYTES", "1000")]).is_err());
    assert!(c.enable_file_watcher);
    assert_eq!(c.run_dir, PathBuf::from("/run/meta-core"));
    assert_eq!(c.log_format, LogFormat::Text);
    assert_eq!(c.admin_token, None);
    assert!(!c.admin_open, "the admin routes are closed by default");
    assert_eq!(c.base_url, None);
}

#[test]
fn extra_ports_are_a_checked_list_apart_from_the_main_port() {
    assert_eq!(cfg(&[]).unwrap().http_extra_ports, Vec::<u16>::new());
    let c = cfg(&[("META_CORE_HTTP_EXTRA_PORTS", " 80, 8180 ")]).unwrap();
    assert_eq!(c.http_extra_ports, vec![80, 8180]);
    for bad in ["80,80", "0", "http", "70000", "80;81"] {
        let e = cfg(&[("META_CORE_HTTP_EXTRA_PORTS", bad)]).unwrap_err();
        assert_eq!(e.var, "META_CORE_HTTP_EXTRA_PORTS", "{bad}");
    }
    let e = cfg(&[
        ("META_CORE_HTTP_PORT", "9000"),
        ("META_CORE_HTTP_EXTRA_PORTS", "80,9000"),
    ])
    .unwrap_err();
    assert_eq!(e.var, "META_CORE_HTTP_EXTRA_PORTS");
}

#[test]
fn cors_origins_are_any_or_a_checked_list() {
    assert_eq!(cfg(&[]).unwrap().cors_origins, None);
    assert_eq!(
        cfg(&[("META_CORE_CORS_ORIGINS", "*")])
            .unwrap()
            .cors_origins,
        None
    );
    assert_eq!(
        cfg(&[(
            "META_CORE_CORS_ORIGINS",
            "http://UI.lan:8080/, https://x.example"
        )])
        .unwrap()
        .cors_origins,
        Some(vec![
            "http://ui.lan:8080".to_owned(),
            "https://x.example".to_owned()
        ])
    );
    for bad in [
        "ui.lan",
        "http://ui.lan/app",
        "ftp://x",
        ",",
        "http://*.lan",
    ] {
        assert_eq!(
            cfg(&[("META_CORE_CORS_ORIGINS", bad)]).unwrap_err().var,
            "META_CORE_CORS_ORIGINS",
            "{bad}"
        );
    }
}

#[test]
fn an_import_expands_to_at_most_twice_the_upload_unless_configured() {
    assert_eq!(cfg(&[]).unwrap().import_max_bytes, 4 << 30);
    let c = cfg(&[("META_CORE_IMPORT_MAX_BYTES", "17179869184")]).unwrap();
    assert_eq!(c.import_max_bytes, 16 << 30);
    for refused in ["1048575", "4GiB", "-1"] {
        assert_eq!(
            cfg(&[("META_CORE_IMPORT_MAX_BYTES", refused)])
                .unwrap_err()
                .var,
            "META_CORE_IMPORT_MAX_BYTES",
            "{refused}"
        );
    }
}

#[test]
fn open_admin_routes_are_an_explicit_choice_without_a_token() {
    assert!(cfg(&[("META_CORE_ADMIN_OPEN", "true")]).unwrap().admin_open);
    let e = cfg(&[
        ("META_CORE_ADMIN_OPEN", "true"),
        ("META_CORE_ADMIN_TOKEN", "t"),
    ])
    .unwrap_err();
    assert_eq!(e.var, "META_CORE_ADMIN_OPEN");
    assert_eq!(
        cfg(&[("META_CORE_ADMIN_OPEN", "sure")]).unwrap_err().var,
        "META_CORE_ADMIN_OPEN"
    );
}

#[test]
fn db_path_follows_meta_core_path_unless_set() {
    let c = cfg(&[("META_CORE_PATH", "/x")]).unwrap();
    assert_eq!(c.db_path, PathBuf::from("/x/db/meta-core.db"));
    let c = cfg(&[("META_CORE_PATH", "/x"), ("META_CORE_DB_PATH", "/y/z.db")]).unwrap();
    assert_eq!(c.db_path, PathBuf::from("/y/z.db"));
}

#[test]
fn malformed_values_name_the_variable() {
    let e = cfg(&[("META_CORE_DB_READERS", "lots")]).unwrap_err();
    assert_eq!(e.var, "META_CORE_DB_READERS");
    assert!(e.to_string().contains("lots"));
    assert_eq!(
        cfg(&[("META_CORE_HTTP_PORT", "70000")]).unwrap_err().var,
        "META_CORE_HTTP_PORT"
    );
    assert_eq!(
        cfg(&[("META_CORE_HTTP_PORT", "0")]).unwrap_err().var,
        "META_CORE_HTTP_PORT"
    );
    assert_eq!(
        cfg(&[("ENABLE_FILE_WATCHER", "maybe")]).unwrap_err().var,
        "ENABLE_FILE_WATCHER"
    );
    assert_eq!(cfg(&[("LOG_FORMAT", "xml")]).unwrap_err().var, "LOG_FORMAT");
    assert_eq!(
        cfg(&[("HEALTH_CHECK_INTERVAL_MS", "-5")]).unwrap_err().var,
        "HEALTH_CHECK_INTERVAL_MS"
    );
}

#[test]
fn overrides() {
    let c = cfg(&[
        ("LOG_FORMAT", "JSON"),
        ("ENABLE_FILE_WATCHER", "false"),
        ("BASE_URL", "https://x.example/"),
        ("META_CORE_ADMIN_TOKEN", "s3cret"),
    ])
    .unwrap();
    assert_eq!(c.log_format, LogFormat::Json);
    assert!(!c.enable_file_watcher);
    assert_eq!(c.base_url.as_deref(), Some("https://x.example"));
    assert!(
        !format!("{c:?}").contains("s3cret"),
        "the token never shows in Debug"
    );
}
