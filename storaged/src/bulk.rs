//! Operations over many records, each carried out inside the writer so that
//! no other write can land between the read it depends on and its write:
//!
//! - **import**: a group of snapshot records; each is planned ([`plan`],
//!   pure) against the record it meets, read in the same writer savepoint
//!   that applies it, so a write made meanwhile is either seen by the plan
//!   or comes after the import, never silently overwritten;
//! - **wipe**: every record deleted, a chunk of roots per write, until the
//!   root index is empty.

use metacore::api::storaged::{
    ImportBody, ImportConflict, ImportCounts, ImportMode, MAX_IMPORT_GROUP,
};
use metacore::checked::{CheckedFields, Refused};
use metacore::error::ApiError;
use metacore::record::{Fields, Target};
use metacore::rid::Rid;

use crate::engine::tx::Tx;
use crate::error::{Result, schema};
use crate::records::{self, PageStart};

/// Roots a wipe looks at in one write.
pub const WIPE_CHUNK: u32 = 256;
/// Rows a wipe deletes in one write, about: a write holds every other
/// write until it commits, so a chunk stops once it has deleted this many
/// (a few milliseconds' work), whatever the size of its records.
const WIPE_ROWS: u64 = 4096;

/// One snapshot record, checked before it is queued: the fields that pass
/// the write checks and those that do not, with why. A refused field the
/// plan leaves alone (an old store's retired field, unchanged or kept)
/// does no harm; a write that would set one fails with its reason.
#[derive(Debug, Clone)]
pub(crate) struct Incoming {
    rid: Rid,
    ok: CheckedFields,
    refused: Vec<Refused>,
}

impl Incoming {
    pub(crate) fn check(rid: Rid, fields: Fields) -> Self {
        let (ok, refused) = CheckedFields::partition(fields);
        Self { rid, ok, refused }
    }

    pub(crate) fn rid(&self) -> Rid {
        self.rid
    }

    /// Every field as the snapshot has it, refused ones too.
    fn all(&self) -> impl Iterator<Item = (&str, &str)> {
        let ok = self.ok.iter().map(|(f, v, _)| (f.as_str(), v.as_str()));
        ok.chain(
            self.refused
                .iter()
                .map(|r| (r.field.as_str(), r.value.as_str())),
        )
    }

    fn contains(&self, field: &str) -> bool {
        self.ok.contains(field) || self.refused.iter().any(|r| r.field == field)
    }

    fn is_empty(&self) -> bool {
        self.ok.is_empty() && self.refused.is_empty()
    }

    /// The refusal of the first field (in name order) `writes` says yes to.
    fn refusal(&self, mut writes: impl FnMut(&str) -> bool) -> Option<ApiError> {
        self.refused
            .iter()
            .find(|r| writes(&r.field))
            .map(|r| r.why.clone())
    }
}

/// An import group, every record checked, ready for the writer.
#[derive(Debug, Clone)]
pub struct ImportGroup {
    pub(crate) mode: ImportMode,
    pub(crate) conflict: ImportConflict,
    pub(crate) dry_run: bool,
    pub(crate) records: Vec<Incoming>,
}

impl ImportGroup {
    /// Checks every record of `body` (a group too large is refused whole).
    pub fn check(body: ImportBody) -> Result<Self> {
        if body.records.len() > MAX_IMPORT_GROUP {
            return Err(schema(format!(
                "an import group is at most {MAX_IMPORT_GROUP} records"
            )));
        }
        Ok(Self {
            mode: body.mode,
            conflict: body.conflict,
            dry_run: body.dry_run,
            records: body
                .records
                .into_iter()
                .map(|r| Incoming::check(r.rid, r.fields))
                .collect(),
        })
    }
}

/// What one record's import writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RecordWrite {
    Nothing,
    /// These fields set, the others kept.
    Merge(CheckedFields),
    /// The record's fields become the snapshot's.
    Replace,
    /// Replaced by nothing: the record goes.
    Delete,
}

/// The counts and the write of one record, from our fields and the
/// snapshot's; a refusal when the write would set a field that failed its
/// checks. Pure, so a dry run computes exactly what a run does.
pub(crate) fn plan(
    current: &Fields,
    incoming: &Incoming,
    mode: ImportMode,
    conflict: ImportConflict,
) -> std::result::Result<(ImportCounts, RecordWrite), ApiError> {
    let mut c = ImportCounts::default();
    // The fields a merge sets: those we lack, and those that differ when
    // the snapshot's value wins.
    let mut sets = |k: &str, v: &str| match current.get(k) {
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
    };
    let set: Vec<&str> = incoming
        .all()
        .filter(|(k, v)| sets(k, v))
        .map(|(k, _)| k)
        .collect();
    let write = match mode {
        ImportMode::Merge if set.is_empty() => RecordWrite::Nothing,
        ImportMode::Merge => {
            if let Some(why) = incoming.refusal(|f| set.contains(&f)) {
                return Err(why);
            }
            RecordWrite::Merge(incoming.ok.subset(|k, _| set.contains(&k)))
        }
        ImportMode::Replace => {
            c.deleted = current.keys().filter(|k| !incoming.contains(k)).count() as u64;
            if c.added + c.updated + c.deleted == 0 {
                RecordWrite::Nothing
            } else if incoming.is_empty() {
                RecordWrite::Delete
            } else if let Some(why) = incoming.refusal(|_| true) {
                return Err(why);
            } else {
                RecordWrite::Replace
            }
        }
    };
    Ok((c, write))
}

/// Imports one record, reading it inside the write that applies the plan.
pub(crate) fn import_record(
    tx: &mut Tx<'_>,
    incoming: &Incoming,
    mode: ImportMode,
    conflict: ImportConflict,
) -> Result<ImportCounts> {
    let rid = incoming.rid;
    let current = records::fields(tx.conn, rid)?;
    let (counts, write) = plan(&current, incoming, mode, conflict)?;
    let target = Target::Rid(rid);
    match write {
        RecordWrite::Nothing => {}
        RecordWrite::Merge(fields) => {
            records::merge(tx, &target, &fields)?;
        }
        RecordWrite::Replace => {
            records::replace(tx, &target, &incoming.ok)?;
        }
        RecordWrite::Delete => {
            records::delete_rid(tx, rid)?;
        }
    }
    Ok(counts)
}

/// Deletes records, up to [`WIPE_CHUNK`] of them or about [`WIPE_ROWS`]
/// rows; returns how many, and whether any is left.
pub(crate) fn wipe_chunk(tx: &mut Tx<'_>) -> Result<(u64, bool)> {
    let page = records::list_roots(tx.conn, PageStart::default(), WIPE_CHUNK)?;
    let (mut roots, mut rows) = (0u64, 0u64);
    for rid in &page.rids {
        rows += records::delete_rid(tx, *rid)?.rows;
        roots += 1;
        if rows >= WIPE_ROWS {
            break;
        }
    }
    let left = roots < page.rids.len() as u64 || page.next.is_some();
    Ok((roots, left))
}

#[cfg(test)]
mod tests {
    use metacore::error::ErrorCode;

    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        metacore::record::fields_of(pairs)
    }

    fn checked(pairs: &[(&str, &str)]) -> CheckedFields {
        CheckedFields::check(fields(pairs)).unwrap()
    }

    fn incoming(pairs: &[(&str, &str)]) -> Incoming {
        Incoming::check(Rid::mint(), fields(pairs))
    }

    /// The plan of `theirs` meeting `ours`, which must not refuse.
    fn planned(
        ours: &[(&str, &str)],
        theirs: &[(&str, &str)],
        mode: ImportMode,
        conflict: ImportConflict,
    ) -> (ImportCounts, RecordWrite) {
        plan(&fields(ours), &incoming(theirs), mode, conflict).unwrap()
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
        let (ours, theirs) = (
            [("a", "1"), ("b", "2"), ("c", "3")],
            [("a", "1"), ("b", "X"), ("d", "4")],
        );
        let (c, w) = planned(&ours, &theirs, ImportMode::Merge, ImportConflict::Source);
        assert_eq!(c, counts(1, 1, 1, 0, 0));
        assert_eq!(w, RecordWrite::Merge(checked(&[("b", "X"), ("d", "4")])));
    }

    #[test]
    fn merge_mine_keeps_ours() {
        let ours = [("a", "1"), ("b", "2")];
        let (c, w) = planned(
            &ours,
            &[("a", "1"), ("b", "X"), ("d", "4")],
            ImportMode::Merge,
            ImportConflict::Mine,
        );
        assert_eq!(c, counts(1, 0, 1, 1, 0));
        assert_eq!(w, RecordWrite::Merge(checked(&[("d", "4")])));
        let (_, w) = planned(
            &ours,
            &[("b", "X")],
            ImportMode::Merge,
            ImportConflict::Mine,
        );
        assert_eq!(w, RecordWrite::Nothing, "nothing to write is no write");
    }

    #[test]
    fn replace_counts_deletions_and_ignores_conflict() {
        let ours = fields(&[("a", "1"), ("b", "2"), ("c", "3")]);
        let theirs = incoming(&[("a", "1"), ("b", "X"), ("d", "4")]);
        for conflict in [ImportConflict::Mine, ImportConflict::Source] {
            let (c, w) = plan(&ours, &theirs, ImportMode::Replace, conflict).unwrap();
            assert_eq!(c, counts(1, 1, 1, 0, 1));
            assert_eq!(w, RecordWrite::Replace);
        }
        let same = Incoming::check(Rid::mint(), ours.clone());
        let (c, w) = plan(&ours, &same, ImportMode::Replace, ImportConflict::Source).unwrap();
        assert_eq!((c.unchanged, w), (3, RecordWrite::Nothing));
        let empty = incoming(&[]);
        let (c, w) = plan(&ours, &empty, ImportMode::Replace, ImportConflict::Source).unwrap();
        assert_eq!((c.deleted, w), (3, RecordWrite::Delete));
    }

    #[test]
    fn a_refused_field_fails_the_record_only_when_the_write_would_set_it() {
        // An old store's retired field, the same in the snapshot: a merge
        // leaves it alone, so the record imports.
        let ours = fields(&[("midhash256", "old"), ("title", "T")]);
        let theirs = incoming(&[("midhash256", "old"), ("title", "T"), ("year", "2001")]);
        let (c, w) = plan(&ours, &theirs, ImportMode::Merge, ImportConflict::Mine).unwrap();
        assert_eq!(c, counts(1, 0, 2, 0, 0));
        assert_eq!(w, RecordWrite::Merge(checked(&[("year", "2001")])));
        // A merge that would set it, and any replace that writes, refuse.
        let changed = incoming(&[("midhash256", "new")]);
        let e = plan(&ours, &changed, ImportMode::Merge, ImportConflict::Source).unwrap_err();
        assert_eq!(e.code, ErrorCode::DeprecatedField);
        let e = plan(&ours, &theirs, ImportMode::Replace, ImportConflict::Source).unwrap_err();
        assert_eq!(e.code, ErrorCode::DeprecatedField);
        // A replace that changes nothing writes nothing, so refuses nothing.
        let same = incoming(&[("midhash256", "old"), ("title", "T")]);
        let (_, w) = plan(&ours, &same, ImportMode::Replace, ImportConflict::Source).unwrap();
        assert_eq!(w, RecordWrite::Nothing);
    }
}
