//! What a browser page on another origin may do with the API (issue 23,
//! finding N9): the CORS headers of every answer, the preflights, and the
//! refusal of the writes a cross-site page could send without a preflight.
//!
//! - `META_CORE_CORS_ORIGINS` unset or `*` (the default, what the mesh's
//!   browser UIs use): any origin may call the open routes
//!   (`Access-Control-Allow-Origin: *`); no origin may call an admin route
//!   (its preflight is a 403, its answers carry no CORS header), so a page
//!   cannot borrow a browser that holds the admin token.
//! - A list of origins: those, and only those, may call every route, the
//!   admin ones included (an operator's console): the answer names the
//!   origin, with `Vary: Origin`.
//! - A `POST` that carries an `Origin` and a body that is not JSON is a
//!   415 on every route that reads JSON: a page may post a `text/plain` or
//!   form body cross-site without asking first, and the routes read such a
//!   body as JSON. (`PUT`, `PATCH` and `DELETE` are always preflighted, so
//!   the CORS answer governs them.) Service clients send no `Origin` and
//!   are not affected; WebDAV and the snapshot import (ZIP bodies) are not
//!   JSON routes. A request to an admin route that carries an `Origin` not
//!   allowed there is a 403 `origin_refused` whatever its method or body.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Method, header};
use metacore::error::{ApiError, ErrorCode};

use crate::methods::METHODS;
use crate::paths::{DAV_PREFIX, SNAPSHOT_IMPORT};
use crate::state::AppState;

/// What every answer says a page may send; `Authorization` only where an
/// admin route may be called (a listed origin).
const HEADERS: &str = "Content-Type, Last-Event-ID, Range, If-Match, If-None-Match, \
                       If-Modified-Since, If-Unmodified-Since, If-Range, Depth, Destination, \
                       Overwrite, If, Lock-Token, Timeout";
const HEADERS_WITH_AUTH: &str = "Content-Type, Authorization, Last-Event-ID, Range, If-Match, \
                                 If-None-Match, If-Modified-Since, If-Unmodified-Since, If-Range, \
                                 Depth, Destination, Overwrite, If, Lock-Token, Timeout";
/// A player in a browser reads these of a ranged or conditional answer.
const EXPOSED: &str =
    "Content-Range, Content-Length, Accept-Ranges, ETag, Last-Modified, DAV, Lock-Token";

/// Whether `method path` is an admin route (the ones behind the admin
/// token; held to the OpenAPI document's `security` by a test).
pub(crate) fn admin_route(method: &Method, path: &str) -> bool {
    let under = |prefix: &str| {
        path == prefix
            || path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    match path {
        "/api/kv/value" => method != Method::GET && method != Method::HEAD,
        "/api/metadata/batch"
        | "/api/metadata/clear"
        | "/api/schema/rescan"
        | "/api/snapshot/import"
        | "/api/snapshot/wipe" => true,
        "/api/tree/stop" => true,
        _ => {
            under("/api/watchers")
                || under("/api/scan")
                || under("/api/mounts")
                || under("/api/daemons")
                || under("/api/logs")
        }
    }
}

/// Who may call what from a browser.
#[derive(Debug, Clone, Copy)]
enum Allowed<'a> {
    /// Any origin (`*`).
    Any,
    /// This origin, named back.
    Origin(&'a str),
    /// No CORS header: the browser keeps the answer from the page.
    None,
}

fn allowed<'a>(listed: Option<&[String]>, origin: Option<&'a str>, admin: bool) -> Allowed<'a> {
    match (listed, origin) {
        (None, _) if admin => Allowed::None,
        (None, _) => Allowed::Any,
        (Some(list), Some(o)) if list.iter().any(|l| l.eq_ignore_ascii_case(o)) => {
            Allowed::Origin(o)
        }
        (Some(_), _) => Allowed::None,
    }
}

/// The CORS headers of every answer; preflights answered here, before
/// routing; cross-site non-JSON writes refused.
pub(crate) async fn cors(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let listed = st.config.cors_origins.as_deref();
    let path = req.uri().path().to_owned();
    // The console's own pages (`/ui/`): a browser says so in
    // `Sec-Fetch-Site`, which no page may set. Their writes carry an
    // `Origin` (`null` under their `no-referrer` policy) and are not
    // cross-origin: they pass as a client's without one would.
    let same_origin = req
        .headers()
        .get("sec-fetch-site")
        .is_some_and(|v| v.as_bytes() == b"same-origin");
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .filter(|_| !same_origin)
        .map(str::to_owned);
    // A WebDAV client's OPTIONS (no `Access-Control-Request-Method`) asks
    // what the server speaks: the WebDAV handler answers it.
    let asked = req
        .headers()
        .get(header::ACCESS_CONTROL_REQUEST_METHOD)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let preflight =
        req.method() == Method::OPTIONS && (!path.starts_with(DAV_PREFIX) || asked.is_some());
    let method = match (&asked, preflight) {
        (Some(m), true) => Method::from_bytes(m.trim().as_bytes()).unwrap_or(Method::OPTIONS),
        _ => req.method().clone(),
    };
    let admin = admin_route(&method, &path);
    let who = allowed(listed, origin.as_deref(), admin);
    let mut resp = if preflight {
        match (who, origin.is_some()) {
            (Allowed::None, true) => ApiError::new(
                ErrorCode::OriginRefused,
                if admin {
                    "this route is an admin route: no page of another origin may call it \
                     unless META_CORE_CORS_ORIGINS lists that origin"
                } else {
                    "this origin is not in META_CORE_CORS_ORIGINS"
                },
            )
            .into_response(),
            _ if asked.is_some() && !METHODS.contains(&method.as_str()) => ApiError::new(
                ErrorCode::MethodNotAllowed,
                format!("{method} is not a method of this API"),
            )
            .into_response(),
            _ => http::StatusCode::OK.into_response(),
        }
    } else if admin && origin.is_some() && matches!(who, Allowed::None) {
        // A page may send a bodiless or `text/plain` POST without asking
        // first: an admin route refuses it outright (with
        // `META_CORE_ADMIN_OPEN` it would otherwise be carried out).
        ApiError::new(
            ErrorCode::OriginRefused,
            "this route is an admin route: no page of another origin may call it \
             unless META_CORE_CORS_ORIGINS lists that origin",
        )
        .into_response()
    } else if let Some(refusal) =
        cross_site_non_json(req.headers(), req.method(), &path).filter(|_| !same_origin)
    {
        refusal.into_response()
    } else {
        next.run(req).await
    };
    decorate(
        resp.headers_mut(),
        who,
        listed.is_some(),
        preflight.then_some(&method),
    );
    resp
}

/// The CORS headers for `who`; on a preflight, the method asked for.
fn decorate(h: &mut HeaderMap, who: Allowed<'_>, listed: bool, preflight: Option<&Method>) {
    if listed {
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    let (origin, headers) = match who {
        Allowed::None => return,
        Allowed::Any => (HeaderValue::from_static("*"), HEADERS),
        Allowed::Origin(o) => match HeaderValue::from_str(o) {
            Ok(v) => (v, HEADERS_WITH_AUTH),
            Err(_) => return,
        },
    };
    h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    let methods = match preflight {
        Some(m) if METHODS.contains(&m.as_str()) && m != Method::OPTIONS => {
            HeaderValue::from_str(m.as_str()).unwrap_or(HeaderValue::from_static("GET"))
        }
        _ => HeaderValue::from_static(
            "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS, PROPFIND, PROPPATCH, MKCOL, COPY, \
             MOVE, LOCK, UNLOCK",
        ),
    };
    h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, methods);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(headers),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSED),
    );
}

/// A `POST` from a page (it carries `Origin`) whose body is not JSON, on
/// a route that reads JSON: a 415. The other writing methods are always
/// preflighted.
fn cross_site_non_json(h: &HeaderMap, method: &Method, path: &str) -> Option<ApiError> {
    let write = *method == Method::POST;
    let json_route = !path.starts_with(DAV_PREFIX) && path != SNAPSHOT_IMPORT;
    if !write || !json_route || !h.contains_key(header::ORIGIN) {
        return None;
    }
    let has_body = h.contains_key(header::TRANSFER_ENCODING)
        || metacore::socket::body::declared_length(h).is_some_and(|n| n > 0);
    if !has_body || is_json(h) {
        return None;
    }
    Some(ApiError::new(
        ErrorCode::UnsupportedMediaType,
        "a write from a browser page must send its body as Content-Type: application/json",
    ))
}

/// `application/json`, or any `+json` type, parameters aside.
fn is_json(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|t| {
            t == "application/json" || (t.starts_with("application/") && t.ends_with("+json"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_routes_are_told_by_method_and_path() {
        assert!(admin_route(&Method::PUT, "/api/kv/value"));
        assert!(!admin_route(&Method::GET, "/api/kv/value"));
        assert!(admin_route(&Method::GET, "/api/mounts"));
        assert!(admin_route(&Method::POST, "/api/mounts/x/mount"));
        assert!(admin_route(&Method::GET, "/api/watchers/x"));
        assert!(admin_route(&Method::POST, "/api/scan/trigger"));
        assert!(!admin_route(&Method::GET, "/api/mountsx"));
        assert!(!admin_route(&Method::PATCH, "/meta/x"));
        assert!(!admin_route(&Method::POST, "/api/metadata/search"));
    }

    #[test]
    fn any_origin_reaches_the_open_routes_and_none_the_admin_ones() {
        assert!(matches!(
            allowed(None, Some("http://evil"), false),
            Allowed::Any
        ));
        assert!(matches!(
            allowed(None, Some("http://evil"), true),
            Allowed::None
        ));
        let list = vec!["http://ui.lan".to_owned()];
        assert!(matches!(
            allowed(Some(&list), Some("http://UI.lan"), true),
            Allowed::Origin("http://UI.lan")
        ));
        assert!(matches!(
            allowed(Some(&list), Some("http://evil"), false),
            Allowed::None
        ));
        assert!(matches!(allowed(Some(&list), None, false), Allowed::None));
    }

    #[test]
    fn only_a_pages_non_json_writes_are_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("10"));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        // A service client: no Origin.
        assert!(cross_site_non_json(&h, &Method::POST, "/api/metadata/batch").is_none());
        h.insert(header::ORIGIN, HeaderValue::from_static("http://evil"));
        assert!(cross_site_non_json(&h, &Method::POST, "/api/metadata/batch").is_some());
        assert!(cross_site_non_json(&h, &Method::PUT, "/webdav/plugin/a").is_none());
        assert!(cross_site_non_json(&h, &Method::GET, "/meta").is_none());
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(cross_site_non_json(&h, &Method::POST, "/api/metadata/batch").is_none());
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/merge-patch+json"),
        );
        assert!(cross_site_non_json(&h, &Method::POST, "/meta/x/_add/y").is_none());
        h.remove(header::CONTENT_TYPE);
        assert!(cross_site_non_json(&h, &Method::POST, "/meta/x/_add/y").is_some());
        // Preflighted methods are the CORS answer's to allow.
        assert!(cross_site_non_json(&h, &Method::PATCH, "/meta/x").is_none());
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("0"));
        assert!(cross_site_non_json(&h, &Method::POST, "/meta/x/_add/y").is_none());
    }
}
