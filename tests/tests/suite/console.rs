//! The web console (issue 27) in a real headless Chromium against a real
//! tree: the dashboard lists every daemon ready, shows a killed daemon's
//! restart without a reload, the live file feed and a daemon's log; the
//! editor stores an edited field and shows its `set` event, and its
//! search returns what the API returns. Each page is saved as a
//! screenshot under `target/console-screenshots/` for review.

#![cfg_attr(no_browser, allow(unused))]

use e2e::browser::Browser;
use e2e::fixtures::random_rid;
use e2e::supervisor::{Launch, MetaCore};
use metacore::layout::Daemon;
use serde_json::{Value, json};

/// A tree whose watcher announces a file soon after it is written (the
/// default waits out a long quiet for files still being copied).
async fn tree(dir: &std::path::Path) -> MetaCore {
    let mut mc = Launch::in_dir(dir, "run").env("DEBOUNCE_MS", "300").spawn();
    mc.wait_all_ready().await;
    mc
}

/// Gives the page the admin token through its own dialog.
async fn give_token(b: &Browser, mc: &MetaCore) {
    let token = mc.admin_token().expect("the tree's admin token").to_owned();
    b.click("#token").await;
    b.type_into("#token-dialog input", &token).await;
    b.click("#token-dialog button[value=ok]").await;
}

/// The dashboard's daemon rows: name, state, pid, ready, restarts.
const ROWS: &str = "return [...document.querySelectorAll('#daemons tbody tr')].map(tr => \
     ({name: tr.cells[0].textContent, state: tr.cells[1].textContent, pid: tr.cells[2].textContent, \
       ready: tr.cells[3].textContent, restarts: Number(tr.cells[5].textContent), \
       exit: tr.cells[6].textContent}))";

fn row<'a>(rows: &'a Value, name: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {rows}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_browser,
    ignore = "no chromium or chromedriver here (tests/build.rs)"
)]
async fn the_dashboard_shows_the_tree_live_its_restarts_feeds_and_logs() {
    let dir = e2e::daemon::test_dir();
    let mc = tree(dir.path()).await;
    let b = Browser::start(dir.path()).await;
    b.goto(&format!("{}/", mc.api_url())).await;
    assert!(b.url().await.ends_with("/ui/"), "{}", b.url().await);
    let rows = b
        .wait_for(
            "every daemon listed running and ready",
            &format!(
                "const rows = (() => {{ {ROWS} }})(); \
                 return rows.length === 4 && rows.every(r => r.state === 'running' && r.ready === 'yes') && rows"
            ),
        )
        .await;
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["storaged", "apid", "watcherd", "mountd"]);
    assert_eq!(
        row(&rows, "storaged")["pid"],
        "—",
        "no pids without the token"
    );
    b.screenshot("dashboard").await;

    // With the token: pids, and a killed daemon's restart shows without a
    // reload of the page.
    give_token(&b, &mc).await;
    b.run("window.notReloaded = true", json!([])).await;
    let watcherd = mc.daemon(Daemon::Watcherd).await;
    let pid = watcherd.pid.expect("watcherd runs");
    b.wait_for(
        "watcherd's pid on the page",
        &format!("const rows = (() => {{ {ROWS} }})(); return rows.some(r => r.name === 'watcherd' && r.pid === '{pid}')"),
    )
    .await;
    let before = watcherd.restarts;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    b.wait_for(
        "watcherd's restart count to rise on the page",
        &format!(
            "const rows = (() => {{ {ROWS} }})(); \
             return window.notReloaded === true && rows.some(r => r.name === 'watcherd' && r.restarts > {before} && r.state === 'running')"
        ),
    )
    .await;

    // The page's own restart button (a same-origin write of an admin route).
    let mountd = mc.daemon(Daemon::Mountd).await.restarts;
    b.click("button[data-restart=\"mountd\"]").await;
    b.wait_for(
        "mountd restarted from the page",
        &format!(
            "const rows = (() => {{ {ROWS} }})(); \
             return rows.some(r => r.name === 'mountd' && r.restarts > {mountd} && r.state === 'running' \
             && r.exit.includes('restart requested'))"
        ),
    )
    .await;

    // A file written into watch/ appears in the live file feed.
    let name = format!("console-{}.mkv", random_rid());
    let watch = dir.path().join("files/watch");
    std::fs::create_dir_all(&watch).unwrap();
    std::fs::write(watch.join(&name), vec![7u8; 4096]).unwrap();
    b.wait_for(
        "the file in the live file feed",
        &format!(
            "return [...document.querySelectorAll('#files-feed li')].some(li => li.textContent.includes('{name}'))"
        ),
    )
    .await;

    // A daemon's log, followed.
    b.wait_for(
        "storaged's log on the page",
        "return document.querySelector('#log-lines').textContent.includes('storaged ready')",
    )
    .await;
    b.screenshot("dashboard-admin").await;
    // A phone's screen: the page fits its width (tables scroll inside).
    b.resize(390, 844).await;
    b.wait_for("a phone's width", "return window.innerWidth <= 390")
        .await;
    let overflow = b
        .run(
            "return document.documentElement.scrollWidth - window.innerWidth",
            json!([]),
        )
        .await;
    assert!(
        overflow.as_i64().unwrap() <= 0,
        "wider than a phone by {overflow}px"
    );
    b.screenshot("dashboard-phone").await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    no_browser,
    ignore = "no chromium or chromedriver here (tests/build.rs)"
)]
async fn the_editor_stores_an_edit_shows_its_event_and_searches_as_the_api_does() {
    let dir = e2e::daemon::test_dir();
    let mc = tree(dir.path()).await;
    let mut rids = Vec::new();
    for title in ["alpha one", "alpha two", "beta three"] {
        let rid = random_rid().to_string();
        let r = mc
            .send_json(
                "PATCH",
                &format!("/meta/{rid}"),
                &json!({ "title": title, "year": "2001" }),
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
        rids.push(rid);
    }
    let b = Browser::start(dir.path()).await;

    // Search: the page's answer is the API's.
    b.goto(&format!("{}/ui/editor.html", mc.api_url())).await;
    b.wait_for(
        "the first page of records",
        "return document.querySelector('#page').textContent.includes('of 3')",
    )
    .await;
    b.type_into("#search input[name=query]", "alpha").await;
    b.click("#search button").await;
    let shown = b
        .wait_for(
            "search results on the page",
            "const ids = [...document.querySelectorAll('#list tbody a[data-rid]')].map(a => a.dataset.rid); \
             return document.querySelector('#page').textContent.includes('found') && ids",
        )
        .await;
    let api = mc
        .send_json(
            "POST",
            "/api/metadata/search",
            &json!({ "query": "alpha", "limit": 50 }),
        )
        .await
        .json();
    let want: Vec<&str> = api["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["hashId"].as_str().unwrap())
        .collect();
    let got: Vec<&str> = shown
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 2, "{got:?}");
    b.screenshot("editor-search").await;

    // Edit a field: stored through the public API, its `set` event shown.
    let rid = &rids[0];
    b.goto(&format!("{}/ui/editor.html#{rid}", mc.api_url()))
        .await;
    b.wait_for(
        "the record's fields",
        "return document.querySelector('tr[data-field=\"title\"]') !== null",
    )
    .await;
    b.click("tr[data-field=\"title\"] td:last-child button")
        .await;
    b.type_into("tr[data-field=\"title\"] input", "alpha edited")
        .await;
    b.click("tr[data-field=\"title\"] td[data-value] button")
        .await;
    e2e::wait::until("the edit stored", e2e::wait::DAEMON_DEADLINE, || async {
        let r = mc.get(&format!("/meta/{rid}")).await;
        (r.json()["metadata"]["title"] == "alpha edited").then_some(())
    })
    .await;
    b.wait_for(
        "the set event of the edit on the page",
        &format!(
            "return [...document.querySelectorAll('#record-events li')].some(li => \
             li.dataset.event === 'set' && li.textContent.includes('file:{rid}/title'))"
        ),
    )
    .await;
    b.wait_for(
        "the page showing the stored value",
        "return document.querySelector('tr[data-field=\"title\"] td[data-value]').textContent === 'alpha edited'",
    )
    .await;
    b.screenshot("editor-record").await;
    b.close().await;
}

/// The console's files come from the binary with their policy, and the
/// log tail is an admin stream like the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_from_the_binary_with_its_policy_and_logs_need_the_token() {
    let dir = e2e::daemon::test_dir();
    let mc = tree(dir.path()).await;
    let r = mc.get("/").await;
    assert_eq!(r.status, 303, "{:?}", r.headers);
    assert_eq!(r.header("location"), Some("/ui/"));
    let page = mc.get("/ui/").await;
    assert_eq!(page.status, 200);
    assert!(
        page.header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    let policy = page.header("content-security-policy").expect("a policy");
    assert!(
        policy.contains("default-src 'self'") && policy.contains("connect-src 'self'"),
        "{policy}"
    );
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    let tag = page.header("etag").expect("an etag").to_owned();
    let again = mc
        .send(
            "GET",
            "/ui/",
            bytes::Bytes::new(),
            &[("if-none-match", tag.as_str())],
        )
        .await;
    assert_eq!(again.status, 304);
    let script = mc.get("/ui/dashboard.js").await;
    assert!(
        script
            .header("content-type")
            .unwrap()
            .starts_with("text/javascript")
    );
    mc.get("/ui/nothing.js")
        .await
        .assert_error(404, "not_found");
    mc.get("/ui/../docs/openapi.json")
        .await
        .assert_error(404, "not_found");

    // The log tail: refused without the token, then storaged's lines.
    let port = mc.port();
    let refused = e2e::sse::Follower::open(port, "/api/logs/storaged", &[], true)
        .await
        .unwrap();
    assert_eq!(refused.status, 401);
    let bearer = format!("Bearer {}", mc.admin_token().unwrap());
    let unknown = e2e::sse::Follower::open(
        port,
        "/api/logs/nobody",
        &[("authorization", Some(bearer.as_str()))],
        true,
    )
    .await
    .unwrap();
    assert_eq!(unknown.status, 404);
    let mut log = e2e::sse::Follower::connect_with(
        port,
        "/api/logs/storaged",
        &[("authorization", Some(bearer.as_str()))],
    )
    .await;
    assert_eq!(log.status, 200);
    assert_eq!(log.header("content-type"), Some("text/event-stream"));
    wait_line(&mut log, "storaged ready", 1).await;
    // A line written after the connect arrives too: a restart of watcherd
    // writes the supervisor's own lines to watcherd's log.
    let mut wlog = e2e::sse::Follower::connect_with(
        port,
        "/api/logs/watcherd",
        &[("authorization", Some(bearer.as_str()))],
    )
    .await;
    let admin = mc.admin();
    let r = admin
        .send(
            "POST",
            "/api/daemons/watcherd/restart",
            bytes::Bytes::new(),
            &[],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["name"], "watcherd");
    // The first answer holds the first start's line; the restart's is new.
    wait_line(&mut wlog, "watcherd ready", 2).await;
    let refused = mc
        .send(
            "POST",
            "/api/daemons/watcherd/restart",
            bytes::Bytes::new(),
            &[],
        )
        .await;
    refused.assert_error(401, "unauthorized");
}

/// Waits until a log follower has received `times` lines that say
/// `needle`.
async fn wait_line(log: &mut e2e::sse::Follower, needle: &str, times: usize) {
    let what = format!("{times} log lines saying {needle:?}");
    let mut seen = 0;
    e2e::wait::within(&what, e2e::wait::DAEMON_DEADLINE, async {
        loop {
            match log.next(e2e::wait::IO_DEADLINE).await {
                e2e::sse::Next::Event(e) => {
                    assert_eq!(e.event, "line");
                    if e.field("line").contains(needle) {
                        seen += 1;
                        if seen == times {
                            return;
                        }
                    }
                }
                e2e::sse::Next::Quiet => {}
                other => panic!("the log stream: {other:?}"),
            }
        }
    })
    .await;
}
