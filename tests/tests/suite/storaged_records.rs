//! Every record operation of storaged over its real socket, checked through
//! the API and against the rows left in the database file.

use std::collections::BTreeSet;

use e2e::fixtures::{
    api_error, btih_v2, checked, dag_pb, field_name, field_write, fields, file_path, key_write,
    member, midhash, random_midhash, random_rid, set_member, sha2_256, target, url_locator,
    writable,
};
use e2e::snapshot::{self, aliases, assert_sound, dump, keys_naming, record, roots};
use e2e::{Storaged, unchecked};
use metacore::api::storaged::{EntriesQuery, MintBody, PageQuery, RangeQuery, StoragedClient};
use metacore::{ErrorCode, Fields, Rid, StreamId, StreamName};

/// The `(type, key)` of every `meta:events` entry after `after`.
async fn meta_events_after(c: &StoragedClient, after: Option<StreamId>) -> Vec<(String, String)> {
    let q = EntriesQuery {
        after,
        limit: Some(10_000),
    };
    let entries = c.entries(StreamName::Meta, &q).await.unwrap();
    entries
        .into_iter()
        .map(|e| (e.fields["type"].clone(), e.fields["key"].clone()))
        .collect()
}

async fn meta_head(c: &StoragedClient) -> Option<StreamId> {
    c.stream_info(StreamName::Meta).await.unwrap().last
}

#[tokio::test]
async fn merge_by_an_unregistered_cid_mints_a_root_and_registers_the_cid() {
    let s = Storaged::start().await;
    let c = s.client();
    let cid = random_midhash();

    let w = c
        .merge(
            &target(cid.as_str()),
            &checked(fields(&[("filePath", "/files/a.mkv"), ("title", "A")])),
        )
        .await
        .unwrap();
    assert!(w.created, "the first write by a new CID makes the record");
    assert_eq!(c.resolve(&target(cid.as_str())).await.unwrap(), w.rid);
    let rec = c.get_record(&target(cid.as_str())).await.unwrap();
    assert_eq!(rec.rid, w.rid);
    assert_eq!(
        rec.fields,
        fields(&[
            (&member(&cid), "true"),
            ("filePath", "/files/a.mkv"),
            ("title", "A")
        ])
    );

    let rows = dump(&s.db_path());
    assert_eq!(aliases(&rows).get(cid.as_str()), Some(&w.rid.to_string()));
    assert!(roots(&rows).contains(&w.rid.to_string()));
    assert_sound(&rows);

    let again = c
        .merge(&target(cid.as_str()), &checked(fields(&[("title", "B")])))
        .await
        .unwrap();
    assert_eq!(
        (again.rid, again.created, again.changed),
        (w.rid, false, 1),
        "the CID now addresses that record"
    );
    assert_eq!(roots(&dump(&s.db_path())).len(), 1);
}

#[tokio::test]
async fn merge_by_rid_creates_the_record_then_merges_into_it() {
    let s = Storaged::start().await;
    let c = s.client();
    let rid = random_rid();
    let r = rid.to_string();

    let w = c
        .merge(&target(&r), &checked(fields(&[("a", "1"), ("b", "2")])))
        .await
        .unwrap();
    assert_eq!((w.rid, w.created, w.changed), (rid, true, 2));
    let w = c
        .merge(&target(&r), &checked(fields(&[("b", "3"), ("c", "4")])))
        .await
        .unwrap();
    assert_eq!((w.rid, w.created, w.changed), (rid, false, 2));
    let w = c
        .merge(&target(&r), &checked(fields(&[("a", "1")])))
        .await
        .unwrap();
    assert_eq!(w.changed, 0, "the same value is no change");

    assert_eq!(
        c.get_record(&target(&r)).await.unwrap().fields,
        fields(&[("a", "1"), ("b", "3"), ("c", "4")])
    );
    let rows = dump(&s.db_path());
    assert_eq!(
        record(&rows, &r),
        fields(&[("a", "1"), ("b", "3"), ("c", "4")])
    );
    assert_sound(&rows);
}

#[tokio::test]
async fn replace_deletes_absent_fields_and_retracts_the_aliases_of_dropped_members() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    let (x, y) = (random_midhash(), random_midhash());
    c.merge(
        &target(&r),
        &checked(fields(&[
            ("title", "T"),
            ("year", "1999"),
            (&member(&x), "true"),
            (&member(&y), "true"),
        ])),
    )
    .await
    .unwrap();

    let w = c
        .replace(
            &target(&r),
            &checked(fields(&[("title", "T2"), (&member(&y), "true")])),
        )
        .await
        .unwrap();
    assert!(!w.created);
    assert_eq!(w.changed, 3, "year and cids/x deleted, title changed");
    let want = fields(&[("title", "T2"), (&member(&y), "true")]);
    assert_eq!(c.get_record(&target(&r)).await.unwrap().fields, want);

    let rows = dump(&s.db_path());
    assert_eq!(record(&rows, &r), want);
    assert!(
        !rows.contains_key(&format!("cid:{x}")),
        "the dropped member's alias is gone"
    );
    assert_eq!(rows.get(&format!("cid:{y}")), Some(&r));
    assert_sound(&rows);
    assert_eq!(
        api_error(c.resolve(&target(x.as_str())).await).code,
        ErrorCode::UnknownCid
    );

    // Addressed by a CID, the replace keeps that CID's member.
    let w = c
        .replace(&target(y.as_str()), &checked(fields(&[("title", "T3")])))
        .await
        .unwrap();
    assert_eq!(w.rid.to_string(), r);
    assert_eq!(
        c.get_record(&target(&r)).await.unwrap().fields,
        fields(&[("title", "T3"), (&member(&y), "true")])
    );
    assert_sound(&dump(&s.db_path()));
}

#[tokio::test]
async fn single_fields_with_slashes_and_unicode_are_set_read_and_deleted() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    let names = [
        "fileinfo/streamdetails/video/0/codec",
        "titles/日本語/タイトル",
        "Le ∕ Film é",
        "odd chars/a%2Fb?c#d&e=f+g",
    ];
    for (i, name) in names.iter().enumerate() {
        let value = format!("välue {i} ✓");
        let w = c
            .set_field(&target(&r), &field_write(name, &value))
            .await
            .unwrap();
        assert_eq!(
            (w.field.as_str(), w.created, w.changed),
            (*name, i == 0, true),
            "{name}"
        );
        let w = c
            .set_field(&target(&r), &field_write(name, &value))
            .await
            .unwrap();
        assert!(!w.changed, "{name}: the same value again changes nothing");
        assert_eq!(
            c.get_field(&target(&r), &field_name(name))
                .await
                .unwrap()
                .value,
            value,
            "{name}"
        );
    }
    let want: Fields = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.to_string(), format!("välue {i} ✓")))
        .collect();
    assert_eq!(c.get_record(&target(&r)).await.unwrap().fields, want);
    assert_eq!(
        record(&dump(&s.db_path()), &r),
        want,
        "the rows hold the field names as sent"
    );
    c.add_duplicate(&target(&r), &file_path("/files/dup.mkv"))
        .await
        .unwrap();

    for name in &names[..names.len() - 1] {
        assert!(
            c.delete_field(&target(&r), &field_name(name))
                .await
                .unwrap()
                .existed,
            "{name}"
        );
        assert!(
            !c.delete_field(&target(&r), &field_name(name))
                .await
                .unwrap()
                .existed,
            "{name} is gone"
        );
        assert_eq!(
            api_error(c.get_field(&target(&r), &field_name(name)).await).code,
            ErrorCode::NotFound,
            "{name}"
        );
    }
    let last = names[names.len() - 1];
    assert!(
        c.delete_field(&target(&r), &field_name(last))
            .await
            .unwrap()
            .existed
    );
    assert_eq!(
        api_error(c.get_record(&target(&r)).await).code,
        ErrorCode::UnknownRoot,
        "the last field took the record"
    );
    assert_eq!(
        api_error(c.document(&target(&r)).await).code,
        ErrorCode::UnknownRoot
    );
    assert_eq!(
        api_error(c.delete_field(&target(&r), &field_name(last)).await).code,
        ErrorCode::UnknownRoot
    );
    let rows = dump(&s.db_path());
    assert!(
        keys_naming(&rows, &r).is_empty(),
        "{:?}",
        keys_naming(&rows, &r)
    );
    assert_sound(&rows);
}

/// A record with three plain fields, two CID members it owns, a member
/// owned by another root and two duplicate paths.
async fn full_record(c: &StoragedClient) -> (String, String) {
    let (x, y, z) = (random_midhash(), random_midhash(), random_midhash());
    let other = random_rid().to_string();
    c.merge(
        &target(&other),
        &checked(fields(&[("title", "other"), (&member(&z), "true")])),
    )
    .await
    .unwrap();
    let r = random_rid().to_string();
    let f = [
        ("title", "T"),
        ("year", "2001"),
        ("filePath", "/files/t.mkv"),
        (&member(&x), "true"),
        (&member(&y), "true"),
    ];
    c.merge(&target(&r), &checked(fields(&f))).await.unwrap();
    assert_eq!(
        c.add_alias(&target(&r), &z)
            .await
            .unwrap()
            .owner
            .to_string(),
        other
    );
    c.add_duplicate(&target(&r), &file_path("/files/copy/t.mkv"))
        .await
        .unwrap();
    c.add_duplicate(&target(&r), &file_path("/files/other copy/t.mkv"))
        .await
        .unwrap();
    (r, other)
}

#[tokio::test]
async fn deleting_a_root_leaves_no_row_of_it_and_announces_each_field() {
    let s = Storaged::start().await;
    let c = s.client();
    let (r, other) = full_record(c).await;
    let other_before = record(&dump(&s.db_path()), &other);
    let field_keys: BTreeSet<String> = c
        .get_record(&target(&r))
        .await
        .unwrap()
        .fields
        .keys()
        .map(|f| format!("file:{r}/{f}"))
        .collect();
    assert_eq!(field_keys.len(), 6);
    let head = meta_head(c).await;

    let d = c.delete_record(&target(&r)).await.unwrap();
    assert_eq!(d.rid.to_string(), r);

    let rows = dump(&s.db_path());
    assert_eq!(
        keys_naming(&rows, &r),
        Vec::<String>::new(),
        "no field, duplicate, index entry or alias is left"
    );
    assert_eq!(
        record(&rows, &other),
        other_before,
        "the other root is untouched"
    );
    assert_sound(&rows);

    let events = meta_events_after(c, head).await;
    let dels: BTreeSet<String> = events
        .iter()
        .filter(|(t, _)| t == "del")
        .map(|(_, k)| k.clone())
        .collect();
    assert_eq!(dels, field_keys, "one del per field");
    assert_eq!(
        events.len(),
        field_keys.len(),
        "nothing but one del per field: {events:?}"
    );

    assert_eq!(
        api_error(c.get_record(&target(&r)).await).code,
        ErrorCode::UnknownRoot
    );
    assert_eq!(
        api_error(c.delete_record(&target(&r)).await).code,
        ErrorCode::UnknownRoot
    );
}

/// A delete removes every row of the record (fields, aliases,
/// duplicates, index entries) and counts, as the original did, the
/// record's own keys: its fields.
#[tokio::test]
async fn deleting_a_root_removes_every_row_and_counts_its_fields() {
    let s = Storaged::start().await;
    let c = s.client();
    let (r, _) = full_record(c).await;
    let before = snapshot::without_events(&dump(&s.db_path()));
    let d = c.delete_record(&target(&r)).await.unwrap();
    let after = snapshot::without_events(&dump(&s.db_path()));
    // The search index's rows (`idx:fts/`, `idx:ftsrow/`) and the schema
    // counters that fall to 0 go at COMMIT, after the write has counted
    // what it removed.
    let removed: Vec<&String> = before
        .keys()
        .filter(|k| {
            !after.contains_key(*k) && !k.starts_with("idx:fts") && !k.starts_with("idx:schema/")
        })
        .collect();
    // 6 fields, 2 aliases (x, y), 2 duplicates, 1 root index entry.
    assert_eq!(removed.len(), 11, "{removed:#?}");
    let fields = removed
        .iter()
        .filter(|k| k.starts_with(&format!("file:{r}/")))
        .count();
    assert_eq!(fields, 6, "{removed:#?}");
    assert_eq!(d.deleted, 6, "the record's own keys: {removed:#?}");
}

#[tokio::test]
async fn mint_makes_a_record_for_a_file_with_its_cids() {
    let s = Storaged::start().await;
    let c = s.client();
    let (m, h) = (random_midhash(), sha2_256());
    let body = MintBody {
        file_path: file_path("/files/movies/Film (2001)/film.mkv"),
        size_byte: 1_234_567_890,
        mtime_nano: 1_700_000_000_123_456_789,
        cids: vec![m.clone(), h.clone()],
    };
    let rid = c.mint(&body).await.unwrap();
    let want = fields(&[
        ("filePath", "/files/movies/Film (2001)/film.mkv"),
        ("sizeByte", "1234567890"),
        ("mtimeNano", "1700000000123456789"),
        (&member(&m), "true"),
        (&member(&h), "true"),
    ]);
    assert_eq!(
        c.get_record(&target(&rid.to_string()))
            .await
            .unwrap()
            .fields,
        want
    );
    assert_eq!(c.resolve(&target(m.as_str())).await.unwrap(), rid);
    assert_eq!(c.resolve(&target(h.as_str())).await.unwrap(), rid);
    assert_eq!(
        c.document(&target(m.as_str()))
            .await
            .unwrap()
            .canonical_cid
            .as_deref(),
        Some(h.as_str())
    );
    let rows = dump(&s.db_path());
    assert_eq!(record(&rows, &rid.to_string()), want);
    assert!(roots(&rows).contains(&rid.to_string()));
    assert_sound(&rows);
}

#[tokio::test]
async fn an_alias_added_to_a_record_resolves_to_it() {
    let s = Storaged::start().await;
    let c = s.client();
    let rid = random_rid();
    let r = rid.to_string();
    c.merge(&target(&r), &checked(fields(&[("title", "T")])))
        .await
        .unwrap();
    let x = random_midhash();
    let a = c.add_alias(&target(&r), &x.clone()).await.unwrap();
    assert_eq!((a.rid, a.cid.clone(), a.owner), (rid, x.clone(), rid));
    assert_eq!(c.resolve(&target(x.as_str())).await.unwrap(), rid);
    assert_eq!(
        c.get_field(&target(&r), &field_name(&member(&x)))
            .await
            .unwrap()
            .value,
        "true"
    );

    // Addressed through the alias, the next one lands on the same record.
    let y = btih_v2();
    assert_eq!(
        c.add_alias(&target(x.as_str()), &y.clone())
            .await
            .unwrap()
            .owner,
        rid
    );
    assert_eq!(c.resolve(&target(y.as_str())).await.unwrap(), rid);
    let rows = dump(&s.db_path());
    assert_eq!(rows.get(&format!("cid:{y}")), Some(&r));
    assert_sound(&rows);
}

#[tokio::test]
async fn an_alias_owned_by_another_root_keeps_its_first_owner() {
    let s = Storaged::start().await;
    let c = s.client();
    let (a, b) = (random_rid(), random_rid());
    let x = random_midhash();
    c.merge(
        &target(&a.to_string()),
        &checked(fields(&[("title", "A"), (&member(&x), "true")])),
    )
    .await
    .unwrap();
    c.merge(&target(&b.to_string()), &checked(fields(&[("title", "B")])))
        .await
        .unwrap();

    let r = c
        .add_alias(&target(&b.to_string()), &x.clone())
        .await
        .unwrap();
    assert_eq!(
        (r.rid, r.owner),
        (b, a),
        "the member is written to b, the alias stays a's"
    );
    assert_eq!(
        c.get_field(&target(&b.to_string()), &field_name(&member(&x)))
            .await
            .unwrap()
            .value,
        "true"
    );
    assert_eq!(c.resolve(&target(x.as_str())).await.unwrap(), a);
    let w = c
        .merge(&target(x.as_str()), &checked(fields(&[("note", "by cid")])))
        .await
        .unwrap();
    assert_eq!(
        (w.rid, w.created),
        (a, false),
        "a write by the CID goes to its owner"
    );

    // b dropping its member does not touch a's alias.
    assert!(
        c.delete_field(&target(&b.to_string()), &field_name(&member(&x)))
            .await
            .unwrap()
            .existed
    );
    assert_eq!(
        dump(&s.db_path()).get(&format!("cid:{x}")),
        Some(&a.to_string())
    );
    // The owner dropping it removes it.
    assert!(
        c.delete_field(&target(&a.to_string()), &field_name(&member(&x)))
            .await
            .unwrap()
            .existed
    );
    let rows = dump(&s.db_path());
    assert!(!rows.contains_key(&format!("cid:{x}")));
    assert_sound(&rows);
    assert_eq!(
        api_error(c.resolve(&target(x.as_str())).await).code,
        ErrorCode::UnknownCid
    );
}

#[tokio::test]
async fn the_document_lists_cids_and_elects_the_canonical_one_by_rank() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    c.merge(&target(&r), &checked(fields(&[("title", "T")])))
        .await
        .unwrap();
    let doc = c.document(&target(&r)).await.unwrap();
    assert_eq!(
        (
            doc.cids.len(),
            doc.canonical_cid.clone(),
            doc.duplicates.len()
        ),
        (0, None, 0)
    );

    // Best first: dag-pb 40, sha2-256 30, BitTorrent 20, midhash 10, URL 5.
    let ladder = [dag_pb(), sha2_256(), btih_v2(), midhash(), url_locator()];
    for cid in ladder.iter().rev() {
        c.set_field(&target(&r), &field_write(&member(cid), "true"))
            .await
            .unwrap();
    }
    c.add_duplicate(&target(&r), &file_path("/files/b.mkv"))
        .await
        .unwrap();
    c.add_duplicate(&target(&r), &file_path("/files/a.mkv"))
        .await
        .unwrap();
    let doc = c.document(&target(&r)).await.unwrap();
    let mut sorted: Vec<String> = ladder.iter().map(ToString::to_string).collect();
    sorted.sort();
    assert_eq!(doc.cids, sorted);
    assert_eq!(doc.duplicates, ["/files/a.mkv", "/files/b.mkv"]);
    assert_eq!(doc.fields["title"], "T");

    for (i, cid) in ladder.iter().enumerate() {
        let doc = c.document(&target(&r)).await.unwrap();
        assert_eq!(
            doc.canonical_cid.as_deref(),
            Some(cid.as_str()),
            "with {} members left",
            ladder.len() - i
        );
        c.delete_field(&target(&r), &field_name(&member(cid)))
            .await
            .unwrap();
    }
    assert_eq!(c.document(&target(&r)).await.unwrap().canonical_cid, None);

    // A tie goes to the smaller string.
    let (m1, m2) = (random_midhash(), random_midhash());
    c.merge(
        &target(&r),
        &checked(fields(&[(&member(&m1), "true"), (&member(&m2), "true")])),
    )
    .await
    .unwrap();
    let smaller = m1.as_str().min(m2.as_str());
    assert_eq!(
        c.document(&target(m1.as_str()))
            .await
            .unwrap()
            .canonical_cid
            .as_deref(),
        Some(smaller)
    );
}

#[tokio::test]
async fn duplicates_are_added_once_to_existing_records() {
    let s = Storaged::start().await;
    let c = s.client();
    let x = random_midhash();
    let w = c
        .merge(
            &target(x.as_str()),
            &checked(fields(&[("filePath", "/files/a.mkv")])),
        )
        .await
        .unwrap();
    let r = w.rid.to_string();
    let d = c
        .add_duplicate(&target(&r), &file_path("/files/copies/a.mkv"))
        .await
        .unwrap();
    assert_eq!(
        (d.rid, d.path.as_str(), d.added),
        (w.rid, "/files/copies/a.mkv", true)
    );
    assert!(
        !c.add_duplicate(&target(x.as_str()), &file_path("/files/copies/a.mkv"))
            .await
            .unwrap()
            .added,
        "by CID, a repeat"
    );
    assert!(
        c.add_duplicate(&target(x.as_str()), &file_path("/files/ü/a.mkv"))
            .await
            .unwrap()
            .added
    );
    assert_eq!(
        c.document(&target(&r)).await.unwrap().duplicates,
        ["/files/copies/a.mkv", "/files/ü/a.mkv"]
    );
    let rows = dump(&s.db_path());
    assert!(
        rows.contains_key(&format!("dup:{r}//files/copies/a.mkv")),
        "{}",
        snapshot::render(&rows)
    );
    assert_sound(&rows);

    let nobody = random_rid().to_string();
    assert_eq!(
        api_error(
            c.add_duplicate(&target(&nobody), &file_path("/files/x"))
                .await
        )
        .code,
        ErrorCode::UnknownRoot
    );
    assert!(
        !dump(&s.db_path()).keys().any(|k| k.contains(&nobody)),
        "a refused duplicate writes nothing"
    );
}

#[tokio::test]
async fn roots_are_listed_in_pages() {
    let s = Storaged::start().await;
    let c = s.client();
    let mut made = Vec::new();
    for i in 0..25 {
        let w = c
            .merge(
                &target(&random_rid().to_string()),
                &checked(fields(&[("n", &i.to_string())])),
            )
            .await
            .unwrap();
        made.push(w.rid);
    }
    made.sort();

    let mut seen: Vec<Rid> = Vec::new();
    let mut after = None;
    let mut sizes = Vec::new();
    loop {
        let page = c
            .list_roots(&PageQuery {
                after,
                offset: None,
                limit: Some(10),
            })
            .await
            .unwrap();
        sizes.push(page.rids.len());
        seen.extend(&page.rids);
        match page.next {
            Some(next) => {
                assert_eq!(
                    Some(&next),
                    page.rids.last(),
                    "next is the page's last root"
                );
                after = Some(next);
            }
            None => break,
        }
        assert!(sizes.len() < 10, "paging does not end");
    }
    assert_eq!(sizes, [10, 10, 5]);
    assert_eq!(seen, made, "every root once, in order");

    let all = c.list_roots(&PageQuery::default()).await.unwrap();
    assert_eq!((all.rids, all.next), (made.clone(), None));
    let past = c
        .list_roots(&PageQuery {
            after: Some(made[24]),
            offset: None,
            limit: None,
        })
        .await
        .unwrap();
    assert_eq!((past.rids.len(), past.next), (0, None));
    // An after that is no RID cannot be sent by the typed client: the raw
    // socket's refusal is in storaged_bad_input::bad_paging_parameters_are_400.
}

#[tokio::test]
async fn resolve_answers_roots_and_registered_cids_only() {
    let s = Storaged::start().await;
    let c = s.client();
    let x = random_midhash();
    let rid = c
        .merge(&target(x.as_str()), &checked(fields(&[("title", "T")])))
        .await
        .unwrap()
        .rid;
    assert_eq!(c.resolve(&target(&rid.to_string())).await.unwrap(), rid);
    assert_eq!(c.resolve(&target(x.as_str())).await.unwrap(), rid);
    assert_eq!(
        api_error(c.resolve(&target(&random_rid().to_string())).await).code,
        ErrorCode::UnknownRoot
    );
    assert_eq!(
        api_error(c.resolve(&target(random_midhash().as_str())).await).code,
        ErrorCode::UnknownCid
    );
    assert_eq!(
        api_error(unchecked::resolve(c, "not-a-hash").await).code,
        ErrorCode::SchemaViolation
    );
}

#[tokio::test]
async fn set_add_keeps_a_pipe_delimited_set() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    let head = meta_head(c).await;
    for (value, added) in [
        ("a", true),
        ("b", true),
        ("a", false),
        ("c d", true),
        ("b", false),
    ] {
        let out = c
            .set_add(&target(&r), &set_member("tags", value))
            .await
            .unwrap();
        assert_eq!(
            (out.rid.to_string(), out.field.as_str(), out.added),
            (r.clone(), "tags", added),
            "{value}"
        );
    }
    assert_eq!(
        c.get_field(&target(&r), &field_name("tags"))
            .await
            .unwrap()
            .value,
        "a|b|c d"
    );
    let sets = meta_events_after(c, head).await;
    assert_eq!(
        sets,
        vec![("set".to_string(), format!("file:{r}/tags")); 3],
        "one event per real addition"
    );

    for bad in ["x|y", ""] {
        assert_eq!(
            api_error(unchecked::set_add(c, &r, "tags", bad).await).code,
            ErrorCode::SchemaViolation,
            "{bad:?}"
        );
    }
    let cid_member = member(&random_midhash());
    assert_eq!(
        api_error(unchecked::set_add(c, &r, &cid_member, "x").await).code,
        ErrorCode::SchemaViolation
    );
    assert_eq!(
        c.get_field(&target(&r), &field_name("tags"))
            .await
            .unwrap()
            .value,
        "a|b|c d"
    );

    // Addressed by a new CID, set-add makes the record (contract 13).
    let x = random_midhash();
    let out = c
        .set_add(&target(x.as_str()), &set_member("genres", "drama"))
        .await
        .unwrap();
    assert_eq!(c.resolve(&target(x.as_str())).await.unwrap(), out.rid);
    assert_sound(&dump(&s.db_path()));
}

#[tokio::test]
async fn raw_keys_are_read_written_deleted_and_listed() {
    let s = Storaged::start().await;
    let c = s.client();
    let meta_before = c.stream_info(StreamName::Meta).await.unwrap();

    let put = c
        .kv_put(&key_write("udl:alice/prefs", "{\"theme\":\"dark\"}"))
        .await
        .unwrap();
    assert_eq!((put.key.as_str(), put.changed), ("udl:alice/prefs", true));
    assert!(
        !c.kv_put(&key_write("udl:alice/prefs", "{\"theme\":\"dark\"}"))
            .await
            .unwrap()
            .changed
    );
    assert_eq!(
        c.kv_get("udl:alice/prefs").await.unwrap().as_deref(),
        Some("{\"theme\":\"dark\"}")
    );
    assert_eq!(c.kv_get("udl:nobody").await.unwrap(), None);

    let keys: Vec<String> = (0..12).map(|i| format!("nzb:list/k{i:02}")).collect();
    for (i, k) in keys.iter().enumerate() {
        c.kv_put(&key_write(k, &format!("v{i}"))).await.unwrap();
    }
    c.kv_put(&key_write("nzb:lisu", "outside")).await.unwrap();
    c.kv_put(&key_write("nzb:lis", "outside")).await.unwrap();

    let all = c
        .kv_range(&RangeQuery {
            prefix: Some("nzb:list/".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        all.rows.iter().map(|r| r.key.clone()).collect::<Vec<_>>(),
        keys
    );
    assert_eq!(all.rows[3].value.as_deref(), Some("v3"));
    assert_eq!(all.next, None);

    let mut paged = Vec::new();
    let mut after = None;
    for want in [5, 5, 2] {
        let q = RangeQuery {
            prefix: Some("nzb:list/".into()),
            after: after.clone(),
            limit: Some(5),
            ..Default::default()
        };
        let page = c.kv_range(&q).await.unwrap();
        assert_eq!(page.rows.len(), want);
        paged.extend(page.rows.iter().map(|r| r.key.clone()));
        after = page.next.clone();
        assert_eq!(after.is_some(), want == 5 && paged.len() < 12);
    }
    assert_eq!(paged, keys);

    let q = RangeQuery {
        prefix: Some("nzb:list/".into()),
        keys_only: true,
        ..Default::default()
    };
    let ko = c.kv_range(&q).await.unwrap();
    assert_eq!(ko.rows.len(), 12);
    assert!(
        ko.rows.iter().all(|r| r.value.is_none()),
        "keysOnly leaves values out"
    );

    let q = RangeQuery {
        start: Some("nzb:list/k03".into()),
        end: Some("nzb:list/k06".into()),
        ..Default::default()
    };
    let window = c.kv_range(&q).await.unwrap();
    assert_eq!(
        window
            .rows
            .iter()
            .map(|r| r.key.as_str())
            .collect::<Vec<_>>(),
        &keys[3..6]
    );

    assert!(
        c.kv_delete(&writable("udl:alice/prefs"))
            .await
            .unwrap()
            .existed
    );
    assert!(
        !c.kv_delete(&writable("udl:alice/prefs"))
            .await
            .unwrap()
            .existed
    );
    assert_eq!(c.kv_get("udl:alice/prefs").await.unwrap(), None);

    let rows = dump(&s.db_path());
    assert_eq!(rows.get("nzb:list/k11").map(String::as_str), Some("v11"));
    assert!(!rows.contains_key("udl:alice/prefs"));
    assert_eq!(
        c.stream_info(StreamName::Meta).await.unwrap(),
        meta_before,
        "plain keys are not record events"
    );
}

#[tokio::test]
async fn a_raw_record_key_goes_through_the_record_rules() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    let x = random_midhash();
    let head = meta_head(c).await;

    assert!(
        c.kv_put(&key_write(&format!("file:{r}/title"), "T"))
            .await
            .unwrap()
            .changed
    );
    assert!(
        c.kv_put(&key_write(&format!("file:{r}/cids/{x}"), "true"))
            .await
            .unwrap()
            .changed
    );
    assert_eq!(
        c.get_record(&target(&r)).await.unwrap().fields,
        fields(&[("title", "T"), (&member(&x), "true")])
    );
    assert_eq!(c.resolve(&target(x.as_str())).await.unwrap().to_string(), r);
    let rows = dump(&s.db_path());
    assert!(roots(&rows).contains(&r));
    assert_eq!(rows.get(&format!("cid:{x}")), Some(&r));
    assert_sound(&rows);

    let deprecated = api_error(unchecked::kv_put(c, &format!("file:{r}/midhash256"), "abc").await);
    assert_eq!(deprecated.code, ErrorCode::DeprecatedField);
    let bad_cid =
        api_error(unchecked::kv_put(c, &format!("file:{r}/cids/not-a-cid"), "true").await);
    assert_eq!(bad_cid.code, ErrorCode::SchemaViolation);

    assert!(
        c.kv_delete(&writable(&format!("file:{r}/title")))
            .await
            .unwrap()
            .existed
    );
    assert!(
        c.kv_delete(&writable(&format!("file:{r}/cids/{x}")))
            .await
            .unwrap()
            .existed
    );
    assert!(
        !c.kv_delete(&writable(&format!("file:{r}/title")))
            .await
            .unwrap()
            .existed
    );
    let rows = dump(&s.db_path());
    assert_eq!(keys_naming(&rows, &r), Vec::<String>::new());
    assert_sound(&rows);

    let kinds: Vec<(String, String)> = meta_events_after(c, head).await;
    let want = vec![
        ("set".to_string(), format!("file:{r}/title")),
        ("set".to_string(), format!("file:{r}/cids/{x}")),
        ("del".to_string(), format!("file:{r}/title")),
        ("del".to_string(), format!("file:{r}/cids/{x}")),
    ];
    assert_eq!(kinds, want);
}

#[tokio::test]
async fn raw_writes_under_reserved_prefixes_are_refused_and_change_nothing() {
    let s = Storaged::start().await;
    let c = s.client();
    let x = random_midhash();
    let rid = c
        .merge(&target(x.as_str()), &checked(fields(&[("title", "T")])))
        .await
        .unwrap()
        .rid;
    c.add_duplicate(&target(&rid.to_string()), &file_path("/files/p"))
        .await
        .unwrap();
    let before = dump(&s.db_path());
    let reserved = [
        format!("idx:roots/{rid}"),
        format!("idx:roots/{}", random_rid()),
        "idx:count/roots".to_string(),
        "idx:fts/x".to_string(),
        "ev:meta:events/0000000000001-0000000000".to_string(),
        "ev:file:events/9999999999999-0000000000".to_string(),
        "evhwm:meta:events".to_string(),
        format!("cid:{x}"),
        format!("cid:{}", random_midhash()),
        format!("dup:{rid}//files/p"),
        "meta-core:schema-version".to_string(),
        "meta-core:anything".to_string(),
    ];
    for key in &reserved {
        assert_eq!(
            api_error(unchecked::kv_put(c, key, "1").await).code,
            ErrorCode::SchemaViolation,
            "put {key}"
        );
        assert_eq!(
            api_error(unchecked::kv_delete(c, key).await).code,
            ErrorCode::SchemaViolation,
            "delete {key}"
        );
    }
    snapshot::assert_same(&before, &dump(&s.db_path()), "refused reserved writes");
    // Reading them is fine.
    assert_eq!(
        c.kv_get("meta-core:schema-version")
            .await
            .unwrap()
            .as_deref(),
        Some("2")
    );
}

#[tokio::test]
async fn stats_and_the_root_counter_follow_creates_and_deletes() {
    let s = Storaged::start().await;
    let c = s.client();
    let mut rids = Vec::new();
    for i in 0..4 {
        rids.push(
            c.merge(
                &target(&random_rid().to_string()),
                &checked(fields(&[("n", &i.to_string())])),
            )
            .await
            .unwrap()
            .rid,
        );
        rids.push(
            c.merge(
                &target(random_midhash().as_str()),
                &checked(fields(&[("n", &i.to_string())])),
            )
            .await
            .unwrap()
            .rid,
        );
        let body = MintBody {
            file_path: file_path(&format!("/files/{i}.mkv")),
            size_byte: i,
            mtime_nano: i,
            cids: vec![random_midhash()],
        };
        rids.push(c.mint(&body).await.unwrap());
    }
    assert_eq!(rids.len(), 12);
    for rid in &rids[..4] {
        c.delete_record(&target(&rid.to_string())).await.unwrap();
    }
    c.delete_field(&target(&rids[4].to_string()), &field_name("n"))
        .await
        .unwrap(); // its cids/ member is left
    let fields5 = c
        .get_record(&target(&rids[5].to_string()))
        .await
        .unwrap()
        .fields;
    for f in fields5.keys() {
        c.delete_field(&target(&rids[5].to_string()), &field_name(f))
            .await
            .unwrap();
    }
    c.replace(&target(&rids[6].to_string()), &checked(Fields::new()))
        .await
        .unwrap();
    let live = 12 - 4 - 2;

    let stats = c.stats().await.unwrap();
    let rows = dump(&s.db_path());
    assert_eq!(roots(&rows).len(), live);
    assert_eq!(
        rows.get("idx:count/roots").map(String::as_str),
        Some(live.to_string().as_str())
    );
    assert_eq!(stats.roots, live as u64);
    assert_eq!(stats.keys, rows.len() as u64, "keys counts every row");
    assert!(stats.db_bytes > 0);
    assert_eq!(
        c.list_roots(&PageQuery::default())
            .await
            .unwrap()
            .rids
            .len(),
        live
    );
    assert_sound(&rows);

    let status = c.status().await.unwrap();
    assert_eq!(
        (status.pid, status.roots, status.schema_version.as_str()),
        (s.pid(), live as u64, "2")
    );
    assert_eq!(std::path::Path::new(&status.db_path), s.db_path());
}

/// `changed` counts the rows a write set or deleted: exactly what it
/// announced on `meta:events`.
#[tokio::test]
async fn a_write_reports_as_changed_what_it_announces() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    let x = random_midhash();
    let steps = [
        (
            "merge that creates",
            fields(&[("title", "A"), ("year", "1"), (&member(&x), "true")]),
            false,
        ),
        (
            "merge",
            fields(&[("title", "B"), ("year", "1"), ("genre", "x")]),
            false,
        ),
        ("replace", fields(&[("title", "B")]), true),
    ];
    for (what, f, replace) in steps {
        let head = meta_head(c).await;
        let w = if replace {
            c.replace(&target(&r), &checked(f)).await
        } else {
            c.merge(&target(&r), &checked(f)).await
        }
        .unwrap();
        let announced = meta_events_after(c, head).await;
        assert_eq!(
            w.changed as usize,
            announced.len(),
            "{what}: {w:?} announced {announced:?}"
        );
    }
    // Addressed by a CID no one registered: the member it adds is a row
    // set by this write too.
    let head = meta_head(c).await;
    let w = c
        .merge(
            &target(random_midhash().as_str()),
            &checked(fields(&[("title", "C")])),
        )
        .await
        .unwrap();
    let announced = meta_events_after(c, head).await;
    assert_eq!(
        announced.len(),
        2,
        "the field and the CID's member: {announced:?}"
    );
    assert_eq!(
        w.changed as usize,
        announced.len(),
        "merge by a new CID: {w:?} announced {announced:?}"
    );
}

/// A write that leaves the record without any field makes no record, and
/// says so.
#[tokio::test]
async fn a_write_of_no_field_to_a_new_rid_creates_nothing() {
    let s = Storaged::start().await;
    let c = s.client();
    let r = random_rid().to_string();
    let before = snapshot::without_events(&dump(&s.db_path()));
    let merged = c.merge(&target(&r), &checked(Fields::new())).await.unwrap();
    let replaced = c
        .replace(&target(&r), &checked(Fields::new()))
        .await
        .unwrap();
    snapshot::assert_same(
        &before,
        &snapshot::without_events(&dump(&s.db_path())),
        "empty writes",
    );
    assert_eq!(
        api_error(c.get_record(&target(&r)).await).code,
        ErrorCode::UnknownRoot
    );
    assert!(
        !merged.created && !replaced.created,
        "no record was made: {merged:?} {replaced:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_by_one_new_cid_make_one_record() {
    let s = Storaged::start().await;
    let x = random_midhash();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let c = s.client().clone();
            let x = x.clone();
            tokio::spawn(async move {
                c.merge(
                    &target(x.as_str()),
                    &checked(fields(&[(&format!("f{i:02}"), "v")])),
                )
                .await
                .unwrap()
            })
        })
        .collect();
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let rids: BTreeSet<Rid> = results.iter().map(|w| w.rid).collect();
    assert_eq!(
        rids.len(),
        1,
        "every write by the CID lands on one record: {results:?}"
    );
    assert_eq!(
        results.iter().filter(|w| w.created).count(),
        1,
        "exactly one write made it"
    );
    let rid = *rids.first().unwrap();
    assert_eq!(
        field_count(&s, rid).await,
        17,
        "16 fields and the CID's member"
    );
    let rows = dump(&s.db_path());
    assert_eq!(roots(&rows).len(), 1);
    assert_sound(&rows);
}

async fn field_count(s: &Storaged, rid: Rid) -> usize {
    s.client()
        .get_record(&target(&rid.to_string()))
        .await
        .unwrap()
        .fields
        .len()
}
