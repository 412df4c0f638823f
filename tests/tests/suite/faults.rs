//! The fault suite's short runs (issue 26): the whole tree under 16
//! writers, 25 followers of each event stream and files copied into
//! `watch/`, SIGKILLed part by part at random moments; nothing
//! acknowledged may be lost, nothing sent twice or out of order. The long
//! runs are `bench/faults.sh`, with more rounds (`META_CORE_FAULT_ROUNDS`);
//! `META_CORE_FAULT_SEED` replays a run's order of kills and moments.

use e2e::daemon::test_dir;
use e2e::faults::{Plan, Report, run, setting};

/// Prints the report (and appends its JSON to `META_CORE_FAULT_REPORT`
/// when set), then fails on anything lost.
fn judge(report: &Report) {
    eprintln!("{report}");
    if let Some(path) = std::env::var_os("META_CORE_FAULT_REPORT") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open the report file");
        writeln!(f, "{}", report.json()).expect("append to the report file");
    }
    let problems = report.problems();
    assert!(problems.is_empty(), "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_each_daemon_and_of_the_supervisor_under_load_loses_nothing() {
    let dir = test_dir();
    let plan = Plan::crashes(setting("ROUNDS", 2) as usize);
    judge(&run(dir.path(), &plan).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_under_load_and_loses_nothing() {
    let dir = test_dir();
    let plan = Plan::failover(setting("ROUNDS", 3) as usize);
    judge(&run(dir.path(), &plan).await);
}
