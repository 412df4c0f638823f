//! The one table that maps every error a client can see to its HTTP status,
//! its slug and whether a retry can help, and the JSON envelope that carries
//! it (`{"error": <slug>, "message": <text>, "retryable": <bool>}`).
//!
//! Engines return their own typed errors; at the edge each is turned into an
//! [`ApiError`] (a code plus a message meant for the client). The same
//! envelope is used on the public API and on the internal sockets, so a
//! daemon's client can turn an answer back into the same [`ApiError`].

use std::fmt;

use http::StatusCode;
use serde::{Deserialize, Serialize};

/// Every error kind a client can receive, public API and sockets alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The root (RID) has no record.
    UnknownRoot,
    /// The CID is not registered as an alias of any record.
    UnknownCid,
    /// The request is well-formed JSON but breaks a rule (bad RID, bad
    /// field name, wrong type, ...).
    SchemaViolation,
    /// A write names a field the contract retired (`cid_*`, `midhash256`,
    /// `canonical_cid`).
    DeprecatedField,
    /// The key or alias is held by something else.
    AliasCollision,
    /// The store cannot be reached or is shutting down; try again.
    StorageUnavailable,
    /// A bug or an I/O failure on our side.
    Internal,
    /// The body is larger than the route accepts.
    PayloadTooLarge,
    /// A bearer token is required or wrong.
    Unauthorized,
    /// No such route, daemon, mount or watcher.
    NotFound,
    /// The route exists, the method does not.
    MethodNotAllowed,
    /// The body is not JSON, or not the JSON shape the route takes.
    BadRequest,
    /// The request cannot be carried out in the current state (a standby
    /// supervisor runs no daemons; a stop is under way).
    Conflict,
    /// A bounded resource is taken (every SSE follower slot); retry later.
    Overloaded,
    /// The feature the route drives is switched off by configuration
    /// (`ENABLE_FILE_WATCHER=false`); retrying will not help.
    Disabled,
    /// A WebDAV write outside the writable folders (`plugin/`, `corn/`).
    ReadOnly,
    /// The volume has no room for what the request would write.
    InsufficientStorage,
    /// rclone could not mount or unmount (the remote does not answer, a
    /// file is busy): the mount's state keeps the request from being
    /// carried out, as a 409; the message is rclone's own text.
    MountFailed,
    /// This client holds as much of a bounded resource as one client may
    /// (connections, event streams, locks); the others are still served.
    TooManyRequests,
    /// A browser's write whose body is not JSON where the route reads JSON
    /// (a cross-site form could send it without asking first).
    UnsupportedMediaType,
    /// A browser page whose origin may not call this route
    /// (`META_CORE_CORS_ORIGINS`, or an admin route).
    OriginRefused,
    /// The request body stopped coming (`META_CORE_HTTP_BODY_TIMEOUT_MS`
    /// without a byte).
    RequestTimeout,
}

/// One row of the error table.
struct Row {
    code: ErrorCode,
    status: u16,
    slug: &'static str,
    retryable: bool,
}

/// The table itself: status, slug and retry advice for each code.
const TABLE: &[Row] = &[
    Row {
        code: ErrorCode::UnknownRoot,
        status: 404,
        slug: "unknown_root",
        retryable: false,
    },
    Row {
        code: ErrorCode::UnknownCid,
        status: 404,
        slug: "unknown_cid",
        retryable: false,
    },
    Row {
        code: ErrorCode::SchemaViolation,
        status: 400,
        slug: "schema_violation",
        retryable: false,
    },
    Row {
        code: ErrorCode::DeprecatedField,
        status: 400,
        slug: "deprecated_field",
        retryable: false,
    },
    Row {
        code: ErrorCode::AliasCollision,
        status: 409,
        slug: "alias_collision",
        retryable: false,
    },
    Row {
        code: ErrorCode::StorageUnavailable,
        status: 503,
        slug: "storage_unavailable",
        retryable: true,
    },
    Row {
        code: ErrorCode::Internal,
        status: 500,
        slug: "internal",
        retryable: true,
    },
    Row {
        code: ErrorCode::PayloadTooLarge,
        status: 413,
        slug: "payload_too_large",
        retryable: false,
    },
    Row {
        code: ErrorCode::Unauthorized,
        status: 401,
        slug: "unauthorized",
        retryable: false,
    },
    Row {
        code: ErrorCode::NotFound,
        status: 404,
        slug: "not_found",
        retryable: false,
    },
    Row {
        code: ErrorCode::MethodNotAllowed,
        status: 405,
        slug: "method_not_allowed",
        retryable: false,
    },
    Row {
        code: ErrorCode::BadRequest,
        status: 400,
        slug: "bad_request",
        retryable: false,
    },
    Row {
        code: ErrorCode::Conflict,
        status: 409,
        slug: "conflict",
        retryable: true,
    },
    Row {
        code: ErrorCode::Overloaded,
        status: 503,
        slug: "overloaded",
        retryable: true,
    },
    Row {
        code: ErrorCode::Disabled,
        status: 409,
        slug: "disabled",
        retryable: false,
    },
    Row {
        code: ErrorCode::ReadOnly,
        status: 403,
        slug: "read_only",
        retryable: false,
    },
    Row {
        code: ErrorCode::InsufficientStorage,
        status: 507,
        slug: "insufficient_storage",
        retryable: true,
    },
    Row {
        code: ErrorCode::MountFailed,
        status: 409,
        slug: "mount_failed",
        retryable: true,
    },
    Row {
        code: ErrorCode::TooManyRequests,
        status: 429,
        slug: "too_many_requests",
        retryable: true,
    },
    Row {
        code: ErrorCode::UnsupportedMediaType,
        status: 415,
        slug: "unsupported_media_type",
        retryable: false,
    },
    Row {
        code: ErrorCode::OriginRefused,
        status: 403,
        slug: "origin_refused",
        retryable: false,
    },
    Row {
        code: ErrorCode::RequestTimeout,
        status: 408,
        slug: "request_timeout",
        retryable: false,
    },
];

/// Seconds a client is told to wait on a 503 or a 429.
pub const RETRY_AFTER_SECS: u32 = 1;

impl ErrorCode {
    fn row(self) -> &'static Row {
        TABLE
            .iter()
            .find(|r| r.code == self)
            .expect("every ErrorCode has a row in TABLE")
    }

    /// The HTTP status this code is sent with.
    pub fn status(self) -> StatusCode {
        StatusCode::from_u16(self.row().status).expect("TABLE holds valid statuses")
    }

    /// The machine-readable slug of the envelope.
    pub fn slug(self) -> &'static str {
        self.row().slug
    }

    /// Whether the same request may succeed later.
    pub fn retryable(self) -> bool {
        self.row().retryable
    }

    /// The code for a slug, if it is one of ours.
    pub fn from_slug(slug: &str) -> Option<Self> {
        TABLE.iter().find(|r| r.slug == slug).map(|r| r.code)
    }
}

/// An error as a client sees it: a code and a message in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::BadRequest, message)
    }

    pub fn schema(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::SchemaViolation, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::StorageUnavailable, message)
    }

    /// The JSON envelope of this error.
    pub fn envelope(&self) -> ErrorEnvelope {
        ErrorEnvelope {
            error: self.code.slug().to_owned(),
            message: self.message.clone(),
            retryable: self.code.retryable(),
        }
    }

    /// Rebuilds an error from an envelope received over HTTP. An unknown
    /// slug keeps its status class: 5xx become `internal`, others
    /// `bad_request`.
    pub fn from_envelope(status: StatusCode, env: ErrorEnvelope) -> Self {
        let code = ErrorCode::from_slug(&env.error).unwrap_or(if status.is_server_error() {
            ErrorCode::Internal
        } else {
            ErrorCode::BadRequest
        });
        Self {
            code,
            message: env.message,
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.slug(), self.message)
    }
}

impl std::error::Error for ApiError {}

/// The wire shape of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    pub error: String,
    pub message: String,
    pub retryable: bool,
}

impl axum::response::IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        let status = self.code.status();
        let mut resp = (status, axum::Json(self.envelope())).into_response();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The body was not read to its end, so the connection cannot carry
            // another request: say so, or a pooled client would reuse it.
            resp.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
        }
        if status == StatusCode::UNAUTHORIZED {
            // RFC 9110 §15.5.2: a 401 names the scheme it wants.
            resp.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer realm=\"meta-core admin\""),
            );
        }
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            resp.headers_mut().insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from(RETRY_AFTER_SECS),
            );
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ErrorCode; 22] = [
        ErrorCode::UnknownRoot,
        ErrorCode::UnknownCid,
        ErrorCode::SchemaViolation,
        ErrorCode::DeprecatedField,
        ErrorCode::AliasCollision,
        ErrorCode::StorageUnavailable,
        ErrorCode::Internal,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::BadRequest,
        ErrorCode::Conflict,
        ErrorCode::Overloaded,
        ErrorCode::Disabled,
        ErrorCode::ReadOnly,
        ErrorCode::InsufficientStorage,
        ErrorCode::MountFailed,
        ErrorCode::TooManyRequests,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::OriginRefused,
        ErrorCode::RequestTimeout,
    ];

    #[test]
    fn every_code_round_trips_through_its_slug() {
        for code in ALL {
            assert_eq!(ErrorCode::from_slug(code.slug()), Some(code));
        }
        assert_eq!(TABLE.len(), ALL.len());
    }

    #[test]
    fn contract_slugs_and_statuses() {
        assert_eq!(ErrorCode::UnknownRoot.status(), StatusCode::NOT_FOUND);
        assert_eq!(ErrorCode::DeprecatedField.slug(), "deprecated_field");
        assert_eq!(ErrorCode::AliasCollision.status(), StatusCode::CONFLICT);
        assert!(ErrorCode::StorageUnavailable.retryable());
        assert!(!ErrorCode::SchemaViolation.retryable());
    }

    #[test]
    fn unknown_slug_keeps_its_class() {
        let env = ErrorEnvelope {
            error: "brand_new".into(),
            message: "m".into(),
            retryable: true,
        };
        let e = ApiError::from_envelope(StatusCode::BAD_GATEWAY, env.clone());
        assert_eq!(e.code, ErrorCode::Internal);
        let e = ApiError::from_envelope(StatusCode::CONFLICT, env);
        assert_eq!(e.code, ErrorCode::BadRequest);
    }
}
