//! Records: a root's flat fields `file:<rid>/<field>`, its place in the root
//! index `idx:roots/<rid>`, its CID aliases and duplicate paths.
//!
//! Invariant kept by every write here: `idx:roots/<rid>` exists exactly
//! when the record has at least one field, and `idx:count/roots` counts
//! those keys. Write functions run inside the writer's transaction
//! ([`Tx`]); read functions take a reader connection.

use std::collections::BTreeSet;

use metacore::api::storaged::{
    AliasResult, Deleted, Document, DuplicateResult, FieldDelete, FieldWrite, FieldsPage, MintBody,
    RootFields, RootPage, SetAdd, WriteResult,
};
use metacore::cid::{Cid, canonical};
use metacore::error::{ApiError, ErrorCode};
use metacore::record::{
    CIDS_PREFIX, Fields, Target, check_shape, check_write, dup_end, dup_start, field_key,
    record_end, record_start, root_key,
};
use metacore::rid::Rid;
use rusqlite::{Connection, OptionalExtension, params};

use crate::cid_index;
use crate::engine::tx::Tx;
use crate::error::{Result, StoreError, schema};

/// Longest duplicate path accepted, in bytes.
const MAX_PATH_LEN: usize = 4096;

// ---------------------------------------------------------------------------
// Write side
// ---------------------------------------------------------------------------

/// The fields of a write, every one checked (shape, retired names, member
/// CIDs, values), with the CID of each `cids/` member in field order.
/// Checking happens before a write is queued, so a bad request never takes
/// the writer's time and never reaches the store.
#[derive(Debug)]
pub struct CheckedFields {
    fields: Fields,
    cids: Vec<Option<Cid>>,
}

impl CheckedFields {
    pub fn check(fields: Fields) -> Result<Self> {
        let cids = fields
            .iter()
            .map(|(f, v)| check_write(f, v).map_err(ApiError::from))
            .collect::<Result<_, _>>()?;
        Ok(Self { fields, cids })
    }

    /// Checks `fields` plus, for a write addressed by CID, that CID's
    /// member (a replace keeps the address it was made through).
    pub fn check_for(target: &Target, mut fields: Fields) -> Result<Self> {
        if let Target::Cid(cid) = target {
            fields
                .entry(format!("{CIDS_PREFIX}{cid}"))
                .or_insert_with(|| "true".into());
        }
        Self::check(fields)
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &String, Option<&Cid>)> {
        self.fields
            .iter()
            .zip(&self.cids)
            .map(|((f, v), c)| (f, v, c.as_ref()))
    }
}

/// Where a write lands, as resolved inside its transaction.
struct Landing {
    rid: Rid,
    /// The record existed before this write.
    existed: bool,
    /// Rows of the record the resolution itself changed (the member of a
    /// new CID).
    changed: u64,
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
                put_field(tx, rid, &format!("{CIDS_PREFIX}{cid}"), "true", Some(cid))?;
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

/// Writes one field (already checked) and keeps the alias of a member.
fn put_field(
    tx: &mut Tx<'_>,
    rid: Rid,
    field: &str,
    value: &str,
    cid: Option<&Cid>,
) -> Result<bool> {
    put_field_at(tx, &record_start(rid), rid, field, value, cid)
}

/// [`put_field`] with the record's key prefix (`file:<rid>/`) already
/// formatted, for writes of many fields.
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

/// Deletes one field, retracting the alias of a member this root owns.
/// Returns the rows removed (0, 1, or 2 with the alias).
fn delete_field_row(tx: &mut Tx<'_>, rid: Rid, field: &str) -> Result<u64> {
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
fn ensure_root(tx: &mut Tx<'_>, rid: Rid) -> Result<bool> {
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
pub fn replace(tx: &mut Tx<'_>, target: &Target, fields: &CheckedFields) -> Result<WriteResult> {
    let landing = resolve_for_write(tx, target)?;
    let rid = landing.rid;
    let mut changed = landing.changed;
    for old in field_names(tx, rid)? {
        if !fields.fields.contains_key(&old) && delete_field_row(tx, rid, &old)? > 0 {
            changed += 1;
        }
    }
    let prefix = record_start(rid);
    for (f, v, cid) in fields.iter() {
        if put_field_at(tx, &prefix, rid, f, v, cid)? {
            changed += 1;
        }
    }
    let exists = settle_root(tx, rid)?;
    Ok(WriteResult {
        rid,
        created: exists && !landing.existed,
        changed,
    })
}

/// `PATCH`: the fields are set, the others kept.
pub fn merge(tx: &mut Tx<'_>, target: &Target, fields: &CheckedFields) -> Result<WriteResult> {
    let landing = resolve_for_write(tx, target)?;
    let rid = landing.rid;
    let mut changed = landing.changed;
    let prefix = record_start(rid);
    for (f, v, cid) in fields.iter() {
        if put_field_at(tx, &prefix, rid, f, v, cid)? {
            changed += 1;
        }
    }
    // A merge only adds: a record that existed still does, and one that
    // got a field now exists.
    let exists = landing.existed || landing.changed > 0 || !fields.fields.is_empty();
    if exists && !landing.existed {
        ensure_root(tx, rid)?;
    }
    Ok(WriteResult {
        rid,
        created: exists && !landing.existed,
        changed,
    })
}

/// Sets one field.
pub fn set_field(tx: &mut Tx<'_>, target: &Target, field: &str, value: &str) -> Result<FieldWrite> {
    let cid = check_write(field, value).map_err(ApiError::from)?;
    let landing = resolve_for_write(tx, target)?;
    let changed = put_field(tx, landing.rid, field, value, cid.as_ref())?;
    ensure_root(tx, landing.rid)?;
    Ok(FieldWrite {
        rid: landing.rid,
        field: field.to_owned(),
        created: !landing.existed,
        changed,
    })
}

/// Deletes one field; the root leaves the index with its last field.
pub fn delete_field(tx: &mut Tx<'_>, target: &Target, field: &str) -> Result<FieldDelete> {
    check_shape(field).map_err(ApiError::from)?;
    let rid = resolve_existing(tx, target)?;
    let existed = delete_field_row(tx, rid, field)? > 0;
    drop_root_if_empty(tx, rid)?;
    Ok(FieldDelete {
        rid,
        field: field.to_owned(),
        existed,
    })
}

/// Adds `value` to the pipe-delimited set held by one field.
pub fn set_add(tx: &mut Tx<'_>, target: &Target, field: &str, value: &str) -> Result<SetAdd> {
    check_write(field, value).map_err(ApiError::from)?;
    if cid_index::member_cid(field).is_some() {
        return Err(schema(
            "cids/ members are a key-set: write cids/<cid> = \"true\" instead",
        ));
    }
    if value.is_empty() {
        return Err(schema("a set member is required"));
    }
    if value.contains('|') {
        return Err(schema(
            "a set member cannot contain '|', the set's separator",
        ));
    }
    let rid = resolve_for_write(tx, target)?.rid;
    let key = field_key(rid, field);
    let current = tx.get(&key)?.unwrap_or_default();
    let mut members: Vec<&str> = current.split('|').filter(|m| !m.is_empty()).collect();
    let added = !members.contains(&value);
    if added {
        members.push(value);
        tx.put_record_key(&key, &members.join("|"))?;
        ensure_root(tx, rid)?;
    }
    Ok(SetAdd {
        rid,
        field: field.to_owned(),
        added,
    })
}

/// Deletes a record: every field (each with its `del` event), the aliases
/// it owns, its duplicates and its index entry.
pub fn delete_root(tx: &mut Tx<'_>, target: &Target) -> Result<Deleted> {
    let rid = resolve_existing(tx, target)?;
    let mut deleted = 0;
    for f in field_names(tx, rid)? {
        deleted += delete_field_row(tx, rid, &f)?;
    }
    deleted += drop_root_if_empty(tx, rid)?;
    Ok(Deleted { rid, deleted })
}

/// A new record for a file: `filePath`, `sizeByte`, `mtimeNano` and its
/// CIDs as members.
pub fn mint(tx: &mut Tx<'_>, body: &MintBody) -> Result<Rid> {
    check_path(&body.file_path)?;
    let rid = Rid::mint();
    put_field(tx, rid, "filePath", &body.file_path, None)?;
    put_field(tx, rid, "sizeByte", &body.size_byte.to_string(), None)?;
    put_field(tx, rid, "mtimeNano", &body.mtime_nano.to_string(), None)?;
    for cid in &body.cids {
        put_field(tx, rid, &format!("{CIDS_PREFIX}{cid}"), "true", Some(cid))?;
    }
    ensure_root(tx, rid)?;
    Ok(rid)
}

/// Adds a CID to a record's key-set and reverse index.
pub fn add_alias(tx: &mut Tx<'_>, target: &Target, cid: &Cid) -> Result<AliasResult> {
    let rid = resolve_for_write(tx, target)?.rid;
    put_field(tx, rid, &format!("{CIDS_PREFIX}{cid}"), "true", Some(cid))?;
    ensure_root(tx, rid)?;
    let owner = cid_index::owner(tx.conn, cid)?.unwrap_or(rid);
    Ok(AliasResult {
        rid,
        cid: cid.clone(),
        owner,
    })
}

fn check_path(path: &str) -> Result<()> {
    if path.is_empty() || path.len() > MAX_PATH_LEN || path.contains('\0') {
        return Err(schema(format!(
            "a path is 1 to {MAX_PATH_LEN} bytes without NUL"
        )));
    }
    Ok(())
}

/// Records another path holding the same content.
pub fn add_duplicate(tx: &mut Tx<'_>, target: &Target, path: &str) -> Result<DuplicateResult> {
    check_path(path)?;
    let rid = resolve_existing(tx, target)?;
    let added = tx.insert_new(&format!("{}{path}", dup_start(rid)), "")?;
    Ok(DuplicateResult {
        rid,
        path: path.to_owned(),
        added,
    })
}

// ---------------------------------------------------------------------------
// Read side
// ---------------------------------------------------------------------------

/// The root a target names, if any record answers to it.
pub fn resolve(conn: &Connection, target: &Target) -> Result<Option<Rid>> {
    let rid = match target {
        Target::Rid(rid) => *rid,
        Target::Cid(cid) => match cid_index::owner(conn, cid)? {
            Some(rid) => rid,
            None => return Ok(None),
        },
    };
    let exists = conn
        .prepare_cached("SELECT 1 FROM kv WHERE k = ?1")?
        .query_row([root_key(rid)], |_| Ok(()))
        .optional()?
        .is_some();
    Ok(exists.then_some(rid))
}

/// The root of a target, or its 404.
pub fn resolve_or_404(conn: &Connection, target: &Target) -> Result<Rid> {
    resolve(conn, target)?.ok_or_else(|| target.not_found().into())
}

/// A record's fields.
pub fn fields(conn: &Connection, rid: Rid) -> Result<Fields> {
    let start = record_start(rid);
    let mut stmt = conn.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2")?;
    let mut rows = stmt.query(params![start, record_end(rid)])?;
    let mut out = Fields::new();
    while let Some(row) = rows.next()? {
        let k: String = row.get(0)?;
        out.insert(k[start.len()..].to_owned(), row.get(1)?);
    }
    Ok(out)
}

/// One field's value.
pub fn field(conn: &Connection, rid: Rid, field: &str) -> Result<Option<String>> {
    crate::kv::get(conn, &field_key(rid, field))
}

/// The record as a document: fields, the CIDs of its key-set, the canonical
/// CID elected by rank, and its duplicate paths.
pub fn document(conn: &Connection, rid: Rid) -> Result<Document> {
    let fields = fields(conn, rid)?;
    let cids: Vec<String> = fields
        .keys()
        .filter_map(|f| cid_index::member_cid(f))
        .map(str::to_owned)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let canonical_cid = canonical(cids.iter().map(String::as_str)).map(str::to_owned);
    let start = dup_start(rid);
    let mut stmt = conn.prepare_cached("SELECT k FROM kv WHERE k >= ?1 AND k < ?2")?;
    let duplicates = stmt
        .query_map(params![start, dup_end(rid)], |r| r.get::<_, String>(0))?
        .map(|k| k.map(|k| k[start.len()..].to_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Document {
        rid,
        fields,
        cids,
        canonical_cid,
        duplicates,
    })
}

/// A page of roots in RID order, strictly after `after`.
pub fn list_roots(conn: &Connection, after: Option<Rid>, limit: u32) -> Result<RootPage> {
    let start = match after {
        Some(r) => root_key(r),
        None => "idx:roots/".to_owned(),
    };
    let mut stmt = conn
        .prepare_cached("SELECT k FROM kv WHERE k > ?1 AND k < 'idx:roots0' ORDER BY k LIMIT ?2")?;
    let keys = stmt
        .query_map(params![start, i64::from(limit) + 1], |r| {
            r.get::<_, String>(0)
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut rids = Vec::with_capacity(keys.len());
    for k in &keys {
        let rid = Rid::parse(&k["idx:roots/".len()..]).map_err(|e| StoreError::Corrupt {
            key: k.clone(),
            detail: e.to_string(),
        })?;
        rids.push(rid);
    }
    let next = if rids.len() > limit as usize {
        rids.truncate(limit as usize);
        rids.last().copied()
    } else {
        None
    };
    Ok(RootPage { rids, next })
}

/// The fields `names` of a page of roots in RID order (absent fields are
/// left out of a row).
pub fn fields_page(
    conn: &Connection,
    names: &[String],
    after: Option<Rid>,
    limit: u32,
) -> Result<FieldsPage> {
    let page = list_roots(conn, after, limit)?;
    let mut rows = Vec::with_capacity(page.rids.len());
    for rid in page.rids {
        let mut fields = Fields::new();
        for name in names {
            if let Some(v) = field(conn, rid, name)? {
                fields.insert(name.clone(), v);
            }
        }
        rows.push(RootFields { rid, fields });
    }
    Ok(FieldsPage {
        rows,
        next: page.next,
    })
}

/// The 404 for a missing field.
pub fn field_not_found(rid: Rid, field: &str) -> StoreError {
    StoreError::Rejected(ApiError::new(
        ErrorCode::NotFound,
        format!("record {rid} has no field {field:?}"),
    ))
}
