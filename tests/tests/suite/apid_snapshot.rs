//! Snapshot export, wipe and import (apid's functions under
//! `/api/snapshot/*`) against a real storaged, checked row by row: an
//! import of an export gives back the same `file:` and `cid:` rows.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use apid::routes::snapshot::{self, ExportOptions, ImportOptions, ImportReport, PluginReport};
use e2e::Storaged;
use e2e::fixtures::{checked, fields, member, random_midhash, random_rid, target};
use e2e::snapshot::{Rows, assert_same, dump, record, with_prefix, without_events};
use metacore::api::storaged::{ImportConflict, ImportCounts, ImportMode, StoragedClient};
use metacore::{ErrorCode, Fields};
use serde_json::{Value, json};
use zip::ZipArchive;
use zip::write::SimpleFileOptions;

fn export_options(plugin_dir: Option<PathBuf>) -> ExportOptions {
    ExportOptions {
        plugin_dir,
        source_host: "test-host".into(),
        generated_at: "2024-03-05T07:08:09Z".into(),
    }
}

fn import_options(
    mode: ImportMode,
    conflict: ImportConflict,
    dry_run: bool,
    plugin_dir: &Path,
) -> ImportOptions {
    ImportOptions {
        mode,
        conflict,
        dry_run,
        plugin_dir: plugin_dir.to_path_buf(),
        max_entries: 1_000_000,
        max_bytes: 16 << 30,
    }
}

async fn export(c: &StoragedClient, path: &Path, plugin_dir: Option<PathBuf>) -> u64 {
    let out = std::fs::File::create(path).unwrap();
    snapshot::export_to(c, export_options(plugin_dir), out)
        .await
        .unwrap()
}

/// The rows a snapshot must give back: fields, aliases, root index.
fn record_rows(rows: &Rows) -> Rows {
    ["file:", "cid:", "idx:roots/"]
        .iter()
        .flat_map(|p| with_prefix(rows, p).map(|(k, v)| (k.clone(), v.clone())))
        .collect()
}

fn entry_names(path: &Path) -> Vec<String> {
    let mut zip = ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| zip.by_index(i).unwrap().name().unwrap().into_owned())
        .collect()
}

fn entry_json(path: &Path, name: &str) -> Value {
    let mut zip = ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut s = String::new();
    zip.by_name(name).unwrap().read_to_string(&mut s).unwrap();
    serde_json::from_str(&s).unwrap()
}

/// A ZIP of `(name, bytes)` entries, in order.
fn make_zip(path: &Path, entries: &[(&str, &[u8])]) {
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in entries {
        zip.start_file(*name, SimpleFileOptions::default()).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.finish().unwrap();
}

fn sums(r: &ImportReport) -> ImportCounts {
    let mut c = ImportCounts::default();
    for f in &r.files {
        c.added += f.counts.added;
        c.updated += f.counts.updated;
        c.unchanged += f.counts.unchanged;
        c.kept += f.counts.kept;
        c.deleted += f.counts.deleted;
    }
    c
}

#[tokio::test]
async fn export_wipe_import_gives_back_the_same_rows() {
    let s = Storaged::start().await;
    let c = s.client();
    let work = tempfile::tempdir().unwrap();

    let mut total_fields = 0u64;
    for i in 0..50 {
        let rid = random_rid();
        let cid = random_midhash();
        let n = i.to_string();
        let mut f = fields(&[
            (&member(&cid), "true"),
            ("title", &format!("Title {i}")),
            ("code", "007"),
            ("price", "5.10"),
            ("empty", ""),
            ("flag", "true"),
            ("nothing", "null"),
            ("a", "x"),
            ("a/b", "y"),
            ("streams/0/language", "eng"),
            ("streams/1/language", "fra"),
            ("fileinfo/streamdetails/video/0/codec", "h264"),
            ("deep/x/y/z", &n),
        ]);
        if i % 7 == 0 {
            f.insert(member(&random_midhash()), "true".into());
            f.insert("gap/0".into(), "a".into());
            f.insert("gap/2".into(), "c".into());
        }
        total_fields += f.len() as u64;
        c.merge(&target(&rid.to_string()), &checked(f))
            .await
            .unwrap();
    }

    // Plugin output, with a symlink that must not be followed.
    let plugin = work.path().join("plugin");
    std::fs::create_dir_all(plugin.join("sub")).unwrap();
    std::fs::write(plugin.join("p1.txt"), b"one").unwrap();
    std::fs::write(plugin.join("sub/p2.bin"), [0u8, 1, 2, 255]).unwrap();
    let secret = work.path().join("secret.txt");
    std::fs::write(&secret, b"outside").unwrap();
    std::os::unix::fs::symlink(&secret, plugin.join("link.txt")).unwrap();

    let before = dump(&s.db_path());
    let zip_path = work.path().join("snap.zip");
    assert_eq!(export(c, &zip_path, Some(plugin.clone())).await, 50);

    let names = entry_names(&zip_path);
    assert_eq!(names[0], "manifest.json");
    assert_eq!(names[1], "index.json");
    assert_eq!(
        names.iter().filter(|n| n.starts_with("metadata/")).count(),
        50
    );
    assert_eq!(
        &names[52..],
        [
            "cache/plugin-output/p1.txt",
            "cache/plugin-output/sub/p2.bin"
        ],
        "no symlink"
    );
    let manifest = entry_json(&zip_path, "manifest.json");
    assert_eq!(manifest["schemaVersion"], json!(2));
    assert_eq!(manifest["fileCount"], json!(50));
    assert_eq!(manifest["sourceHost"], json!("test-host"));
    assert_eq!(
        manifest["includes"],
        json!({"metadata": true, "pluginOutput": true})
    );
    let index = entry_json(&zip_path, "index.json");
    assert_eq!(index["hashIds"].as_array().unwrap().len(), 50);
    let first = names[2]
        .trim_start_matches("metadata/")
        .trim_end_matches(".json")
        .to_owned();
    let doc = entry_json(&zip_path, &names[2]);
    assert_eq!(doc["code"], json!("007"), "values stay strings");
    assert_eq!(doc["a"], json!({"": "x", "b": "y"}));
    assert_eq!(
        doc["streams"],
        json!([{"language": "eng"}, {"language": "fra"}])
    );
    assert_eq!(
        apid::nested::flatten(&doc),
        record(&before, &first).into_iter().collect::<Fields>()
    );

    assert_eq!(snapshot::wipe(c).await.unwrap(), 50);
    let wiped = dump(&s.db_path());
    assert!(
        record_rows(&wiped).is_empty(),
        "left after the wipe:\n{:?}",
        record_rows(&wiped)
    );
    assert_eq!(snapshot::wipe(c).await.unwrap(), 0, "nothing left to wipe");

    // A dry run reports what it would do and changes nothing.
    let target = work.path().join("restored-plugin");
    let dry = snapshot::import_file(
        c,
        &zip_path,
        &import_options(ImportMode::Merge, ImportConflict::Source, true, &target),
    )
    .await
    .unwrap();
    assert_eq!(
        (dry.total_files, dry.files_ok, dry.files_failed),
        (50, 50, 0)
    );
    assert_eq!(sums(&dry).added, total_fields);
    assert_eq!(
        dry.plugin_output,
        Some(PluginReport {
            written: 2,
            skipped: 0,
            skipped_files: Vec::new(),
        })
    );
    assert_same(
        &without_events(&wiped),
        &without_events(&dump(&s.db_path())),
        "a dry run",
    );
    assert!(!target.exists(), "a dry run writes no plugin output");

    let done = snapshot::import_file(
        c,
        &zip_path,
        &import_options(ImportMode::Merge, ImportConflict::Source, false, &target),
    )
    .await
    .unwrap();
    assert_eq!(
        (done.total_files, done.files_ok, done.files_failed),
        (50, 50, 0),
        "{:?}",
        done.files
    );
    assert_eq!(
        sums(&done),
        ImportCounts {
            added: total_fields,
            ..ImportCounts::default()
        }
    );
    assert_same(
        &record_rows(&before),
        &record_rows(&dump(&s.db_path())),
        "export, wipe, import",
    );
    assert_eq!(std::fs::read(target.join("p1.txt")).unwrap(), b"one");
    assert_eq!(
        std::fs::read(target.join("sub/p2.bin")).unwrap(),
        [0u8, 1, 2, 255]
    );
    assert!(!target.join("link.txt").exists());

    // Importing again changes nothing, in either mode.
    for mode in [ImportMode::Merge, ImportMode::Replace] {
        let again = snapshot::import_file(
            c,
            &zip_path,
            &import_options(mode, ImportConflict::Source, false, &target),
        )
        .await
        .unwrap();
        assert_eq!(
            sums(&again),
            ImportCounts {
                unchanged: total_fields,
                ..ImportCounts::default()
            }
        );
    }
    assert_same(
        &record_rows(&before),
        &record_rows(&dump(&s.db_path())),
        "a second import",
    );
}

#[tokio::test]
async fn merge_follows_the_conflict_rule_and_replace_deletes() {
    let s = Storaged::start().await;
    let c = s.client();
    let work = tempfile::tempdir().unwrap();
    let plugin = work.path().join("plugin");
    let rid = random_rid().to_string();
    c.merge(&target(&rid), &checked(fields(&[("a", "1"), ("b", "2")])))
        .await
        .unwrap();
    let zip_path = work.path().join("snap.zip");
    export(c, &zip_path, None).await;
    assert!(
        !entry_names(&zip_path)
            .iter()
            .any(|n| n.starts_with("cache/"))
    );

    c.merge(&target(&rid), &checked(fields(&[("b", "3"), ("c", "4")])))
        .await
        .unwrap();
    let mine = snapshot::import_file(
        c,
        &zip_path,
        &import_options(ImportMode::Merge, ImportConflict::Mine, false, &plugin),
    )
    .await
    .unwrap();
    assert_eq!(
        mine.files[0].counts,
        ImportCounts {
            unchanged: 1,
            kept: 1,
            ..ImportCounts::default()
        }
    );
    assert!(mine.plugin_output.is_none());
    assert_eq!(
        c.get_record(&target(&rid)).await.unwrap().fields,
        fields(&[("a", "1"), ("b", "3"), ("c", "4")])
    );

    let source = snapshot::import_file(
        c,
        &zip_path,
        &import_options(ImportMode::Merge, ImportConflict::Source, false, &plugin),
    )
    .await
    .unwrap();
    assert_eq!(
        source.files[0].counts,
        ImportCounts {
            unchanged: 1,
            updated: 1,
            ..ImportCounts::default()
        }
    );
    assert_eq!(
        c.get_record(&target(&rid)).await.unwrap().fields,
        fields(&[("a", "1"), ("b", "2"), ("c", "4")])
    );

    let dry = snapshot::import_file(
        c,
        &zip_path,
        &import_options(ImportMode::Replace, ImportConflict::Mine, true, &plugin),
    )
    .await
    .unwrap();
    assert_eq!(
        dry.files[0].counts,
        ImportCounts {
            unchanged: 2,
            deleted: 1,
            ..ImportCounts::default()
        }
    );
    assert_eq!(
        c.get_record(&target(&rid)).await.unwrap().fields.len(),
        3,
        "a dry run changes nothing"
    );

    let replace = snapshot::import_file(
        c,
        &zip_path,
        &import_options(ImportMode::Replace, ImportConflict::Mine, false, &plugin),
    )
    .await
    .unwrap();
    assert_eq!(
        replace.files[0].counts,
        ImportCounts {
            unchanged: 2,
            deleted: 1,
            ..ImportCounts::default()
        }
    );
    assert_eq!(
        c.get_record(&target(&rid)).await.unwrap().fields,
        fields(&[("a", "1"), ("b", "2")])
    );
}

#[tokio::test]
async fn bad_archives_are_refused_and_bad_entries_counted() {
    let s = Storaged::start().await;
    let c = s.client();
    let work = tempfile::tempdir().unwrap();
    let plugin = work.path().join("files/plugin");
    let opts = import_options(ImportMode::Merge, ImportConflict::Source, false, &plugin);

    let v3 = work.path().join("v3.zip");
    make_zip(&v3, &[("manifest.json", br#"{"schemaVersion":3}"#)]);
    let e = snapshot::import_file(c, &v3, &opts).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
    assert!(e.message.contains("schemaVersion"), "{e}");

    let no_manifest = work.path().join("none.zip");
    make_zip(&no_manifest, &[("index.json", b"{}")]);
    assert_eq!(
        snapshot::import_file(c, &no_manifest, &opts)
            .await
            .unwrap_err()
            .code,
        ErrorCode::BadRequest
    );

    let not_zip = work.path().join("not.zip");
    std::fs::write(&not_zip, b"this is not a zip").unwrap();
    assert_eq!(
        snapshot::import_file(c, &not_zip, &opts)
            .await
            .unwrap_err()
            .code,
        ErrorCode::BadRequest
    );

    let rid = random_rid().to_string();
    let good = format!("metadata/{rid}.json");
    let mixed = work.path().join("mixed.zip");
    make_zip(
        &mixed,
        &[
            ("manifest.json", br#"{"schemaVersion":2,"fileCount":3}"#),
            (&good, br#"{"title":"ok","n":7,"tags":["a","b"]}"#),
            ("metadata/not-a-rid.json", b"{}"),
            (&format!("metadata/{}.json", random_rid()), b"[1,2]"),
            ("cache/plugin-output/../x", b"escape"),
            ("cache/plugin-output/ok/y.txt", b"fine"),
        ],
    );
    let r = snapshot::import_file(c, &mixed, &opts).await.unwrap();
    assert_eq!(
        (r.total_files, r.files_ok, r.files_failed),
        (3, 1, 2),
        "{:?}",
        r.files
    );
    assert!(
        r.files
            .iter()
            .filter(|f| f.hash_id != rid)
            .all(|f| f.error.is_some())
    );
    let plugin_report = r.plugin_output.clone().unwrap();
    assert_eq!((plugin_report.written, plugin_report.skipped), (1, 1));
    assert_eq!(
        plugin_report
            .skipped_files
            .iter()
            .map(|f| (f.path.as_str(), f.error.as_str()))
            .collect::<Vec<_>>(),
        [("../x", "the path leaves the plugin output folder")]
    );
    assert!(!work.path().join("files/x").exists(), "../x stays out");
    assert_eq!(std::fs::read(plugin.join("ok/y.txt")).unwrap(), b"fine");
    assert_eq!(
        c.get_record(&target(&rid)).await.unwrap().fields,
        fields(&[
            ("title", "ok"),
            ("n", "7"),
            ("tags/0", "a"),
            ("tags/1", "b")
        ]),
        "older exports' typed values come back as strings"
    );
}

/// The import plans each record inside the writer transaction that reads
/// it: a write that lands while the import runs is either seen by the plan
/// or comes after it. With `conflict=mine`, a field the live writer added
/// must survive (the old read-plan-write across the socket could overwrite
/// it with the snapshot's value), and every record carries both the
/// import's fields and the live writer's, none half applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_made_while_an_import_runs_is_neither_lost_nor_half_applied() {
    const N: usize = 600;
    let s = Storaged::start().await;
    let c = s.client().clone();
    let work = tempfile::tempdir().unwrap();
    let mut rids: Vec<String> = Vec::with_capacity(N);
    for i in 0..N {
        let r = random_rid().to_string();
        c.merge(&target(&r), &checked(fields(&[("n", &i.to_string())])))
            .await
            .unwrap();
        rids.push(r);
    }
    rids.sort();
    let manifest = br#"{"schemaVersion":2,"fileCount":600}"#;
    let names: Vec<String> = rids.iter().map(|r| format!("metadata/{r}.json")).collect();
    let doc = br#"{"a":"snap","b":"snap"}"#;
    let mut entries: Vec<(&str, &[u8])> = vec![("manifest.json", manifest)];
    entries.extend(names.iter().map(|n| (n.as_str(), &doc[..])));
    let zip = work.path().join("race.zip");
    make_zip(&zip, &entries);

    // One pass of live writes, in the order the import goes, racing it.
    let live = {
        let (c, rids) = (c.clone(), rids.clone());
        tokio::spawn(async move {
            for r in &rids {
                let f = checked(fields(&[("a", "live"), ("c", "live")]));
                c.merge(&target(r), &f).await.unwrap();
            }
        })
    };
    let opts = import_options(
        ImportMode::Merge,
        ImportConflict::Mine,
        false,
        &work.path().join("plugin"),
    );
    let report = snapshot::import_file(&c, &zip, &opts).await.unwrap();
    live.await.unwrap();
    assert_eq!((report.files_ok, report.files_failed), (N as u64, 0));

    let rows = dump(&s.db_path());
    e2e::snapshot::assert_sound(&rows);
    for r in &rids {
        let rec = record(&rows, r);
        assert_eq!(
            rec.get("a").map(String::as_str),
            Some("live"),
            "{r}: the live write was lost"
        );
        assert_eq!(
            rec.get("b").map(String::as_str),
            Some("snap"),
            "{r}: the import is half applied"
        );
        assert_eq!(
            rec.get("c").map(String::as_str),
            Some("live"),
            "{r}: the live write is half applied"
        );
        assert!(
            rec.contains_key("n"),
            "{r}: the field before the import is kept"
        );
    }
}

/// A group of records goes to storaged in one call; a record storaged
/// refuses fails alone, with its reason, and the answer keeps the
/// archive's order.
#[tokio::test]
async fn a_refused_record_fails_alone_within_its_group() {
    let s = Storaged::start().await;
    let c = s.client();
    let work = tempfile::tempdir().unwrap();
    let mut rids: Vec<String> = (0..5).map(|_| random_rid().to_string()).collect();
    rids.sort();
    let names: Vec<String> = rids.iter().map(|r| format!("metadata/{r}.json")).collect();
    let zip = work.path().join("group.zip");
    make_zip(
        &zip,
        &[
            ("manifest.json", br#"{"schemaVersion":2,"fileCount":5}"#),
            (&names[0], br#"{"title":"zero"}"#),
            (&names[1], br#"{"midhash256":"retired"}"#),
            ("metadata/not-a-rid.json", b"{}"),
            (&names[2], br#"{"title":"two"}"#),
            (&names[3], br#"{"cids":{"not-a-cid":"true"}}"#),
            (&names[4], br#"{"title":"four"}"#),
        ],
    );
    let opts = import_options(
        ImportMode::Replace,
        ImportConflict::Source,
        false,
        &work.path().join("plugin"),
    );
    let r = snapshot::import_file(c, &zip, &opts).await.unwrap();
    let order: Vec<&str> = r.files.iter().map(|f| f.hash_id.as_str()).collect();
    let expected = [
        rids[0].as_str(),
        rids[1].as_str(),
        "not-a-rid",
        rids[2].as_str(),
        rids[3].as_str(),
        rids[4].as_str(),
    ];
    assert_eq!(order, expected, "archive order");
    assert_eq!((r.total_files, r.files_ok, r.files_failed), (6, 3, 3));
    let err = |i: usize| r.files[i].error.clone().unwrap_or_default();
    assert!(err(1).starts_with("deprecated_field"), "{}", err(1));
    assert!(err(4).starts_with("schema_violation"), "{}", err(4));
    let rows = dump(&s.db_path());
    assert_eq!(record(&rows, &rids[0]), fields(&[("title", "zero")]));
    assert!(
        record(&rows, &rids[1]).is_empty(),
        "the refused record wrote nothing"
    );
    assert_eq!(record(&rows, &rids[4]), fields(&[("title", "four")]));
}

/// Records go to storaged in groups of at most 256 records and about
/// 4 MiB: a record larger than a group goes alone and imports; one larger
/// than storaged's 16 MiB body limit fails alone; the records around them
/// import, and the answer keeps the archive's order.
#[tokio::test]
async fn large_records_go_alone_and_one_too_large_fails_alone() {
    let s = Storaged::start().await;
    let c = s.client();
    let work = tempfile::tempdir().unwrap();
    let mut rids: Vec<String> = (0..4).map(|_| random_rid().to_string()).collect();
    rids.sort();
    let big = format!(r#"{{"blob":"{}"}}"#, "b".repeat(5 << 20));
    let huge = format!(r#"{{"blob":"{}"}}"#, "h".repeat(17 << 20));
    let names: Vec<String> = rids.iter().map(|r| format!("metadata/{r}.json")).collect();
    let zip = work.path().join("large.zip");
    make_zip(
        &zip,
        &[
            ("manifest.json", br#"{"schemaVersion":2,"fileCount":4}"#),
            (&names[0], br#"{"title":"small"}"#),
            (&names[1], big.as_bytes()),
            (&names[2], huge.as_bytes()),
            (&names[3], br#"{"title":"after"}"#),
        ],
    );
    let opts = import_options(
        ImportMode::Merge,
        ImportConflict::Source,
        false,
        &work.path().join("plugin"),
    );
    let r = snapshot::import_file(c, &zip, &opts).await.unwrap();
    let order: Vec<&str> = r.files.iter().map(|f| f.hash_id.as_str()).collect();
    assert_eq!(order, rids.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!((r.files_ok, r.files_failed), (3, 1), "{:?}", r.files);
    let err = r.files[2].error.clone().unwrap_or_default();
    assert!(err.starts_with("payload_too_large"), "{err}");
    let rows = dump(&s.db_path());
    assert_eq!(record(&rows, &rids[1])["blob"].len(), 5 << 20);
    assert!(record(&rows, &rids[2]).is_empty());
    assert_eq!(record(&rows, &rids[3]), fields(&[("title", "after")]));
}
