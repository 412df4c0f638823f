//! The nested view of a flat record (`?shape=nested`, snapshot export) and
//! its inverse (snapshot import), per the seeds' reconstruction rules:
//! `/` separates segments; an object whose keys are exactly `0..n-1`
//! becomes an array; values stay strings (CONTRACT decision 4).
//!
//! One case the seeds leave open: a path that is both a value and a parent
//! (`a = "x"` and `a/b = "y"`). Field segments are never empty, so the
//! value is kept under the key `""` of the object (`{"a": {"": "x", "b":
//! "y"}}`), and [`flatten`] reads it back: nesting loses nothing.

use std::collections::BTreeMap;

use metacore::record::Fields;
use serde_json::{Map, Value};

#[derive(Debug, Default)]
struct Node {
    value: Option<String>,
    children: BTreeMap<String, Node>,
}

/// The nested document of `fields`: always an object, even of no fields
/// or of fields named `0..n-1` only (a record's document is an object,
/// and an import reads no other).
pub fn nest(fields: &Fields) -> Value {
    let mut root = Node::default();
    for (path, value) in fields {
        let mut node = &mut root;
        for seg in path.split('/') {
            node = node.children.entry(seg.to_owned()).or_default();
        }
        node.value = Some(value.clone());
    }
    // Field names are never empty: the root holds no value of its own.
    let map = root
        .children
        .into_iter()
        .map(|(k, child)| (k, to_value(child)))
        .collect();
    Value::Object(map)
}

fn to_value(node: Node) -> Value {
    if node.children.is_empty() {
        return Value::String(node.value.unwrap_or_default());
    }
    let n = node.children.len();
    let is_array =
        node.value.is_none() && (0..n).all(|i| node.children.contains_key(&i.to_string()));
    if is_array {
        let mut items: Vec<(usize, Node)> = node
            .children
            .into_iter()
            .map(|(k, v)| (k.parse().expect("checked above"), v))
            .collect();
        items.sort_by_key(|(i, _)| *i);
        return Value::Array(items.into_iter().map(|(_, v)| to_value(v)).collect());
    }
    let mut map = Map::new();
    if let Some(v) = node.value {
        map.insert(String::new(), Value::String(v));
    }
    for (k, child) in node.children {
        map.insert(k, to_value(child));
    }
    Value::Object(map)
}

/// The flat fields of a nested document. Besides strings it takes what
/// older exports held (the original coerced values): `null` becomes `""`,
/// booleans `"true"`/`"false"`, numbers their shortest decimal form; empty
/// objects and arrays add nothing.
pub fn flatten(doc: &Value) -> Fields {
    let mut out = Fields::new();
    walk(doc, &mut String::new(), &mut out);
    out
}

fn walk(v: &Value, path: &mut String, out: &mut Fields) {
    let len = path.len();
    let mut child = |key: &str, v: &Value, path: &mut String| {
        if key.is_empty() {
            walk(v, path, out);
            return;
        }
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str(key);
        walk(v, path, out);
        path.truncate(len);
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                child(k, v, path);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                child(&i.to_string(), v, path);
            }
        }
        leaf => {
            if !path.is_empty() {
                out.insert(path.clone(), scalar(leaf));
            }
        }
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (_, Some(u), _) => u.to_string(),
            (_, _, Some(f)) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
            (_, _, Some(f)) => f.to_string(),
            _ => n.to_string(),
        },
        Value::Array(_) | Value::Object(_) => unreachable!("walk handles containers"),
    }
}

#[cfg(test)]
#[path = "nested_fuzz_test.rs"]
mod fuzz_test;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        metacore::record::fields_of(pairs)
    }

    #[test]
    fn the_seed_example_nests() {
        let f = fields(&[
            ("title", "Inception"),
            ("fileinfo/duration", "8878.5"),
            ("fileinfo/streamdetails/video/0/codec", "h264"),
            ("streams/0/language", "eng"),
            ("streams/1/language", "fra"),
        ]);
        assert_eq!(
            nest(&f),
            json!({
                "title": "Inception",
                "fileinfo": {"duration": "8878.5", "streamdetails": {"video": [{"codec": "h264"}]}},
                "streams": [{"language": "eng"}, {"language": "fra"}],
            })
        );
    }

    #[test]
    fn gaps_and_leading_zeros_stay_objects() {
        let f = fields(&[("a/0", "x"), ("a/2", "y"), ("b/00", "z")]);
        assert_eq!(
            nest(&f),
            json!({"a": {"0": "x", "2": "y"}, "b": {"00": "z"}})
        );
    }

    #[test]
    fn nesting_loses_nothing() {
        let f = fields(&[
            ("a", "x"),
            ("a/b", "y"),
            ("n", "007"),
            ("e", ""),
            ("t", "true"),
            ("list/0", "p"),
            ("list/1", "q"),
            ("list/1/deeper", "r"),
            ("cids/bafkreiabc", "true"),
        ]);
        assert_eq!(flatten(&nest(&f)), f);
    }

    /// Found by the property tests: a record of no fields nested to `""`
    /// and one whose fields are all named `0..n-1` to an array, documents
    /// an import refuses ("not a JSON object").
    #[test]
    fn a_record_nests_to_an_object_whatever_its_names() {
        assert_eq!(nest(&Fields::new()), json!({}));
        let f = fields(&[("0", "x"), ("1", "y"), ("2/0", "z")]);
        assert_eq!(nest(&f), json!({"0": "x", "1": "y", "2": ["z"]}));
        assert_eq!(flatten(&nest(&f)), f);
    }

    #[test]
    fn older_exports_flatten_with_the_original_coercions() {
        let doc = json!({"n": 7, "f": 5.1, "b": true, "z": null, "e": {}, "big": 1e3});
        assert_eq!(
            flatten(&doc),
            fields(&[
                ("n", "7"),
                ("f", "5.1"),
                ("b", "true"),
                ("z", ""),
                ("big", "1000")
            ])
        );
    }
}
