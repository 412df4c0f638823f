//! watcherd under rename storms (issue 23, finding N4), on a real folder
//! with real inotify under the real supervisor: files renamed through
//! intermediate names, copied, swapped, moved over each other and deleted,
//! in seeded random orders, then checked once the watcher has settled:
//! every record's `filePath` is a live file when any live file has its
//! midhash, every `dup:` row names a live file, no record is lost. The
//! model and the checker are shared with `watcherd_repair`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use e2e::snapshot::{self, Rows};
use e2e::wait::until;
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use serde_json::Value;

use super::watcherd::{Watched, content, midhash};

/// Short, so a storm settles soon; the rules do not depend on it.
pub(crate) const DEBOUNCE_MS: &str = "100";

/// A hang guard for a storm to be taken in, not a speed check.
const SETTLE_DEADLINE: Duration = Duration::from_secs(240);

/// The bytes of content number `id`.
pub(crate) fn bytes_of(id: u32) -> Vec<u8> {
    content(50_000 + id, 1200 + (id as usize * 37) % 900)
}

/// The library as the test made it: path relative to `FILES_PATH` →
/// content number.
type Disk = BTreeMap<String, u32>;

/// One file-system step of a storm.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Rename(String, String),
    Write(String, u32),
    Remove(String),
}

pub(crate) struct Storm {
    rng: StdRng,
    seed: u64,
    pub(crate) disk: Disk,
    /// Every content written, by number.
    made: BTreeSet<u32>,
    next_name: u32,
    next_content: u32,
}

const DIRS: [&str; 5] = [
    "watch",
    "plugin",
    "watch/sub",
    "plugin/deep/er",
    "watch/.hidden",
];

impl Storm {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            seed,
            disk: Disk::new(),
            made: BTreeSet::new(),
            next_name: 0,
            next_content: 0,
        }
    }

    /// A name not used before, in a random folder; hidden (a partial
    /// download's) when `hidden`.
    fn fresh(&mut self, hidden: bool) -> String {
        self.next_name += 1;
        let dir = DIRS.choose(&mut self.rng).expect("folders");
        let dot = if hidden { "." } else { "" };
        format!("{dir}/{dot}n{:05}.mkv", self.next_name)
    }

    pub(crate) fn new_content(&mut self) -> u32 {
        self.next_content += 1;
        self.next_content
    }

    pub(crate) fn apply(&mut self, w: &Watched, op: &Op) {
        let files = w.files();
        match op {
            Op::Rename(from, to) => {
                std::fs::create_dir_all(files.join(to).parent().expect("a parent")).unwrap();
                std::fs::rename(files.join(from), files.join(to))
                    .unwrap_or_else(|e| panic!("seed {}: {op:?}: {e}", self.seed));
                let id = self.disk.remove(from).expect("the model has it");
                self.disk.insert(to.clone(), id);
            }
            Op::Write(path, id) => {
                w.write(path, &bytes_of(*id));
                self.disk.insert(path.clone(), *id);
                self.made.insert(*id);
            }
            Op::Remove(path) => {
                std::fs::remove_file(files.join(path))
                    .unwrap_or_else(|e| panic!("seed {}: {op:?}: {e}", self.seed));
                self.disk.remove(path);
            }
        }
    }

    /// `n` new files, about a third of them copies of a live file.
    fn add_files(&mut self, w: &Watched, n: usize) {
        for _ in 0..n {
            let live: Vec<u32> = self.disk.values().copied().collect();
            let id = match live.choose(&mut self.rng) {
                Some(id) if self.rng.random_bool(0.3) => *id,
                _ => self.new_content(),
            };
            let path = self.fresh(false);
            self.apply(w, &Op::Write(path, id));
        }
    }

    /// A rename of `from` to a new name through one or two intermediate
    /// ones (hidden or not, in any folder).
    fn renames_through(&mut self, from: &str, ops: &mut VecDeque<Op>) -> String {
        let mut at = from.to_owned();
        for _ in 0..self.rng.random_range(1..=2) {
            let hidden = self.rng.random_bool(0.3);
            let next = self.fresh(hidden);
            ops.push_back(Op::Rename(at, next.clone()));
            at = next;
        }
        let last = self.fresh(false);
        ops.push_back(Op::Rename(at, last.clone()));
        last
    }

    /// One storm over the live files: each takes part in at most one
    /// chain of steps, and the chains' steps are interleaved at random.
    /// At a few random steps the watcher is let settle first (so some
    /// intermediate names are announced and some are not), and checked.
    async fn storm(&mut self, w: &Watched, when: &str) {
        let mut paths: Vec<String> = self
            .disk
            .keys()
            .filter(|p| !p.rsplit('/').next().unwrap_or("").starts_with('.'))
            .cloned()
            .collect();
        paths.shuffle(&mut self.rng);
        let mut chains: Vec<VecDeque<Op>> = Vec::new();
        while let Some(a) = paths.pop() {
            if self.rng.random_bool(0.3) {
                continue; // left alone this round
            }
            let id = self.disk[&a];
            let mut ops = VecDeque::new();
            match self.rng.random_range(0..10) {
                0..=3 => {
                    self.renames_through(&a, &mut ops);
                }
                4 | 5 => {
                    // A copy, maybe renamed on through other names too.
                    let copy = self.fresh(false);
                    ops.push_back(Op::Write(copy.clone(), id));
                    if self.rng.random_bool(0.5) {
                        self.renames_through(&copy, &mut ops);
                    }
                }
                6 => ops.push_back(Op::Remove(a)),
                7 => {
                    // Finding N4: rename a → b, add c (same content), delete b.
                    let b = self.fresh(false);
                    let c = self.fresh(false);
                    ops.push_back(Op::Rename(a, b.clone()));
                    ops.push_back(Op::Write(c, id));
                    ops.push_back(Op::Remove(b));
                }
                8 => {
                    // Two files swap their contents through a third name.
                    let Some(b) = paths.pop() else { continue };
                    let hidden = self.rng.random_bool(0.5);
                    let t = self.fresh(hidden);
                    ops.push_back(Op::Rename(a.clone(), t.clone()));
                    ops.push_back(Op::Rename(b.clone(), a));
                    ops.push_back(Op::Rename(t, b));
                }
                _ => {
                    // Moved over another file, whose content leaves the disk.
                    let Some(b) = paths.pop() else { continue };
                    ops.push_back(Op::Rename(a, b));
                }
            }
            chains.push(ops);
        }
        let steps: usize = chains.iter().map(VecDeque::len).sum();
        let stops: BTreeSet<usize> = (0..3).map(|_| self.rng.random_range(0..steps)).collect();
        let mut step = 0;
        while !chains.is_empty() {
            let i = self.rng.random_range(0..chains.len());
            let Some(op) = chains[i].pop_front() else {
                chains.swap_remove(i);
                continue;
            };
            self.apply(w, &op);
            step += 1;
            if stops.contains(&step) {
                let when = format!("{when}, step {step} of {steps}");
                let rows = settle(w, &self.expected(), &when).await;
                assert_records_follow_files(w, &rows, self, &when);
            }
        }
    }

    /// The live files as the watcher announces them: path → midhash,
    /// hidden names left out.
    pub(crate) fn expected(&self) -> BTreeMap<String, String> {
        self.disk
            .iter()
            .filter(|(p, _)| !p.rsplit('/').next().unwrap_or("").starts_with('.'))
            .map(|(p, id)| (p.clone(), midhash(&bytes_of(*id))))
            .collect()
    }

    fn made_cids(&self) -> BTreeSet<String> {
        self.made.iter().map(|id| midhash(&bytes_of(*id))).collect()
    }
}

/// The `seen:` rows: path → midhash.
fn seen_of(rows: &Rows) -> BTreeMap<String, String> {
    snapshot::with_prefix(rows, "seen:")
        .map(|(k, v)| {
            let v: Value = serde_json::from_str(v).unwrap();
            (
                k["seen:".len()..].to_owned(),
                v["midhash"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Until watcherd has nothing pending or gone and its `seen:` rows are
/// the live files with their contents; the store's rows then.
pub(crate) async fn settle(w: &Watched, live: &BTreeMap<String, String>, what: &str) -> Rows {
    until(
        &format!("the watcher to settle ({what})"),
        SETTLE_DEADLINE,
        || async {
            let s: Value = w.watcherd().get("/status").await.ok()?;
            if s["pending"] != 0 || s["gone"] != 0 || s["loaded"] != true {
                return None;
            }
            let rows = snapshot::dump(&w.mc.db());
            (seen_of(&rows) == *live).then_some(rows)
        },
    )
    .await
}

/// The path relative to `files` of an absolute one under it.
fn rel_of<'a>(abs: &'a str, files: &str) -> Option<&'a str> {
    abs.strip_prefix(files)?.strip_prefix('/')
}

/// What must hold of the records once the watcher has settled, in words.
fn violations(
    rows: &Rows,
    files: &str,
    live: &BTreeMap<String, String>,
    made: &BTreeSet<String>,
) -> Vec<String> {
    let mut out = snapshot::violations(rows);
    let roots = snapshot::roots(rows);
    let mut members: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut file_path: BTreeMap<&str, &str> = BTreeMap::new();
    for (k, v) in snapshot::with_prefix(rows, "file:") {
        let rest = &k["file:".len()..];
        let (rid, field) = rest.split_at(26);
        if let Some(cid) = field.strip_prefix("/cids/") {
            members.entry(rid).or_default().insert(cid);
        } else if field == "/filePath" {
            file_path.insert(rid, v);
        }
    }
    let live_with = |abs: &str, rid: &str| {
        rel_of(abs, files)
            .and_then(|rel| live.get(rel))
            .is_some_and(|cid| members.get(rid).is_some_and(|m| m.contains(cid.as_str())))
    };
    // No record lost, and one per content.
    for cid in made {
        match rows.get(&format!("cid:{cid}")) {
            Some(rid) if roots.contains(rid) => {}
            other => out.push(format!("the record of {cid} is lost: cid: row {other:?}")),
        }
    }
    if roots.len() != made.len() {
        out.push(format!(
            "{} records for {} contents",
            roots.len(),
            made.len()
        ));
    }
    // A record with a live file of its content has a live filePath.
    for (rid, m) in &members {
        let has_live = live.values().any(|cid| m.contains(cid.as_str()));
        if !has_live {
            continue;
        }
        match file_path.get(rid) {
            Some(p) if live_with(p, rid) => {}
            other => out.push(format!(
                "{rid} has a live file but its filePath is {other:?}, not a live file of it"
            )),
        }
    }
    // Every duplicate is a live file of its record's content.
    for (k, _) in snapshot::with_prefix(rows, "dup:") {
        let (rid, abs) = k["dup:".len()..].split_at(26);
        let abs = &abs[1..];
        if !live_with(abs, rid) {
            out.push(format!("{k} names no live file of {rid}"));
        }
    }
    // Every live file is its record's filePath or one of its duplicates.
    for (rel, cid) in live {
        let abs = format!("{files}/{rel}");
        let Some(rid) = rows.get(&format!("cid:{cid}")) else {
            continue; // reported above
        };
        let listed = file_path.get(rid.as_str()) == Some(&abs.as_str())
            || rows.contains_key(&format!("dup:{rid}/{abs}"));
        if !listed {
            out.push(format!(
                "{rel} is neither the filePath nor a duplicate of {rid}"
            ));
        }
    }
    out
}

pub(crate) fn assert_records_follow_files(w: &Watched, rows: &Rows, storm: &Storm, when: &str) {
    let files = w.files().display().to_string();
    let v = violations(rows, &files, &storm.expected(), &storm.made_cids());
    assert!(
        v.is_empty(),
        "{when} (storm seed {}): {} violations:\n{}",
        storm.seed,
        v.len(),
        v.join("\n")
    );
}

#[tokio::test]
async fn rename_storms_with_duplicates_leave_every_record_on_a_live_file() {
    let seed: u64 = match std::env::var("STORM_SEED") {
        Ok(s) => s.parse().expect("STORM_SEED is a number"),
        Err(_) => rand::random(),
    };
    eprintln!("rename storm seed {seed} (run again with STORM_SEED={seed})");
    let w = Watched::start(&[("DEBOUNCE_MS", DEBOUNCE_MS)]).await;
    let mut storm = Storm::new(seed);
    for round in 0..4 {
        storm.add_files(&w, 250);
        let when = format!("seed {seed}, round {round}, files added");
        let rows = settle(&w, &storm.expected(), &when).await;
        assert_records_follow_files(&w, &rows, &storm, &when);
        storm
            .storm(&w, &format!("seed {seed}, round {round}"))
            .await;
        let when = format!("seed {seed}, round {round}, after the storm");
        let rows = settle(&w, &storm.expected(), &when).await;
        assert_records_follow_files(&w, &rows, &storm, &when);
    }
}

/// Each step taken in before the next, so the order is exactly this one.
#[tokio::test]
async fn a_delete_of_the_file_path_hands_it_to_the_live_duplicate() {
    let w = Watched::start(&[("DEBOUNCE_MS", DEBOUNCE_MS)]).await;
    let mut storm = Storm::new(0);
    let id = storm.new_content();
    let steps = [
        Op::Write("watch/a.mkv".into(), id),
        Op::Rename("watch/a.mkv".into(), "watch/b.mkv".into()),
        Op::Write("plugin/c.mkv".into(), id),
        Op::Remove("watch/b.mkv".into()),
    ];
    for op in &steps {
        storm.apply(&w, op);
        let rows = settle(&w, &storm.expected(), &format!("{op:?}")).await;
        assert_records_follow_files(&w, &rows, &storm, &format!("after {op:?}"));
    }
    let rec =
        w.mc.get_ok(&format!("/meta/{}", midhash(&bytes_of(id))))
            .await;
    assert_eq!(rec["metadata"]["filePath"], w.abs("plugin/c.mkv"), "{rec}");
    assert_eq!(w.query("SELECT count(*) FROM kv WHERE k LIKE 'dup:%'"), 0);
    assert_eq!(w.roots(), 1);
}

/// A path overwritten by another file's content hands its old record's
/// `filePath` to that record's live duplicate.
#[tokio::test]
async fn a_file_path_overwritten_by_other_content_hands_over_to_the_duplicate() {
    let w = Watched::start(&[("DEBOUNCE_MS", DEBOUNCE_MS)]).await;
    let mut storm = Storm::new(0);
    let (x, y) = (storm.new_content(), storm.new_content());
    let steps = [
        Op::Write("watch/x.mkv".into(), x),
        Op::Write("plugin/x-copy.mkv".into(), x),
        Op::Write("watch/y.mkv".into(), y),
        Op::Rename("watch/y.mkv".into(), "watch/x.mkv".into()),
    ];
    for op in &steps {
        storm.apply(&w, op);
        let rows = settle(&w, &storm.expected(), &format!("{op:?}")).await;
        assert_records_follow_files(&w, &rows, &storm, &format!("after {op:?}"));
    }
    let rec =
        w.mc.get_ok(&format!("/meta/{}", midhash(&bytes_of(x))))
            .await;
    assert_eq!(
        rec["metadata"]["filePath"],
        w.abs("plugin/x-copy.mkv"),
        "{rec}"
    );
}
