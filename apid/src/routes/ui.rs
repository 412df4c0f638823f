//! The web console (`/ui/`): a dashboard and a metadata editor, plain
//! HTML, CSS and JavaScript built into the binary (`apid/ui/`), so running
//! meta-core needs nothing besides it. `GET /` sends a browser there.
//!
//! Each asset is answered with its type, an `ETag` of its bytes (a repeat
//! visit is a 304), and a Content-Security-Policy that lets the pages load
//! and call nothing but this meta-core.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use metacore::error::ApiError;
use sha2::{Digest, Sha256};

/// The pages may load and call nothing but this origin, and may not be
/// framed by another.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// One file of the console.
struct Asset {
    name: &'static str,
    kind: &'static str,
    bytes: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        kind: "text/html; charset=utf-8",
        bytes: include_bytes!("../../ui/index.html"),
    },
    Asset {
        name: "editor.html",
        kind: "text/html; charset=utf-8",
        bytes: include_bytes!("../../ui/editor.html"),
    },
    Asset {
        name: "app.css",
        kind: "text/css; charset=utf-8",
        bytes: include_bytes!("../../ui/app.css"),
    },
    Asset {
        name: "common.js",
        kind: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../ui/common.js"),
    },
    Asset {
        name: "dashboard.js",
        kind: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../ui/dashboard.js"),
    },
    Asset {
        name: "editor.js",
        kind: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../../ui/editor.js"),
    },
];

/// Each asset's `ETag`, from its bytes, made once.
static TAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let digest = Sha256::digest(a.bytes);
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            HeaderValue::from_str(&format!("\"{hex}\"")).expect("hex is a header value")
        })
        .collect()
});

/// `GET /`: to the console.
pub(crate) async fn root() -> Redirect {
    Redirect::to("/ui/")
}

/// `GET /ui`: to `/ui/`, where the pages' relative links resolve.
pub(crate) async fn bare() -> Redirect {
    Redirect::permanent("/ui/")
}

/// `GET /ui/`: the dashboard.
pub(crate) async fn index(headers: HeaderMap) -> Response {
    answer("index.html", &headers)
}

/// `GET /ui/{file}`: one asset, or 404.
pub(crate) async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    answer(&name, &headers)
}

fn answer(name: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return ApiError::not_found("no such page of the console").into_response();
    };
    let (asset, tag) = (&ASSETS[i], &TAGS[i]);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == tag.as_bytes());
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(header::CONTENT_TYPE, HeaderValue::from_static(asset.kind))],
            asset.bytes,
        )
            .into_response()
    };
    let h = response.headers_mut();
    h.insert(header::ETAG, tag.clone());
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_names_only_assets_that_are_built_in() {
        let names: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        for page in ASSETS.iter().filter(|a| a.name.ends_with(".html")) {
            let text = std::str::from_utf8(page.bytes).unwrap();
            for attr in ["src=\"", "href=\""] {
                for part in text.split(attr).skip(1) {
                    let target = part.split('"').next().unwrap();
                    if target == "./" {
                        continue;
                    }
                    assert!(
                        names.contains(&target),
                        "{} links {target:?}, which is not built in",
                        page.name
                    );
                }
            }
        }
        for script in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            let text = std::str::from_utf8(script.bytes).unwrap();
            for part in text.split("from './").skip(1) {
                let target = part.split('\'').next().unwrap();
                assert!(
                    names.contains(&target),
                    "{} imports {target:?}",
                    script.name
                );
            }
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{} names another origin",
                script.name
            );
        }
    }
}
