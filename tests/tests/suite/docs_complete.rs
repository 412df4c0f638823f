//! The operator's and the client author's documents name everything the
//! code reads and serves: every environment variable any process reads is
//! in `docs/configuration.md`, and every route apid serves is in
//! `docs/api.md` and in the OpenAPI document.
//!
//! The variables are those `Config::from_lookup` asks for (recorded by
//! the lookup itself, so a new one cannot be missed), and the names the
//! shipped sources read from the environment outside it. The routes are
//! read from apid's router sources (each `.route("<path>", ...)`) and,
//! for the APIs apid relays by prefix, from the router of the daemon that
//! serves them.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn read(rel: &str) -> String {
    std::fs::read_to_string(e2e::workspace_root().join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The string literals that follow each occurrence of `before` in `text`.
fn literals_after(text: &str, before: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(before) {
        rest = &rest[at + before.len()..];
        let trimmed = rest.trim_start();
        if let Some(lit) = trimmed.strip_prefix('"')
            && let Some(end) = lit.find('"')
        {
            found.push(lit[..end].to_owned());
        }
    }
    found
}

/// What the shipped code of every crate reads from the environment.
fn variables_read() -> BTreeSet<String> {
    let asked = RefCell::new(BTreeSet::new());
    let _ = metacore::Config::from_lookup(|name| {
        asked.borrow_mut().insert(name.to_owned());
        None
    });
    let mut names = asked.into_inner();
    assert!(names.len() > 40, "the lookup recorded {names:?}");
    for krate in [
        "metacore",
        "supervisor",
        "storaged",
        "apid",
        "watcherd",
        "mountd",
    ] {
        let mut files = Vec::new();
        sources(&e2e::workspace_root().join(krate).join("src"), &mut files);
        // Unit tests (`*_test.rs`, `fuzz_test/`) and their helpers
        // (`metacore::testing`, behind a dev-only feature) are not
        // shipped: what they read (`PROPTEST_CASES`) is not meta-core's
        // configuration.
        let shipped = |f: &PathBuf| {
            let name = f.to_string_lossy();
            !name.ends_with("_test.rs")
                && !name.ends_with("metacore/src/testing.rs")
                && !f.components().any(|c| c.as_os_str() == "fuzz_test")
        };
        for file in files.into_iter().filter(shipped) {
            let text = std::fs::read_to_string(&file).unwrap();
            for before in ["env::var(", "env::var_os(", "_ENV: &str ="] {
                names.extend(literals_after(&text, before));
            }
        }
    }
    names
}

#[test]
fn every_variable_the_code_reads_is_in_the_configuration_document() {
    let doc = read("docs/configuration.md");
    let names = variables_read();
    for name in ["HOSTNAME", "RUST_LOG", "META_CORE_READY_FD", "LOG_FORMAT"] {
        assert!(names.contains(name), "{name} is read: {names:?}");
    }
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !doc.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "read by the code, not in docs/configuration.md: {missing:?}"
    );
}

/// A path's segments, a parameter (`{x}`, `{*x}`, `{x...}`) as `None`.
fn segments(path: &str) -> Vec<Option<&str>> {
    path.trim_end_matches('/')
        .split('/')
        .map(|s| (!s.starts_with('{')).then_some(s))
        .collect()
}

/// Whether the documented path `doc` covers the served route `served`: as
/// many segments, the same words, and a parameter where the route has
/// one (a route's parameter may stand for words the document spells out,
/// as `/api/mounts/{id}/{action}` for `/api/mounts/{id}/mount`).
fn covers(doc: &str, served: &str) -> bool {
    let (d, s) = (segments(doc), segments(served));
    d.len() == s.len()
        && d.iter().zip(&s).all(|(d, s)| match (d, s) {
            (_, None) => true,
            (Some(d), Some(s)) => d == s,
            (None, Some(_)) => false,
        })
}

/// The APIs apid relays by prefix: the daemon's router, where the daemon
/// serves the API, and where apid serves it.
const RELAYED: [(&str, &str, &str); 2] = [
    ("watcherd/src/api.rs", "/watchers", "/api/watchers"),
    ("mountd/src/api.rs", "/mounts", "/api/mounts"),
];

/// The routes apid serves, from its router sources and the relayed
/// daemons'.
fn routes_served() -> BTreeSet<String> {
    let mut files = Vec::new();
    sources(&e2e::workspace_root().join("apid/src"), &mut files);
    let mut routes = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        routes.extend(literals_after(&text, ".route("));
    }
    for (router, socket, public) in RELAYED {
        let relayed: Vec<String> = literals_after(&read(router), ".route(")
            .iter()
            .filter_map(|r| {
                let rest = r.strip_prefix(socket)?;
                (rest.is_empty() || rest.starts_with('/')).then(|| format!("{public}{rest}"))
            })
            .collect();
        assert!(relayed.len() >= 3, "{router}: {relayed:?}");
        routes.extend(relayed);
    }
    // `/webdav` and `/webdav/` are the folder `/webdav/{path}` lists.
    routes.remove("/webdav");
    routes.remove("/webdav/");
    assert!(routes.len() > 40, "{routes:?}");
    routes
}

/// The paths written in backquotes in `text` (`GET /meta/{hash}` gives
/// `/meta/{hash}`; `{key...}` is a parameter).
fn paths_in(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for quoted in text.split('`').skip(1).step_by(2) {
        for word in quoted.split_whitespace() {
            let word = word.split(['?', '[']).next().unwrap_or_default();
            if word.starts_with('/') {
                paths.push(word.trim_end_matches([',', '.', ':']).to_owned());
            }
        }
    }
    paths
}

#[test]
fn every_route_apid_serves_is_in_the_api_document_and_the_openapi_document() {
    let openapi: serde_json::Value = serde_json::from_str(&read("docs/openapi.json")).unwrap();
    let documented: Vec<String> = openapi["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let api_md = paths_in(&read("docs/api.md"));
    for route in routes_served() {
        assert!(
            documented.iter().any(|d| covers(d, &route)),
            "{route} is served but not in docs/openapi.json"
        );
        assert!(
            api_md.iter().any(|d| covers(d, &route)),
            "{route} is served but not in docs/api.md"
        );
    }
}

#[test]
fn the_route_matching_tells_routes_apart() {
    assert!(covers("/meta/{hash}/{key}", "/meta/{hash}/{*key}"));
    assert!(covers(
        "/api/mounts/{id}/mount",
        "/api/mounts/{id}/{action}"
    ));
    assert!(!covers("/api/mounts/{id}", "/api/mounts/{id}/{action}"));
    assert!(!covers("/meta/{hash}", "/meta/x"));
    assert!(!covers("/api/kv/keys", "/api/kv/tree"));
    assert_eq!(
        paths_in("| `GET /meta/{hash}/{key...}?x=1` | `{a}` and `/urls`, |"),
        ["/meta/{hash}/{key...}", "/urls"]
    );
}
