//! Property tests of the nested view and its inverse: a record nested
//! (an export, `?shape=nested`) and read back (an import) is the record
//! it was, and any JSON document an archive may hold flattens without a
//! panic. `cargo test -p apid fuzz`.

use metacore::record::{Fields, check_shape};
use metacore::testing::cases;
use proptest::prelude::*;
use serde_json::Value;

use super::*;

/// A segment: array indexes, names, or any text (later kept only when
/// the whole name is well shaped, as a write requires).
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        (0..4u8).prop_map(|i| i.to_string()),
        Just("00".to_owned()),
        "[a-zA-Z_.é]{1,6}",
        any::<String>(),
    ]
}

/// A record's fields, every name well shaped (as stored records are).
fn record() -> impl Strategy<Value = Fields> {
    let name = prop::collection::vec(segment(), 1..5).prop_map(|s| s.join("/"));
    prop::collection::btree_map(name, any::<String>(), 0..12).prop_map(|f| {
        f.into_iter()
            .filter(|(k, _)| check_shape(k).is_ok())
            .collect()
    })
}

/// A record with one field as deep as a name may be (1024 bytes: up to
/// 512 one-letter segments). Its JSON text is read back by the import's
/// own reader in `routes/snapshot/import/fuzz_test.rs`.
fn deep_record() -> impl Strategy<Value = Fields> {
    (1..=512usize, record()).prop_map(|(depth, mut f)| {
        f.insert(vec!["a"; depth].join("/"), "deep".into());
        f
    })
}

/// Any JSON document: what an archive's `metadata/<rid>.json` may hold.
fn document() -> impl Strategy<Value = Value> {
    let key = prop_oneof![segment(), Just(String::new()), Just("a/b".to_owned())];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("JSON numbers are finite", |f| f.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// What an import keeps of a document: its well-shaped fields.
fn kept(doc: &Value) -> Fields {
    flatten(doc)
        .into_iter()
        .filter(|(k, _)| check_shape(k).is_ok())
        .collect()
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn nesting_any_record_loses_nothing(f in record()) {
        prop_assert_eq!(flatten(&nest(&f)), f);
    }

    #[test]
    fn a_record_exported_as_json_text_reads_back_whole(f in record()) {
        let text = serde_json::to_vec_pretty(&nest(&f)).expect("a document serializes");
        let doc: Value = serde_json::from_slice(&text).expect("and reads back");
        prop_assert_eq!(flatten(&doc), f);
    }

    #[test]
    fn nesting_a_record_as_deep_as_a_name_may_be_loses_nothing(f in deep_record()) {
        prop_assert_eq!(flatten(&nest(&f)), f);
    }

    #[test]
    fn any_document_flattens_and_what_is_kept_nests_back(doc in document()) {
        let f = kept(&doc);
        prop_assert_eq!(flatten(&nest(&f)), f.clone());
        prop_assert_eq!(kept(&nest(&f)), f);
    }
}
