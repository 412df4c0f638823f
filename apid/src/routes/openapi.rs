//! `GET /api/openapi.json`: the OpenAPI 3.1 document of the public API.
//! It is hand-written in `docs/openapi.json` (the one place a client reads
//! the contract from) and embedded at build time, so the binary always
//! serves the document of its own source tree.

use axum::response::IntoResponse;
use http::header;

/// The document, as written in `docs/openapi.json`.
pub(crate) const DOCUMENT: &str = include_str!("../../../docs/openapi.json");

pub(super) async fn document() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], DOCUMENT)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use http::{Method, Request, StatusCode};
    use serde_json::Value;
    use tower::ServiceExt;

    use super::*;
    use crate::state::AppState;

    const RID: &str = "01M8N10DTXEQRADXEPK8EBGMCQ";
    const CID: &str = "bagacbabaec7v3fu2ygzh3e2sybg3fbzmisry2hbtpmck6vx3yftea6vzq35r4";

    /// The operations a path item may hold, as OpenAPI names them.
    const METHODS: [&str; 8] = [
        "get", "put", "post", "delete", "options", "head", "patch", "trace",
    ];

    /// The admin routes: the ones behind the admin token.
    const ADMIN: [(&str, &str); 32] = [
        ("/api/kv/value", "put"),
        ("/api/schema/rescan", "post"),
        ("/api/kv/value", "delete"),
        ("/api/metadata/batch", "post"),
        ("/api/metadata/clear", "post"),
        ("/api/snapshot/import", "post"),
        ("/api/snapshot/wipe", "post"),
        ("/api/watchers", "get"),
        ("/api/watchers", "post"),
        ("/api/watchers/scan-all", "post"),
        ("/api/watchers/reset-all", "post"),
        ("/api/watchers/{id}", "get"),
        ("/api/watchers/{id}", "put"),
        ("/api/watchers/{id}", "delete"),
        ("/api/watchers/{id}/scan", "post"),
        ("/api/watchers/{id}/reset", "post"),
        ("/api/scan/trigger", "post"),
        ("/api/scan/status", "get"),
        ("/api/mounts", "get"),
        ("/api/mounts", "post"),
        ("/api/mounts/rclone/remotes", "get"),
        ("/api/mounts/{id}", "get"),
        ("/api/mounts/{id}", "put"),
        ("/api/mounts/{id}", "patch"),
        ("/api/mounts/{id}", "delete"),
        ("/api/mounts/{id}/mount", "post"),
        ("/api/mounts/{id}/unmount", "post"),
        ("/api/mounts/{id}/safe-unmount", "post"),
        ("/api/mounts/{id}/scan", "post"),
        ("/api/daemons/{daemon}/restart", "post"),
        ("/api/tree/stop", "post"),
        ("/api/logs/{daemon}", "get"),
    ];

    fn doc() -> Value {
        serde_json::from_str(DOCUMENT).expect("docs/openapi.json is JSON")
    }

    /// Every documented (path, method), in document order.
    fn operations(doc: &Value) -> Vec<(String, &'static str)> {
        let paths = doc["paths"].as_object().expect("paths is an object");
        let mut ops = Vec::new();
        for (path, item) in paths {
            for m in METHODS {
                if item.get(m).is_some() {
                    ops.push((path.clone(), m));
                }
            }
        }
        ops
    }

    /// A documented path with its parameters replaced by valid samples.
    fn sample(path: &str) -> String {
        let key = if path.starts_with("/api/kv/key/") {
            format!("file:{RID}")
        } else {
            "fileinfo/duration".into()
        };
        path.replace("{hash}", RID)
            .replace("{hashId}", RID)
            .replace("{cid}", CID)
            .replace("{key}", &key)
    }

    #[test]
    fn the_document_is_openapi_3_1() {
        let d = doc();
        let version = d["openapi"].as_str().expect("openapi is a string");
        assert!(version.starts_with("3.1."), "openapi is {version}");
        assert!(!operations(&d).is_empty());
        assert!(d["components"]["schemas"]["ErrorEnvelope"].is_object());
        assert_eq!(
            d["components"]["securitySchemes"]["adminToken"]["scheme"],
            "bearer"
        );
    }

    #[test]
    fn every_ref_resolves() {
        fn walk<'a>(v: &'a Value, refs: &mut Vec<&'a str>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        match (k.as_str(), x) {
                            ("$ref", Value::String(r)) => refs.push(r),
                            _ => walk(x, refs),
                        }
                    }
                }
                Value::Array(xs) => xs.iter().for_each(|x| walk(x, refs)),
                _ => {}
            }
        }
        let d = doc();
        let mut refs = Vec::new();
        walk(&d, &mut refs);
        assert!(!refs.is_empty());
        for r in refs {
            let pointer = r
                .strip_prefix('#')
                .unwrap_or_else(|| panic!("{r} is not a local reference"));
            assert!(d.pointer(pointer).is_some(), "{r} does not resolve");
        }
    }

    #[test]
    fn cors_knows_the_admin_routes_as_the_document_does() {
        for (path, m) in operations(&doc()) {
            let method = Method::from_bytes(m.to_uppercase().as_bytes()).expect("a method");
            let uri = sample(&path).replace("{id}", "x");
            assert_eq!(
                crate::cors::admin_route(&method, &uri),
                ADMIN.contains(&(path.as_str(), m)),
                "{m} {path}"
            );
        }
    }

    #[test]
    fn exactly_the_admin_routes_need_the_bearer_token() {
        let d = doc();
        for (path, m) in operations(&d) {
            let secured = d["paths"][&path][m].get("security").is_some();
            let admin = ADMIN.contains(&(path.as_str(), m));
            assert_eq!(
                secured, admin,
                "{m} {path}: security is {secured}, admin is {admin}"
            );
        }
    }

    /// Whether an answer is the router's own: 404 `no route` or 405.
    async fn unrouted(app: &axum::Router, method: Method, uri: &str) -> Option<String> {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Body::empty())
            .expect("a valid request");
        let resp = app
            .clone()
            .oneshot(req)
            .await
            .expect("the router is infallible");
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("the body reads");
        let env: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let (slug, message) = (
            env["error"].as_str().unwrap_or(""),
            env["message"].as_str().unwrap_or(""),
        );
        let no_route = status == StatusCode::NOT_FOUND
            && slug == "not_found"
            && message.starts_with("no route");
        (no_route || status == StatusCode::METHOD_NOT_ALLOWED)
            .then(|| format!("{status} {slug}: {message}"))
    }

    /// The public router over a run directory where storaged has no socket.
    fn app_without_storaged(run: &tempfile::TempDir) -> axum::Router {
        let run_dir = run.path().to_str().expect("a UTF-8 temp path").to_owned();
        let config =
            metacore::Config::from_lookup(|k| (k == "META_CORE_RUN_DIR").then(|| run_dir.clone()))
                .expect("a valid config");
        crate::routes::public(Arc::new(AppState::new(
            config,
            metacore::admin::AdminAccess::Open,
            metacore::shutdown::Shutdown::never(),
        )))
    }

    /// `GET path` on the router without storaged: 200 with `content_type`;
    /// its body.
    async fn get_ok(path: &str, content_type: &str) -> axum::body::Bytes {
        let run = tempfile::tempdir().expect("a temp dir");
        let req = Request::get(path)
            .body(Body::empty())
            .expect("a valid request");
        let resp = app_without_storaged(&run)
            .oneshot(req)
            .await
            .expect("the router is infallible");
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert_eq!(resp.headers()[http::header::CONTENT_TYPE], content_type);
        axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("the body reads")
    }

    #[tokio::test]
    async fn the_document_is_served_as_json() {
        let body = get_ok("/api/openapi.json", "application/json").await;
        assert_eq!(body, DOCUMENT.as_bytes());
    }

    /// `/metrics` is documented with the content type it is served with,
    /// and answers, open, with the other parts left out while they are
    /// away.
    #[tokio::test]
    async fn metrics_are_served_as_documented() {
        let doc = doc();
        let op = &doc["paths"]["/metrics"]["get"];
        assert!(op.get("security").is_none(), "/metrics is open");
        let content = op["responses"]["200"]["content"]
            .as_object()
            .expect("documented content");
        assert_eq!(
            content.keys().collect::<Vec<_>>(),
            [metacore::metrics::CONTENT_TYPE]
        );
        let body = get_ok("/metrics", metacore::metrics::CONTENT_TYPE).await;
        let text = std::str::from_utf8(&body).expect("text");
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains("metacore_scrape_ok{daemon=\"apid\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("metacore_scrape_ok{daemon=\"storaged\"} 0\n"),
            "{text}"
        );
    }

    /// Every documented operation reaches a handler: with storaged absent
    /// the answers are 200, 400 or 503, never the router's 404 or 405.
    #[tokio::test]
    async fn every_documented_operation_is_routed() {
        let run = tempfile::tempdir().expect("a temp dir");
        let app = app_without_storaged(&run);

        // The check tells a routed answer from the router's own.
        assert!(
            unrouted(&app, Method::GET, "/api/no-such-route")
                .await
                .is_some()
        );
        assert!(
            unrouted(&app, Method::PATCH, "/api/kv/info")
                .await
                .is_some()
        );

        let ops = operations(&doc());
        assert!(
            ops.len() >= 40,
            "the document lists {} operations",
            ops.len()
        );
        for (path, m) in ops {
            let uri = sample(&path);
            let method = Method::from_bytes(m.to_uppercase().as_bytes()).expect("a method");
            if let Some(answer) = unrouted(&app, method, &uri).await {
                panic!("{m} {uri} is documented but not routed ({answer})");
            }
        }
    }
}
