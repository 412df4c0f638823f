//! The engine's own reads of raw rows, below every domain module.

use rusqlite::{Connection, OptionalExtension};

use crate::error::Result;

/// A key's value.
pub(crate) fn get(conn: &Connection, key: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT v FROM kv WHERE k = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}
