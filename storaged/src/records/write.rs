//! The write side of records. Every function runs inside the writer's
//! transaction ([`Tx`]) and takes only checked inputs
//! ([`metacore::checked`]): nothing unchecked reaches the writer.
//!
//! Invariant kept by every write here: `idx:roots/<rid>` exists exactly
//! when the record has at least one field, and `idx:count/roots` counts
//! those keys.

use metacore::api::storaged::{
    AliasResult, Deleted, DuplicateResult, FieldDelete, FieldWrite, MintBody, SetAdd, WriteResult,
};
use metacore::checked::{CheckedField, CheckedFields, FieldName, FilePath, SetMember};
use metacore::cid::Cid;
use metacore::record::{Target, dup_end, dup_start, field_key, record_end, record_start, root_key};
use metacore::rid::Rid;

use crate::cid_index;
use crate::engine::tx::Tx;
use crate::error::Result;

/// Where a write lands, as resolved inside its transaction.
struct Landing {
    rid: Rid,
    /// The record existed before this write.
    existed: bool,
    /// Rows of the record the resolution itself changed (the member of a
    /// new CID).
    changed: u64,
}

impl Landing {
    /// The answer of a bulk write that left the record existing or not and
    /// changed `changed` rows.
    fn result(&self, exists: bool, changed: u64) -> WriteResult {
        WriteResult {
            rid: self.rid,
            created: exists && !self.existed,
            changed,
        }
    }
}

/// The root a write lands on. A valid CID nobody registered gets a new
/// root whose first field is that CID's member (so it becomes the root's
/// alias); a RID without a record is used as it is.
fn resolve_for_write(tx: &mut Tx<'_>, target: &Target) -> Result<Landing> {
    match target {
        Target::Rid(rid) => Ok(Landing {
            rid: *rid,
            existed: tx.get(&root_key(*rid))?.is_some(),
            changed: 0,
        }),
        Target::Cid(cid) => match cid_index::owner(tx.conn, cid)? {
            Some(rid) => Ok(Landing {
                rid,
                existed: true,
                changed: 0,
            }),
            None => {
                let rid = Rid::mint();
                put(tx, rid, &CheckedField::member(cid))?;
                Ok(Landing {
                    rid,
                    existed: false,
                    changed: 1,
                })
            }
        },
    }
}

/// Puts the root in the index, or takes it out, after a write: the record
/// exists exactly while it has a field. Returns whether it exists.
fn settle_root(tx: &mut Tx<'_>, rid: Rid) -> Result<bool> {
    if tx.any_in(&record_start(rid), &record_end(rid))? {
        ensure_root(tx, rid)?;
        Ok(true)
    } else {
        drop_root_if_empty(tx, rid)?;
        Ok(false)
    }
}

/// The root of an existing record, or the target's 404.
fn resolve_existing(tx: &Tx<'_>, target: &Target) -> Result<Rid> {
    let rid = match target {
        Target::Rid(rid) => *rid,
        Target::Cid(cid) => cid_index::owner(tx.conn, cid)?.ok_or_else(|| target.not_found())?,
    };
    if tx.get(&root_key(rid))?.is_none() && !tx.any_in(&record_start(rid), &record_end(rid))? {
        return Err(target.not_found().into());
    }
    Ok(rid)
}

/// Writes one checked field and keeps the alias of a member.
pub(crate) fn put(tx: &mut Tx<'_>, rid: Rid, field: &CheckedField) -> Result<bool> {
    put_field_at(
        tx,
        &record_start(rid),
        rid,
        field.name(),
        field.value(),
        field.cid(),
    )
}

/// Writes one field of a checked bulk write, with the record's key prefix
/// (`file:<rid>/`) already formatted.
fn put_field_at(
    tx: &mut Tx<'_>,
    prefix: &str,
    rid: Rid,
    field: &str,
    value: &str,
    cid: Option<&Cid>,
) -> Result<bool> {
    let changed = tx.put_record_key(&format!("{prefix}{field}"), value)?;
    if let Some(cid) = cid {
        cid_index::register(tx, cid, rid)?;
    }
    Ok(changed)
}

/// Writes every field of a checked bulk write; returns how many changed.
fn put_all(tx: &mut Tx<'_>, rid: Rid, fields: &CheckedFields) -> Result<u64> {
    let prefix = record_start(rid);
    let mut changed = 0;
    for (f, v, cid) in fields.iter() {
        changed += u64::from(put_field_at(tx, &prefix, rid, f, v, cid)?);
    }
    Ok(changed)
}

/// Deletes one field, retracting the alias of a member this root owns.
/// Returns the rows removed (0, 1, or 2 with the alias).
pub(crate) fn delete_field_row(tx: &mut Tx<'_>, rid: Rid, field: &str) -> Result<u64> {
    if !tx.delete_record_key(&field_key(rid, field))? {
        return Ok(0);
    }
    let alias = match cid_index::member_cid(field) {
        Some(cid) => u64::from(cid_index::retract(tx, cid, rid)?),
        None => 0,
    };
    Ok(1 + alias)
}

/// Puts the root in the index (after a write that left fields).
pub(crate) fn ensure_root(tx: &mut Tx<'_>, rid: Rid) -> Result<bool> {
    let added = tx.insert_new(&root_key(rid), "")?;
    if added {
        tx.count_roots(1);
    }
    Ok(added)
}

/// Takes the root out of the index, with its duplicates, once it has no
/// field left. Returns the rows removed.
fn drop_root_if_empty(tx: &mut Tx<'_>, rid: Rid) -> Result<u64> {
    if tx.any_in(&record_start(rid), &record_end(rid))? {
        return Ok(0);
    }
    let mut n = tx.delete_range(&dup_start(rid), &dup_end(rid))?;
    if tx.delete_raw(&root_key(rid))? {
        tx.count_roots(-1);
        n += 1;
    }
    Ok(n)
}

/// Field names of a record, read inside the transaction.
fn field_names(tx: &Tx<'_>, rid: Rid) -> Result<Vec<String>> {
    let start = record_start(rid);
    Ok(tx
        .rows_in(&start, &record_end(rid))?
        .into_iter()
        .map(|(k, _)| k[start.len()..].to_owned())
        .collect())
}

/// `PUT`: the record's fields become exactly `fields` (plus, when it is
/// addressed by CID, that CID's member, so the write cannot orphan the
/// address it was made through). Dropped members retract their aliases.
pub(crate) fn replace(tx: &mut Tx<'_>, at: &Target, fields: &CheckedFields) -> Result<WriteResult> {
    let landing = resolve_for_write(tx, at)?;
    let rid = landing.rid;
    let mut changed = landing.changed;
    for old in field_names(tx, rid)? {
        if !fields.contains(&old) && delete_field_row(tx, rid, &old)? > 0 {
            changed += 1;
        }
    }
    changed += put_all(tx, rid, fields)?;
    let exists = settle_root(tx, rid)?;
    Ok(landing.result(exists, changed))
}

/// `PATCH`: the fields are set, the others kept.
pub(crate) fn merge(tx: &mut Tx<'_>, at: &Target, fields: &CheckedFields) -> Result<WriteResult> {
    let landing = resolve_for_write(tx, at)?;
    let rid = landing.rid;
    let mut changed = landing.changed;
    changed += put_all(tx, rid, fields)?;
    // A merge only adds: a record that existed still does, and one that
    // got a field now exists.
    let exists = landing.existed || landing.changed > 0 || !fields.is_empty();
    if exists && !landing.existed {
        ensure_root(tx, rid)?;
    }
    Ok(landing.result(exists, changed))
}

/// Sets one field.
pub(crate) fn set_field(tx: &mut Tx<'_>, at: &Target, field: &CheckedField) -> Result<FieldWrite> {
    let landing = resolve_for_write(tx, at)?;
    let changed = put(tx, landing.rid, field)?;
    ensure_root(tx, landing.rid)?;
    Ok(FieldWrite {
        rid: landing.rid,
        field: field.name().to_owned(),
        created: !landing.existed,
        changed,
    })
}

/// Deletes one field; the root leaves the index with its last field.
pub(crate) fn delete_field(tx: &mut Tx<'_>, at: &Target, field: &FieldName) -> Result<FieldDelete> {
    let rid = resolve_existing(tx, at)?;
    let existed = delete_field_row(tx, rid, field.as_str())? > 0;
    drop_root_if_empty(tx, rid)?;
    Ok(FieldDelete {
        rid,
        field: field.as_str().to_owned(),
        existed,
    })
}

/// Adds a member to the pipe-delimited set held by one field.
pub(crate) fn set_add(tx: &mut Tx<'_>, at: &Target, member: &SetMember) -> Result<SetAdd> {
    let rid = resolve_for_write(tx, at)?.rid;
    let key = field_key(rid, member.field());
    let current = tx.get(&key)?.unwrap_or_default();
    let mut members: Vec<&str> = current.split('|').filter(|m| !m.is_empty()).collect();
    let added = !members.contains(&member.value());
    if added {
        members.push(member.value());
        tx.put_record_key(&key, &members.join("|"))?;
        ensure_root(tx, rid)?;
    }
    Ok(SetAdd {
        rid,
        field: member.field().to_owned(),
        added,
    })
}

/// Deletes a record: every field (each with its `del` event), the aliases
/// it owns, its duplicates and its index entry.
pub(crate) fn delete_root(tx: &mut Tx<'_>, target: &Target) -> Result<Deleted> {
    let rid = resolve_existing(tx, target)?;
    Ok(Deleted {
        rid,
        deleted: delete_rid(tx, rid)?.fields,
    })
}

/// What deleting a record removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Removed {
    /// The record's own keys (`file:<rid>/<field>`): the count the
    /// original answered as `deleted`.
    pub fields: u64,
    /// Every row, the reverse index, duplicates and root index included.
    pub rows: u64,
}

/// Deletes the record of `rid`, which exists.
pub(crate) fn delete_rid(tx: &mut Tx<'_>, rid: Rid) -> Result<Removed> {
    let (mut fields, mut rows) = (0, 0);
    for f in field_names(tx, rid)? {
        let n = delete_field_row(tx, rid, &f)?;
        fields += u64::from(n > 0);
        rows += n;
    }
    rows += drop_root_if_empty(tx, rid)?;
    Ok(Removed { fields, rows })
}

/// A new record for a file: `filePath`, `sizeByte`, `mtimeNano` and its
/// CIDs as members.
pub(crate) fn mint(tx: &mut Tx<'_>, body: &MintBody) -> Result<Rid> {
    let rid = Rid::mint();
    let prefix = record_start(rid);
    let size = body.size_byte.to_string();
    let mtime = body.mtime_nano.to_string();
    for (field, value) in [
        ("filePath", body.file_path.as_str()),
        ("sizeByte", &size),
        ("mtimeNano", &mtime),
    ] {
        put_field_at(tx, &prefix, rid, field, value, None)?;
    }
    for cid in &body.cids {
        put(tx, rid, &CheckedField::member(cid))?;
    }
    ensure_root(tx, rid)?;
    Ok(rid)
}

/// Adds a CID to a record's key-set and reverse index.
pub(crate) fn add_alias(tx: &mut Tx<'_>, at: &Target, cid: &Cid) -> Result<AliasResult> {
    let rid = resolve_for_write(tx, at)?.rid;
    put(tx, rid, &CheckedField::member(cid))?;
    ensure_root(tx, rid)?;
    let owner = cid_index::owner(tx.conn, cid)?.unwrap_or(rid);
    Ok(AliasResult {
        rid,
        cid: cid.clone(),
        owner,
    })
}

/// Records another path holding the same content.
pub(crate) fn add_duplicate(
    tx: &mut Tx<'_>,
    at: &Target,
    path: &FilePath,
) -> Result<DuplicateResult> {
    let rid = resolve_existing(tx, at)?;
    let added = tx.insert_new(&format!("{}{path}", dup_start(rid)), "")?;
    Ok(DuplicateResult {
        rid,
        path: path.as_str().to_owned(),
        added,
    })
}
