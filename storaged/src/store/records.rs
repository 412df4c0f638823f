//! The record methods of [`Store`]: reads on the reader pool, writes on
//! the writer thread, and the operations over many records (import, wipe,
//! totals), each of which runs inside storaged rather than as many socket
//! calls.

use metacore::api::storaged::{
    AliasResult, Deleted, Document, DuplicateResult, FieldDelete, FieldValue, FieldWrite,
    FieldsPage, ImportBody, ImportCounts, ImportOutcome, Imported, MAX_IMPORT_GROUP, MintBody,
    RecordFields, RootPage, SetAdd, Totals, WriteResult,
};
use metacore::checked::{CheckedField, CheckedFields, FieldName, FilePath, SetMember};
use metacore::cid::Cid;
use metacore::error::ApiError;
use metacore::record::Target;
use metacore::rid::Rid;
use rusqlite::Connection;

use super::{Store, in_read_tx};
use crate::bulk::{self, WIPE_CHUNK};
use crate::engine::tx::Tx;
use crate::error::{Result, schema};
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

    /// Imports a group of records. Each record's fields are checked before
    /// anything is queued (a bad one fails alone, with its reason); each
    /// good one is planned and applied by one write of its own, which reads
    /// the record it meets in the same savepoint, so one failing record
    /// leaves the others be and no write can slip in between the read and
    /// the write. A dry run plans against one read transaction.
    pub async fn import(&self, body: ImportBody) -> Result<Imported> {
        if body.records.len() > MAX_IMPORT_GROUP {
            return Err(schema(format!(
                "an import group is at most {MAX_IMPORT_GROUP} records"
            )));
        }
        let (mode, conflict) = (body.mode, body.conflict);
        let mut outcomes = Vec::with_capacity(body.records.len());
        // The records that passed their checks, and where each stands.
        let (mut at, mut good) = (Vec::new(), Vec::new());
        for (i, r) in body.records.into_iter().enumerate() {
            let mut outcome = ImportOutcome {
                rid: r.rid,
                counts: ImportCounts::default(),
                error: None,
            };
            match CheckedFields::check(r.fields) {
                Ok(fields) => {
                    at.push(i);
                    good.push((r.rid, fields));
                }
                Err(e) => outcome.error = Some(e.to_string()),
            }
            outcomes.push(outcome);
        }
        let results: Vec<Result<ImportCounts>> = if body.dry_run {
            let planned = self
                .readers
                .read(move |c| {
                    in_read_tx(c, |c| {
                        good.iter()
                            .map(|(rid, fields)| {
                                let current = records::fields(c, *rid)?;
                                Ok(bulk::plan(&current, fields, mode, conflict).0)
                            })
                            .collect::<Result<Vec<_>>>()
                    })
                })
                .await?;
            planned.into_iter().map(Ok).collect()
        } else {
            let ops = good
                .into_iter()
                .map(|(rid, fields)| {
                    move |tx: &mut Tx<'_>| bulk::import_record(tx, rid, &fields, mode, conflict)
                })
                .collect();
            self.writer.write_all(ops).await
        };
        for (i, result) in at.into_iter().zip(results) {
            match result {
                Ok(counts) => outcomes[i].counts = counts,
                Err(e) => outcomes[i].error = Some(ApiError::from(e).to_string()),
            }
        }
        Ok(Imported { records: outcomes })
    }

    /// Deletes every record, [`WIPE_CHUNK`] roots a write, until a write
    /// finds fewer than a chunk left; returns the records deleted.
    pub async fn wipe(&self) -> Result<u64> {
        let mut deleted = 0;
        loop {
            let n = self.writer.write(bulk::wipe_chunk).await?;
            deleted += n;
            if n < u64::from(WIPE_CHUNK) {
                return Ok(deleted);
            }
        }
    }
}
