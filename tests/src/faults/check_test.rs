//! The checks find what they are there to find: a lost, a half-written,
//! a repeated, a reordered or a missing item each makes a problem.

use super::*;

fn entry(id: u64, kind: &str, subject: &str) -> Entry {
    Entry {
        id,
        kind: kind.to_owned(),
        subject: subject.to_owned(),
    }
}

fn followed(ids: &[u64]) -> Followed {
    Followed {
        ids: ids.to_vec(),
        ..Followed::default()
    }
}

#[test]
fn a_follower_short_of_an_entry_or_given_one_twice_or_out_of_order_is_a_problem() {
    let committed: Vec<Entry> = (1..=4).map(|i| entry(i, "set", "k")).collect();
    let cases = [
        (vec![1, 2, 3, 4], 0),
        (vec![1, 2, 4], 1),
        (vec![1, 2, 2, 3, 4], 1),
        (vec![1, 3, 2, 4], 1),
        (vec![1, 2, 3, 4, 5], 1),
    ];
    for (ids, problems) in cases {
        let d = delivery(&committed, &[followed(&ids)]);
        assert_eq!(d.problems.len(), problems, "{ids:?}: {:?}", d.problems);
    }
    let mut gapped = followed(&[1, 2, 3, 4]);
    gapped.gaps = 1;
    assert_eq!(delivery(&committed, &[gapped]).problems.len(), 1);
}

#[test]
fn a_copied_file_never_announced_or_announced_twice_is_a_problem() {
    let committed = [
        entry(1, "add", "watch/a"),
        entry(2, "add", "watch/b"),
        entry(3, "change", "watch/b"),
        entry(4, "add", "watch/d"),
        entry(5, "add", "watch/d"),
    ];
    let copied: Vec<String> = ["watch/a", "watch/b", "watch/c", "watch/d"]
        .map(str::to_owned)
        .to_vec();
    let a = announced(&committed, &copied);
    assert_eq!(a.once, 1);
    assert_eq!(a.problems.len(), 3, "{:?}", a.problems);
}

#[test]
fn a_lost_acknowledged_record_and_a_half_committed_one_are_found_in_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kv.db");
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    let put = |rid: &str, w: usize, i: u64, fields: usize| {
        for (k, v) in record_fields(w, i).into_iter().take(fields) {
            conn.execute(
                "INSERT INTO kv VALUES (?1, ?2)",
                [format!("file:{rid}/{k}"), v.as_str().unwrap().to_owned()],
            )
            .unwrap();
        }
    };
    put("whole", 0, 0, FIELDS_PER_RECORD);
    put("short", 0, 1, FIELDS_PER_RECORD - 1);
    put("committed", 0, 3, FIELDS_PER_RECORD);
    put("half", 0, 4, 3);
    let tally = Tally {
        acked: vec![
            ("whole".into(), 0, 0),
            ("short".into(), 0, 1),
            ("absent".into(), 0, 2),
        ],
        uncertain: vec![
            ("committed".into(), 0, 3),
            ("half".into(), 0, 4),
            ("never".into(), 0, 5),
        ],
        unexpected: Vec::new(),
    };
    let w = writes(&db, &[tally]);
    assert_eq!((w.acked, w.uncertain, w.uncertain_committed), (3, 3, 1));
    assert_eq!(w.lost.len(), 2, "{:?}", w.lost);
    assert_eq!(w.partial.len(), 1, "{:?}", w.partial);
}
