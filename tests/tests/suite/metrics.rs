//! `GET /metrics` under the real supervisor: one valid OpenMetrics
//! exposition (held to a real OpenMetrics parser) of all five parts, whose
//! counters move with the writes and requests made while it is scraped,
//! every family named `metacore_…`, every counter `…_total`, no record id,
//! CID or path as a label value; and a part that does not answer (its
//! daemon stopped) left out, with `metacore_scrape_ok` 0 saying so.

use std::collections::BTreeMap;

use e2e::daemon::test_dir;
use e2e::fixtures::{random_midhash, random_rid};
use e2e::supervisor::{Launch, MetaCore};
use e2e::wait::{DAEMON_DEADLINE, until};
use metacore::layout::Daemon;
use openmetrics_parser::{MetricsExposition, OpenMetricsType, OpenMetricsValue};
use rustix::process::{Pid, Signal, kill_process};
use serde_json::json;

type Exposition = MetricsExposition<OpenMetricsType, OpenMetricsValue>;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PARTS: [&str; 5] = ["supervisor", "storaged", "apid", "watcherd", "mountd"];

/// One scrape: the text, and the text parsed by a strict OpenMetrics
/// parser (one `# EOF` at the end, each family once, types respected).
async fn scrape(mc: &MetaCore) -> (String, Exposition) {
    let r = mc.get("/metrics").await;
    assert_eq!(r.status, 200, "GET /metrics: {}", r.text());
    assert_eq!(r.header("content-type"), Some(CONTENT_TYPE));
    let text = r.text();
    let parsed = openmetrics_parser::openmetrics::parse_openmetrics(&text)
        .unwrap_or_else(|e| panic!("not a valid OpenMetrics exposition ({e:?}):\n{text}"));
    (text, parsed)
}

/// The value of the sample of `family` whose labels include `labels`.
fn value(x: &Exposition, family: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let fam = x.families.get(family)?;
    fam.iter_samples().find_map(|s| {
        let set = s.get_labelset().ok()?;
        labels
            .iter()
            .all(|(k, v)| set.get_label_value(k) == Some(*v))
            .then(|| match &s.value {
                OpenMetricsValue::Counter(c) => c.value.as_f64(),
                OpenMetricsValue::Gauge(n) | OpenMetricsValue::Unknown(n) => n.as_f64(),
                OpenMetricsValue::Histogram(h) => h.count.unwrap_or(0) as f64,
                OpenMetricsValue::Info => 1.0,
                other => panic!("{family}: unexpected value {other:?}"),
            })
    })
}

/// Every label value of the exposition, with its label's name.
fn label_values(x: &Exposition) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for fam in x.families.values() {
        for s in fam.iter_samples() {
            let set = s.get_labelset().expect("a sample of a family");
            out.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    out
}

/// The sample lines of each family of `text`, by family name.
fn samples_by_family(text: &str) -> BTreeMap<&str, Vec<&str>> {
    let mut out: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut family = "";
    for line in text.lines() {
        if let Some(meta) = line.strip_prefix("# ") {
            family = meta.split(' ').nth(1).unwrap_or("");
        } else {
            out.entry(family).or_default().push(line);
        }
    }
    out
}

/// Whether `route` is a template of the router: `unmatched`, or segments
/// that are each a `{parameter}` or a short lower-case word (a record id
/// is upper case, a CID much longer).
fn is_template(route: &str) -> bool {
    route == "unmatched"
        || route.starts_with('/')
            && route[1..].split('/').all(|seg| {
                seg.starts_with('{') && seg.ends_with('}')
                    || seg.len() <= 16
                        && seg.chars().all(|c| {
                            c.is_ascii_lowercase() || c.is_ascii_digit() || "-_.".contains(c)
                        })
            })
}

/// The shape rules: names, counters, labels, the five parts.
fn check_shape(text: &str, x: &Exposition, secrets: &[String], parts: &[&str]) {
    let samples = samples_by_family(text);
    for (name, fam) in &x.families {
        assert!(
            name.starts_with("metacore_"),
            "{name} has no metacore_ prefix"
        );
        if fam.family_type == OpenMetricsType::Counter {
            let lines = &samples[name.as_str()];
            assert!(!lines.is_empty(), "{name} has no sample");
            for l in lines {
                let sample = l.split(['{', ' ']).next().unwrap_or("");
                assert_eq!(sample, format!("{name}_total"), "a counter's sample: {l}");
            }
        }
    }
    for secret in secrets {
        assert!(
            !text.contains(secret.as_str()),
            "{secret} is in the metrics"
        );
    }
    for (k, v) in label_values(x) {
        assert!(
            v.parse::<metacore::Cid>().is_err() && v.parse::<metacore::Rid>().is_err(),
            "{k}={v} is a CID or a record id"
        );
        if k == "route" {
            assert!(is_template(&v), "route={v} is not a route template");
        } else {
            assert!(!v.contains('/'), "{k}={v} looks like a path");
        }
    }
    for part in parts {
        assert_eq!(
            value(x, "metacore_build", &[("daemon", part)]),
            Some(1.0),
            "{part}'s build info"
        );
    }
    for d in ["storaged", "apid", "watcherd", "mountd"] {
        assert!(
            value(x, "metacore_daemon_up", &[("daemon", d)]).is_some(),
            "the supervisor's row of {d}"
        );
    }
}

async fn write(mc: &MetaCore, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let cid = random_midhash().to_string();
        let r = mc
            .send_json(
                "PATCH",
                &format!("/meta/{cid}"),
                &json!({ "title": format!("metrics {i}") }),
            )
            .await;
        assert_eq!(r.status, 200, "PATCH /meta/{cid}: {}", r.text());
        ids.push(cid);
    }
    ids
}

#[tokio::test]
async fn the_trees_metrics_move_with_writes_and_requests_and_say_which_part_is_missing() {
    let dir = test_dir();
    // Health checks far apart: a daemon this test stops is not restarted
    // under it.
    let mc = Launch::in_dir(dir.path(), "run")
        .env("HEALTH_CHECK_INTERVAL_MS", "600000")
        .start()
        .await;
    let files_path = dir.path().join("files").display().to_string();
    let rid = random_rid().to_string();
    // A request no route takes, with a record id in its path.
    assert_eq!(mc.get(&format!("/nothing/{rid}")).await.status, 404);

    let (_, before) = scrape(&mc).await;
    for part in PARTS {
        assert_eq!(
            value(&before, "metacore_scrape_ok", &[("daemon", part)]),
            Some(1.0),
            "{part} answered"
        );
    }
    let patches = |x: &Exposition| {
        value(
            x,
            "metacore_apid_http_requests",
            &[
                ("route", "/meta/{hash}"),
                ("method", "PATCH"),
                ("status", "200"),
            ],
        )
        .unwrap_or(0.0)
    };
    let committed = |x: &Exposition| {
        value(x, "metacore_storaged_writes_committed", &[]).expect("storaged's writes")
    };
    let groups = |x: &Exposition| {
        value(x, "metacore_storaged_commit_duration_seconds", &[]).expect("the commit histogram")
    };

    // Scraped while 4 writers write 10 records each: every scrape whole,
    // and no counter goes back.
    const WRITERS: usize = 4;
    const EACH: usize = 10;
    let writers = futures_util::future::join_all((0..WRITERS).map(|_| write(&mc, EACH)));
    let scrapes = async {
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(scrape(&mc).await);
        }
        seen
    };
    let (written, during) = tokio::join!(writers, scrapes);
    let mut last = committed(&before);
    for (_, x) in &during {
        assert!(committed(x) >= last, "writes committed went back");
        last = committed(x);
    }
    let (text, after) = scrape(&mc).await;
    let n = (WRITERS * EACH) as f64;
    assert!(
        committed(&after) - committed(&before) >= n,
        "storaged counted {} new writes for {n}",
        committed(&after) - committed(&before)
    );
    assert!(groups(&after) > groups(&before), "no commit observed");
    assert_eq!(patches(&after) - patches(&before), n, "apid's PATCH count");
    assert!(
        value(&after, "metacore_storaged_roots", &[]).expect("roots") >= n,
        "the roots"
    );
    assert!(
        value(
            &after,
            "metacore_apid_http_requests",
            &[("route", "unmatched"), ("status", "404")]
        )
        .is_some(),
        "the request no route took"
    );
    assert!(is_template("/meta/{hash}") && !is_template(&format!("/nothing/{rid}")));
    assert!(
        value(
            &after,
            "metacore_apid_http_requests",
            &[("route", "/metrics"), ("status", "200")]
        )
        .expect("the scrapes")
            >= 6.0
    );
    for d in ["storaged", "apid", "watcherd", "mountd"] {
        assert_eq!(
            value(&after, "metacore_daemon_up", &[("daemon", d)]),
            Some(1.0)
        );
        assert_eq!(
            value(&after, "metacore_daemon_ready", &[("daemon", d)]),
            Some(1.0)
        );
    }
    let mut secrets: Vec<String> = written.into_iter().flatten().collect();
    secrets.push(rid);
    secrets.push(files_path);
    check_shape(&text, &after, &secrets, &PARTS);

    // watcherd stopped: apid's /metrics still answers, without its part.
    let watcherd = mc
        .daemon(Daemon::Watcherd)
        .await
        .pid
        .expect("watcherd's pid");
    let pid = Pid::from_raw(watcherd as i32).expect("a pid");
    kill_process(pid, Signal::STOP).expect("stop watcherd");
    // The signal is delivered asynchronously: scrape once it is stopped.
    e2e::wait::until("watcherd to be stopped", e2e::wait::IO_DEADLINE, || async {
        let stat = std::fs::read_to_string(format!("/proc/{watcherd}/stat")).ok()?;
        let state = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .next()?
            .to_owned();
        (state == "T").then_some(())
    })
    .await;
    let (text, stopped) = scrape(&mc).await;
    kill_process(pid, Signal::CONT).expect("let watcherd go on");
    assert_eq!(
        value(&stopped, "metacore_scrape_ok", &[("daemon", "watcherd")]),
        Some(0.0),
        "{text}"
    );
    assert!(value(&stopped, "metacore_build", &[("daemon", "watcherd")]).is_none());
    assert!(!stopped.families.contains_key("metacore_watcherd_files"));
    for part in ["supervisor", "storaged", "apid", "mountd"] {
        assert_eq!(
            value(&stopped, "metacore_scrape_ok", &[("daemon", part)]),
            Some(1.0),
            "{part} still answers"
        );
    }
    check_shape(
        &text,
        &stopped,
        &[],
        &["supervisor", "storaged", "apid", "mountd"],
    );

    // Going on, it is back in the next scrape.
    until("watcherd back in /metrics", DAEMON_DEADLINE, || async {
        let (_, x) = scrape(&mc).await;
        (value(&x, "metacore_scrape_ok", &[("daemon", "watcherd")]) == Some(1.0)).then_some(())
    })
    .await;
}

/// Each daemon's socket answers its own part, a whole exposition.
#[tokio::test]
async fn every_socket_answers_its_own_part() {
    let dir = test_dir();
    let mc = Launch::in_dir(dir.path(), "run").start().await;
    let sockets: BTreeMap<&str, std::path::PathBuf> = [
        ("supervisor", mc.run_dir().join("meta-core.sock")),
        ("storaged", mc.run_dir().join("storaged.sock")),
        ("apid", mc.run_dir().join("apid.sock")),
        ("watcherd", mc.run_dir().join("watcherd.sock")),
        ("mountd", mc.run_dir().join("mountd.sock")),
    ]
    .into();
    for (part, socket) in sockets {
        let client = metacore::socket::client::SocketClient::new(part, &socket);
        let text = client
            .get_text("/metrics")
            .await
            .unwrap_or_else(|e| panic!("{part}'s /metrics: {e}"));
        let x = openmetrics_parser::openmetrics::parse_openmetrics(&text)
            .unwrap_or_else(|e| panic!("{part}: not OpenMetrics ({e:?}):\n{text}"));
        assert_eq!(
            value(&x, "metacore_build", &[("daemon", part)]),
            Some(1.0),
            "{part}"
        );
        assert!(!x.families.contains_key("metacore_scrape_ok"), "{part}");
    }
}
