//! What one stored value is, as the original service's `ClassifyValue` saw
//! it, and the counter key that value adds to the schema.
//!
//! The rules run in the reference's order, first match wins: missing or
//! `"null"`, bool, int64 (maybe a Unix timestamp), float, JSON object or
//! array, CID-looking string, date or RFC 3339 string, any other string.
//! Where the Go service leaned on its standard library (`strconv`, `time`,
//! `encoding/json`) what that library accepts is re-implemented, so values
//! classify as they did there: the float and date parsers in [`golang`],
//! the JSON check here. The few known differences are noted where they
//! arise (JSON nesting depth here, hex-float rounding in [`golang`]).

use super::golang;

/// The primitive type of one value ("prim" in the original editor).
/// `mixed` is not one: it only describes a field, see `aggregate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Prim {
    String,
    Int,
    Float,
    Bool,
    JsonObject,
    JsonArray,
    /// A missing key, or the literal `"null"`.
    Undefined,
}

impl Prim {
    pub(crate) const ALL: [Prim; 7] = [
        Prim::String,
        Prim::Int,
        Prim::Float,
        Prim::Bool,
        Prim::JsonObject,
        Prim::JsonArray,
        Prim::Undefined,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Prim::String => "string",
            Prim::Int => "int",
            Prim::Float => "float",
            Prim::Bool => "bool",
            Prim::JsonObject => "json-object",
            Prim::JsonArray => "json-array",
            Prim::Undefined => "undefined",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Prim> {
        Prim::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// What a value's content suggests beyond its primitive; the editor picks
/// a datetime or a hash editor from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Hint {
    /// An int in the Unix seconds or milliseconds range, or a date or
    /// RFC 3339 string.
    Timestamp,
    /// A string shaped like a CIDv1 (base32 `ba…`) or a CIDv0 (`Qm…`).
    Cid,
}

impl Hint {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Hint::Timestamp => "timestamp",
            Hint::Cid => "cid",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Hint> {
        [Hint::Timestamp, Hint::Cid]
            .into_iter()
            .find(|h| h.as_str() == s)
    }
}

/// What a field's name (not its value) says: the field was collapsed from
/// per-language keys such as `plot/eng`, `plot/fr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum KeyHint {
    LanguageCode,
}

impl KeyHint {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            KeyHint::LanguageCode => "language-code",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<KeyHint> {
        (s == KeyHint::LanguageCode.as_str()).then_some(KeyHint::LanguageCode)
    }
}

/// Where the per-field value counters live in the key space.
pub(crate) const SCHEMA_PREFIX: &str = "idx:schema/";

/// Separates the parts of a counter key. A field name may contain it
/// (`metacore::record::check_shape` refuses only NUL and empty, `.` and
/// `..` segments), so [`parse_counter_key`] splits from the right, where
/// the three parts after the path are fixed vocabulary without it.
const SEP: char = '\x1f';

/// Classifies one stored value (`None` when the key is missing).
pub(crate) fn classify(value: Option<&str>) -> (Prim, Option<Hint>) {
    let Some(v) = value.filter(|v| *v != "null") else {
        return (Prim::Undefined, None);
    };
    if v == "true" || v == "false" {
        return (Prim::Bool, None);
    }
    // Go's `strconv.ParseInt(v, 10, 64)` and Rust's `i64` parse accept the
    // same text: an optional `+`/`-`, then ASCII digits (no `_`).
    if let Ok(n) = v.parse::<i64>() {
        return (Prim::Int, is_unix_time(n).then_some(Hint::Timestamp));
    }
    if golang::parses_float(v) {
        return (Prim::Float, None);
    }
    if let Some(prim) = json_container(v) {
        return (prim, None);
    }
    if is_cid_like(v) {
        return (Prim::String, Some(Hint::Cid));
    }
    if golang::is_rfc3339(v) || golang::is_date(v) {
        return (Prim::String, Some(Hint::Timestamp));
    }
    (Prim::String, None)
}

/// The schema path of a field and its key hint: when the last `/`-segment
/// is two or three lowercase ASCII letters (`plot/eng`), the field counts
/// under its prefix (`plot`) as a language-code key.
///
/// A field with no `/` (`eng`) has no prefix to collapse to and stays as it
/// is, without a hint; so does `/eng`, whose prefix would be empty. The
/// split is at the last `/` only, so `a//eng` would become `a/` — checked
/// field names never have empty segments, so the store cannot hold it.
pub(crate) fn field_path(field: &str) -> (String, Option<KeyHint>) {
    match field.rsplit_once('/') {
        Some((prefix, last)) if !prefix.is_empty() && is_language_code(last) => {
            (prefix.to_owned(), Some(KeyHint::LanguageCode))
        }
        _ => (field.to_owned(), None),
    }
}

/// `^[a-z]{2,3}$`.
fn is_language_code(segment: &str) -> bool {
    (2..=3).contains(&segment.len()) && segment.bytes().all(|b| b.is_ascii_lowercase())
}

/// `idx:schema/<path>\x1f<keyHint>\x1f<prim>\x1f<hint>`, absent hints as
/// empty parts: the key whose count is the number of values of that kind.
pub(crate) fn counter_key(
    path: &str,
    key_hint: Option<KeyHint>,
    prim: Prim,
    hint: Option<Hint>,
) -> String {
    format!(
        "{SCHEMA_PREFIX}{path}{SEP}{}{SEP}{}{SEP}{}",
        key_hint.map_or("", KeyHint::as_str),
        prim.as_str(),
        hint.map_or("", Hint::as_str),
    )
}

/// The parts of a counter key; `None` for a key without the prefix, with
/// fewer than four parts, an empty path or a word outside the vocabulary.
/// The parts are not checked against each other (a `bool` with hint `cid`
/// parses), since no combination is ambiguous.
pub(crate) fn parse_counter_key(
    key: &str,
) -> Option<(String, Option<KeyHint>, Prim, Option<Hint>)> {
    let mut parts = key.strip_prefix(SCHEMA_PREFIX)?.rsplitn(4, SEP);
    let hint = parts.next()?;
    let prim = Prim::parse(parts.next()?)?;
    let key_hint = parts.next()?;
    let path = parts.next().filter(|p| !p.is_empty())?;
    let key_hint = match key_hint {
        "" => None,
        k => Some(KeyHint::parse(k)?),
    };
    let hint = match hint {
        "" => None,
        h => Some(Hint::parse(h)?),
    };
    Some((path.to_owned(), key_hint, prim, hint))
}

/// The counter one stored value of `field` counts in: the writer adds 1
/// when it sets the value and takes 1 off the old value's counter when the
/// value is replaced or deleted.
pub(crate) fn contribution(field: &str, value: Option<&str>) -> String {
    let (path, key_hint) = field_path(field);
    let (prim, hint) = classify(value);
    counter_key(&path, key_hint, prim, hint)
}

/// Unix seconds from 1e9 (2001-09-09) to 4,102,444,800 (2100-01-01
/// 00:00:00 UTC), or the same span in milliseconds. The reference writes
/// both as `1e9..4,102,444,800`; the upper figure is a round date meant as
/// the last accepted value, so both ends are read as inclusive.
fn is_unix_time(n: i64) -> bool {
    (1_000_000_000..=4_102_444_800).contains(&n)
        || (1_000_000_000_000..=4_102_444_800_000).contains(&n)
}

/// `{`/`[` first and valid JSON throughout (trailing whitespace allowed, as
/// Go's `json.Valid` allows it). `IgnoredAny` checks the syntax without
/// building a value, and like Go it does not reject lone UTF-16 surrogates
/// in `\u` escapes. One difference: serde_json refuses nesting deeper than
/// 128 levels, Go's decoder 10,000; such a value classifies as a string.
fn json_container(v: &str) -> Option<Prim> {
    let prim = match v.as_bytes().first()? {
        b'{' => Prim::JsonObject,
        b'[' => Prim::JsonArray,
        _ => return None,
    };
    serde_json::from_str::<serde::de::IgnoredAny>(v)
        .is_ok()
        .then_some(prim)
}

/// `^(ba[a-z2-7]{14,}|Qm[base58]{44})$`, the original's regex, by hand.
fn is_cid_like(v: &str) -> bool {
    const BASE58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
    if let Some(rest) = v.strip_prefix("ba") {
        return rest.len() >= 14 && rest.bytes().all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'));
    }
    v.strip_prefix("Qm")
        .is_some_and(|rest| rest.len() == 44 && rest.bytes().all(|b| BASE58.contains(&b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CIDV1: &str = "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi";
    const CIDV0: &str = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG";

    /// Asserts the classification of each value, naming the one that fails.
    fn check(expected: (Prim, Option<Hint>), values: &[&str]) {
        for v in values {
            assert_eq!(classify(Some(v)), expected, "value {v:?}");
        }
    }

    const STRING: (Prim, Option<Hint>) = (Prim::String, None);
    const INT: (Prim, Option<Hint>) = (Prim::Int, None);
    const INT_TS: (Prim, Option<Hint>) = (Prim::Int, Some(Hint::Timestamp));
    const FLOAT: (Prim, Option<Hint>) = (Prim::Float, None);
    const STR_TS: (Prim, Option<Hint>) = (Prim::String, Some(Hint::Timestamp));
    const STR_CID: (Prim, Option<Hint>) = (Prim::String, Some(Hint::Cid));

    #[test]
    fn missing_and_null_are_undefined() {
        assert_eq!(classify(None), (Prim::Undefined, None));
        assert_eq!(classify(Some("null")), (Prim::Undefined, None));
        check(STRING, &["NULL", "Null", "nil", ""]);
    }

    #[test]
    fn only_lowercase_true_and_false_are_bool() {
        check((Prim::Bool, None), &["true", "false"]);
        check(STRING, &["True", "FALSE", "yes", "t"]);
        // Go's ParseBool would take "1"; the rule is the literal words.
        check(INT, &["1", "0"]);
    }

    #[test]
    fn int64_text_is_int() {
        check(
            INT,
            &[
                "0",
                "-42",
                "+7",
                "007",
                "2023",
                "9223372036854775807",
                "-9223372036854775808",
            ],
        );
        // One past i64 is still a valid float.
        check(FLOAT, &["9223372036854775808"]);
    }

    #[test]
    fn ints_in_unix_seconds_or_millis_range_are_timestamps() {
        check(
            INT_TS,
            &[
                "1000000000",
                "1700000000",
                "4102444800",
                "1000000000000",
                "4102444800000",
            ],
        );
        check(
            INT,
            &[
                "999999999",
                "4102444801",
                "999999999999",
                "4102444800001",
                "-1700000000",
            ],
        );
    }

    #[test]
    fn valid_json_containers_are_json() {
        for v in ["{}", r#"{"a":1}"#, r#"{"a":[1,{"b":null}]}"#, "{\"a\":1}\n"] {
            assert_eq!(classify(Some(v)), (Prim::JsonObject, None), "{v:?}");
        }
        for v in ["[]", "[1,2]", r#"["x",{"y":true}]"#, r#"["\ud800"]"#] {
            assert_eq!(classify(Some(v)), (Prim::JsonArray, None), "{v:?}");
        }
        // Invalid JSON, or JSON that does not start with `{`/`[`.
        check(
            STRING,
            &[
                "{not json",
                "{",
                "[1,]",
                r#"{"a":1} x"#,
                " {}",
                "{'a':1}",
                r#""quoted""#,
            ],
        );
    }

    #[test]
    fn cid_shaped_strings_get_the_cid_hint() {
        check(
            STR_CID,
            &[CIDV1, CIDV0, "baaaaaaaaaaaaaaa", "ba234567abcdefgh"],
        );
        assert_eq!(CIDV0.len(), 46);
        check(
            STRING,
            &[
                "baaaaaaaaaaaaaa",          // 13 after "ba"
                "bafyBEIGDYRZT5SFP7UDM7HU", // uppercase
                "baaaaaaaaaaaaaa1",         // 1 is not base32
                "baaaaaaaaaaaaaa8",
                &CIDV0[..45],
                &format!("{CIDV0}x"),
                "Qm0wAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", // 0
                "QmOwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", // O
                "QmIwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", // I
                "QmlwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG", // l
                "qmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
            ],
        );
    }

    #[test]
    fn anything_else_is_a_plain_string() {
        check(
            STRING,
            &["hello", " ", "Qm", "ba", "12abc", "true ", "-", "☃"],
        );
    }

    #[test]
    fn prim_names_round_trip() {
        let names: Vec<_> = Prim::ALL.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "string",
                "int",
                "float",
                "bool",
                "json-object",
                "json-array",
                "undefined"
            ]
        );
        for p in Prim::ALL {
            assert_eq!(Prim::parse(p.as_str()), Some(p));
        }
        assert_eq!(Prim::parse("mixed"), None);
        assert_eq!(Hint::parse("timestamp"), Some(Hint::Timestamp));
        assert_eq!(Hint::parse("cid"), Some(Hint::Cid));
        assert_eq!(KeyHint::parse("language-code"), Some(KeyHint::LanguageCode));
        assert_eq!(Hint::parse(""), None);
    }

    #[test]
    fn language_code_segments_collapse_to_their_prefix() {
        let lc = Some(KeyHint::LanguageCode);
        assert_eq!(field_path("plot/eng"), ("plot".into(), lc));
        assert_eq!(field_path("plot/fr"), ("plot".into(), lc));
        assert_eq!(field_path("meta/title/de"), ("meta/title".into(), lc));
        for unchanged in [
            "plot/english",
            "plot/EN",
            "plot/e",
            "plot/en1",
            "plot/é",
            "eng",
            "/eng",
        ] {
            assert_eq!(
                field_path(unchanged),
                (unchanged.into(), None),
                "{unchanged:?}"
            );
        }
        // Only the last segment is looked at, and only once.
        assert_eq!(field_path("en/plot"), ("en/plot".into(), None));
        assert_eq!(field_path("a/en/fr"), ("a/en".into(), lc));
        assert_eq!(field_path("a//eng"), ("a/".into(), lc));
    }

    #[test]
    fn counter_keys_round_trip() {
        let cases = [
            ("title", None, Prim::String, None),
            ("plot", Some(KeyHint::LanguageCode), Prim::String, None),
            ("a/b/c", None, Prim::Int, Some(Hint::Timestamp)),
            ("hash", None, Prim::String, Some(Hint::Cid)),
            ("odd\x1fname\x1f", None, Prim::JsonArray, None),
            ("x", Some(KeyHint::LanguageCode), Prim::Undefined, None),
        ];
        for (path, kh, prim, hint) in cases {
            let key = counter_key(path, kh, prim, hint);
            assert_eq!(
                parse_counter_key(&key),
                Some((path.to_owned(), kh, prim, hint)),
                "{key:?}"
            );
        }
        assert_eq!(
            counter_key("a/b", None, Prim::Bool, None),
            "idx:schema/a/b\x1f\x1fbool\x1f"
        );
    }

    #[test]
    fn malformed_counter_keys_do_not_parse() {
        for key in [
            "",
            "idx:schema/",
            "schema/a\x1f\x1fint\x1f",
            "idx:schema/a\x1fint\x1f",
            "idx:schema/\x1f\x1fint\x1f",
            "idx:schema/a\x1f\x1fmixed\x1f",
            "idx:schema/a\x1f\x1fint\x1fdate",
            "idx:schema/a\x1fcountry\x1fint\x1f",
            "idx:schema/a\x1f\x1fINT\x1f",
        ] {
            assert_eq!(parse_counter_key(key), None, "{key:?}");
        }
    }

    #[test]
    fn a_value_contributes_to_its_collapsed_field_and_kind() {
        assert_eq!(
            contribution("plot/eng", Some("A heist")),
            "idx:schema/plot\x1flanguage-code\x1fstring\x1f"
        );
        assert_eq!(
            contribution("created", Some("1700000000")),
            "idx:schema/created\x1f\x1fint\x1ftimestamp"
        );
        assert_eq!(
            contribution("gone", None),
            "idx:schema/gone\x1f\x1fundefined\x1f"
        );
        assert_eq!(
            contribution("src", Some(CIDV1)),
            "idx:schema/src\x1f\x1fstring\x1fcid"
        );
        // The Go parsers' answers, as classify uses them.
        assert_eq!(classify(Some("1_000.5")), FLOAT);
        assert_eq!(classify(Some("1e400")), STRING);
        check(STR_TS, &["2023-06-01T12:34:56Z", "2023-06-01"]);
        check(STRING, &["2023-06-01T12:00:00", "2023-02-29"]);
    }
}
