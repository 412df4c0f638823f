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
    /// for it), and answers the schema it gives.
    pub async fn rescan_schema(&self) -> Result<SchemaRescanned> {
        self.writer
            .write(|tx| {
                let values = crate::schema::counts::rescan(tx)?;
                Ok(SchemaRescanned {
                    values,
                    fields: crate::schema::counts::schema(tx.conn)?,
                })
            })
            .await
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
