//! Writes sent to storaged exactly as given, without the checks the typed
//! client's inputs carry: what a peer that skips them (or a newer or older
//! apid) could send, so the tests see storaged's own refusal, not ours.
//! Each goes through the same pooled socket client as the typed calls.

use http::Method;
use metacore::api::storaged::{
    AppendBody, Appended, FieldsBody, KvDeleted, KvPut, KvWrite, RidBody, SetAdd, StoragedClient,
    ValueBody, WriteResult,
};
use metacore::record::Fields;
use metacore::socket::client::ClientError;
use metacore::stream::{EntryFields, StreamId, StreamName};

/// `PATCH /records/{hash}` with these fields.
pub async fn merge(
    c: &StoragedClient,
    hash: &str,
    fields: Fields,
) -> Result<WriteResult, ClientError> {
    let body = FieldsBody { fields };
    c.socket()
        .call(Method::PATCH, &format!("/records/{hash}"), Some(&body))
        .await
}

/// `POST /records/{hash}/set-add/{field}` (the field as it goes in the URL).
pub async fn set_add(
    c: &StoragedClient,
    hash: &str,
    field: &str,
    value: &str,
) -> Result<SetAdd, ClientError> {
    let body = ValueBody {
        value: value.to_owned(),
    };
    let path = format!("/records/{hash}/set-add/{field}");
    c.socket().call(Method::POST, &path, Some(&body)).await
}

/// `PUT /kv/value`.
pub async fn kv_put(c: &StoragedClient, key: &str, value: &str) -> Result<KvWrite, ClientError> {
    let body = KvPut {
        key: key.to_owned(),
        value: value.to_owned(),
    };
    c.socket().call(Method::PUT, "/kv/value", Some(&body)).await
}

/// `DELETE /kv/value?key=`.
pub async fn kv_delete(c: &StoragedClient, key: &str) -> Result<KvDeleted, ClientError> {
    let q = serde_urlencoded::to_string([("key", key)]).expect("a key encodes");
    c.socket()
        .call::<(), _>(Method::DELETE, &format!("/kv/value?{q}"), None)
        .await
}

/// `POST /streams/{stream}/entries`.
pub async fn append(
    c: &StoragedClient,
    stream: StreamName,
    fields: EntryFields,
) -> Result<StreamId, ClientError> {
    let body = AppendBody { fields };
    let path = format!("/streams/{stream}/entries");
    let r: Appended = c.socket().call(Method::POST, &path, Some(&body)).await?;
    Ok(r.id)
}

/// `GET /resolve/{hash}`.
pub async fn resolve(c: &StoragedClient, hash: &str) -> Result<RidBody, ClientError> {
    c.socket().get(&format!("/resolve/{hash}")).await
}
