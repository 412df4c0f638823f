//! The CID reverse index: `cid:<cid> → <rid>`, kept in step with each
//! record's `cids/<cid>` key-set in the same transaction.
//!
//! - Writing a member registers the alias unless another root owns it (the
//!   first owner keeps it; the member is still written).
//! - Deleting a member removes the alias only when this root owns it.
//! - The canonical CID is never stored: [`metacore::cid::canonical`] elects
//!   it from the members on read.

use metacore::cid::Cid;
use metacore::record::{CIDS_PREFIX, alias_key};
use metacore::rid::Rid;
use rusqlite::Connection;

use crate::engine::tx::Tx;
use crate::error::{Result, StoreError};

/// Registers `cid → rid` unless the CID already has an owner. Returns
/// whether this call registered it.
pub(crate) fn register(tx: &Tx<'_>, cid: &Cid, rid: Rid) -> Result<bool> {
    tx.insert_new(&alias_key(cid.as_str()), &rid.to_string())
}

/// Removes `cid → rid` if (and only if) `rid` owns it.
pub(crate) fn retract(tx: &Tx<'_>, cid: &str, rid: Rid) -> Result<bool> {
    tx.delete_if(&alias_key(cid), &rid.to_string())
}

/// The CID of a member key's field name, when it is one. Members written
/// before validation existed may not parse; they are still retracted.
pub(crate) fn member_cid(field: &str) -> Option<&str> {
    field
        .strip_prefix(CIDS_PREFIX)
        .filter(|c| !c.is_empty() && !c.contains('/'))
}

fn parse_owner(key: &str, v: &str) -> Result<Rid> {
    Rid::parse(v).map_err(|e| StoreError::Corrupt {
        key: key.to_owned(),
        detail: e.to_string(),
    })
}

/// The owner of a CID (a reader connection, or the writer's `tx.conn`).
pub(crate) fn owner(conn: &Connection, cid: &Cid) -> Result<Option<Rid>> {
    let key = alias_key(cid.as_str());
    crate::kv::get(conn, &key)?
        .map(|v| parse_owner(&key, &v))
        .transpose()
}
