//! `POST /api/metadata/search`: the original's request and answer around
//! storaged's `POST /search`, which applies its semantics (RID order,
//! fresh on commit); `GET /api/schema` and `POST /api/schema/rescan`, one
//! rescan at a time.

use axum::Json;
use metacore::api::storaged::{SearchFilter, SearchQuery};
use metacore::error::{ApiError, ErrorCode};
use metacore::record::{Fields, Target};
use metacore::rid::Rid;
use metacore::socket::body::{JsonBody, JsonReply};
use metacore::socket::client::ClientError;
use serde::{Deserialize, Serialize};

use crate::state::State;

/// `limit` when absent or 0 (the original's default).
const DEFAULT_LIMIT: u32 = 100;
/// `limit` at most.
pub(crate) const MAX_LIMIT: u32 = 10_000;
/// Filters in one request at most (the legacy pair included), values in
/// one filter, and values in all of them.
const MAX_FILTERS: usize = 32;
const MAX_VALUES: usize = 256;
const MAX_ALL_VALUES: usize = 1024;
/// Bytes and words of `query` at most.
const MAX_QUERY_BYTES: usize = 4096;
const MAX_QUERY_WORDS: usize = 64;

/// A member sent as JSON `null` reads as absent, as Go's decoder read it.
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The request, as the original read it: every member optional, members it
/// does not know ignored (its Go decoder did the same).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchRequest {
    #[serde(default, deserialize_with = "null_as_default")]
    pub query: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub hash_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub property: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub property_value: String,
    pub limit: Option<i64>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub filters: Vec<FilterRequest>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct FilterRequest {
    #[serde(default, deserialize_with = "null_as_default")]
    pub property: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub values: Vec<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub exact: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchHit {
    pub hash_id: Rid,
    pub metadata: Fields,
}

#[derive(Debug, Serialize)]
pub(crate) struct SearchAnswer {
    pub results: Vec<SearchHit>,
    pub count: usize,
    pub total: u64,
    /// Sent (as true) only when the answer stopped before `limit` at its
    /// byte bound.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// What storaged is asked: the legacy `property` + `propertyValue` pair
/// becomes one more filter (substring) when both are set.
fn storaged_query(req: SearchRequest) -> Result<SearchQuery, ApiError> {
    let limit = match req.limit {
        None | Some(0) => DEFAULT_LIMIT,
        Some(n) if n < 0 => return Err(ApiError::schema("limit must be 0 (100) or more")),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| *n <= MAX_LIMIT)
            .ok_or_else(|| ApiError::schema(format!("limit is at most {MAX_LIMIT}")))?,
    };
    let mut filters: Vec<SearchFilter> = req
        .filters
        .into_iter()
        .map(|f| SearchFilter {
            property: f.property,
            values: f.values,
            exact: f.exact,
        })
        .collect();
    if !req.property.is_empty() && !req.property_value.is_empty() {
        filters.push(SearchFilter {
            property: req.property,
            values: vec![req.property_value],
            exact: false,
        });
    }
    if filters.len() > MAX_FILTERS {
        return Err(ApiError::schema(format!(
            "at most {MAX_FILTERS} filters in one search"
        )));
    }
    if filters.iter().any(|f| f.values.len() > MAX_VALUES) {
        return Err(ApiError::schema(format!(
            "at most {MAX_VALUES} values in one filter"
        )));
    }
    if filters.iter().map(|f| f.values.len()).sum::<usize>() > MAX_ALL_VALUES {
        return Err(ApiError::schema(format!(
            "at most {MAX_ALL_VALUES} values in all filters"
        )));
    }
    if req.query.len() > MAX_QUERY_BYTES || req.query.split_whitespace().count() > MAX_QUERY_WORDS {
        return Err(ApiError::schema(format!(
            "query is at most {MAX_QUERY_BYTES} bytes and {MAX_QUERY_WORDS} words"
        )));
    }
    Ok(SearchQuery {
        query: req.query,
        filters,
        limit,
    })
}

/// `POST /api/metadata/search`. With `hashId`, that one record by its RID
/// (no CID is resolved, as in the original) or nothing; otherwise
/// storaged's search.
pub(crate) async fn search(
    st: State,
    JsonBody(req): JsonBody<SearchRequest>,
) -> JsonReply<SearchAnswer> {
    if !req.hash_id.is_empty() {
        let Ok(rid) = Rid::parse(&req.hash_id) else {
            return Ok(Json(SearchAnswer {
                results: Vec::new(),
                count: 0,
                total: 0,
                truncated: false,
            }));
        };
        let results = match st.store.get_record(&Target::Rid(rid)).await {
            Ok(r) => vec![SearchHit {
                hash_id: r.rid,
                metadata: r.fields,
            }],
            Err(ClientError::Api(e)) if e.code == ErrorCode::UnknownRoot => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let n = results.len();
        return Ok(Json(SearchAnswer {
            results,
            count: n,
            total: n as u64,
            truncated: false,
        }));
    }
    let page = st.store.search(&storaged_query(req)?).await?;
    let results: Vec<SearchHit> = page
        .results
        .into_iter()
        .map(|r| SearchHit {
            hash_id: r.rid,
            metadata: r.fields,
        })
        .collect();
    Ok(Json(SearchAnswer {
        count: results.len(),
        results,
        total: page.total,
        truncated: page.truncated,
    }))
}

/// `GET /api/schema`: the original's shape.
#[derive(Debug, Serialize)]
pub(crate) struct SchemaAnswer {
    pub fields: std::collections::BTreeMap<String, metacore::api::storaged::FieldSchema>,
    pub generated_at: String,
    pub source: &'static str,
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// `GET /api/schema`: per field path, the kind of its values, from
/// counters kept on every write.
pub(crate) async fn schema(st: State) -> JsonReply<SchemaAnswer> {
    let s = st.store.schema().await?;
    Ok(Json(SchemaAnswer {
        fields: s.fields,
        generated_at: now_rfc3339(),
        source: "live",
    }))
}

/// `POST /api/schema/rescan`.
#[derive(Debug, Serialize)]
pub(crate) struct RescanAnswer {
    /// Values counted (the original republished one event per value).
    pub published_events: u64,
    pub schema: SchemaAnswer,
}

/// The turn of the rescan apid is relaying. One at a time: a rescan
/// holds storaged's writer for its whole run, so a second asked for
/// meanwhile is answered 409 here, without a socket call, rather than
/// queued as a second full recount. storaged refuses a second one too, for
/// any caller of its socket (`storaged/src/schema/rescans.rs`), so a
/// rescan still running after its client went away is guarded there.
static RESCAN_TURN: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// `POST /api/schema/rescan` (admin): the counters rebuilt from every
/// stored value, in one transaction; 409 `conflict` while one runs.
pub(crate) async fn rescan(st: State) -> JsonReply<RescanAnswer> {
    let _turn = RESCAN_TURN.try_acquire().map_err(|_| {
        ApiError::new(
            ErrorCode::Conflict,
            "a schema rescan is under way; retry when it has finished",
        )
    })?;
    let r = st.store.rescan_schema().await?;
    Ok(Json(RescanAnswer {
        published_events: r.values,
        schema: SchemaAnswer {
            fields: r.fields,
            generated_at: now_rfc3339(),
            source: "rescan",
        },
    }))
}
