//! Operations over many records, each carried out inside the writer so that
//! no other write can land between the read it depends on and its write:
//!
//! - **import**: a group of snapshot records; each is planned ([`plan`],
//!   pure) against the record it meets, read in the same writer savepoint
//!   that applies it, so a write made meanwhile is either seen by the plan
//!   or comes after the import, never silently overwritten;
//! - **wipe**: every record deleted, a chunk of roots per write, until the
//!   root index is empty.

use metacore::api::storaged::{ImportConflict, ImportCounts, ImportMode};
use metacore::checked::CheckedFields;
use metacore::record::{Fields, Target};
use metacore::rid::Rid;

use crate::engine::tx::Tx;
use crate::error::Result;
use crate::records::{self, PageStart};

/// Roots deleted by one write of a wipe: large enough to keep the commits
/// few, small enough that other writes wait a few milliseconds at most.
pub const WIPE_CHUNK: u32 = 500;

/// What one record's import writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecordWrite {
    Nothing,
    /// These fields set, the others kept.
    Merge(CheckedFields),
    /// The record's fields become these.
    Replace,
    /// Replaced by nothing: the record goes.
    Delete,
}

/// The counts and the write of one record, from our fields and the
/// snapshot's. Pure, so a dry run computes exactly what a run does.
pub(crate) fn plan(
    current: &Fields,
    incoming: &CheckedFields,
    mode: ImportMode,
    conflict: ImportConflict,
) -> (ImportCounts, RecordWrite) {
    let mut c = ImportCounts::default();
    let merge = incoming.subset(|k, v| match current.get(k) {
        None => {
            c.added += 1;
            true
        }
        Some(ours) if ours == v => {
            c.unchanged += 1;
            false
        }
        Some(_) if mode == ImportMode::Replace || conflict == ImportConflict::Source => {
            c.updated += 1;
            true
        }
        Some(_) => {
            c.kept += 1;
            false
        }
    });
    let write = match mode {
        ImportMode::Merge if merge.is_empty() => RecordWrite::Nothing,
        ImportMode::Merge => RecordWrite::Merge(merge),
        ImportMode::Replace => {
            c.deleted = current.keys().filter(|k| !incoming.contains(k)).count() as u64;
            if c.added + c.updated + c.deleted == 0 {
                RecordWrite::Nothing
            } else if incoming.is_empty() {
                RecordWrite::Delete
            } else {
                RecordWrite::Replace
            }
        }
    };
    (c, write)
}

/// Imports one record, reading it inside the write that applies the plan.
pub(crate) fn import_record(
    tx: &mut Tx<'_>,
    rid: Rid,
    incoming: &CheckedFields,
    mode: ImportMode,
    conflict: ImportConflict,
) -> Result<ImportCounts> {
    let current = records::fields(tx.conn, rid)?;
    let (counts, write) = plan(&current, incoming, mode, conflict);
    let target = Target::Rid(rid);
    match write {
        RecordWrite::Nothing => {}
        RecordWrite::Merge(fields) => {
            records::merge(tx, &target, &fields)?;
        }
        RecordWrite::Replace => {
            records::replace(tx, &target, incoming)?;
        }
        RecordWrite::Delete => {
            records::delete_rid(tx, rid)?;
        }
    }
    Ok(counts)
}

/// Deletes up to [`WIPE_CHUNK`] records; returns how many (0: none left).
pub(crate) fn wipe_chunk(tx: &mut Tx<'_>) -> Result<u64> {
    let page = records::list_roots(tx.conn, PageStart::default(), WIPE_CHUNK)?;
    for rid in &page.rids {
        records::delete_rid(tx, *rid)?;
    }
    Ok(page.rids.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        metacore::record::fields_of(pairs)
    }

    fn checked(pairs: &[(&str, &str)]) -> CheckedFields {
        CheckedFields::check(fields(pairs)).unwrap()
    }

    fn counts(added: u64, updated: u64, unchanged: u64, kept: u64, deleted: u64) -> ImportCounts {
        ImportCounts {
            added,
            updated,
            unchanged,
            kept,
            deleted,
        }
    }

    #[test]
    fn merge_source_adds_and_updates() {
        let ours = fields(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let theirs = checked(&[("a", "1"), ("b", "X"), ("d", "4")]);
        let (c, w) = plan(&ours, &theirs, ImportMode::Merge, ImportConflict::Source);
        assert_eq!(c, counts(1, 1, 1, 0, 0));
        assert_eq!(w, RecordWrite::Merge(checked(&[("b", "X"), ("d", "4")])));
    }

    #[test]
    fn merge_mine_keeps_ours() {
        let ours = fields(&[("a", "1"), ("b", "2")]);
        let theirs = checked(&[("a", "1"), ("b", "X"), ("d", "4")]);
        let (c, w) = plan(&ours, &theirs, ImportMode::Merge, ImportConflict::Mine);
        assert_eq!(c, counts(1, 0, 1, 1, 0));
        assert_eq!(w, RecordWrite::Merge(checked(&[("d", "4")])));
        let (_, w) = plan(
            &ours,
            &checked(&[("b", "X")]),
            ImportMode::Merge,
            ImportConflict::Mine,
        );
        assert_eq!(w, RecordWrite::Nothing, "nothing to write is no write");
    }

    #[test]
    fn replace_counts_deletions_and_ignores_conflict() {
        let ours = fields(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let theirs = checked(&[("a", "1"), ("b", "X"), ("d", "4")]);
        for conflict in [ImportConflict::Mine, ImportConflict::Source] {
            let (c, w) = plan(&ours, &theirs, ImportMode::Replace, conflict);
            assert_eq!(c, counts(1, 1, 1, 0, 1));
            assert_eq!(w, RecordWrite::Replace);
        }
        let same = CheckedFields::check(ours.clone()).unwrap();
        let (c, w) = plan(&ours, &same, ImportMode::Replace, ImportConflict::Source);
        assert_eq!((c.unchanged, w), (3, RecordWrite::Nothing));
        let empty = CheckedFields::default();
        let (c, w) = plan(&ours, &empty, ImportMode::Replace, ImportConflict::Source);
        assert_eq!((c.deleted, w), (3, RecordWrite::Delete));
    }
}
