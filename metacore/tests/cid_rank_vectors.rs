//! The golden CID ranking vectors every implementation of the original is
//! held to, loaded from the vendored copy (kept identical to
//! `shared/data/cid-rank-vectors.json`).

use metacore::cid::{Cid, better, canonical, rank};

fn vectors() -> serde_json::Value {
    let text = include_str!("data/cid-rank-vectors.json");
    serde_json::from_str(text).expect("vectors file is JSON")
}

#[test]
fn vendored_copy_matches_the_shared_one_when_present() {
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/cid-rank-vectors.json");
    if let Ok(text) = std::fs::read_to_string(&shared) {
        assert_eq!(
            text,
            include_str!("data/cid-rank-vectors.json"),
            "re-vendor {}",
            shared.display()
        );
    }
}

#[test]
fn every_vector_ranks_as_pinned() {
    let v = vectors();
    let list = v["vectors"].as_array().unwrap();
    assert_eq!(list.len(), 26);
    for item in list {
        let name = item["name"].as_str().unwrap();
        let cid = item["cid"].as_str().unwrap();
        let want = item["rank"].as_u64().unwrap() as u8;
        assert_eq!(rank(cid), want, "vector {name} ({cid})");
        // Every positive vector is an accepted CID; rank-0 ones may or may
        // not parse (weak digests parse, garbage does not).
        if want > 0 {
            assert!(Cid::parse(cid).is_ok(), "vector {name} parses");
        }
    }
}

#[test]
fn rejected_forms_do_not_parse() {
    for s in [
        "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
        "midhash256:bagacbabaeaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "not-a-cid",
        "",
    ] {
        assert!(Cid::parse(s).is_err(), "{s:?} must be refused");
    }
}

#[test]
fn ladder_order_and_tie_break() {
    let v = vectors();
    assert_eq!(v["tieBreak"], "lexicographically smaller cid wins");
    let list = v["vectors"].as_array().unwrap();
    let cids: Vec<&str> = list.iter().map(|i| i["cid"].as_str().unwrap()).collect();
    // The canonical of all vectors is the dag-pb root.
    assert_eq!(
        canonical(cids.iter().copied()),
        Some("bafybeiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    );
    // Pairwise, `better` agrees with the ranks.
    for a in &cids {
        for b in &cids {
            let (ra, rb) = (rank(a), rank(b));
            let want = ra > rb || (ra == rb && a <= b);
            assert_eq!(better(a, b), want, "better({a}, {b})");
        }
    }
}
