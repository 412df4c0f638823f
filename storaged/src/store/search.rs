//! The search method of [`Store`].

use metacore::api::storaged::{SchemaFields, SchemaRescanned, SearchPage, SearchQuery};

use super::Store;
use crate::error::Result;
use crate::search;

impl Store {
    /// Records passing `q`, in RID order, read in one read transaction.
    pub async fn search(&self, q: SearchQuery) -> Result<SearchPage> {
        let exclude = self.exclude.clone();
        if !self.indexed {
            return self.search_by_scan(q).await;
        }
        self.readers
            .read(move |c| search::search(c, &q, &exclude))
            .await
    }

    /// The schema of every counted field path.
    pub async fn schema(&self) -> Result<SchemaFields> {
        self.readers
            .read(|c| {
                Ok(SchemaFields {
                    fields: crate::schema::counts::schema(c)?,
                })
            })
            .await
    }

    /// Counts every stored value again, in one write (the writer waits
    /// for it), and answers the schema it gives. One at a time: while a
    /// rescan is queued, running or committing, another is refused with a
    /// 409 `conflict`. The turn travels with the write and comes back with
    /// its answer after COMMIT (or is dropped with a write that failed or
    /// never ran), so it ends with the write, even if this caller stopped
    /// waiting.
    pub async fn rescan_schema(&self) -> Result<SchemaRescanned> {
        let turn = self.rescans.begin()?;
        let (rescanned, _turn) = self
            .writer
            .write(move |tx| {
                let values = crate::schema::counts::rescan(tx)?;
                let fields = crate::schema::counts::schema(tx.conn)?;
                Ok((SchemaRescanned { values, fields }, turn))
            })
            .await?;
        Ok(rescanned)
    }

    /// The same answer by a scan of every record, without the index: the
    /// reference that tests and benchmarks hold the index to.
    pub async fn search_by_scan(&self, q: SearchQuery) -> Result<SearchPage> {
        let exclude = self.exclude.clone();
        self.readers
            .read(move |c| search::scan(c, &q, &exclude))
            .await
    }
}

#[cfg(test)]
#[path = "search_test.rs"]
mod tests;
