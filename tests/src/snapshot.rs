//! The store as rows: every `(k, v)` of the `kv` table read straight from
//! the database file (read-only, beside a running storaged or after it
//! died), a text rendering for snapshot assertions, a diff, and the
//! invariants every state of the store must satisfy.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// Every row of the store, sorted by key (byte order, as SQLite sorts).
pub type Rows = BTreeMap<String, String>;

/// A read-only connection to `db` that waits up to 10 s for a lock
/// (beside a running storaged, or after it died).
pub fn open_read_only(db: &Path) -> Connection {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap_or_else(|e| panic!("open {} read-only: {e}", db.display()));
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .expect("set a busy timeout");
    conn
}

/// Reads every row of `db` through a read-only connection, in one
/// statement, so the rows are one committed state.
pub fn dump(db: &Path) -> Rows {
    let conn = open_read_only(db);
    let mut stmt = conn
        .prepare("SELECT k, v FROM kv ORDER BY k")
        .expect("prepare the dump");
    stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .expect("dump the kv table")
        .collect::<Result<Rows, _>>()
        .expect("read a row")
}

/// One `k = v` line per row.
pub fn render(rows: &Rows) -> String {
    rows.iter().map(|(k, v)| format!("{k} = {v}\n")).collect()
}

/// The rows whose key starts with `prefix`.
pub fn with_prefix<'a>(
    rows: &'a Rows,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a String, &'a String)> + 'a {
    rows.range(prefix.to_owned()..)
        .take_while(move |(k, _)| k.starts_with(prefix))
}

/// The rows without the event streams and their marks (`ev:`, `evhwm:`),
/// which every write to a record changes.
pub fn without_events(rows: &Rows) -> Rows {
    rows.iter()
        .filter(|(k, _)| !k.starts_with("ev:") && !k.starts_with("evhwm:"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `+ k = v`, `- k = v` and `~ k: a -> b` lines from `before` to `after`.
pub fn diff(before: &Rows, after: &Rows) -> String {
    let mut out = String::new();
    for (k, v) in before {
        match after.get(k) {
            None => out.push_str(&format!("- {k} = {v}\n")),
            Some(w) if w != v => out.push_str(&format!("~ {k}: {v} -> {w}\n")),
            Some(_) => {}
        }
    }
    for (k, v) in after {
        if !before.contains_key(k) {
            out.push_str(&format!("+ {k} = {v}\n"));
        }
    }
    out
}

/// Panics with the diff when the two dumps differ.
pub fn assert_same(before: &Rows, after: &Rows, context: &str) {
    let d = diff(before, after);
    assert!(d.is_empty(), "{context}: the store changed:\n{d}");
}

/// The fields of one record (`file:<rid>/<field>` rows), by field name.
pub fn record(rows: &Rows, rid: &str) -> BTreeMap<String, String> {
    let prefix = format!("file:{rid}/");
    with_prefix(rows, &prefix)
        .map(|(k, v)| (k[prefix.len()..].to_owned(), v.clone()))
        .collect()
}

/// The RIDs of the root index.
pub fn roots(rows: &Rows) -> BTreeSet<String> {
    with_prefix(rows, "idx:roots/")
        .map(|(k, _)| k["idx:roots/".len()..].to_owned())
        .collect()
}

/// The RIDs that have at least one `file:` row.
pub fn rids_with_fields(rows: &Rows) -> BTreeSet<String> {
    with_prefix(rows, "file:")
        .filter_map(|(k, _)| {
            k["file:".len()..]
                .split_once('/')
                .map(|(r, _)| r.to_owned())
        })
        .collect()
}

/// The alias index: CID → RID.
pub fn aliases(rows: &Rows) -> BTreeMap<String, String> {
    with_prefix(rows, "cid:")
        .map(|(k, v)| (k["cid:".len()..].to_owned(), v.clone()))
        .collect()
}

/// Every key that names `rid`, outside the event streams.
pub fn keys_naming(rows: &Rows, rid: &str) -> Vec<String> {
    rows.iter()
        .filter(|(k, v)| {
            !k.starts_with("ev:")
                && !k.starts_with("evhwm:")
                && (k.contains(rid) || v.as_str() == rid)
        })
        .map(|(k, v)| format!("{k} = {v}"))
        .collect()
}

/// What must hold of every committed state of the store; returns each
/// violation in words (empty when the store is sound):
///
/// - the schema sentinel is `"2"`;
/// - `idx:roots/<rid>` exists exactly for the RIDs that have `file:` rows;
/// - `idx:count/roots` equals the number of `idx:roots/` rows;
/// - every `cid:<c> → <rid>` is backed by the member `file:<rid>/cids/<c>`;
/// - every `dup:<rid>/…` belongs to an indexed root.
pub fn violations(rows: &Rows) -> Vec<String> {
    let mut out = Vec::new();
    match rows.get("meta-core:schema-version") {
        Some(v) if v == "2" => {}
        other => out.push(format!("schema sentinel is {other:?}, want \"2\"")),
    }
    let roots = roots(rows);
    let with_fields = rids_with_fields(rows);
    for r in roots.difference(&with_fields) {
        out.push(format!("idx:roots/{r} has no file:{r}/ row"));
    }
    for r in with_fields.difference(&roots) {
        out.push(format!("file:{r}/ rows without idx:roots/{r}"));
    }
    let count = rows.get("idx:count/roots").cloned().unwrap_or_default();
    if count != roots.len().to_string() {
        out.push(format!(
            "idx:count/roots is {count:?} but there are {} idx:roots/ rows",
            roots.len()
        ));
    }
    for (cid, rid) in aliases(rows) {
        if !rows.contains_key(&format!("file:{rid}/cids/{cid}")) {
            out.push(format!(
                "cid:{cid} -> {rid} but {rid} has no cids/{cid} member"
            ));
        }
    }
    for (k, _) in with_prefix(rows, "dup:") {
        let rid = k["dup:".len()..].split('/').next().unwrap_or_default();
        if !roots.contains(rid) {
            out.push(format!("{k} belongs to no indexed root"));
        }
    }
    out
}

/// Panics listing every violated invariant.
pub fn assert_sound(rows: &Rows) {
    let v = violations(rows);
    assert!(
        v.is_empty(),
        "the store breaks its invariants:\n{}",
        v.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(pairs: &[(&str, &str)]) -> Rows {
        metacore::record::fields_of(pairs)
    }

    const R: &str = "01JKR8XW5T4QMV7AHNJ2DEFGHK";

    #[test]
    fn a_sound_store_has_no_violation() {
        let r = rows(&[
            ("meta-core:schema-version", "2"),
            ("idx:count/roots", "1"),
            (&format!("idx:roots/{R}"), ""),
            (&format!("file:{R}/title"), "x"),
            (&format!("file:{R}/cids/bafyx"), "true"),
            ("cid:bafyx", R),
            (&format!("dup:{R}/a/b.mkv"), ""),
        ]);
        assert_eq!(violations(&r), Vec::<String>::new());
    }

    #[test]
    fn each_invariant_is_checked() {
        let r = rows(&[
            ("meta-core:schema-version", "1"),
            ("idx:count/roots", "2"),
            (&format!("idx:roots/{R}"), ""),
            ("file:01JKR8XW5T4QMV7AHNJ2DEFGHM/title", "x"),
            ("cid:bafyx", R),
            ("dup:01JKR8XW5T4QMV7AHNJ2DEFGHN/p", ""),
        ]);
        assert_eq!(violations(&r).len(), 6, "{:#?}", violations(&r));
    }

    #[test]
    fn diff_names_every_change() {
        let a = rows(&[("a", "1"), ("b", "2")]);
        let b = rows(&[("b", "3"), ("c", "4")]);
        assert_eq!(diff(&a, &b), "- a = 1\n~ b: 2 -> 3\n+ c = 4\n");
        assert_eq!(
            record(&rows(&[(&format!("file:{R}/x/y"), "v")]), R)
                .get("x/y")
                .map(String::as_str),
            Some("v")
        );
    }
}
