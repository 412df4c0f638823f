//! The record methods of [`Store`]: reads on the reader pool, writes on
//! the writer thread, and the operations over many records (import, wipe,
//! totals), each of which runs inside storaged rather than as many socket
//! calls.

use metacore::api::storaged::{
    AliasResult, Deleted, Document, DuplicateResult, FieldDelete, FieldValue, FieldWrite,
    FieldsPage, ImportCounts, ImportOutcome, Imported, MintBody, RecordFields, RootPage, SetAdd,
    Totals, WriteResult,
};
use metacore::checked::{CheckedField, CheckedFields, FieldName, FilePath, SetMember};
use metacore::cid::Cid;
use metacore::error::ApiError;
use metacore::record::Target;
use metacore::rid::Rid;
use rusqlite::Connection;

use super::{Store, in_read_tx};
use crate::bulk::{self, ImportGroup, Incoming};
use crate::engine::tx::Tx;
use crate::error::{Result, StoreError};
use crate::records::{self, PageStart};

impl Store {
    pub async fn replace(&self, target: Target, fields: CheckedFields) -> Result<WriteResult> {
        self.writer
            .write(move |tx| records::replace(tx, &target, &fields))
            .await
    }

    pub async fn merge(&self, target: Target, fields: CheckedFields) -> Result<WriteResult> {
        self.writer
            .write(move |tx| records::merge(tx, &target, &fields))
            .await
    }

    pub async fn set_field(&self, target: Target, field: CheckedField) -> Result<FieldWrite> {
        self.writer
            .write(move |tx| records::set_field(tx, &target, &field))
            .await
    }

    pub async fn delete_field(&self, target: Target, field: FieldName) -> Result<FieldDelete> {
        self.writer
            .write(move |tx| records::delete_field(tx, &target, &field))
            .await
    }

    pub async fn set_add(&self, target: Target, member: SetMember) -> Result<SetAdd> {
        self.writer
            .write(move |tx| records::set_add(tx, &target, &member))
            .await
    }

    pub async fn delete_root(&self, target: Target) -> Result<Deleted> {
        self.writer
            .write(move |tx| records::delete_root(tx, &target))
            .await
    }

    pub async fn mint(&self, body: MintBody) -> Result<Rid> {
        self.writer.write(move |tx| records::mint(tx, &body)).await
    }

    pub async fn add_alias(&self, target: Target, cid: Cid) -> Result<AliasResult> {
        self.writer
            .write(move |tx| records::add_alias(tx, &target, &cid))
            .await
    }

    pub async fn add_duplicate(&self, target: Target, path: FilePath) -> Result<DuplicateResult> {
        self.writer
            .write(move |tx| records::add_duplicate(tx, &target, &path))
            .await
    }

    /// Runs a point read `f` inside one read transaction, so its
    /// statements see one committed state.
    async fn read_tx<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        self.readers.read_now(move |c| in_read_tx(c, f)).await
    }

    pub async fn resolve(&self, target: Target) -> Result<Rid> {
        self.readers
            .read_now(move |c| records::resolve_or_404(c, &target))
            .await
    }

    pub async fn get_record(&self, target: Target) -> Result<RecordFields> {
        self.read_tx(move |c| {
            let rid = records::resolve_or_404(c, &target)?;
            Ok(RecordFields {
                rid,
                fields: records::fields(c, rid)?,
            })
        })
        .await
    }

    pub async fn get_field(&self, target: Target, field: FieldName) -> Result<FieldValue> {
        self.read_tx(move |c| {
            let rid = records::resolve_or_404(c, &target)?;
            match records::field(c, rid, field.as_str())? {
                Some(value) => Ok(FieldValue {
                    rid,
                    field: field.into_string(),
                    value,
                }),
                None => Err(records::field_not_found(rid, field.as_str())),
            }
        })
        .await
    }

    pub async fn document(&self, target: Target) -> Result<Document> {
        self.read_tx(move |c| {
            let rid = records::resolve_or_404(c, &target)?;
            records::document(c, rid)
        })
        .await
    }

    pub async fn list_roots(&self, from: PageStart, limit: u32) -> Result<RootPage> {
        self.readers
            .read(move |c| records::list_roots(c, from, limit))
            .await
    }

    /// Chosen fields of a page of roots, read in one transaction.
    pub async fn fields_page(
        &self,
        names: Vec<FieldName>,
        from: PageStart,
        limit: u32,
    ) -> Result<FieldsPage> {
        // A page reads thousands of rows: on the blocking pool, not inline.
        self.readers
            .read(move |c| in_read_tx(c, |c| records::fields_page(c, &names, from, limit)))
            .await
    }

    /// Counts and sizes over every record, in one read transaction.
    pub async fn totals(&self) -> Result<Totals> {
        self.readers.read(|c| in_read_tx(c, records::totals)).await
    }

    /// Imports a group of records, each checked before it was queued
    /// ([`ImportGroup::check`]). Each record is planned and applied by one
    /// write of its own, which reads the record it meets in the same
    /// savepoint, so one failing record leaves the others be and no write
    /// can slip in between the read and the write; the writes are queued
    /// together and share groups. A dry run plans against one read
    /// transaction. One outcome a record, in order.
    pub async fn import(&self, group: ImportGroup) -> Result<Imported> {
        let ImportGroup {
            mode,
            conflict,
            dry_run,
            records: incoming,
        } = group;
        let rids: Vec<Rid> = incoming.iter().map(Incoming::rid).collect();
        let results: Vec<Result<ImportCounts>> = if dry_run {
            self.readers
                .read(move |c| {
                    in_read_tx(c, |c| {
                        incoming
                            .iter()
                            .map(|r| {
                                let current = records::fields(c, r.rid())?;
                                Ok(bulk::plan(&current, r, mode, conflict).map(|(n, _)| n))
                            })
                            .collect::<Result<Vec<_>>>()
                    })
                })
                .await?
                .into_iter()
                .map(|r| r.map_err(StoreError::from))
                .collect()
        } else {
            let ops = incoming
                .into_iter()
                .map(|r| move |tx: &mut Tx<'_>| bulk::import_record(tx, &r, mode, conflict))
                .collect();
            self.writer.write_all(ops).await
        };
        let records = rids
            .into_iter()
            .zip(results)
            .map(|(rid, result)| match result {
                Ok(counts) => ImportOutcome {
                    rid,
                    counts,
                    error: None,
                },
                Err(e) => ImportOutcome {
                    rid,
                    counts: ImportCounts::default(),
                    error: Some(ApiError::from(e).to_string()),
                },
            })
            .collect();
        Ok(Imported { records })
    }

    /// Deletes every record, a chunk a write ([`bulk::wipe_chunk`]), until
    /// none is left; returns the records deleted.
    pub async fn wipe(&self) -> Result<u64> {
        let mut deleted = 0;
        loop {
            let (n, left) = self.writer.write(bulk::wipe_chunk).await?;
            deleted += n;
            if !left {
                return Ok(deleted);
            }
        }
    }
}
