//! `JsonBody<T>`: the JSON extractor every route uses instead of axum's, so
//! that a malformed, mistyped or oversized body is answered with the error
//! envelope (400 `bad_request` / `schema_violation`, 413
//! `payload_too_large`) and never reaches a handler.

use axum::extract::{FromRequest, Request};
use bytes::Bytes;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};
use crate::record::Target;

/// What a JSON route answers: the body as `T`, or the error envelope.
pub type JsonReply<T> = Result<axum::Json<T>, ApiError>;

/// A JSON body decoded into `T`.
#[derive(Debug, Clone)]
pub struct JsonBody<T>(pub T);

/// Decodes JSON bytes, telling syntax errors from shape errors.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => ApiError::new(
                ErrorCode::SchemaViolation,
                format!("unexpected JSON shape: {e}"),
            ),
            _ => ApiError::bad_request(format!("malformed JSON: {e}")),
        }
    })
}

/// The length a request declares (`Content-Length`), if it declares one.
pub fn declared_length(headers: &http::HeaderMap) -> Option<u64> {
    headers
        .get(http::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn too_large() -> ApiError {
    ApiError::new(
        ErrorCode::PayloadTooLarge,
        "request body is larger than this route accepts",
    )
}

/// Reads the whole body within the route's limit (`DefaultBodyLimit`),
/// answering 413 past it: at once when the declared `Content-Length` is
/// over it (before a byte of the body is read, so a client announcing
/// 100 GB is not waited for), else as soon as the bytes read pass it.
pub async fn read_body<S: Send + Sync>(req: Request, _state: &S) -> Result<Bytes, ApiError> {
    use axum::RequestExt;
    use axum::body::HttpBody as _;
    use http_body_util::BodyExt;
    let declared = declared_length(req.headers());
    let body = req.with_limited_body().into_body();
    // The limited body's upper bound is the smaller of the limit and
    // the declared length: a declared length above it is over the limit.
    if let (Some(declared), Some(upper)) = (declared, body.size_hint().upper())
        && declared > upper
    {
        return Err(too_large());
    }
    match body.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => {
            let over = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
                || e.to_string().contains("length limit exceeded");
            if over {
                Err(too_large())
            } else {
                Err(ApiError::bad_request(format!(
                    "cannot read the request body: {e}"
                )))
            }
        }
    }
}

/// Bytes of request bodies a process takes in at once, all requests
/// together ([`budget`]). A body, its parsed form and what is made of it
/// live as long as its request; with the budget they cannot add up past a
/// few times this, whatever the concurrency.
pub const BODY_BUDGET: u64 = 32 << 20;
/// What a body of unknown length (chunked) is counted as: the default
/// route limit.
const UNKNOWN_LENGTH: u64 = 8 << 20;
/// How long a request waits for room in the budget before 503.
const BUDGET_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

static BUDGET: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new((BODY_BUDGET >> 10) as usize);

/// Bytes of [`BODY_BUDGET`] held by request bodies now (`/metrics`).
pub fn budget_in_use() -> u64 {
    let total = (BODY_BUDGET >> 10) as usize;
    (total.saturating_sub(BUDGET.available_permits()) as u64) << 10
}

/// Middleware: a request with a body holds its share of [`BODY_BUDGET`]
/// (its declared length, or 8 MiB when it declares none) until its answer
/// is made; one that finds no room within 10 s is answered 503
/// `overloaded` with `Retry-After`. For routes that buffer their bodies
/// (not for streamed uploads, which hold no body in memory).
pub async fn budget(req: Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    let has_body = req.headers().contains_key(http::header::TRANSFER_ENCODING)
        || declared_length(req.headers()).is_some_and(|n| n > 0);
    if !has_body {
        return next.run(req).await;
    }
    let bytes = declared_length(req.headers())
        .unwrap_or(UNKNOWN_LENGTH)
        .min(BODY_BUDGET);
    let kib = bytes.div_ceil(1024).max(1) as u32;
    let permit = match tokio::time::timeout(BUDGET_WAIT, BUDGET.acquire_many(kib)).await {
        Ok(Ok(p)) => p,
        _ => {
            return ApiError::new(
                ErrorCode::Overloaded,
                "request bodies in flight fill this server's budget; try again shortly",
            )
            .into_response();
        }
    };
    let resp = next.run(req).await;
    drop(permit);
    resp
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(req, state).await?;
        decode_json(&bytes).map(JsonBody)
    }
}

/// The raw body, its rejections answered with the envelope (413 over the
/// route's limit) like [`JsonBody`]'s.
#[derive(Debug, Clone)]
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        read_body(req, state).await.map(RawBody)
    }
}

/// An axum extractor of request parts whose rejection becomes the error
/// envelope (400 `bad_request`, `what` naming the part).
macro_rules! enveloped_extractor {
    ($(#[$doc:meta])* $name:ident, $inner:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        pub struct $name<T>(pub T);

        impl<T, S> axum::extract::FromRequestParts<S> for $name<T>
        where
            T: DeserializeOwned + Send,
            S: Send + Sync,
        {
            type Rejection = ApiError;

            async fn from_request_parts(
                parts: &mut http::request::Parts,
                state: &S,
            ) -> Result<Self, Self::Rejection> {
                // Bytes that are not UTF-8 would come out as U+FFFD and be
                // taken for a value nobody sent.
                if !decodes_to_utf8(parts.uri.path()) || !decodes_to_utf8(parts.uri.query().unwrap_or("")) {
                    return Err(ApiError::bad_request(concat!(
                        $what,
                        ": a percent-encoded byte sequence is not UTF-8"
                    )));
                }
                axum::extract::$inner::<T>::from_request_parts(parts, state)
                    .await
                    .map(|v| $name(v.0))
                    .map_err(|rej| ApiError::bad_request(format!(concat!($what, ": {}"), rej)))
            }
        }
    };
}

/// Whether `s`, percent-decoded, is UTF-8 (a lone `%` is itself).
pub fn decodes_to_utf8(s: &str) -> bool {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .is_ok()
}

enveloped_extractor!(
    /// `Path<T>` whose rejection is the error envelope (400).
    PathParams,
    Path,
    "bad path"
);

enveloped_extractor!(
    /// `Query<T>` whose rejection is the error envelope (400).
    QueryParams,
    Query,
    "bad query string"
);

/// A route's `{hash}` (a RID or a CID), checked when the handler asks
/// for it ([`PathTarget::target`], the 400 [`Target::parse`] says). A
/// handler asks after reading its body or query, so that a request wrong
/// in both is answered for its body first, as the original answered.
#[derive(Debug)]
pub struct PathTarget(Result<Target, ApiError>);

impl PathTarget {
    pub fn target(self) -> Result<Target, ApiError> {
        self.0
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PathTarget {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        let PathParams(hash) = PathParams::<String>::from_request_parts(parts, state).await?;
        Ok(PathTarget(Target::parse(&hash)))
    }
}

/// `{hash}` and the segment after it (`/meta/{hash}/{*key}`): the record,
/// checked when asked as [`PathTarget`] is, and the rest as it was sent.
#[derive(Debug)]
pub struct PathTargetAnd(pub PathTarget, pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PathTargetAnd {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        let PathParams((hash, rest)) =
            PathParams::<(String, String)>::from_request_parts(parts, state).await?;
        Ok(PathTargetAnd(PathTarget(Target::parse(&hash)), rest))
    }
}

/// Fallback for unknown routes: 404 with the envelope.
pub async fn no_route(uri: http::Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for {}", uri.path()))
}

/// Fallback for a known route with another method: 405 with the envelope.
pub async fn no_method(method: http::Method, uri: http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!("{method} is not allowed on {}", uri.path()),
    )
}

#[cfg(test)]
mod utf8_tests {
    use super::decodes_to_utf8;

    #[test]
    fn percent_encoded_bytes_must_be_utf8() {
        assert!(decodes_to_utf8("contains=caf%C3%A9&limit=5"));
        assert!(decodes_to_utf8("a=100%"), "a lone % is itself");
        assert!(decodes_to_utf8(""));
        assert!(!decodes_to_utf8("contains=%ff"));
        assert!(!decodes_to_utf8("contains=%C3"));
    }
}
