//! The fault suite (issue 26): the real tree under the load the mesh puts
//! on it, killed with SIGKILL part by part at random moments, and then
//! held to what its clients were told.
//!
//! One [`run`] of a [`Plan`]:
//! 1. a `meta-core` on a fresh volume (and, for failover, a standby on
//!    it), an rclone `:memory:` mount where this machine has FUSE;
//! 2. the load: [`load::Writers`] `PATCH`ing whole records over HTTP,
//!    [`follow::Followers`] on both event streams from a known ID, and a
//!    [`files::Copier`] dropping files into `FILES_PATH/watch`;
//! 3. each kill of the plan at a random moment of that load, the tree
//!    waited for until every daemon is ready again;
//! 4. the load stopped, the followers caught up (every copied file seen,
//!    then a fence record's event), the tree stopped in order;
//! 5. the [`check`]s, from the database file and what each client got:
//!    every acknowledged write whole, no uncertain write in part, each
//!    follower every committed entry exactly once and in order, each
//!    copied file one `add`; and from [`tree`], never two storaged with
//!    the database open, no process or mount left behind.
//!
//! The [`Report`] says it all in figures, and [`Report::problems`] is
//! empty when nothing was lost.

pub mod check;
pub mod files;
pub mod follow;
pub mod load;
pub mod report;
pub mod tree;

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use metacore::layout::Daemon;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

pub use report::Report;
use tree::{Holders, Target, Tree};

use crate::apid::Http;
use crate::fixtures::random_rid;
use crate::sse::Follower;
use crate::supervisor::Launch;
use crate::wait::{DAEMON_DEADLINE, until, until_or_none};

/// What one run does.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: &'static str,
    pub writers: usize,
    /// Followers of each stream.
    pub followers: usize,
    /// What is killed, in this order.
    pub kills: Vec<Target>,
    /// A standby beside the leader (failover).
    pub standby: bool,
    /// Load between two kills, in ms: a random moment in this range.
    pub pause_ms: (u64, u64),
    /// How often a file is copied into `watch/`.
    pub copy_every: Duration,
    pub seed: u64,
}

/// `META_CORE_FAULT_<name>` as a number, or `default`.
pub fn setting(name: &str, default: u64) -> u64 {
    std::env::var(format!("META_CORE_FAULT_{name}"))
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Plan {
    fn new(name: &'static str, kills: Vec<Target>, standby: bool) -> Self {
        let seed = setting("SEED", rand::random());
        let mut kills = kills;
        kills.shuffle(&mut StdRng::seed_from_u64(seed));
        Self {
            name,
            writers: 16,
            followers: 25,
            kills,
            standby,
            pause_ms: (100, 1500),
            copy_every: Duration::from_millis(100),
            seed,
        }
    }

    /// `rounds` SIGKILLs of each daemon and of the supervisor, in a
    /// random order, one tree restarted on its own volume.
    pub fn crashes(rounds: usize) -> Self {
        let targets = [
            Target::Daemon(Daemon::Storaged),
            Target::Daemon(Daemon::Apid),
            Target::Daemon(Daemon::Watcherd),
            Target::Daemon(Daemon::Mountd),
            Target::Supervisor,
        ];
        let kills = (0..rounds).flat_map(|_| targets).collect();
        Self::new("crashes under load", kills, false)
    }

    /// `rounds` SIGKILLs of the leader's supervisor, each time with a
    /// standby on the same volume to take over.
    pub fn failover(rounds: usize) -> Self {
        Self::new(
            "failover under load",
            vec![Target::Supervisor; rounds],
            true,
        )
    }
}

/// `PATCH /meta/{rid}` of one field until it is acknowledged (the tree
/// may be restarting).
async fn write_until_acked(leader: &load::Leader, rid: &str, title: &str) {
    let body = Bytes::from(serde_json::to_vec(&serde_json::json!({ "title": title })).unwrap());
    until(
        &format!("{title} to be acknowledged"),
        DAEMON_DEADLINE,
        || {
            let body = body.clone();
            async move {
                let http = Http::new(leader.port()?);
                let r = http
                    .try_send(
                        Method::PATCH,
                        &format!("/meta/{rid}"),
                        body,
                        &[("content-type", "application/json")],
                    )
                    .await
                    .ok()?;
                (r.status == 200).then_some(())
            }
        },
    )
    .await;
}

/// The ID of the next entry of `path` after `act`, as a fresh follower
/// sees it: where the suite's followers start.
async fn next_id(port: u16, path: &str, act: impl std::future::Future<Output = ()>) -> String {
    let mut probe = Follower::connect(port, path, None).await;
    assert_eq!(probe.status, 200, "GET {path}");
    act.await;
    probe.event().await.id
}

/// Runs `plan` in `dir` (a fresh folder); the report.
pub async fn run(dir: &Path, plan: &Plan) -> Report {
    let started = Instant::now();
    let watch = dir.join("files/watch");
    std::fs::create_dir_all(&watch).expect("make FILES_PATH/watch");
    let launch = |run: &str| {
        Launch::in_dir(dir, run)
            .env("DEBOUNCE_MS", "400")
            // Nothing is trimmed: every committed entry stays to be
            // compared with what the followers were given.
            .env("META_CORE_STREAM_RETENTION", "100000000")
    };
    let mut tree = Tree::start(dir, [launch("run-a"), launch("run-b")], plan.standby).await;
    #[cfg(not(no_fuse))]
    {
        let made = tree.leader.admin().post_memory_mount("faults").await;
        assert_eq!(made.status, 201, "POST /api/mounts: {}", made.text());
        tree.mount = Some(dir.join("files/corn/faults"));
    }
    let leader = load::Leader::new(&tree.leader.info_file());
    let port = tree.leader.port();
    let meta_after = next_id(port, "/api/events/meta", async {
        write_until_acked(&leader, &random_rid().to_string(), "the start").await;
    })
    .await;
    let files_after = next_id(port, "/api/events/files", async {
        std::fs::write(watch.join("start.bin"), b"the start").expect("write start.bin");
    })
    .await;

    let holders = Holders::sample(&tree.leader.db());
    let meta = follow::Followers::start(&leader, "/api/events/meta", &meta_after, plan.followers);
    let file_followers =
        follow::Followers::start(&leader, "/api/events/files", &files_after, plan.followers);
    let writers = load::Writers::start(&leader, plan.writers);
    let copier = files::Copier::start(&dir.join("source"), &watch, plan.copy_every);

    let mut rng = StdRng::seed_from_u64(plan.seed);
    for target in &plan.kills {
        let before = writers.acked();
        until("writes between two kills", DAEMON_DEADLINE, || {
            std::future::ready((writers.acked() > before).then_some(()))
        })
        .await;
        let pause = rng.random_range(plan.pause_ms.0..=plan.pause_ms.1);
        tokio::time::sleep(Duration::from_millis(pause)).await;
        tree.kill(*target).await;
    }

    let tallies = writers.stop().await;
    let copied = copier.stop().await;
    // Caught up: every copied file seen by every files follower, then
    // the fence's event (after every file's record change) by every
    // meta follower.
    let caught_up = until_or_none(DAEMON_DEADLINE * 3, || {
        std::future::ready(
            file_followers
                .snapshot()
                .iter()
                .all(|f| copied.iter().all(|p| f.added.contains(p)))
                .then_some(()),
        )
    })
    .await;
    let fence = random_rid().to_string();
    let fence_key = format!("file:{fence}/title");
    meta.notice(&fence_key);
    write_until_acked(&leader, &fence, "the fence").await;
    let fenced = until_or_none(DAEMON_DEADLINE * 3, || {
        std::future::ready(
            meta.snapshot()
                .iter()
                .all(|f| f.noticed.contains(&fence_key))
                .then_some(()),
        )
    })
    .await;
    let meta_followed = meta.stop().await;
    let files_followed = file_followers.stop().await;
    let db = tree.leader.db();
    let stopped = tree.stop().await;
    let (most_holders, samples) = holders.finish();

    let meta_entries = check::entries_after(&db, "meta:events", &meta_after);
    let fence_at = meta_entries.iter().position(|e| e.subject == fence_key);
    let meta_entries = &meta_entries[..fence_at.map_or(meta_entries.len(), |i| i + 1)];
    let file_entries = check::entries_after(&db, "file:events", &files_after);
    let last_copied = file_entries
        .iter()
        .rposition(|e| copied.contains(&e.subject));
    let file_entries = &file_entries[..last_copied.map_or(0, |i| i + 1)];
    Report {
        name: plan.name,
        seed: plan.seed,
        elapsed: started.elapsed(),
        kills: plan.kills.clone(),
        writes: check::writes(&db, &tallies),
        meta: check::delivery(meta_entries, &meta_followed),
        files_stream: check::delivery(file_entries, &files_followed),
        files: check::announced(file_entries, &copied),
        caught_up: caught_up.is_some() && fenced.is_some() && fence_at.is_some(),
        most_holders,
        samples,
        stopped,
        violations: crate::snapshot::violations(&crate::snapshot::dump(&db)),
    }
}
