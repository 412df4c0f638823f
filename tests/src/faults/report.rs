//! A run's figures, as text for a person and as one JSON line for the
//! long runs' summary (`bench/faults.sh`), and the list of what was lost.

use std::collections::BTreeMap;
use std::time::Duration;

use super::check::{Announced, Delivery, Writes};
use super::tree::{Stopped, Target};

#[derive(Debug)]
pub struct Report {
    pub name: &'static str,
    pub seed: u64,
    pub elapsed: Duration,
    pub kills: Vec<Target>,
    pub writes: Writes,
    pub meta: Delivery,
    pub files_stream: Delivery,
    pub files: Announced,
    /// Whether every follower caught up with the end of the load.
    pub caught_up: bool,
    pub most_holders: usize,
    pub samples: u64,
    pub stopped: Stopped,
    /// The store's own invariants (indexes, counters) that do not hold.
    pub violations: Vec<String>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl Report {
    fn kill_counts(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for k in &self.kills {
            *out.entry(k.to_string()).or_default() += 1;
        }
        out
    }

    /// Everything that went wrong; empty when nothing was lost.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut all = |what: &str, list: &[String]| {
            out.extend(list.iter().take(20).map(|p| format!("{what}: {p}")));
        };
        all("acknowledged write lost", &self.writes.lost);
        all("write half committed", &self.writes.partial);
        all("unexpected answer", &self.writes.unexpected);
        all("meta:events", &self.meta.problems);
        all("file:events", &self.files_stream.problems);
        all("copied file", &self.files.problems);
        all("orphan", &self.stopped.orphans);
        all("stale mount", &self.stopped.stale_mounts);
        all("stop", &self.stopped.bad_exits);
        all("leader file", &self.stopped.misnamed);
        all("store invariant", &self.violations);
        if !self.caught_up {
            out.push("the followers did not catch up with the end of the load".to_owned());
        }
        if self.most_holders > 1 {
            out.push(format!(
                "{} processes held the database at once",
                self.most_holders
            ));
        }
        out
    }

    /// One JSON object of the figures.
    pub fn json(&self) -> serde_json::Value {
        let t: Vec<f64> = self.stopped.takeovers.iter().copied().map(ms).collect();
        let delivery = |d: &Delivery| {
            serde_json::json!({
                "committed": d.committed, "followers": d.followers,
                "delivered": d.delivered, "resumes": d.resumes,
                "problems": d.problems.len(),
            })
        };
        serde_json::json!({
            "scenario": self.name,
            "seed": self.seed,
            "seconds": self.elapsed.as_secs_f64(),
            "kills": self.kill_counts(),
            "acked": self.writes.acked,
            "uncertain": self.writes.uncertain,
            "uncertainCommitted": self.writes.uncertain_committed,
            "lost": self.writes.lost.len(),
            "partial": self.writes.partial.len(),
            "unexpected": self.writes.unexpected.len(),
            "meta": delivery(&self.meta),
            "filesStream": delivery(&self.files_stream),
            "filesCopied": self.files.copied,
            "filesAnnouncedOnce": self.files.once,
            "mostDbHolders": self.most_holders,
            "holderSamples": self.samples,
            "orphans": self.stopped.orphans.len(),
            "staleMounts": self.stopped.stale_mounts.len(),
            "takeoverMs": t,
            "problems": self.problems().len(),
        })
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = &self.writes;
        writeln!(
            f,
            "== {} (seed {}, {:.1} s)",
            self.name,
            self.seed,
            self.elapsed.as_secs_f64()
        )?;
        let kills: Vec<String> = self
            .kill_counts()
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        writeln!(f, "kills: {}", kills.join(", "))?;
        writeln!(
            f,
            "writes: {} acknowledged, {} lost; {} uncertain ({} committed whole, {} in part); {} unexpected answers",
            w.acked,
            w.lost.len(),
            w.uncertain,
            w.uncertain_committed,
            w.partial.len(),
            w.unexpected.len()
        )?;
        for (name, d) in [
            ("meta:events", &self.meta),
            ("file:events", &self.files_stream),
        ] {
            writeln!(
                f,
                "{name}: {} committed, {} followers, {} delivered ({} resumes), {} followers short",
                d.committed,
                d.followers,
                d.delivered,
                d.resumes,
                d.problems.len()
            )?;
        }
        writeln!(
            f,
            "files: {} copied, {} announced exactly once",
            self.files.copied, self.files.once
        )?;
        writeln!(
            f,
            "database holders: at most {} at once in {} samples",
            self.most_holders, self.samples
        )?;
        if !self.stopped.takeovers.is_empty() {
            let mut t: Vec<f64> = self.stopped.takeovers.iter().copied().map(ms).collect();
            t.sort_by(f64::total_cmp);
            writeln!(
                f,
                "takeover (old tree gone → standby /health 200): median {:.1} ms, max {:.1} ms over {}",
                (t[(t.len() - 1) / 2] + t[t.len() / 2]) / 2.0,
                t[t.len() - 1],
                t.len()
            )?;
        }
        writeln!(
            f,
            "orphans: {}; stale mounts: {}",
            self.stopped.orphans.len(),
            self.stopped.stale_mounts.len()
        )?;
        for p in self.problems() {
            writeln!(f, "PROBLEM {p}")?;
        }
        Ok(())
    }
}
