//! Pages: the size a client asks for, checked against its cap; and walking
//! every root a page at a time, with a few of its fields through
//! storaged's `GET /records/fields` (one read transaction per page), or
//! just the roots through `GET /records`.

use metacore::api::storaged::{FieldsPageQuery, MAX_PAGE, PageQuery, RootFields, StoragedClient};
use metacore::error::ApiError;
use metacore::rid::Rid;

/// A page size from the query: `default` when absent; 400 when 0 or over
/// `cap`, with the cap in the message.
pub(crate) fn page_size(
    name: &str,
    v: Option<u32>,
    default: u32,
    cap: u32,
) -> Result<u32, ApiError> {
    match v {
        None => Ok(default),
        Some(0) => Err(ApiError::schema(format!("{name} must be at least 1"))),
        Some(n) if n > cap => Err(ApiError::schema(format!(
            "{name} is at most {cap}, not {n}"
        ))),
        Some(n) => Ok(n),
    }
}

/// Roots per page asked of storaged.
const PAGE: u32 = 2000;

/// Calls `each` for every root in RID order with the fields `names` it has,
/// until `each` returns false.
pub(crate) async fn each_root(
    store: &StoragedClient,
    names: &[&str],
    mut each: impl FnMut(RootFields) -> bool,
) -> Result<(), ApiError> {
    let mut q = FieldsPageQuery {
        names: names.join(","),
        page: PageQuery {
            limit: Some(PAGE),
            ..PageQuery::default()
        },
    };
    loop {
        let page = store.fields_page(&q).await?;
        for row in page.rows {
            if !each(row) {
                return Ok(());
            }
        }
        match page.next {
            Some(next) => q.page.after = Some(next),
            None => return Ok(()),
        }
    }
}

/// Every root, in RID order (16 bytes each: fine to hold for a listing).
pub(crate) async fn all_roots(store: &StoragedClient) -> Result<Vec<Rid>, ApiError> {
    let mut q = PageQuery {
        limit: Some(MAX_PAGE),
        ..PageQuery::default()
    };
    let mut out = Vec::new();
    loop {
        let page = store.list_roots(&q).await?;
        out.extend(page.rids);
        match page.next {
            Some(next) => q.after = Some(next),
            None => return Ok(out),
        }
    }
}
