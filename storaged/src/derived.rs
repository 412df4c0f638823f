//! The rows storaged derives from its records: the search index and the
//! schema counters. Built (or checked) when the store opens, then kept up
//! to date by every write group through [`Derive`]; a second engine
//! reuses the same derivation.

use std::collections::BTreeMap;
use std::sync::Arc;

use metacore::record::Fields;
use metacore::rid::Rid;
use rusqlite::Connection;

use crate::engine::derive::Derive;
use crate::error::Result;

/// The search index and the schema counters of a store, for the search
/// the store serves (`exclude`: the field prefixes search does not see).
#[derive(Debug)]
pub(crate) struct SearchAndSchema {
    exclude: Arc<[String]>,
}

impl SearchAndSchema {
    /// At open: builds the index and the counters where they are missing,
    /// out of date, or were left stale.
    pub(crate) fn open(conn: &Connection, exclude: &[String]) -> Result<Self> {
        let rebuilt = crate::search::index::ensure(conn, exclude)?;
        crate::schema::counts::ensure(conn, rebuilt)?;
        Ok(Self {
            exclude: exclude.into(),
        })
    }
}

impl Derive for SearchAndSchema {
    fn fields(&self, conn: &Connection, rid: Rid) -> Result<Fields> {
        crate::records::fields(conn, rid)
    }

    fn apply(&self, conn: &Connection, touched: BTreeMap<Rid, Fields>) -> Result<()> {
        let mut deltas = BTreeMap::new();
        for (rid, before) in touched {
            let after = crate::records::fields(conn, rid)?;
            crate::schema::counts::changes(&before, &after, &mut deltas);
            let exists = !after.is_empty();
            crate::search::index::refresh(
                conn,
                rid,
                crate::search::visible(after, &self.exclude),
                exists,
                &self.exclude,
            )?;
        }
        crate::schema::counts::apply(conn, &deltas)
    }

    fn mark_stale(&self, conn: &Connection) -> Result<()> {
        crate::search::index::mark_stale(conn)
    }
}
