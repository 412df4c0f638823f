//! storaged's socket API: request and response types of every route, and a
//! typed client over [`SocketClient`]. The routes are listed in
//! `docs/storaged-api.md`.

use std::path::Path;

use bytes::Bytes;
use futures_util::Stream;
use http::Method;
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};

use crate::cid::Cid;
use crate::error::ApiError;
use crate::record::Fields;
use crate::rid::Rid;
use crate::socket::Health;
use crate::socket::client::{ClientError, SocketClient};
use crate::stream::{Entry, EntryFields, StreamId, StreamName};

/// Largest page any listing returns.
pub const MAX_PAGE: u32 = 10_000;

/// `PUT` / `PATCH /records/{hash}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldsBody {
    pub fields: Fields,
}

/// The answer to a record write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteResult {
    pub rid: Rid,
    /// The write made the record (a new RID or an unregistered CID).
    pub created: bool,
    /// Rows of the record that changed (set to a new value or deleted).
    pub changed: u64,
}

/// `GET /records/{hash}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFields {
    pub rid: Rid,
    pub fields: Fields,
}

/// `GET /records/{hash}/document`: the record with its CIDs hoisted, the
/// canonical CID derived by rank, and its duplicate paths.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Document {
    pub rid: Rid,
    pub fields: Fields,
    pub cids: Vec<String>,
    pub canonical_cid: Option<String>,
    pub duplicates: Vec<String>,
}

/// `DELETE /records/{hash}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted {
    pub rid: Rid,
    /// Rows removed: fields, aliases, duplicates, index entries.
    pub deleted: u64,
}

/// `GET /records?after=&limit=`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootPage {
    pub rids: Vec<Rid>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<Rid>,
}

/// `GET /records/fields?names=a,b&after=&limit=`: chosen fields of a page
/// of roots, for listings that need a few fields of every record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldsPageQuery {
    /// Comma-separated field names (at most [`MAX_FIELDS_PER_PAGE`]).
    pub names: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Most field names one `GET /records/fields` may ask for.
pub const MAX_FIELDS_PER_PAGE: usize = 32;

/// One root of a [`FieldsPage`]: the asked fields it has (absent ones are
/// left out).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootFields {
    pub rid: Rid,
    pub fields: Fields,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldsPage {
    pub rows: Vec<RootFields>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<Rid>,
}

/// `PUT /records/{hash}/fields/{field}` and `POST .../set-add/{field}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValueBody {
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldValue {
    pub rid: Rid,
    pub field: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldWrite {
    pub rid: Rid,
    pub field: String,
    pub created: bool,
    pub changed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDelete {
    pub rid: Rid,
    pub field: String,
    pub existed: bool,
}

/// `POST /records/{hash}/set-add/{field}`: the field holds `a|b|c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAdd {
    pub rid: Rid,
    pub field: String,
    pub added: bool,
}

/// `POST /records/{hash}/aliases`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasBody {
    pub cid: Cid,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AliasResult {
    pub rid: Rid,
    pub cid: Cid,
    /// Who owns `cid:<cid>` after the write: the first writer keeps it.
    pub owner: Rid,
}

/// `POST /records/{hash}/duplicates`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateBody {
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DuplicateResult {
    pub rid: Rid,
    pub path: String,
    pub added: bool,
}

/// `POST /mint`: a new record for a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MintBody {
    pub file_path: String,
    pub size_byte: u64,
    pub mtime_nano: u64,
    #[serde(default)]
    pub cids: Vec<Cid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RidBody {
    pub rid: Rid,
}

/// `GET /kv/value?key=` and `DELETE /kv/value?key=`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyQuery {
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvValue {
    pub key: String,
    pub value: Option<String>,
}

/// `PUT /kv/value`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvPut {
    pub key: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvWrite {
    pub key: String,
    pub changed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvDeleted {
    pub key: String,
    pub existed: bool,
}

/// `GET /kv/range`: rows with `start <= k < end` (or under `prefix`),
/// strictly after `after`, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RangeQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(default)]
    pub keys_only: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRow {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvRange {
    pub rows: Vec<KvRow>,
    /// Pass as `after` for the next page; absent on the last page.
    pub next: Option<String>,
}

/// `POST /streams/{stream}/entries`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendBody {
    pub fields: EntryFields,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    pub id: StreamId,
}

/// `GET /streams/{stream}/entries?after=&limit=`: entries strictly after
/// `after` (from the oldest when absent).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntriesQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<StreamId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entries {
    pub entries: Vec<Entry>,
}

/// `GET /streams/{stream}/info`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamInfo {
    pub stream: String,
    /// Oldest entry still kept.
    pub first: Option<StreamId>,
    /// Last ID ever issued (the high-water mark), kept even when trimmed.
    pub last: Option<StreamId>,
    pub length: u64,
}

/// `GET /streams/{stream}/tail?after=`: newline-delimited JSON entries,
/// strictly after `after` (from the head, new entries only, when absent),
/// for as long as the connection lasts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<StreamId>,
}

/// `GET /stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub roots: u64,
    /// Rows of the kv table, counted at `keys_counted_at_ms` (a count of a
    /// large table is cached for a minute).
    pub keys: u64,
    pub keys_counted_at_ms: u64,
    /// Database file plus its WAL, in bytes.
    pub db_bytes: u64,
}

/// Counters of the writer thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WriterStats {
    pub batches: u64,
    pub writes: u64,
    pub failed_writes: u64,
    pub failed_commits: u64,
    pub largest_batch: u64,
    pub queued: u64,
}

/// `GET /status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoragedStatus {
    pub daemon: String,
    pub version: String,
    pub pid: u32,
    pub uptime_secs: u64,
    pub db_path: String,
    pub schema_version: String,
    pub readers: u32,
    pub roots: u64,
    pub db_bytes: u64,
    pub writer: WriterStats,
}

/// The `{hash}` path segment: RIDs and CIDs are URL-safe as they are.
fn seg(hash: &str) -> &str {
    hash
}

/// Percent-encodes a field path for the URL, keeping `/` as separators.
fn field_path(field: &str) -> String {
    field
        .split('/')
        .map(encode_component)
        .collect::<Vec<_>>()
        .join("/")
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

/// A typed client of storaged's socket.
#[derive(Debug, Clone)]
pub struct StoragedClient {
    inner: SocketClient,
}

impl StoragedClient {
    pub fn new(socket: &Path) -> Self {
        Self {
            inner: SocketClient::new("storaged", socket),
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
        let health = self.health().await?;
        match health.mismatch() {
            None => Ok(health),
            Some(why) => Err(ClientError::Protocol {
                daemon: "storaged".into(),
                status: http::StatusCode::OK,
                detail: why,
            }),
        }
    }

    pub async fn status(&self) -> Result<StoragedStatus, ClientError> {
        self.inner.get("/status").await
    }

    pub async fn stats(&self) -> Result<Stats, ClientError> {
        self.inner.get("/stats").await
    }

    pub async fn resolve(&self, hash: &str) -> Result<Rid, ClientError> {
        let r: RidBody = self.inner.get(&format!("/resolve/{}", seg(hash))).await?;
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

    pub async fn get_record(&self, hash: &str) -> Result<RecordFields, ClientError> {
        self.inner.get(&format!("/records/{}", seg(hash))).await
    }

    pub async fn document(&self, hash: &str) -> Result<Document, ClientError> {
        self.inner
            .get(&format!("/records/{}/document", seg(hash)))
            .await
    }

    /// Replaces the record's fields with `fields`.
    pub async fn replace(&self, hash: &str, fields: Fields) -> Result<WriteResult, ClientError> {
        let body = FieldsBody { fields };
        self.inner
            .call(Method::PUT, &format!("/records/{}", seg(hash)), Some(&body))
            .await
    }

    /// Merges `fields` into the record.
    pub async fn merge(&self, hash: &str, fields: Fields) -> Result<WriteResult, ClientError> {
        let body = FieldsBody { fields };
        self.inner
            .call(
                Method::PATCH,
                &format!("/records/{}", seg(hash)),
                Some(&body),
            )
            .await
    }

    pub async fn delete_record(&self, hash: &str) -> Result<Deleted, ClientError> {
        self.inner
            .call::<(), _>(Method::DELETE, &format!("/records/{}", seg(hash)), None)
            .await
    }

    pub async fn get_field(&self, hash: &str, field: &str) -> Result<FieldValue, ClientError> {
        self.inner
            .get(&format!(
                "/records/{}/fields/{}",
                seg(hash),
                field_path(field)
            ))
            .await
    }

    pub async fn set_field(
        &self,
        hash: &str,
        field: &str,
        value: &str,
    ) -> Result<FieldWrite, ClientError> {
        let body = ValueBody {
            value: value.to_owned(),
        };
        let path = format!("/records/{}/fields/{}", seg(hash), field_path(field));
        self.inner.call(Method::PUT, &path, Some(&body)).await
    }

    pub async fn delete_field(&self, hash: &str, field: &str) -> Result<FieldDelete, ClientError> {
        let path = format!("/records/{}/fields/{}", seg(hash), field_path(field));
        self.inner.call::<(), _>(Method::DELETE, &path, None).await
    }

    pub async fn set_add(
        &self,
        hash: &str,
        field: &str,
        value: &str,
    ) -> Result<SetAdd, ClientError> {
        let body = ValueBody {
            value: value.to_owned(),
        };
        let path = format!("/records/{}/set-add/{}", seg(hash), field_path(field));
        self.inner.call(Method::POST, &path, Some(&body)).await
    }

    pub async fn add_alias(&self, hash: &str, cid: Cid) -> Result<AliasResult, ClientError> {
        let body = AliasBody { cid };
        self.inner
            .call(
                Method::POST,
                &format!("/records/{}/aliases", seg(hash)),
                Some(&body),
            )
            .await
    }

    pub async fn add_duplicate(
        &self,
        hash: &str,
        path: &str,
    ) -> Result<DuplicateResult, ClientError> {
        let body = DuplicateBody {
            path: path.to_owned(),
        };
        self.inner
            .call(
                Method::POST,
                &format!("/records/{}/duplicates", seg(hash)),
                Some(&body),
            )
            .await
    }

    pub async fn mint(&self, body: &MintBody) -> Result<Rid, ClientError> {
        let r: RidBody = self.inner.call(Method::POST, "/mint", Some(body)).await?;
        Ok(r.rid)
    }

    pub async fn kv_get(&self, key: &str) -> Result<Option<String>, ClientError> {
        let q = query(&KeyQuery {
            key: key.to_owned(),
        })?;
        let v: KvValue = self.inner.get(&format!("/kv/value?{q}")).await?;
        Ok(v.value)
    }

    pub async fn kv_put(&self, key: &str, value: &str) -> Result<KvWrite, ClientError> {
        let body = KvPut {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        self.inner.call(Method::PUT, "/kv/value", Some(&body)).await
    }

    pub async fn kv_delete(&self, key: &str) -> Result<KvDeleted, ClientError> {
        let q = query(&KeyQuery {
            key: key.to_owned(),
        })?;
        self.inner
            .call::<(), _>(Method::DELETE, &format!("/kv/value?{q}"), None)
            .await
    }

    pub async fn kv_range(&self, q: &RangeQuery) -> Result<KvRange, ClientError> {
        self.inner.get(&format!("/kv/range?{}", query(q)?)).await
    }

    pub async fn append(
        &self,
        stream: StreamName,
        fields: EntryFields,
    ) -> Result<StreamId, ClientError> {
        let body = AppendBody { fields };
        let r: Appended = self
            .inner
            .call(
                Method::POST,
                &format!("/streams/{stream}/entries"),
                Some(&body),
            )
            .await?;
        Ok(r.id)
    }

    pub async fn entries(
        &self,
        stream: StreamName,
        q: &EntriesQuery,
    ) -> Result<Vec<Entry>, ClientError> {
        let r: Entries = self
            .inner
            .get(&format!("/streams/{stream}/entries?{}", query(q)?))
            .await?;
        Ok(r.entries)
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
        let body = resp.into_body();
        Ok(ndjson_lines(body))
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
                                daemon: "storaged".into(),
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
                            daemon: "storaged".into(),
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
