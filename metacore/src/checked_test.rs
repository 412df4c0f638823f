use super::*;
use crate::error::ErrorCode;

const CID: &str = "bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn fields(pairs: &[(&str, &str)]) -> Fields {
    crate::record::fields_of(pairs)
}

#[test]
fn a_field_is_checked_for_writing() {
    let f = CheckedField::new("title", "Inception").unwrap();
    assert_eq!((f.name(), f.value(), f.cid()), ("title", "Inception", None));
    let m = CheckedField::new(format!("cids/{CID}"), "true").unwrap();
    assert_eq!(m.cid().map(Cid::as_str), Some(CID));
    assert_eq!(m, CheckedField::member(&Cid::parse(CID).unwrap()));
    assert!(matches!(
        CheckedField::new("midhash256", "x"),
        Err(FieldError::Deprecated(_))
    ));
    assert!(matches!(
        CheckedField::new("a//b", "x"),
        Err(FieldError::EmptySegment(_))
    ));
    assert!(matches!(
        CheckedField::new("a", "x\0"),
        Err(FieldError::NulValue(_))
    ));
    assert!(FieldName::new("a/../b").is_err());
    assert_eq!(
        FieldName::new("cid_x").unwrap().as_str(),
        "cid_x",
        "reads may name anything well-shaped"
    );
}

#[test]
fn bulk_fields_keep_their_error_codes() {
    let e = CheckedFields::check(fields(&[("ok", "1"), ("cid_sha", "x")])).unwrap_err();
    assert_eq!(e.code, ErrorCode::DeprecatedField);
    let e = CheckedFields::check(fields(&[("cids/nope", "true")])).unwrap_err();
    assert_eq!(e.code, ErrorCode::SchemaViolation);
    let ok = CheckedFields::check(fields(&[("a", "1"), (&format!("cids/{CID}"), "true")])).unwrap();
    let cids: Vec<_> = ok.iter().map(|(_, _, c)| c.is_some()).collect();
    assert_eq!(cids, [false, true], "the member CID follows its field");
    assert_eq!(
        serde_json::to_value(&ok).unwrap(),
        serde_json::json!({"a": "1", format!("cids/{CID}"): "true"})
    );
}

#[test]
fn a_partition_keeps_the_good_fields_and_says_why_of_the_others() {
    let (ok, refused) =
        CheckedFields::partition(fields(&[("a", "1"), ("midhash256", "x"), ("b//c", "2")]));
    assert_eq!(ok, CheckedFields::check(fields(&[("a", "1")])).unwrap());
    let why: Vec<_> = refused
        .iter()
        .map(|r| (r.field.as_str(), r.why.code))
        .collect();
    assert_eq!(
        why,
        [
            ("b//c", ErrorCode::SchemaViolation),
            ("midhash256", ErrorCode::DeprecatedField)
        ]
    );
}

#[test]
fn a_write_by_cid_keeps_its_member() {
    let target = Target::Cid(Cid::parse(CID).unwrap());
    let f = CheckedFields::check_for(&target, fields(&[("a", "1")])).unwrap();
    assert!(f.contains(&format!("cids/{CID}")));
    assert_eq!(f.len(), 2);
}

#[test]
fn set_members() {
    assert!(SetMember::new("tags", "a").is_ok());
    for (field, value) in [
        ("tags", ""),
        ("tags", "a|b"),
        (&format!("cids/{CID}")[..], "true"),
        ("cid_x", "a"),
    ] {
        assert!(SetMember::new(field, value).is_err(), "{field} {value}");
    }
}

#[test]
fn entries_are_checked_for_their_stream() {
    let entry = |pairs: &[(&str, &str)]| fields(pairs);
    let ok =
        CheckedEntry::new(StreamName::Files, entry(&[("type", "add"), ("path", "a")])).unwrap();
    assert_eq!(ok.json(), r#"{"path":"a","type":"add"}"#);
    for (stream, pairs) in [
        (StreamName::Meta, &[("type", "set")][..]),
        (StreamName::Files, &[("path", "a")][..]),
        (StreamName::Files, &[("type", "")][..]),
        (StreamName::Files, &[("type", "add"), ("", "x")][..]),
        (StreamName::Files, &[("type", "a\0")][..]),
        (StreamName::Files, &[("type", "add\nid: 1")][..]),
        (StreamName::Files, &[("type", "add\r")][..]),
    ] {
        let e = CheckedEntry::new(stream, entry(pairs)).unwrap_err();
        assert_eq!(e.code, ErrorCode::SchemaViolation, "{pairs:?}");
    }
    let long = "x".repeat(MAX_ENTRY_BYTES);
    assert!(CheckedEntry::new(StreamName::Files, entry(&[("type", "add"), ("p", &long)])).is_err());
}

#[test]
fn relative_paths_stay_inside() {
    for ok in ["a", "watch/a.mkv", "watch/.hidden/x", "a b/c..d"] {
        assert_eq!(RelPath::new(ok).unwrap().as_str(), ok);
    }
    for bad in ["", "/a", "a/", "a//b", "./a", "a/../b", "..", "a/.", "a\0b"] {
        assert!(RelPath::new(bad).is_err(), "{bad:?}");
    }
    let p = RelPath::new("watch/sub/a.mkv").unwrap();
    assert!(p.is_under("") && p.is_under("watch") && p.is_under("watch/sub"));
    assert!(!p.is_under("wat") && !p.is_under("watch/sub/a.mkv") && !p.is_under("plugin"));
    assert!(serde_json::from_str::<RelPath>("\"../etc\"").is_err());
}

#[test]
fn paths() {
    assert!(FilePath::new("/files/a.mkv").is_ok());
    assert!(FilePath::new("").is_err());
    assert!(FilePath::new("a\0b").is_err());
    assert!(FilePath::new("x".repeat(MAX_PATH_LEN + 1)).is_err());
    assert!(serde_json::from_str::<FilePath>("\"\"").is_err());
    assert_eq!(
        serde_json::from_str::<FilePath>("\"/a\"").unwrap().as_str(),
        "/a"
    );
}
