//! A record's `filePath` handed over to a live duplicate.
//!
//! A path is a *live* file of a record when the watcher announced it as
//! that record's (its `seen:` row names the record). A record's `filePath`
//! names no live file of it once the file left (deleted, moved on, or
//! overwritten with other content): then the first of its duplicates in
//! path order that is a live file with one of the record's midhashes
//! becomes the `filePath` (with its `sizeByte` and `mtimeNano`) and leaves
//! the `dup:` rows. The observation that made the path leave does this in
//! its own transaction, beside its `file:events` entry; [`repair`] does it
//! for records a store was left with (written before this rule, or edited
//! by hand), a page at a time, on watcherd's rescans.
//!
//! Only a path the watcher could have seen leave counts as naming no live
//! file: one under `root` that inotify covers. A `filePath` under `corn/`
//! (the mounts, which only a polling watcher sees, if any) or whose name
//! the watcher skips (hidden: `.` first; a name that is not UTF-8 cannot be
//! a `filePath` at all) is a client's, like one outside `root`: kept,
//! never handed to a duplicate. (When the watcher did see such a path
//! leave, the observation that says so hands it over itself.)
//!
//! Nothing here appends to `file:events`: the files did not change. The
//! record's fields do, each with its `meta:events` entry, and only when
//! its value changes, so running a repair twice writes nothing twice.

use metacore::api::storaged::{FileState, REPAIR_PAGE, RepairDone};
use metacore::checked::RelPath;
use metacore::record::{CIDS_PREFIX, dup_end, dup_start, field_key};
use metacore::rid::Rid;
use rusqlite::{OptionalExtension, params};

use super::{Seen, put_file_fields, read_seen, relative_to};
use crate::engine::tx::Tx;
use crate::error::Result;

/// The first `dup:` key (all of them lie in `["dup:", "dup;")`).
const DUP_START: &str = "dup:";
const DUP_END: &str = "dup;";

/// What the watcher announced at `abs`, if it announced it as `rid`'s.
fn live_seen(tx: &Tx<'_>, root: &str, rid: Rid, abs: &str) -> Result<Option<Seen>> {
    let Some(rel) = relative_to(root, abs) else {
        return Ok(None);
    };
    Ok(read_seen(tx, &rel)?.filter(|s| s.rid == rid))
}

/// The folder under `FILES_PATH` that the watcher's inotify tree leaves
/// to polling (watcherd's `exclude::MOUNTS_DIR`).
const MOUNTS_DIR: &str = "corn";

/// Whether the watcher's inotify tree covers `rel`: not under `corn/`, not
/// a hidden name (which the watcher never announces).
fn covered(rel: &RelPath) -> bool {
    let hidden = rel
        .as_str()
        .rsplit('/')
        .next()
        .is_some_and(|name| name.starts_with('.'));
    !hidden && !rel.is_under(MOUNTS_DIR) && rel.as_str() != MOUNTS_DIR
}

/// Whether `rid`'s `filePath` names no live file of it: it has none, or
/// one the watcher covers (see [`covered`]) that it does not see as the
/// record's. A path outside `root`, or one the watcher could not have seen
/// leave, is someone else's to judge: never vacant.
fn vacant(tx: &Tx<'_>, root: &str, rid: Rid) -> Result<bool> {
    let Some(p) = tx.get(&field_key(rid, "filePath"))? else {
        return Ok(true);
    };
    match relative_to(root, &p) {
        Some(rel) if covered(&rel) => Ok(live_seen(tx, root, rid, &p)?.is_none()),
        _ => Ok(false),
    }
}

/// Whether the file of `rid`'s record now at `abs` becomes its `filePath`:
/// the record's is this path, or names no live file of it.
pub(super) fn takes_path(tx: &Tx<'_>, root: &str, rid: Rid, abs: &str) -> Result<bool> {
    if tx.get(&field_key(rid, "filePath"))?.as_deref() == Some(abs) {
        return Ok(true);
    }
    vacant(tx, root, rid)
}

/// The first duplicate of `rid` in path order that is a live file of it
/// with one of its midhashes, and what was announced of it.
fn live_duplicate(tx: &Tx<'_>, root: &str, rid: Rid) -> Result<Option<(String, FileState)>> {
    let start = dup_start(rid);
    for (k, _) in tx.rows_in(&start, &dup_end(rid))? {
        let abs = &k[start.len()..];
        let Some(seen) = live_seen(tx, root, rid, abs)? else {
            continue;
        };
        let member = field_key(rid, &format!("{CIDS_PREFIX}{}", seen.file.midhash));
        if tx.get(&member)?.is_some() {
            return Ok(Some((abs.to_owned(), seen.file)));
        }
    }
    Ok(None)
}

/// `rid`'s `filePath` names no live file of it: a live duplicate takes it
/// over, if there is one. Returns whether one did.
pub(super) fn hand_over(tx: &mut Tx<'_>, root: &str, rid: Rid) -> Result<bool> {
    match live_duplicate(tx, root, rid)? {
        Some((abs, file)) => {
            put_file_fields(tx, rid, &abs, &file)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// The first `dup:` key at or after `from`.
fn first_dup_from(tx: &Tx<'_>, from: &str) -> Result<Option<String>> {
    Ok(tx
        .conn
        .prepare_cached("SELECT k FROM kv WHERE k >= ?1 AND k < ?2 ORDER BY k LIMIT 1")?
        .query_row(params![from, DUP_END], |r| r.get(0))
        .optional()?)
}

/// One page of the repair: the next [`REPAIR_PAGE`] records with
/// duplicates after `after` (in RID order), each whose `filePath` names no
/// live file of it handed to a live duplicate. `next` is where the next
/// page starts; absent on the last.
pub(crate) fn repair(tx: &mut Tx<'_>, root: &str, after: Option<Rid>) -> Result<RepairDone> {
    let mut from = match after {
        Some(rid) => dup_end(rid),
        None => DUP_START.to_owned(),
    };
    let mut done = RepairDone::default();
    let mut last = None;
    while done.records < REPAIR_PAGE as u64 {
        let Some(key) = first_dup_from(tx, &from)? else {
            break;
        };
        // `dup:<rid>/<path>`; a key whose RID does not parse is not a
        // record's (no write makes one): passed over.
        let segment = key[DUP_START.len()..]
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        from = format!("{DUP_START}{segment}0");
        let Ok(rid) = Rid::parse(&segment) else {
            continue;
        };
        done.records += 1;
        last = Some(rid);
        if vacant(tx, root, rid)? && hand_over(tx, root, rid)? {
            done.promoted += 1;
        }
    }
    if done.records == REPAIR_PAGE as u64 {
        done.next = last;
    }
    Ok(done)
}
