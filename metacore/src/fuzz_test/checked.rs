//! The checked write inputs: field names, values, paths and stream
//! entries as a request carries them.

use std::path::{Component, Path};

use proptest::prelude::*;

use super::mutation;
use crate::checked::{
    CheckedEntry, CheckedField, FieldName, FilePath, MAX_ENTRY_BYTES, MAX_PATH_LEN, RelPath,
    SetMember,
};
use crate::cid::Cid;
use crate::record::{CIDS_PREFIX, MAX_FIELD_LEN, check_shape, is_deprecated};
use crate::stream::{EntryFields, StreamName};
use crate::testing::cases;

/// The rule of a field name's shape, said again apart from the code.
fn well_shaped(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FIELD_LEN
        && !name.contains('\0')
        && name
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

/// A segment, sometimes `.` or `..`.
fn segment() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_ .é∕-]{1,8}"
}

/// A name of well-formed segments (which may still hold a `.` or `..`).
fn name() -> impl Strategy<Value = String> {
    prop::collection::vec(segment(), 1..6).prop_map(|s| s.join("/"))
}

/// A `/`-separated name with a `..` segment or a NUL put in somewhere.
fn poisoned() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(segment(), 0..6),
        any::<prop::sample::Index>(),
        any::<bool>(),
    )
        .prop_map(|(mut segs, at, nul)| {
            if nul {
                let mut joined: Vec<char> = segs.join("/").chars().collect();
                joined.insert(at.index(joined.len() + 1), '\0');
                joined.into_iter().collect()
            } else {
                segs.insert(at.index(segs.len() + 1), "..".into());
                segs.join("/")
            }
        })
}

/// A path that, joined to a folder, names nothing outside it.
fn stays_inside(rel: &str) -> bool {
    let base = Path::new("/files");
    let joined = base.join(rel);
    Path::new(rel)
        .components()
        .all(|c| matches!(c, Component::Normal(_)))
        && joined.starts_with(base)
        && joined != base
}

/// What every accepted write field holds.
fn holds_for_checked_field(f: &CheckedField) -> Result<(), TestCaseError> {
    prop_assert!(well_shaped(f.name()), "{:?}", f.name());
    prop_assert!(!is_deprecated(f.name()) && f.name() != "__fields__");
    prop_assert!(!f.value().contains('\0'));
    match f.name().strip_prefix(CIDS_PREFIX) {
        Some(cid) => prop_assert_eq!(f.cid().cloned(), Cid::parse(cid).ok()),
        None => prop_assert_eq!(f.cid(), None),
    }
    // Checked again, it is the same field.
    prop_assert_eq!(CheckedField::new(f.name(), f.value()).ok(), Some(f.clone()));
    Ok(())
}

fn entry_fields() -> impl Strategy<Value = EntryFields> {
    let key = prop_oneof![Just("type".to_owned()), any::<String>(), "[a-z]{0,6}"];
    let value = prop_oneof![any::<String>(), "[a-z\r\n]{0,6}"];
    prop::collection::btree_map(key, value, 0..6)
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_text_is_a_field_name_exactly_when_it_is_well_shaped(s in any::<String>()) {
        prop_assert_eq!(check_shape(&s).is_ok(), well_shaped(&s));
        prop_assert_eq!(FieldName::new(s.clone()).is_ok(), well_shaped(&s));
    }

    #[test]
    fn a_near_valid_name_is_a_field_name_exactly_when_it_is_well_shaped(
        n in name(),
        m in mutation(),
    ) {
        for s in [n.clone(), m.apply(&n)] {
            prop_assert_eq!(check_shape(&s).is_ok(), well_shaped(&s), "{:?}", s);
            if let Ok(f) = CheckedField::new(s, "v") {
                holds_for_checked_field(&f)?;
            }
        }
    }

    #[test]
    fn a_name_with_a_nul_or_a_dot_dot_segment_is_refused(s in poisoned()) {
        prop_assert!(check_shape(&s).is_err(), "{:?}", s);
        prop_assert!(FieldName::new(s.clone()).is_err());
        prop_assert!(CheckedField::new(s.clone(), "v").is_err());
        prop_assert!(RelPath::new(s.clone()).is_err());
        prop_assert!(SetMember::new(s, "v").is_err());
    }

    #[test]
    fn a_value_with_a_nul_is_refused(n in name(), v in any::<String>(), at in any::<prop::sample::Index>()) {
        let mut chars: Vec<char> = v.chars().collect();
        chars.insert(at.index(chars.len() + 1), '\0');
        let v: String = chars.into_iter().collect();
        prop_assert!(CheckedField::new(n, v).is_err());
    }

    #[test]
    fn any_field_and_value_are_checked_or_clearly_refused(n in any::<String>(), v in any::<String>()) {
        if let Ok(f) = CheckedField::new(n, v) {
            holds_for_checked_field(&f)?;
        }
    }

    #[test]
    fn a_cid_member_with_one_mutation_is_checked_or_clearly_refused(
        digest in prop::collection::vec(any::<u8>(), 0..40),
        m in mutation(),
    ) {
        let cid = Cid::from_digest(0x55, 0x12, &digest);
        let name = m.apply(&format!("{CIDS_PREFIX}{cid}"));
        if let Ok(f) = CheckedField::new(name, "true") {
            holds_for_checked_field(&f)?;
        }
    }

    #[test]
    fn any_text_is_a_relative_path_only_when_it_stays_inside(s in any::<String>()) {
        if let Ok(p) = RelPath::new(s.clone()) {
            prop_assert!(s.len() <= MAX_PATH_LEN && well_shaped(&s), "{:?}", s);
            prop_assert!(stays_inside(p.as_str()), "{:?}", s);
            let json = serde_json::to_string(&p).expect("a path serializes");
            prop_assert_eq!(serde_json::from_str::<RelPath>(&json).ok(), Some(p));
        }
    }

    #[test]
    fn a_near_valid_path_is_a_relative_path_only_when_it_stays_inside(n in name(), m in mutation()) {
        for s in [n.clone(), m.apply(&n)] {
            prop_assert_eq!(RelPath::new(s.clone()).is_ok(), well_shaped(&s), "{:?}", s);
            if RelPath::new(s.clone()).is_ok() {
                prop_assert!(stays_inside(&s), "{:?}", s);
            }
        }
    }

    #[test]
    fn any_text_is_a_file_path_or_a_clear_refusal(s in any::<String>()) {
        let ok = !s.is_empty() && s.len() <= MAX_PATH_LEN && !s.contains('\0');
        prop_assert_eq!(FilePath::new(s.clone()).is_ok(), ok);
        let json = serde_json::to_string(&s).expect("text serializes");
        prop_assert_eq!(serde_json::from_str::<FilePath>(&json).is_ok(), ok);
    }

    #[test]
    fn any_set_member_is_checked_or_clearly_refused(n in any::<String>(), v in any::<String>()) {
        if let Ok(m) = SetMember::new(n, v) {
            prop_assert!(well_shaped(m.field()) && !m.field().starts_with(CIDS_PREFIX));
            prop_assert!(!m.value().is_empty() && !m.value().contains(['|', '\0']));
        }
    }

    #[test]
    fn any_entry_is_stored_as_its_fields_or_clearly_refused(fields in entry_fields()) {
        prop_assert!(CheckedEntry::new(StreamName::Meta, fields.clone()).is_err());
        if let Ok(e) = CheckedEntry::new(StreamName::Files, fields.clone()) {
            prop_assert!(e.json().len() <= MAX_ENTRY_BYTES);
            let back: EntryFields = serde_json::from_str(e.json()).expect("the JSON reads back");
            prop_assert_eq!(&back, &fields);
            let kind = &fields["type"];
            prop_assert!(!kind.is_empty() && !kind.contains(['\r', '\n']));
            prop_assert!(fields.iter().all(|(k, v)| !k.is_empty() && !k.contains('\0') && !v.contains('\0')));
        }
    }
}
