//! From counters to `GET /api/schema`'s `fields`: one [`FieldSchema`] per
//! field path, built from how many stored values fell into each
//! (key hint, primitive, hint) counter of that path.

use std::collections::BTreeMap;

use super::classify::{Hint, KeyHint, Prim, parse_counter_key};

pub(crate) use metacore::api::storaged::FieldSchema;

/// The field type of a path whose values were of more than one kind.
const MIXED: &str = "mixed";

/// Builds the schema of every path that has a counted value. Counters
/// whose key does not parse, or whose count is 0, are skipped; a key seen
/// twice counts twice.
pub(crate) fn aggregate(
    counters: impl IntoIterator<Item = (String, u64)>,
) -> BTreeMap<String, FieldSchema> {
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for (key, count) in counters {
        if count == 0 {
            continue;
        }
        let Some((path, key_hint, prim, hint)) = parse_counter_key(&key) else {
            continue;
        };
        tallies
            .entry(path)
            .or_default()
            .add(key_hint, prim, hint, count);
    }
    tallies
        .into_iter()
        .map(|(path, tally)| (path, tally.finish()))
        .collect()
}

/// The counts of one path, as they are added up.
#[derive(Debug, Default)]
struct Tally {
    /// Typed (not undefined) values per primitive.
    prims: BTreeMap<Prim, u64>,
    /// Values per hint.
    hints: BTreeMap<Hint, u64>,
    undefined: u64,
    key_hint: Option<KeyHint>,
    breakdown: BTreeMap<String, u64>,
}

impl Tally {
    fn add(&mut self, key_hint: Option<KeyHint>, prim: Prim, hint: Option<Hint>, count: u64) {
        if prim == Prim::Undefined {
            self.undefined = self.undefined.saturating_add(count);
        } else {
            bump(self.prims.entry(prim).or_default(), count);
        }
        if let Some(h) = hint {
            bump(self.hints.entry(h).or_default(), count);
        }
        // Any value from a collapsed key marks the path: the editor then
        // knows the field has per-language variants, even if plain values
        // of the same path exist too.
        self.key_hint = self.key_hint.or(key_hint);
        let label = hint.map_or(prim.as_str(), Hint::as_str);
        bump(self.breakdown.entry(label.to_owned()).or_default(), count);
    }

    fn finish(self) -> FieldSchema {
        let mut prims = self.prims.keys();
        let type_ = match (prims.next(), prims.next(), self.undefined) {
            (Some(p), None, 0) => p.as_str(),
            (None, _, _) => Prim::Undefined.as_str(),
            _ => MIXED,
        };
        let typed = self
            .prims
            .values()
            .fold(0, |a: u64, &n| a.saturating_add(n));
        let mut hints = self.hints.iter();
        let hint = match (hints.next(), hints.next()) {
            (Some((h, &n)), None) if n == typed && type_ != MIXED => Some(h.as_str().to_owned()),
            _ => None,
        };
        FieldSchema {
            type_: type_.to_owned(),
            hint,
            key_hint: self.key_hint.map(|k| k.as_str().to_owned()),
            breakdown: self.breakdown,
        }
    }
}

fn bump(n: &mut u64, by: u64) {
    *n = n.saturating_add(by);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::classify::counter_key;

    fn key(path: &str, prim: Prim, hint: Option<Hint>) -> String {
        counter_key(path, None, prim, hint)
    }

    fn one(counters: Vec<(String, u64)>) -> FieldSchema {
        let mut fields = aggregate(counters);
        assert_eq!(fields.len(), 1, "{fields:?}");
        fields.pop_first().map(|(_, f)| f).expect("one field")
    }

    fn breakdown(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|&(l, n)| (l.to_owned(), n)).collect()
    }

    #[test]
    fn one_primitive_is_the_field_type() {
        let f = one(vec![
            (key("n", Prim::Int, None), 3),
            (key("n", Prim::Int, None), 2),
        ]);
        assert_eq!(f.type_, "int");
        assert_eq!(f.hint, None);
        assert_eq!(f.breakdown, breakdown(&[("int", 5)]));
    }

    #[test]
    fn only_undefined_values_make_an_undefined_field() {
        let f = one(vec![(key("x", Prim::Undefined, None), 4)]);
        assert_eq!(f.type_, "undefined");
        assert_eq!(f.hint, None);
        assert_eq!(f.breakdown, breakdown(&[("undefined", 4)]));
    }

    #[test]
    fn two_primitives_or_one_with_undefined_are_mixed() {
        let f = one(vec![
            (key("x", Prim::Int, None), 1),
            (key("x", Prim::String, None), 2),
        ]);
        assert_eq!(f.type_, "mixed");
        assert_eq!(f.breakdown, breakdown(&[("int", 1), ("string", 2)]));

        let f = one(vec![
            (key("x", Prim::Bool, None), 1),
            (key("x", Prim::Undefined, None), 1),
        ]);
        assert_eq!(f.type_, "mixed");
        assert_eq!(f.breakdown, breakdown(&[("bool", 1), ("undefined", 1)]));
    }

    #[test]
    fn a_hint_on_every_typed_value_is_the_field_hint() {
        let f = one(vec![(key("d", Prim::String, Some(Hint::Timestamp)), 3)]);
        assert_eq!(
            (f.type_.as_str(), f.hint.as_deref()),
            ("string", Some("timestamp"))
        );
        assert_eq!(f.breakdown, breakdown(&[("timestamp", 3)]));
    }

    #[test]
    fn a_hint_on_some_values_only_is_no_field_hint() {
        let f = one(vec![
            (key("d", Prim::String, Some(Hint::Timestamp)), 2),
            (key("d", Prim::String, None), 1),
        ]);
        assert_eq!((f.type_.as_str(), f.hint.as_deref()), ("string", None));
        assert_eq!(f.breakdown, breakdown(&[("string", 1), ("timestamp", 2)]));
    }

    #[test]
    fn two_hints_are_no_field_hint() {
        let f = one(vec![
            (key("s", Prim::String, Some(Hint::Cid)), 1),
            (key("s", Prim::String, Some(Hint::Timestamp)), 1),
        ]);
        assert_eq!((f.type_.as_str(), f.hint.as_deref()), ("string", None));
        assert_eq!(f.breakdown, breakdown(&[("cid", 1), ("timestamp", 1)]));
    }

    #[test]
    fn a_mixed_field_has_no_hint_even_when_one_covers_every_value() {
        // Int and string timestamps: one hint on all typed values, but mixed.
        let f = one(vec![
            (key("t", Prim::Int, Some(Hint::Timestamp)), 2),
            (key("t", Prim::String, Some(Hint::Timestamp)), 1),
        ]);
        assert_eq!((f.type_.as_str(), f.hint.as_deref()), ("mixed", None));
        assert_eq!(f.breakdown, breakdown(&[("timestamp", 3)]));

        // Undefined values make it mixed too.
        let f = one(vec![
            (key("c", Prim::String, Some(Hint::Cid)), 2),
            (key("c", Prim::Undefined, None), 1),
        ]);
        assert_eq!((f.type_.as_str(), f.hint.as_deref()), ("mixed", None));
        assert_eq!(f.breakdown, breakdown(&[("cid", 2), ("undefined", 1)]));
    }

    #[test]
    fn any_collapsed_value_gives_the_path_its_key_hint() {
        let lc = Some(KeyHint::LanguageCode);
        let f = one(vec![(counter_key("plot", lc, Prim::String, None), 2)]);
        assert_eq!(f.key_hint.as_deref(), Some("language-code"));
        assert_eq!(f.type_, "string");

        let f = one(vec![
            (counter_key("plot", lc, Prim::String, None), 2),
            (counter_key("plot", None, Prim::String, None), 1),
        ]);
        assert_eq!(f.key_hint.as_deref(), Some("language-code"));
        assert_eq!(f.breakdown, breakdown(&[("string", 3)]));

        let f = one(vec![(key("title", Prim::String, None), 1)]);
        assert_eq!(f.key_hint, None);
    }

    #[test]
    fn zero_counts_and_malformed_keys_are_ignored() {
        let fields = aggregate(vec![
            (key("a", Prim::Int, None), 1),
            (key("a", Prim::String, None), 0),
            (key("gone", Prim::Int, None), 0),
            ("idx:schema/b\x1f\x1fmixed\x1f".to_owned(), 5),
            ("not a counter".to_owned(), 5),
        ]);
        assert_eq!(fields.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(fields["a"].type_, "int");
        assert_eq!(fields["a"].breakdown, breakdown(&[("int", 1)]));
    }

    #[test]
    fn paths_are_kept_apart() {
        let fields = aggregate(vec![
            (key("a", Prim::Int, None), 1),
            (key("a/b", Prim::Bool, None), 1),
        ]);
        assert_eq!(fields["a"].type_, "int");
        assert_eq!(fields["a/b"].type_, "bool");
    }

    #[test]
    fn serializes_as_the_original_field_schema() {
        let plain = one(vec![(key("n", Prim::Float, None), 2)]);
        assert_eq!(
            serde_json::to_value(&plain).expect("serializes"),
            serde_json::json!({"type": "float", "breakdown": {"float": 2}})
        );
        let hinted = one(vec![(
            counter_key(
                "d",
                Some(KeyHint::LanguageCode),
                Prim::String,
                Some(Hint::Timestamp),
            ),
            1,
        )]);
        assert_eq!(
            serde_json::to_value(&hinted).expect("serializes"),
            serde_json::json!({
                "type": "string",
                "hint": "timestamp",
                "key_hint": "language-code",
                "breakdown": {"timestamp": 1},
            })
        );
    }
}
