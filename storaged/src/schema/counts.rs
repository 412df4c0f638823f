//! The schema counters in the store: `idx:schema/<path>\x1f<keyHint>\x1f
//! <prim>\x1f<hint>` → how many stored values are of that kind, changed in
//! the write transaction of every record change and rebuildable from the
//! rows.
//!
//! The writer keeps each touched record's fields as they were before the
//! group (`Tx::touched`); before COMMIT, [`changes`] compares them with
//! the fields after and [`apply`] adds the group's changes up, one write
//! per counter. Members of the `cids/` key-set are not counted: every CID
//! would be a field of its own, and the schema as large as the store.

use std::collections::BTreeMap;

use metacore::record::{Fields, prefix_end};
use rusqlite::{Connection, params};

use super::aggregate::{FieldSchema, aggregate};
use super::classify::{SCHEMA_PREFIX, contribution};
use crate::error::{Result, StoreError};
use crate::records;

/// What the counters were last built under (a new classification would
/// rebuild them).
const BUILT_KEY: &str = "idx:schema-built";
const BUILT: &str = "1";

fn counted(field: &str) -> bool {
    !field.starts_with(metacore::record::CIDS_PREFIX)
}

/// Adds the change from `before` to `after` of one record to `deltas`.
pub(crate) fn changes(before: &Fields, after: &Fields, deltas: &mut BTreeMap<String, i64>) {
    for (f, v) in before {
        if counted(f) && after.get(f) != Some(v) {
            *deltas.entry(contribution(f, Some(v))).or_default() -= 1;
        }
    }
    for (f, v) in after {
        if counted(f) && before.get(f) != Some(v) {
            *deltas.entry(contribution(f, Some(v))).or_default() += 1;
        }
    }
}

/// Writes the group's counter changes; a counter that reaches 0 goes. A
/// count never goes below 0 (only a bug could take it there, and a
/// negative count would make the schema unreadable): it stops at 0.
pub(crate) fn apply(conn: &Connection, deltas: &BTreeMap<String, i64>) -> Result<()> {
    let mut add = conn.prepare_cached(
        "INSERT INTO kv(k, v) VALUES (?1, CAST(MAX(0, ?2) AS TEXT)) \
         ON CONFLICT(k) DO UPDATE SET v = CAST(MAX(0, CAST(v AS INTEGER) + ?2) AS TEXT)",
    )?;
    let mut drop_zero = conn.prepare_cached("DELETE FROM kv WHERE k = ?1 AND v = '0'")?;
    for (key, d) in deltas.iter().filter(|(_, d)| **d != 0) {
        add.execute(params![key, d])?;
        if *d < 0 {
            drop_zero.execute([key])?;
        }
    }
    Ok(())
}

/// Every counter and its count.
fn counters(conn: &Connection) -> Result<Vec<(String, u64)>> {
    let end = prefix_end(SCHEMA_PREFIX).expect("a prefix");
    let mut stmt = conn.prepare_cached("SELECT k, v FROM kv WHERE k >= ?1 AND k < ?2")?;
    let rows = stmt.query_map(params![SCHEMA_PREFIX, end], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (k, v) = row?;
        let n = v.parse::<u64>().map_err(|_| StoreError::Corrupt {
            key: k.clone(),
            detail: format!("not a count: {v:?}"),
        })?;
        out.push((k, n));
    }
    Ok(out)
}

/// The schema of every counted field path.
pub(crate) fn schema(conn: &Connection) -> Result<BTreeMap<String, FieldSchema>> {
    Ok(aggregate(counters(conn)?))
}

/// Counts every stored value again (inside the caller's transaction);
/// returns how many values were counted.
pub(crate) fn rebuild(conn: &Connection) -> Result<u64> {
    let end = prefix_end(SCHEMA_PREFIX).expect("a prefix");
    conn.execute(
        "DELETE FROM kv WHERE k >= ?1 AND k < ?2",
        params![SCHEMA_PREFIX, end],
    )?;
    let mut totals: BTreeMap<String, i64> = BTreeMap::new();
    let mut values = 0;
    let mut from = records::PageStart::default();
    let empty = Fields::new();
    loop {
        let page = records::list_roots(conn, from, 1000)?;
        for rid in &page.rids {
            let fields = records::fields(conn, *rid)?;
            values += fields.keys().filter(|f| counted(f)).count() as u64;
            changes(&empty, &fields, &mut totals);
        }
        match page.next {
            Some(next) => from.after = Some(next),
            None => break,
        }
    }
    apply(conn, &totals)?;
    conn.execute(
        "INSERT INTO kv(k, v) VALUES (?1, ?2) ON CONFLICT(k) DO UPDATE SET v = excluded.v",
        params![BUILT_KEY, BUILT],
    )?;
    Ok(values)
}

/// `POST /schema/rescan` as a write: counts every value again, and takes
/// the records the group changed before this job as they are now, so
/// that their changes are not counted a second time before COMMIT.
pub(crate) fn rescan(tx: &mut crate::engine::tx::Tx<'_>) -> Result<u64> {
    let values = rebuild(tx.conn)?;
    if let Some(touched) = tx.touched.as_mut() {
        touched.retake(tx.conn)?;
    }
    Ok(values)
}

/// At open: builds the counters of a store that has none yet (one made
/// before they existed), or again when `stale` (the search index found
/// records written without it, so the counters missed them too), in one
/// transaction.
pub(crate) fn ensure(conn: &Connection, stale: bool) -> Result<()> {
    if !stale && crate::kv::get(conn, BUILT_KEY)?.as_deref() == Some(BUILT) {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let n = crate::engine::schema::in_transaction(conn, || rebuild(conn))?;
    tracing::info!(values = n, took = ?started.elapsed(), "built the schema counters");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pairs: &[(&str, &str)]) -> Fields {
        metacore::record::fields_of(pairs)
    }

    #[test]
    fn a_change_moves_a_value_between_counters() {
        let mut d = BTreeMap::new();
        let before = rec(&[("year", "1999"), ("title", "x"), ("cids/bafyabc", "true")]);
        let after = rec(&[("year", "n/a"), ("title", "x"), ("plot/eng", "p")]);
        changes(&before, &after, &mut d);
        let int = contribution("year", Some("1999"));
        let string = contribution("year", Some("n/a"));
        assert_eq!(d.get(&int), Some(&-1));
        assert_eq!(d.get(&string), Some(&1));
        assert_eq!(d.get(&contribution("plot/eng", Some("p"))), Some(&1));
        assert!(
            !d.contains_key(&contribution("title", Some("x"))),
            "unchanged"
        );
        assert!(d.keys().all(|k| !k.contains("cids")), "{d:?}");
    }
}
