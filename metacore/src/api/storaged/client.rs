//! The typed client of storaged's socket. Every method takes typed
//! addresses ([`Target`]) and checked inputs ([`crate::checked`],
//! [`crate::key`]), so what a caller sends has been parsed and checked once,
//! where it entered; storaged decodes the same types on its side.

use std::path::Path;

use bytes::Bytes;
use futures_util::Stream;
use http::Method;
use http_body_util::BodyExt;
use serde::Serialize;

use super::backup::*;
use super::search::*;
use super::watch::*;
use super::wire::*;
use crate::checked::{CheckedEntry, CheckedField, CheckedFields, FieldName, FilePath, SetMember};
use crate::cid::Cid;
use crate::error::ApiError;
use crate::key::{KeyWrite, WritableKey};
use crate::layout::Daemon;
use crate::record::Target;
use crate::rid::Rid;
use crate::socket::Health;
use crate::socket::client::{ClientError, SocketClient};
use crate::stream::{Entry, StreamId, StreamName};

/// `/records/{target}/{kind}/{field}`, the field percent-encoded segment by
/// segment (its `/` stay separators).
fn field_route(target: &Target, kind: &str, field: &str) -> String {
    let field: Vec<String> = field.split('/').map(encode_component).collect();
    format!("/records/{target}/{kind}/{}", field.join("/"))
}

fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn query<T: Serialize>(q: &T) -> Result<String, ClientError> {
    serde_urlencoded::to_string(q)
        .map_err(|e| ClientError::Api(ApiError::bad_request(e.to_string())))
}

/// The body of a replace or a merge, borrowed.
#[derive(Serialize)]
struct FieldsOf<'a> {
    fields: &'a CheckedFields,
}

/// A typed client of storaged's socket.
#[derive(Debug, Clone)]
pub struct StoragedClient {
    inner: SocketClient,
}

impl StoragedClient {
    pub fn new(socket: &Path) -> Self {
        Self {
            inner: SocketClient::new(Daemon::Storaged.name(), socket),
        }
    }

    pub fn socket(&self) -> &SocketClient {
        &self.inner
    }

    pub async fn health(&self) -> Result<Health, ClientError> {
        self.inner.get("/health").await
    }

    /// `/health`, refusing a storaged that speaks another socket protocol
    /// with a sentence an operator can act on (call once per connection).
    pub async fn handshake(&self) -> Result<Health, ClientError> {
        self.inner.handshake().await
    }

    pub async fn status(&self) -> Result<StoragedStatus, ClientError> {
        self.inner.get("/status").await
    }

    /// `GET /metrics`: this daemon's metrics, OpenMetrics text
    /// ([`crate::metrics`]).
    pub async fn metrics(&self) -> Result<String, ClientError> {
        self.inner.get_text("/metrics").await
    }

    pub async fn stats(&self) -> Result<Stats, ClientError> {
        self.inner.get("/stats").await
    }

    /// Figures over every record, in one read transaction.
    pub async fn totals(&self) -> Result<Totals, ClientError> {
        self.inner.get("/records/totals").await
    }

    pub async fn resolve(&self, target: &Target) -> Result<Rid, ClientError> {
        let r: RidBody = self.inner.get(&format!("/resolve/{target}")).await?;
        Ok(r.rid)
    }

    pub async fn list_roots(&self, q: &PageQuery) -> Result<RootPage, ClientError> {
        self.inner.get(&format!("/records?{}", query(q)?)).await
    }

    pub async fn fields_page(&self, q: &FieldsPageQuery) -> Result<FieldsPage, ClientError> {
        self.inner
            .get(&format!("/records/fields?{}", query(q)?))
            .await
    }

    /// The schema of every counted field path.
    pub async fn schema(&self) -> Result<SchemaFields, ClientError> {
        self.inner.get("/schema").await
    }

    /// Rebuilds the schema counters from every stored value.
    pub async fn rescan_schema(&self) -> Result<SchemaRescanned, ClientError> {
        self.inner
            .call::<(), _>(Method::POST, "/schema/rescan", None)
            .await
    }

    /// Records passing a search, in RID order.
    pub async fn search(&self, q: &SearchQuery) -> Result<SearchPage, ClientError> {
        self.inner.call(Method::POST, "/search", Some(q)).await
    }

    pub async fn get_record(&self, target: &Target) -> Result<RecordFields, ClientError> {
        self.inner.get(&format!("/records/{target}")).await
    }

    pub async fn document(&self, target: &Target) -> Result<Document, ClientError> {
        self.inner.get(&format!("/records/{target}/document")).await
    }

    /// Replaces the record's fields with `fields`.
    pub async fn replace(
        &self,
        target: &Target,
        fields: &CheckedFields,
    ) -> Result<WriteResult, ClientError> {
        self.write_fields(Method::PUT, target, fields).await
    }

    /// Merges `fields` into the record.
    pub async fn merge(
        &self,
        target: &Target,
        fields: &CheckedFields,
    ) -> Result<WriteResult, ClientError> {
        self.write_fields(Method::PATCH, target, fields).await
    }

    pub async fn delete_record(&self, target: &Target) -> Result<Deleted, ClientError> {
        let path = format!("/records/{target}");
        self.inner.call::<(), _>(Method::DELETE, &path, None).await
    }

    pub async fn get_field(
        &self,
        at: &Target,
        field: &FieldName,
    ) -> Result<FieldValue, ClientError> {
        let path = field_route(at, "fields", field.as_str());
        self.inner.get(&path).await
    }

    pub async fn set_field(
        &self,
        target: &Target,
        field: &CheckedField,
    ) -> Result<FieldWrite, ClientError> {
        let path = field_route(target, "fields", field.name());
        self.send_value(Method::PUT, &path, field.value()).await
    }

    pub async fn delete_field(
        &self,
        at: &Target,
        field: &FieldName,
    ) -> Result<FieldDelete, ClientError> {
        let path = field_route(at, "fields", field.as_str());
        self.inner.call::<(), _>(Method::DELETE, &path, None).await
    }

    pub async fn set_add(
        &self,
        target: &Target,
        member: &SetMember,
    ) -> Result<SetAdd, ClientError> {
        let path = field_route(target, "set-add", member.field());
        self.send_value(Method::POST, &path, member.value()).await
    }

    pub async fn add_alias(&self, target: &Target, cid: &Cid) -> Result<AliasResult, ClientError> {
        let body = AliasBody { cid: cid.clone() };
        let path = format!("/records/{target}/aliases");
        self.inner.call(Method::POST, &path, Some(&body)).await
    }

    pub async fn add_duplicate(
        &self,
        target: &Target,
        path: &FilePath,
    ) -> Result<DuplicateResult, ClientError> {
        let body = DuplicateBody {
            path: path.as_str().to_owned(),
        };
        let route = format!("/records/{target}/duplicates");
        self.inner.call(Method::POST, &route, Some(&body)).await
    }

    pub async fn mint(&self, body: &MintBody) -> Result<Rid, ClientError> {
        let r: RidBody = self.inner.call(Method::POST, "/mint", Some(body)).await?;
        Ok(r.rid)
    }

    /// Imports a group of at most [`MAX_IMPORT_GROUP`] records; one outcome
    /// a record, in order.
    pub async fn import(&self, body: &ImportBody) -> Result<Imported, ClientError> {
        self.inner
            .call(Method::POST, "/records/import", Some(body))
            .await
    }

    /// Deletes every record.
    pub async fn wipe(&self) -> Result<Wiped, ClientError> {
        self.inner
            .call::<(), _>(Method::POST, "/records/wipe", None)
            .await
    }

    /// Copies the live database to `req.path` (`POST /backup`); answers
    /// once the copy is durable, checked and in place, which takes about
    /// as long as reading the whole database: callers wait long for it.
    pub async fn backup(&self, req: &BackupRequest) -> Result<BackupDone, ClientError> {
        self.inner.call(Method::POST, "/backup", Some(req)).await
    }

    /// Sends `{"fields": ...}` to `/records/{target}`.
    async fn write_fields(
        &self,
        method: Method,
        target: &Target,
        fields: &CheckedFields,
    ) -> Result<WriteResult, ClientError> {
        let path = format!("/records/{target}");
        self.inner
            .call(method, &path, Some(&FieldsOf { fields }))
            .await
    }

    /// Sends `{"value": value}` to a single-field route.
    async fn send_value<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        value: &str,
    ) -> Result<T, ClientError> {
        let body = ValueBody {
            value: value.to_owned(),
        };
        self.inner.call(method, path, Some(&body)).await
    }

    pub async fn kv_get(&self, key: &str) -> Result<Option<String>, ClientError> {
        let q = query(&KeyQuery {
            key: key.to_owned(),
        })?;
        let v: KvValue = self.inner.get(&format!("/kv/value?{q}")).await?;
        Ok(v.value)
    }

    pub async fn kv_put(&self, write: &KeyWrite) -> Result<KvWrite, ClientError> {
        let body = KvPut {
            key: write.key(),
            value: write.value().to_owned(),
        };
        self.inner.call(Method::PUT, "/kv/value", Some(&body)).await
    }

    pub async fn kv_delete(&self, key: &WritableKey) -> Result<KvDeleted, ClientError> {
        let q = query(&KeyQuery { key: key.key() })?;
        self.inner
            .call::<(), _>(Method::DELETE, &format!("/kv/value?{q}"), None)
            .await
    }

    pub async fn kv_range(&self, q: &RangeQuery) -> Result<KvRange, ClientError> {
        self.inner.get(&format!("/kv/range?{}", query(q)?)).await
    }

    pub async fn kv_tree(&self, q: &KvTreeQuery) -> Result<KvTreePage, ClientError> {
        self.inner.get(&format!("/kv/tree?{}", query(q)?)).await
    }

    /// Applies what the watcher observed, each observation in its own
    /// savepoint (one refused leaves the others be); one outcome each, in
    /// order. At most [`MAX_OBSERVATIONS`] a call.
    pub async fn observe(&self, body: &ObserveBody) -> Result<Observed, ClientError> {
        self.inner
            .call(Method::POST, "/files/observe", Some(body))
            .await
    }

    /// A page of the watcher's `seen:` rows, in path order.
    pub async fn seen(&self, q: &SeenQuery) -> Result<SeenPage, ClientError> {
        self.inner.get(&format!("/files/seen?{}", query(q)?)).await
    }

    /// Forgets what was seen under some folders and starts `file:events`
    /// over with a `reset` entry, in one transaction.
    pub async fn reset_files(&self, body: &ResetBody) -> Result<ResetDone, ClientError> {
        self.inner
            .call(Method::POST, "/files/reset", Some(body))
            .await
    }

    /// One page of the repair of records whose `filePath` names no live
    /// file (at most [`REPAIR_PAGE`] records, one transaction).
    pub async fn repair_files(&self, body: &RepairBody) -> Result<RepairDone, ClientError> {
        self.inner
            .call(Method::POST, "/files/repair", Some(body))
            .await
    }

    pub async fn append(&self, entry: &CheckedEntry) -> Result<StreamId, ClientError> {
        let body = AppendBody {
            fields: entry.fields().clone(),
        };
        let path = format!("/streams/{}/entries", entry.stream());
        let r: Appended = self.inner.call(Method::POST, &path, Some(&body)).await?;
        Ok(r.id)
    }

    pub async fn entries(
        &self,
        stream: StreamName,
        q: &EntriesQuery,
    ) -> Result<Vec<Entry>, ClientError> {
        Ok(self.entries_page(stream, q).await?.entries)
    }

    /// A page of entries, and the oldest entry kept when it was read.
    pub async fn entries_page(
        &self,
        stream: StreamName,
        q: &EntriesQuery,
    ) -> Result<Entries, ClientError> {
        let path = format!("/streams/{stream}/entries?{}", query(q)?);
        self.inner.get(&path).await
    }

    /// The oldest entry kept and the head, without counting.
    pub async fn stream_bounds(&self, stream: StreamName) -> Result<StreamBounds, ClientError> {
        self.inner.get(&format!("/streams/{stream}/bounds")).await
    }

    pub async fn stream_info(&self, stream: StreamName) -> Result<StreamInfo, ClientError> {
        self.inner.get(&format!("/streams/{stream}/info")).await
    }

    /// Follows a stream: entries after `after` (or new ones only), as they
    /// are committed, until the connection ends.
    pub async fn tail(
        &self,
        stream: StreamName,
        after: Option<StreamId>,
    ) -> Result<impl Stream<Item = Result<Entry, ClientError>> + use<>, ClientError> {
        let q = query(&TailQuery { after })?;
        let resp = self
            .inner
            .send(Method::GET, &format!("/streams/{stream}/tail?{q}"), None)
            .await?;
        Ok(ndjson_lines(resp.into_body()))
    }
}

/// Splits a streamed body into newline-delimited JSON entries.
fn ndjson_lines(body: hyper::body::Incoming) -> impl Stream<Item = Result<Entry, ClientError>> {
    futures_util::stream::unfold(
        (body, Vec::<u8>::new(), false),
        |(mut body, mut buf, done)| async move {
            loop {
                if let Some(pos) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    if line.len() == 1 {
                        // A heartbeat.
                        continue;
                    }
                    let item =
                        serde_json::from_slice::<Entry>(&line[..line.len() - 1]).map_err(|e| {
                            ClientError::Protocol {
                                daemon: Daemon::Storaged.name().into(),
                                status: http::StatusCode::OK,
                                detail: e.to_string(),
                            }
                        });
                    return Some((item, (body, buf, done)));
                }
                if done {
                    return None;
                }
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            let data: Bytes = data;
                            buf.extend_from_slice(&data);
                        }
                    }
                    Some(Err(e)) => {
                        let err = ClientError::Protocol {
                            daemon: Daemon::Storaged.name().into(),
                            status: http::StatusCode::OK,
                            detail: e.to_string(),
                        };
                        return Some((Err(err), (body, Vec::new(), true)));
                    }
                    None => return None,
                }
            }
        },
    )
}
