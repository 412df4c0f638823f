//! Property tests of the search request as a client sends it (free text
//! and filters of any text): its FTS5 query is always one SQLite runs,
//! and the index never leaves out a record the matchers pass, so a search
//! by the index answers what a scan answers. Records and queries are
//! drawn from one small vocabulary (cases, sigmas, a dotted capital I,
//! CIDs, key-sets, comma lists, long values) so that they meet, and from
//! any text. `cargo test -p storaged fuzz`.

use std::collections::BTreeSet;

use metacore::api::storaged::{SearchFilter, SearchQuery};
use metacore::record::Fields;
use metacore::rid::Rid;
use metacore::testing::cases;
use proptest::prelude::*;
use rusqlite::Connection;

use super::index::CREATE_TABLE;
use super::tokens::{MAX_INDEXED_CHARS, document};
use super::{fts_query, matchers};

const NAMES: &[&str] = &[
    "title",
    "Title",
    "fileName",
    "filePath",
    "showtitle",
    "genres",
    "genres/Action",
    "genres/drama",
    "GENRES/war",
    "tmdbid",
    "year",
    "poster",
    "ΑΣ",
    "ΑΣ/b",
];

const WORDS: &[&str] = &[
    "Night River",
    "night",
    "RIVER",
    "1405",
    "140",
    "true",
    "false",
    " FALSE ",
    "0",
    "yes",
    "Drama, Science Fiction ,Thriller",
    "science fiction",
    "fict",
    "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
    "BAFKREIGH2AKISCAILDCQABSYG3DFR6CHU3FGPREGIYMSCK7E7AQA4S52ZY",
    "İstanbul",
    "istanbul",
    "ΟΔΟΣ",
    "οδος",
    "ΑΣ",
    "Action",
    "action",
    "war",
    "a",
    "ab",
    "",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(WORDS).prop_map(str::to_owned),
        1 => any::<String>(),
        // Past what is indexed of a value: only its head is.
        1 => (prop::sample::select(WORDS), 0..3usize).prop_map(|(w, n)| {
            format!("{} {w}", "x".repeat(MAX_INDEXED_CHARS + n))
        }),
    ]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(NAMES).prop_map(str::to_owned),
        1 => any::<String>().prop_filter("no NUL in a stored name", |s| !s.contains('\0')),
    ]
}

/// A record as stored: a RID and its fields (no NUL in them).
fn record() -> impl Strategy<Value = (Rid, Fields)> {
    (
        any::<u128>().prop_map(Rid::from_u128),
        prop::collection::btree_map(name(), word(), 0..6),
    )
        .prop_map(|(rid, mut f)| {
            f.retain(|_, v| !v.contains('\0'));
            (rid, f)
        })
}

/// A filter on a name the records hold, for a value they hold (or a
/// piece of one), or of the vocabulary or any text.
fn filter(names: Vec<String>, pieces: Vec<String>) -> impl Strategy<Value = SearchFilter> {
    (
        prop_oneof![
            3 => prop::sample::select(names),
            1 => prop::sample::select(NAMES).prop_map(str::to_owned),
            1 => any::<String>(),
        ],
        prop::collection::vec(
            prop_oneof![3 => prop::sample::select(pieces), 1 => word()],
            0..3,
        ),
        any::<bool>(),
    )
        .prop_map(|(property, values, exact)| SearchFilter {
            property,
            values,
            exact,
        })
}

/// Free text: words the records hold, words of the vocabulary, a piece
/// of a RID, or any text.
fn query(rids: Vec<String>, pieces: Vec<String>) -> impl Strategy<Value = String> {
    let rid_piece = (
        prop::sample::select(rids),
        any::<prop::sample::Index>(),
        0..12usize,
        any::<bool>(),
    )
        .prop_map(|(rid, at, len, lower)| {
            let from = at.index(rid.len());
            let piece = &rid[from..(from + len).min(rid.len())];
            if lower {
                piece.to_lowercase()
            } else {
                piece.to_owned()
            }
        });
    let held = prop::collection::vec(prop::sample::select(pieces), 1..3);
    prop_oneof![
        3 => held.prop_map(|w| w.join(" ")),
        2 => prop::collection::vec(word(), 0..3).prop_map(|w| w.join(" ")),
        1 => rid_piece,
        1 => any::<String>(),
    ]
}

/// The words and comma pieces of the records' values, and the values
/// whole: what a search that finds them asks for.
fn pieces_of(records: &[(Rid, Fields)]) -> Vec<String> {
    let mut out = BTreeSet::from(["night".to_owned()]);
    for v in records.iter().flat_map(|(_, f)| f.values()) {
        out.insert(v.clone());
        out.extend(v.split_whitespace().map(str::to_owned));
        out.extend(v.split(',').map(|p| p.trim().to_owned()));
    }
    out.into_iter().collect()
}

/// Records and a search over them.
fn case() -> impl Strategy<Value = (Vec<(Rid, Fields)>, SearchQuery)> {
    prop::collection::vec(record(), 1..6).prop_flat_map(|records| {
        let rids: Vec<String> = records.iter().map(|(r, _)| r.to_string()).collect();
        let mut names: Vec<String> = records
            .iter()
            .flat_map(|(_, f)| {
                f.keys()
                    .map(|k| k.split('/').next().unwrap_or(k).to_owned())
            })
            .collect();
        names.push("title".into());
        let pieces = pieces_of(&records);
        (
            Just(records),
            query(rids, pieces.clone()),
            prop_oneof![
                2 => Just(Vec::new()),
                1 => prop::collection::vec(filter(names, pieces), 1..3),
            ],
        )
            .prop_map(|(records, query, filters)| {
                (
                    records,
                    SearchQuery {
                        query,
                        filters,
                        limit: 100,
                    },
                )
            })
    })
}

/// The rows of `records` (numbered from 1) that the index offers for `q`:
/// every row when the search is a scan.
fn candidates(records: &[(Rid, Fields)], q: &SearchQuery) -> Result<BTreeSet<i64>, TestCaseError> {
    let conn = Connection::open_in_memory().expect("an in-memory database");
    conn.execute_batch(CREATE_TABLE).expect("the index table");
    for (row, (rid, fields)) in (1..).zip(records) {
        conn.execute(
            "INSERT INTO search_fts(rowid, doc) VALUES (?1, ?2)",
            rusqlite::params![row, document(&rid.to_string(), fields)],
        )
        .expect("a row is indexed");
    }
    let Some(expr) = fts_query(q) else {
        return Ok((1..=records.len() as i64).collect());
    };
    let mut stmt = conn
        .prepare("SELECT rowid FROM search_fts WHERE search_fts MATCH ?1")
        .expect("the query prepares");
    let rows = stmt
        .query_map([&expr], |r| r.get::<_, i64>(0))
        .and_then(|rows| rows.collect::<Result<BTreeSet<i64>, _>>());
    match rows {
        Ok(rows) => Ok(rows),
        Err(e) => Err(TestCaseError::fail(format!("FTS5 refused {expr:?}: {e}"))),
    }
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn the_index_offers_every_record_the_matchers_pass((records, q) in case()) {
        let offered = candidates(&records, &q)?;
        for (row, (rid, fields)) in (1..).zip(&records) {
            if matchers::matches(&rid.to_string(), fields, &q.query, &q.filters) {
                prop_assert!(offered.contains(&row), "{} passes but is not offered for {:?}", rid, q);
            }
        }
    }

    #[test]
    fn a_value_past_the_indexed_head_is_still_found(
        (rid, mut fields) in record(),
        name in prop::sample::select(NAMES),
        head in 60..300usize,
        tail in prop::sample::select(WORDS),
        how in 0..3u8,
    ) {
        fields.insert(name.to_owned(), format!("{} {tail}", "x".repeat(head)));
        let filter = |exact| SearchFilter {
            property: name.to_owned(),
            values: vec![tail.to_owned()],
            exact,
        };
        let (query, filters) = match how {
            0 => (tail.to_owned(), Vec::new()),
            1 => (String::new(), vec![filter(false)]),
            _ => (String::new(), vec![filter(true)]),
        };
        let q = SearchQuery { query, filters, limit: 10 };
        let offered = candidates(&[(rid, fields.clone())], &q)?;
        if matchers::matches(&rid.to_string(), &fields, &q.query, &q.filters) {
            prop_assert!(offered.contains(&1), "{:?} is not offered for {:?}", fields, q);
        }
    }

    #[test]
    fn any_search_is_a_query_sqlite_runs(
        query in any::<String>(),
        filters in prop::collection::vec(
            (any::<String>(), prop::collection::vec(any::<String>(), 0..3), any::<bool>()),
            0..3,
        ),
        r in record(),
    ) {
        let filters = filters
            .into_iter()
            .map(|(property, values, exact)| SearchFilter { property, values, exact })
            .collect();
        let q = SearchQuery { query, filters, limit: 10 };
        let offered = candidates(std::slice::from_ref(&r), &q)?;
        if matchers::matches(&r.0.to_string(), &r.1, &q.query, &q.filters) {
            prop_assert!(offered.contains(&1));
        }
    }
}
