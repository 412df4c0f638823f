//! Search on a real SQLite file: the indexed plan answers exactly what a
//! scan of every record through the same matchers answers, on random
//! records and random requests, after creates, updates and deletes, and
//! again after the index is rebuilt from the rows.

use metacore::api::storaged::{SearchFilter, SearchQuery};
use metacore::checked::{CheckedFields, FieldName};
use metacore::record::{Fields, Target};
use metacore::rid::Rid;
use storaged::{Options, Store};

/// A small deterministic generator (xorshift64*), so a failure repeats.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const WORDS: &[&str] = &[
    "night",
    "river",
    "Night",
    "RIVER",
    "day",
    "lake",
    "the",
    "of",
    "a",
    "x",
    "Rivière",
    "ΣΟΦΙΑ",
    "star",
    "wars",
    "140",
    "1405",
    "99",
    "2019",
    "2020",
    "drama",
    "Drama",
    "action",
    "sci-fi",
    "false",
    "0",
    "true",
    "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
    "BAFKREIGH2AKISCAILDCQABSYG3DFR6CHU3FGPREGIYMSCK7E7AQA4S52ZY",
    "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
    "kreigh2ak",
];
/// CIDs, which the index keeps whole rather than by trigrams.
const CIDS: &[&str] = &[
    "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
    "bafkreidgvpkjawlxz6sffxzwgooowe5yt7i6wsyg236mfoks77nywkptdq",
    "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
];
const GENRES: &[&str] = &[
    "Action", "action", "Drama", "drama", "Comedy", "War", "sci-fi",
];
const TRUTHS: &[&str] = &["true", "1", "yes", "false", "0", "", " FALSE ", "True"];
const PROPERTIES: &[&str] = &[
    "tmdbid",
    "genres",
    "Genres",
    "year",
    "title",
    "type",
    "missing",
    "categories/newznab",
    "plot",
    "poster",
    "Poster",
    "showtitle",
    "",
];

fn words(g: &mut Gen, n: usize) -> String {
    (0..n).map(|_| g.pick(WORDS)).collect::<Vec<_>>().join(" ")
}

fn record(g: &mut Gen) -> Fields {
    let mut f = Fields::new();
    if g.chance(90) {
        let n = 1 + g.below(3);
        f.insert("title".into(), words(g, n));
    }
    if g.chance(40) {
        let n = 1 + g.below(2);
        f.insert("showtitle".into(), words(g, n));
    }
    if g.chance(60) {
        f.insert(
            "filePath".into(),
            format!("/files/watch/{}.mkv", words(g, 2).replace(' ', ".")),
        );
    }
    if g.chance(80) {
        let id = ["140", "1405", "99", "11405", "7", "2140"][g.below(6)];
        f.insert("tmdbid".into(), id.into());
    }
    if g.chance(50) {
        f.insert(
            "year".into(),
            ["2019", "2020", "1999", "20"][g.below(4)].into(),
        );
    }
    for _ in 0..g.below(4) {
        f.insert(format!("genres/{}", g.pick(GENRES)), g.pick(TRUTHS).into());
    }
    if g.chance(30) {
        let n = 1 + g.below(3);
        let pieces: Vec<&str> = (0..n).map(|_| g.pick(GENRES)).collect();
        f.insert("genres".into(), pieces.join(", "));
    }
    if g.chance(20) {
        f.insert("categories/newznab/2040".into(), "true".into());
    }
    if g.chance(10) {
        // Longer than what is indexed of a value.
        f.insert("plot".into(), format!("{} river end", "word ".repeat(80)));
    }
    if g.chance(5) {
        // Longer than what is indexed of a free-text field.
        f.insert(
            "filePath".into(),
            format!("/files/{}night.mkv", "deep/".repeat(60)),
        );
    }
    if g.chance(40) {
        f.insert("poster".into(), g.pick(CIDS).into());
    }
    if g.chance(10) {
        // A CID in a free-text field.
        f.insert("showtitle".into(), g.pick(CIDS).into());
    }
    if f.is_empty() {
        f.insert("type".into(), "movie".into());
    }
    f
}

fn request(g: &mut Gen, rids: &[Rid]) -> SearchQuery {
    let query = match g.below(6) {
        0 | 1 => String::new(),
        2 if !rids.is_empty() => {
            // Part of a RID, in either case.
            let r = rids[g.below(rids.len())].to_string();
            let start = g.below(20);
            let len = 2 + g.below(6);
            let part = &r[start..start + len];
            if g.chance(50) {
                part.to_lowercase()
            } else {
                part.to_owned()
            }
        }
        _ => {
            let n = 1 + g.below(2);
            words(g, n)
        }
    };
    let mut filters = Vec::new();
    for _ in 0..g.below(3) {
        let property = g.pick(PROPERTIES).into();
        let n = g.below(3);
        let values = (0..n).map(|_| g.pick(WORDS).to_owned()).collect();
        filters.push(SearchFilter {
            property,
            values,
            exact: g.chance(50),
        });
    }
    SearchQuery {
        query,
        filters,
        limit: [1, 3, 10, 1000][g.below(4)],
    }
}

async fn compare(store: &Store, g: &mut Gen, rids: &[Rid], rounds: usize) -> usize {
    let mut nonempty = 0;
    for _ in 0..rounds {
        let q = request(g, rids);
        let indexed = store.search(q.clone()).await.unwrap();
        let scanned = store.search_by_scan(q.clone()).await.unwrap();
        assert_eq!(indexed, scanned, "{q:?}");
        nonempty += usize::from(!indexed.results.is_empty());
    }
    nonempty
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_index_answers_what_a_scan_answers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = Store::open(&Options::for_path(&path)).unwrap();
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let mut rids = Vec::new();
    for _ in 0..400 {
        let rid = Rid::mint();
        store
            .replace(
                Target::Rid(rid),
                CheckedFields::check(record(&mut g)).unwrap(),
            )
            .await
            .unwrap();
        rids.push(rid);
    }
    let found = compare(&store, &mut g, &rids, 400).await;
    assert!(found > 100, "the requests find something: {found} of 400");

    // Updates, field deletes and record deletes, then again.
    for _ in 0..200 {
        let rid = rids[g.below(rids.len())];
        match g.below(4) {
            0 => {
                let _ = store.delete_root(Target::Rid(rid)).await;
            }
            1 => {
                let _ = store
                    .delete_field(Target::Rid(rid), FieldName::new("title").unwrap())
                    .await;
            }
            _ => {
                store
                    .merge(
                        Target::Rid(rid),
                        CheckedFields::check(record(&mut g)).unwrap(),
                    )
                    .await
                    .unwrap();
            }
        }
    }
    compare(&store, &mut g, &rids, 300).await;
    // The schema counters kept on every write are what counting every
    // value again gives.
    let kept = store.schema().await.unwrap().fields;
    let recounted = store.rescan_schema().await.unwrap();
    assert_eq!(kept, recounted.fields);
    assert!(
        kept.contains_key("tmdbid") && recounted.values > 400,
        "{kept:?}"
    );
    assert_eq!(kept["tmdbid"].type_, "int");
    assert!(!kept.keys().any(|k| k.starts_with("cids/")));
    store.close().await;
    drop(store);

    // Rebuilt from the rows (as after a change of scheme or of the
    // excluded prefixes), the index answers the same.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE kv SET v = 'stale' WHERE k = 'idx:fts-built'", [])
        .unwrap();
    drop(conn);
    let store = Store::open(&Options::for_path(&path)).unwrap();
    compare(&store, &mut g, &rids, 300).await;
    store.close().await;
}

/// RIDs chosen to share their top 63 bits (labels start as those bits)
/// still come back in RID order, and every one of them: the labels are
/// spread between neighbours, and a crowded range is relabelled (in
/// descending order, a new label is often a neighbour's old one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colliding_rids_keep_rid_order() {
    let mut g = Gen(7);
    let mut shuffled: Vec<u128> = (0..300).collect();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, g.below(i + 1));
    }
    let orders: [Vec<u128>; 3] = [
        // From the middle outwards, so that every gap is halved.
        {
            let mut o: Vec<u128> = (0..200).collect();
            o.sort_by_key(|i| (i % 2 == 0, if i % 2 == 0 { 200 - i } else { *i }));
            o
        },
        (0..300).rev().collect(),
        shuffled,
    ];
    for order in orders {
        colliding_in(order).await;
    }
}

async fn colliding_in(order: Vec<u128>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("c.db"))).unwrap();
    let base = Rid::mint().as_u128() & !((1u128 << 65) - 1);
    let mut rids: Vec<Rid> = Vec::new();
    for i in order {
        let rid = Rid::from_u128(base | (i << 8));
        let fields: Fields = [("title".to_string(), format!("same title {i}"))].into();
        store
            .replace(Target::Rid(rid), CheckedFields::check(fields).unwrap())
            .await
            .unwrap();
        rids.push(rid);
    }
    rids.sort();
    let q = SearchQuery {
        query: "same title".into(),
        filters: Vec::new(),
        limit: 1000,
    };
    let got: Vec<Rid> = store
        .search(q.clone())
        .await
        .unwrap()
        .results
        .into_iter()
        .map(|r| r.rid)
        .collect();
    assert_eq!(got, rids);
    assert_eq!(
        store.search(q.clone()).await.unwrap(),
        store.search_by_scan(q).await.unwrap()
    );
    store.close().await;
}

/// A record whose every field is excluded from search is still found by
/// its RID, as a scan finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_excluded_fields_is_found_by_its_rid() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("x.db"))).unwrap();
    let rid = Rid::mint();
    let fields: Fields = [("categories/newznab/2040".to_string(), "true".to_string())].into();
    store
        .replace(Target::Rid(rid), CheckedFields::check(fields).unwrap())
        .await
        .unwrap();
    let q = SearchQuery {
        query: rid.to_string()[14..24].to_lowercase(),
        filters: Vec::new(),
        limit: 10,
    };
    let indexed = store.search(q.clone()).await.unwrap();
    assert_eq!(indexed, store.search_by_scan(q).await.unwrap());
    assert_eq!(indexed.results.len(), 1);
    assert!(
        indexed.results[0].fields.is_empty(),
        "the excluded field is not shown"
    );
    store.close().await;
}

/// A rescan that shares its group with other writes counts each value
/// once: the counters after are what a rescan on its own gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescan_among_writes_counts_each_value_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("r.db"))).unwrap();
    let mut rids = Vec::new();
    for i in 0..40 {
        let rid = Rid::mint();
        let fields: Fields = [
            ("year".to_string(), (1990 + i).to_string()),
            ("rating".to_string(), "7.5".to_string()),
        ]
        .into();
        store
            .replace(Target::Rid(rid), CheckedFields::check(fields).unwrap())
            .await
            .unwrap();
        rids.push(rid);
    }
    for (i, rid) in rids.iter().enumerate() {
        let fields: Fields = [("year".to_string(), format!("unknown {i}"))].into();
        let (a, b, c, d) = tokio::join!(
            store.merge(
                Target::Rid(Rid::mint()),
                CheckedFields::check(fields.clone()).unwrap()
            ),
            store.delete_field(Target::Rid(*rid), FieldName::new("rating").unwrap()),
            store.rescan_schema(),
            store.merge(Target::Rid(*rid), CheckedFields::check(fields).unwrap()),
        );
        a.unwrap();
        b.unwrap();
        c.unwrap();
        d.unwrap();
        let kept = store.schema().await.unwrap().fields;
        let alone = store.rescan_schema().await.unwrap().fields;
        assert_eq!(kept, alone, "round {i}");
    }
    store.close().await;
}

/// Records written while the index was not kept (a standby on an older
/// build) are found once a store that keeps it opens the file again: it
/// sees the index short of rows and rebuilds it, and the counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_written_without_the_index_are_found_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.db");
    let write = |store: Store, title: &'static str| async move {
        let fields: Fields = [("title".to_string(), title.to_string())].into();
        store
            .replace(
                Target::Rid(Rid::mint()),
                CheckedFields::check(fields).unwrap(),
            )
            .await
            .unwrap();
        store.close().await;
    };
    write(
        Store::open(&Options::for_path(&path)).unwrap(),
        "kept river",
    )
    .await;
    let mut without = Options::for_path(&path);
    without.search_index = false;
    write(Store::open(&without).unwrap(), "unkept river").await;
    let store = Store::open(&Options::for_path(&path)).unwrap();
    let q = SearchQuery {
        query: "river".into(),
        filters: Vec::new(),
        limit: 10,
    };
    let indexed = store.search(q.clone()).await.unwrap();
    assert_eq!(indexed.results.len(), 2, "{indexed:?}");
    assert_eq!(indexed, store.search_by_scan(q).await.unwrap());
    assert_eq!(
        store.schema().await.unwrap().fields["title"].breakdown["string"],
        2
    );
    store.close().await;
}

/// An index row that cannot be updated (here a corrupt label) does not
/// fail the write: it commits, search answers by scanning meanwhile, and
/// the next open rebuilds the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_index_row_fails_no_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    let rid = Rid::mint();
    let title =
        |t: &str| CheckedFields::check([("title".to_string(), t.to_string())].into()).unwrap();
    let store = Store::open(&Options::for_path(&path)).unwrap();
    store
        .replace(Target::Rid(rid), title("alpha river"))
        .await
        .unwrap();
    store.close().await;
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE kv SET v = 'junk' WHERE k = ?1",
        [format!("idx:fts/{rid}")],
    )
    .unwrap();
    drop(conn);
    let q = SearchQuery {
        query: "beta".into(),
        filters: Vec::new(),
        limit: 10,
    };
    let store = Store::open(&Options::for_path(&path)).unwrap();
    store
        .merge(Target::Rid(rid), title("beta river"))
        .await
        .unwrap();
    assert_eq!(store.search(q.clone()).await.unwrap().results.len(), 1);
    store.close().await;
    drop(store);
    let store = Store::open(&Options::for_path(&path)).unwrap();
    let indexed = store.search(q.clone()).await.unwrap();
    assert_eq!(indexed.results.len(), 1);
    assert_eq!(indexed, store.search_by_scan(q).await.unwrap());
    store.close().await;
}

/// An answer stops at its byte bound and says so, the first result kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_stops_at_its_byte_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&Options::for_path(dir.path().join("t.db"))).unwrap();
    let big = "x".repeat(7 << 20);
    for _ in 0..3 {
        let fields: Fields = [
            ("title".to_string(), "big river".to_string()),
            ("plot".to_string(), big.clone()),
        ]
        .into();
        store
            .replace(
                Target::Rid(Rid::mint()),
                CheckedFields::check(fields).unwrap(),
            )
            .await
            .unwrap();
    }
    let q = SearchQuery {
        query: "river".into(),
        filters: Vec::new(),
        limit: 10,
    };
    for page in [
        store.search(q.clone()).await.unwrap(),
        store.search_by_scan(q).await.unwrap(),
    ] {
        assert_eq!(page.results.len(), 2, "16 MiB hold two of 7 MiB");
        assert!(page.truncated);
    }
    let one = SearchQuery {
        query: "river".into(),
        filters: Vec::new(),
        limit: 1,
    };
    assert!(
        !store.search(one).await.unwrap().truncated,
        "the limit came first"
    );
    store.close().await;
}
