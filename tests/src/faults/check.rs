//! What the store holds once the tree has stopped, read from the database
//! file, held to what the clients were told and what they were sent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::Connection;

use super::follow::{Followed, id_number};
use super::load::{FIELDS_PER_RECORD, Tally, record_fields};
use crate::snapshot::open_read_only;

/// The `(k, v)` rows whose key starts with `prefix`, in key order.
fn rows(conn: &Connection, prefix: &str) -> Vec<(String, String)> {
    // Keys are compared as bytes: the prefix's range ends at its last
    // byte plus one.
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().expect("a prefix") += 1;
    let end = String::from_utf8(end).expect("an ASCII prefix");
    let mut stmt = conn
        .prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k")
        .expect("prepare a range");
    stmt.query_map([prefix, end.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("read a range")
        .collect::<Result<_, _>>()
        .expect("read a row")
}

/// What the writers' records came to.
#[derive(Debug, Default)]
pub struct Writes {
    pub acked: u64,
    pub uncertain: u64,
    /// Uncertain writes found committed (whole).
    pub uncertain_committed: u64,
    /// Acknowledged records missing or not whole.
    pub lost: Vec<String>,
    /// Uncertain records present in part.
    pub partial: Vec<String>,
    pub unexpected: Vec<String>,
}

/// Every acknowledged record whole, every uncertain one whole or absent.
pub fn writes(db: &Path, tallies: &[Tally]) -> Writes {
    let conn = open_read_only(db);
    let mut out = Writes::default();
    let fields_of = |rid: &str| -> BTreeMap<String, String> {
        let prefix = format!("file:{rid}/");
        rows(&conn, &prefix)
            .into_iter()
            .map(|(k, v)| (k[prefix.len()..].to_owned(), v))
            .collect()
    };
    let whole = |w: usize, i: u64| -> BTreeMap<String, String> {
        record_fields(w, i)
            .into_iter()
            .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_owned()))
            .collect()
    };
    for t in tallies {
        out.unexpected.extend(t.unexpected.iter().cloned());
        for (rid, w, i) in &t.acked {
            out.acked += 1;
            let got = fields_of(rid);
            if got != whole(*w, *i) {
                out.lost.push(format!(
                    "{rid} (writer {w}, write {i}): {} of {FIELDS_PER_RECORD} fields",
                    got.len()
                ));
            }
        }
        for (rid, w, i) in &t.uncertain {
            out.uncertain += 1;
            let got = fields_of(rid);
            if got.is_empty() {
                continue;
            }
            if got == whole(*w, *i) {
                out.uncertain_committed += 1;
            } else {
                out.partial.push(format!(
                    "{rid} (writer {w}, write {i}): {} of {FIELDS_PER_RECORD} fields",
                    got.len()
                ));
            }
        }
    }
    out
}

/// One committed stream entry: its ID, type and `path` (files) or `key`.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: u64,
    pub kind: String,
    pub subject: String,
}

/// The entries of `stream` (`meta:events` or `file:events`) after the ID
/// `after` (`<ms>-<seq>`), in order.
pub fn entries_after(db: &Path, stream: &str, after: &str) -> Vec<Entry> {
    let after = id_number(after).expect("a stream ID");
    let prefix = format!("ev:{stream}/");
    rows(&open_read_only(db), &prefix)
        .into_iter()
        .filter_map(|(k, v)| {
            let id = id_number(&k[prefix.len()..])?;
            let v: serde_json::Value = serde_json::from_str(&v).ok()?;
            let field = |n: &str| v[n].as_str().unwrap_or_default().to_owned();
            let subject = if stream == "file:events" {
                field("path")
            } else {
                field("key")
            };
            Some(Entry {
                id,
                kind: field("type"),
                subject,
            })
        })
        .filter(|e| e.id > after)
        .collect()
}

/// How one stream's followers fared against what was committed.
#[derive(Debug, Default)]
pub struct Delivery {
    pub committed: u64,
    pub followers: u64,
    pub delivered: u64,
    pub resumes: u64,
    /// Per follower with a problem: what went wrong.
    pub problems: Vec<String>,
}

/// Each follower must have every committed entry once, in order.
pub fn delivery(committed: &[Entry], followed: &[Followed]) -> Delivery {
    let want: Vec<u64> = committed.iter().map(|e| e.id).collect();
    let want_set: BTreeSet<u64> = want.iter().copied().collect();
    let mut out = Delivery {
        committed: want.len() as u64,
        followers: followed.len() as u64,
        ..Delivery::default()
    };
    for (n, f) in followed.iter().enumerate() {
        out.delivered += f.ids.len() as u64;
        out.resumes += f.resumes;
        if f.ids == want && f.gaps == 0 && f.malformed.is_empty() {
            continue;
        }
        let got: BTreeSet<u64> = f.ids.iter().copied().collect();
        let repeated = f.ids.len() - got.len();
        let disordered = f.ids.windows(2).filter(|w| w[0] >= w[1]).count();
        let missing = want_set.difference(&got).count();
        let extra = got.difference(&want_set).count();
        out.problems.push(format!(
            "follower {n}: {} received of {} committed: {missing} missing, {extra} never \
             committed, {repeated} repeated, {disordered} out of order, {} gaps, malformed {:?}",
            f.ids.len(),
            want.len(),
            f.gaps,
            f.malformed.iter().take(3).collect::<Vec<_>>()
        ));
    }
    out
}

/// How the copied files were announced.
#[derive(Debug, Default)]
pub struct Announced {
    pub copied: u64,
    /// Copied files with exactly one `add` and nothing else.
    pub once: u64,
    pub problems: Vec<String>,
}

/// Every copied file is one `add` in `file:events`, and nothing else.
pub fn announced(committed: &[Entry], copied: &[String]) -> Announced {
    let mut by_path: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in committed {
        by_path.entry(&e.subject).or_default().push(&e.kind);
    }
    let mut out = Announced {
        copied: copied.len() as u64,
        ..Announced::default()
    };
    for path in copied {
        match by_path.get(path.as_str()).map(Vec::as_slice) {
            Some(["add"]) => out.once += 1,
            Some(kinds) => out.problems.push(format!("{path}: announced as {kinds:?}")),
            None => out.problems.push(format!("{path}: never announced")),
        }
    }
    out
}

#[cfg(test)]
#[path = "check_test.rs"]
mod tests;
