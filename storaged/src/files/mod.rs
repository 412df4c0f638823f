//! What the watcher observed of the files under `FILES_PATH`, applied in
//! the writer's transaction: the record change, the watcher's own row and
//! the `file:events` entry commit together or not at all, so a crash at any
//! moment neither loses an announcement nor makes one twice.
//!
//! The watcher's rows are `seen:<path>` (relative to `FILES_PATH`), one per
//! file it has announced, holding what it announced (size, mtime, midhash)
//! and the record the path belongs to. They are what a restarted watcher
//! compares the disk with, and they live in the store, so a standby that
//! takes over sees them too. Nothing but this module writes them.
//!
//! How a path is attached to a record (`attach`):
//! - the midhash names a record: the path becomes its `filePath` when it
//!   holds none, holds this path, or holds a path under `FILES_PATH` that
//!   the watcher covers and that is not a live file of it (no `seen:` row
//!   names the record there: the file moved on while the watcher was not
//!   looking; a path under `corn/` or a hidden name is a client's and kept:
//!   [`handover`]); otherwise it is a duplicate, `dup:<rid>/<path>`;
//! - the midhash names none, and the path's record holds it as `filePath`:
//!   the content changed in place, so the record follows it (the old
//!   midhash member leaves, the new one joins);
//! - otherwise a record is minted: `filePath`, `sizeByte`, `mtimeNano` and
//!   the midhash as its `cids/` member.
//!
//! A record's `filePath` that stops naming its file (deleted, moved away,
//! overwritten with other content) is handed to a live duplicate of it in
//! the same transaction ([`handover`]); a rescan's repair does the same for
//! a record left with a stale one.

mod handover;

pub(crate) use handover::repair;

use std::collections::BTreeMap;

use metacore::api::storaged::{
    FileState, Observation, ObserveOutcome, ResetDone, SEEN_PREFIX, SeenPage, SeenRow,
};
use metacore::checked::{CheckedField, RelPath};
use metacore::record::{dup_start, field_key, root_key};
use metacore::rid::Rid;
use metacore::stream::StreamName;
use rusqlite::{Connection, params};
use serde::{Deserialize, Serialize};

use crate::cid_index;
use crate::engine::tx::Tx;
use crate::error::{Result, StoreError};
use crate::records;

/// The end of the `seen:` range (`;` follows `:`).
const SEEN_END: &str = "seen;";

/// The value of a `seen:` row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Seen {
    #[serde(flatten)]
    file: FileState,
    rid: Rid,
}

fn seen_key(path: &RelPath) -> String {
    format!("{SEEN_PREFIX}{path}")
}

fn read_seen(tx: &Tx<'_>, path: &RelPath) -> Result<Option<Seen>> {
    let key = seen_key(path);
    tx.get(&key)?.map(|v| parse_seen(&key, &v)).transpose()
}

fn parse_seen(key: &str, v: &str) -> Result<Seen> {
    serde_json::from_str(v).map_err(|e| StoreError::Corrupt {
        key: key.to_owned(),
        detail: e.to_string(),
    })
}

fn write_seen(tx: &Tx<'_>, path: &RelPath, file: &FileState, rid: Rid) -> Result<()> {
    let seen = Seen {
        file: file.clone(),
        rid,
    };
    let json = serde_json::to_string(&seen).expect("a seen row serializes");
    tx.put_raw(&seen_key(path), &json)?;
    Ok(())
}

/// `<root>/<path>`, as a record's `filePath` holds it.
fn absolute(root: &str, path: &RelPath) -> String {
    format!("{}/{path}", root.trim_end_matches('/'))
}

/// The path relative to `root` of an absolute one under it.
fn relative_to(root: &str, abs: &str) -> Option<RelPath> {
    let rest = abs.strip_prefix(root.trim_end_matches('/'))?;
    RelPath::new(rest.strip_prefix('/')?).ok()
}

fn dup_key(rid: Rid, abs: &str) -> String {
    format!("{}{abs}", dup_start(rid))
}

/// Appends a `file:events` entry of `kind` for `path`.
fn announce(
    tx: &mut Tx<'_>,
    kind: &str,
    path: &RelPath,
    file: Option<&FileState>,
    old_path: Option<&RelPath>,
    out: &mut ObserveOutcome,
) -> Result<()> {
    let mut fields: BTreeMap<&str, String> = BTreeMap::new();
    fields.insert("type", kind.to_owned());
    fields.insert("path", path.to_string());
    fields.insert("timestamp", tx.now_ms.to_string());
    if let Some(f) = file {
        // The original leaves `size` out when it is 0.
        if f.size > 0 {
            fields.insert("size", f.size.to_string());
        }
        fields.insert("midhash256", f.midhash.to_string());
    }
    if let Some(old) = old_path {
        fields.insert("oldPath", old.to_string());
    }
    let json = serde_json::to_string(&fields).expect("strings serialize");
    let now = tx.now_ms;
    let id = tx.streams.append(tx.conn, StreamName::Files, &json, now)?;
    out.event = Some(kind.to_owned());
    out.id = Some(id);
    Ok(())
}

/// Writes `filePath`, `sizeByte` and `mtimeNano` of a record; the path is
/// its own, so it is not (any more) one of its duplicates.
fn put_file_fields(tx: &mut Tx<'_>, rid: Rid, abs: &str, file: &FileState) -> Result<()> {
    tx.delete_raw(&dup_key(rid, abs))?;
    for (field, value) in [
        ("filePath", abs.to_owned()),
        ("sizeByte", file.size.to_string()),
        ("mtimeNano", file.mtime_ns.to_string()),
    ] {
        tx.put_record_key(&field_key(rid, field), &value)?;
    }
    Ok(())
}

/// Whether the record of `rid` has any field (it exists).
fn exists(tx: &Tx<'_>, rid: Rid) -> Result<bool> {
    Ok(tx.get(&root_key(rid))?.is_some())
}

/// Attaches the file `file` at `path` to its record (see the module's
/// rules); `before` is what was seen at `path`. Returns the record and
/// whether it was minted.
fn attach(
    tx: &mut Tx<'_>,
    root: &str,
    path: &RelPath,
    file: &FileState,
    before: Option<&Seen>,
) -> Result<(Rid, bool)> {
    let abs = absolute(root, path);
    let (rid, minted) = match cid_index::owner(tx.conn, &file.midhash)? {
        Some(rid) => {
            if handover::takes_path(tx, root, rid, &abs)? {
                put_file_fields(tx, rid, &abs, file)?;
            } else {
                tx.insert_new(&dup_key(rid, &abs), "")?;
            }
            (rid, false)
        }
        None => match before {
            Some(b)
                if exists(tx, b.rid)?
                    && tx.get(&field_key(b.rid, "filePath"))?.as_deref() == Some(&abs) =>
            {
                // Changed in place: the record follows its file.
                let old = format!("{}{}", metacore::record::CIDS_PREFIX, b.file.midhash);
                records::delete_field_row(tx, b.rid, &old)?;
                records::put(tx, b.rid, &CheckedField::member(&file.midhash))?;
                put_file_fields(tx, b.rid, &abs, file)?;
                (b.rid, false)
            }
            _ => {
                let rid = Rid::mint();
                put_file_fields(tx, rid, &abs, file)?;
                records::put(tx, rid, &CheckedField::member(&file.midhash))?;
                (rid, true)
            }
        },
    };
    records::ensure_root(tx, rid)?;
    if let Some(b) = before.filter(|b| b.rid != rid) {
        release(tx, root, b.rid, &abs)?;
    }
    Ok((rid, minted))
}

/// The path `abs` no longer holds the content of `rid`'s record (it was
/// overwritten with another's): not its duplicate, and not its `filePath`
/// (a write by that record's CID must not reach the other content); a
/// live duplicate of the record takes the `filePath` over, if it has one.
fn release(tx: &mut Tx<'_>, root: &str, rid: Rid, abs: &str) -> Result<()> {
    tx.delete_raw(&dup_key(rid, abs))?;
    if tx.get(&field_key(rid, "filePath"))?.as_deref() == Some(abs) {
        records::delete_field_row(tx, rid, "filePath")?;
        handover::hand_over(tx, root, rid)?;
    }
    Ok(())
}

/// Applies one observation.
pub(crate) fn observe(tx: &mut Tx<'_>, root: &str, o: &Observation) -> Result<ObserveOutcome> {
    let mut out = ObserveOutcome::default();
    match o {
        Observation::Present { path, file } => present(tx, root, path, file, &mut out)?,
        Observation::Gone { path } => {
            gone(tx, root, path, &mut out)?;
        }
        Observation::Moved { from, path, file } => moved(tx, root, from, path, file, &mut out)?,
    }
    Ok(out)
}

fn present(
    tx: &mut Tx<'_>,
    root: &str,
    path: &RelPath,
    file: &FileState,
    out: &mut ObserveOutcome,
) -> Result<()> {
    let before = read_seen(tx, path)?;
    if let Some(b) = &before
        && b.file == *file
        && exists(tx, b.rid)?
    {
        out.rid = Some(b.rid);
        return Ok(()); // announced already, as it is
    }
    let (rid, minted) = attach(tx, root, path, file, before.as_ref())?;
    write_seen(tx, path, file, rid)?;
    out.rid = Some(rid);
    out.minted = minted;
    let kind = if before.is_some() { "change" } else { "add" };
    announce(tx, kind, path, Some(file), None, out)
}

/// Forgets a path; true when it had been seen (and `delete` announced).
/// When it was its record's `filePath`, a live duplicate takes it over.
fn gone(tx: &mut Tx<'_>, root: &str, path: &RelPath, out: &mut ObserveOutcome) -> Result<bool> {
    let Some(before) = read_seen(tx, path)? else {
        return Ok(false);
    };
    tx.delete_raw(&seen_key(path))?;
    left(tx, root, before.rid, &absolute(root, path))?;
    announce(tx, "delete", path, None, None, out)?;
    Ok(true)
}

/// The file of `rid`'s record left `abs` (whose `seen:` row is gone):
/// not its duplicate any more, and if it was its `filePath`, a live
/// duplicate takes that over (the record keeps the old one otherwise).
fn left(tx: &mut Tx<'_>, root: &str, rid: Rid, abs: &str) -> Result<()> {
    tx.delete_raw(&dup_key(rid, abs))?;
    if tx.get(&field_key(rid, "filePath"))?.as_deref() == Some(abs) {
        handover::hand_over(tx, root, rid)?;
    }
    Ok(())
}

fn moved(
    tx: &mut Tx<'_>,
    root: &str,
    from: &RelPath,
    path: &RelPath,
    file: &FileState,
    out: &mut ObserveOutcome,
) -> Result<()> {
    let Some(old) = read_seen(tx, from)?.filter(|s| s.file.midhash == file.midhash) else {
        // Not the content seen there: the old path is gone, this one is new.
        gone(tx, root, from, &mut ObserveOutcome::default())?;
        return present(tx, root, path, file, out);
    };
    tx.delete_raw(&seen_key(from))?;
    let before = read_seen(tx, path)?;
    let (abs_from, abs_to) = (absolute(root, from), absolute(root, path));
    let rid = if cid_index::owner(tx.conn, &file.midhash)? == Some(old.rid) {
        let rid = old.rid;
        // The old path is not a duplicate any more, whatever it was; the
        // new one is the `filePath` when the old one was (or it names no
        // live file of the record), else a duplicate.
        tx.delete_raw(&dup_key(rid, &abs_from))?;
        let was_path = tx.get(&field_key(rid, "filePath"))?.as_deref() == Some(&abs_from);
        if was_path || handover::takes_path(tx, root, rid, &abs_to)? {
            put_file_fields(tx, rid, &abs_to, file)?;
        } else {
            tx.insert_new(&dup_key(rid, &abs_to), "")?;
        }
        if let Some(b) = before.as_ref().filter(|b| b.rid != rid) {
            release(tx, root, b.rid, &abs_to)?;
        }
        rid
    } else {
        // The record was deleted or lost its alias since: the old path
        // leaves it, and the new one is attached afresh.
        left(tx, root, old.rid, &abs_from)?;
        let (rid, minted) = attach(tx, root, path, file, before.as_ref())?;
        out.minted = minted;
        rid
    };
    write_seen(tx, path, file, rid)?;
    out.rid = Some(rid);
    announce(tx, "rename", path, Some(file), Some(from), out)
}

/// Forgets what was seen under `dirs` (all of it for an empty list or
/// `""`), clears `file:events` and appends its first entry, `reset`.
pub(crate) fn reset(tx: &mut Tx<'_>, dirs: &[String], watcher_id: &str) -> Result<ResetDone> {
    let mut forgotten = 0;
    if dirs.is_empty() || dirs.iter().any(|d| d.is_empty()) {
        forgotten += tx.delete_range(SEEN_PREFIX, SEEN_END)?;
    } else {
        for dir in dirs {
            let dir = dir.trim_end_matches('/');
            forgotten += tx.delete_range(
                &format!("{SEEN_PREFIX}{dir}/"),
                &format!("{SEEN_PREFIX}{dir}0"),
            )?;
        }
    }
    tx.streams.clear(tx.conn, StreamName::Files)?;
    let mut fields: BTreeMap<&str, String> = BTreeMap::new();
    fields.insert("type", "reset".to_owned());
    fields.insert("path", String::new());
    fields.insert("timestamp", tx.now_ms.to_string());
    fields.insert("watcherId", watcher_id.to_owned());
    let json = serde_json::to_string(&fields).expect("strings serialize");
    let now = tx.now_ms;
    let id = tx.streams.append(tx.conn, StreamName::Files, &json, now)?;
    Ok(ResetDone { forgotten, id })
}

/// A page of `seen:` rows after the path `after`, in path order.
pub(crate) fn seen_page(conn: &Connection, after: Option<&str>, limit: u32) -> Result<SeenPage> {
    let start = format!("{SEEN_PREFIX}{}", after.unwrap_or(""));
    let mut stmt =
        conn.prepare_cached("SELECT k, v FROM kv WHERE k > ?1 AND k < ?2 ORDER BY k LIMIT ?3")?;
    let mut rows = stmt.query(params![start, SEEN_END, i64::from(limit) + 1])?;
    let mut out = Vec::new();
    let mut more = false;
    while let Some(row) = rows.next()? {
        if out.len() == limit as usize {
            more = true;
            break;
        }
        let k: String = row.get(0)?;
        let v: String = row.get(1)?;
        let seen = parse_seen(&k, &v)?;
        let path = RelPath::new(&k[SEEN_PREFIX.len()..]).map_err(|e| StoreError::Corrupt {
            key: k.clone(),
            detail: e.message,
        })?;
        out.push(SeenRow {
            path,
            file: seen.file,
            rid: seen.rid,
        });
    }
    let next = more
        .then(|| out.last().map(|r| r.path.to_string()))
        .flatten();
    Ok(SeenPage { rows: out, next })
}
