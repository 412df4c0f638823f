//! Walking every root with a few of its fields, a page at a time, through
//! storaged's `GET /records/fields` (one read transaction per page).

use metacore::api::storaged::{FieldsPageQuery, RootFields, StoragedClient};
use metacore::error::ApiError;
use metacore::rid::Rid;

/// Roots per page asked of storaged.
const PAGE: u32 = 2000;

/// Calls `each` for every root in RID order with the fields `names` it has,
/// until `each` returns false.
pub async fn each_root(
    store: &StoragedClient,
    names: &[&str],
    mut each: impl FnMut(RootFields) -> bool,
) -> Result<(), ApiError> {
    let mut q = FieldsPageQuery {
        names: names.join(","),
        after: None,
        limit: Some(PAGE),
    };
    loop {
        let page = store.fields_page(&q).await?;
        for row in page.rows {
            if !each(row) {
                return Ok(());
            }
        }
        match page.next {
            Some(next) => q.after = Some(next.to_string()),
            None => return Ok(()),
        }
    }
}

/// Every root, in RID order (16 bytes each: fine to hold for a listing).
pub async fn all_roots(store: &StoragedClient) -> Result<Vec<Rid>, ApiError> {
    let mut q = metacore::api::storaged::PageQuery {
        after: None,
        limit: Some(metacore::api::storaged::MAX_PAGE),
    };
    let mut out = Vec::new();
    loop {
        let page = store.list_roots(&q).await?;
        out.extend(page.rids);
        match page.next {
            Some(next) => q.after = Some(next.to_string()),
            None => return Ok(out),
        }
    }
}

/// How many record deletions run at once when everything is deleted.
const DELETE_CONCURRENCY: usize = 8;

/// Deletes every record (fields, aliases, duplicates, index rows, events),
/// a page of roots at a time; returns how many were deleted.
pub async fn delete_all_records(store: &StoragedClient) -> Result<u64, ApiError> {
    use futures_util::StreamExt;
    let mut deleted = 0u64;
    loop {
        let page = store
            .list_roots(&metacore::api::storaged::PageQuery {
                after: None,
                limit: Some(1000),
            })
            .await?;
        if page.rids.is_empty() {
            return Ok(deleted);
        }
        let mut results = futures_util::stream::iter(page.rids)
            .map(|rid| async move { store.delete_record(&rid.to_string()).await })
            .buffer_unordered(DELETE_CONCURRENCY);
        while let Some(r) = results.next().await {
            match r {
                Ok(_) => deleted += 1,
                // Deleted meanwhile by someone else: not ours to count.
                Err(metacore::socket::client::ClientError::Api(e)) if e.code.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}
