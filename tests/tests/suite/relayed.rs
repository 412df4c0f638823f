//! The watchers and mounts APIs as apid relays them by prefix: a path the
//! daemon serves no route for, or a method it does not take, is answered
//! with the envelope naming the path the client asked (not the daemon's),
//! an id the daemon could not have made is refused without a call, and
//! all of it is behind the admin token.

use e2e::supervisor::Launch;

use super::watcherd::Watched;

#[tokio::test]
async fn the_relay_answers_in_the_clients_terms() {
    let dir = e2e::daemon::test_dir();
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let w = Watched { dir, mc };
    w.wait_loaded().await;
    let admin = w.mc.admin();
    let uuid = "0b9a5a4e-2f3c-4e0a-9d55-3f1c2b7a8e10";
    for (method, path, status, slug, message) in [
        (
            "GET",
            "/api/watchers/abc/nope".to_owned(),
            404,
            "not_found",
            "no route for /api/watchers/abc/nope".to_owned(),
        ),
        (
            "PATCH",
            "/api/watchers".to_owned(),
            405,
            "method_not_allowed",
            "PATCH is not allowed on /api/watchers".to_owned(),
        ),
        (
            "GET",
            "/api/watchers/bad%20id".to_owned(),
            404,
            "not_found",
            "watcher not found: the id is not a watcher id".to_owned(),
        ),
        (
            "GET",
            "/api/mounts/not-a-mount".to_owned(),
            404,
            "not_found",
            "mount not found: the id is not a mount id".to_owned(),
        ),
        (
            "GET",
            format!("/api/mounts/{uuid}/mount"),
            405,
            "method_not_allowed",
            format!("GET is not allowed on /api/mounts/{uuid}/mount"),
        ),
        (
            "POST",
            format!("/api/mounts/{uuid}/x.y"),
            404,
            "not_found",
            format!("no route for /api/mounts/{uuid}/x.y"),
        ),
        (
            "GET",
            format!("/api/mounts/{uuid}"),
            404,
            "not_found",
            format!("mount not found: {uuid}"),
        ),
    ] {
        let r = admin.send(method, &path, "", &[]).await;
        r.assert_error(status, slug);
        assert_eq!(r.json()["message"], message.as_str(), "{method} {path}");
        if status == 405 {
            // RFC 9110: a 405 names the methods the path takes.
            let allow = r.header("allow").unwrap_or_default();
            assert!(!allow.is_empty(), "{method} {path}: no Allow");
            assert!(!allow.contains(method), "{method} {path}: Allow {allow}");
        }
    }
    w.mc.get("/api/mounts")
        .await
        .assert_error(401, "unauthorized");
    w.mc.get("/api/watchers/abc/nope")
        .await
        .assert_error(401, "unauthorized");
}
