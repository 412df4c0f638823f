//! `docs/openapi.json`, held against what apid really answers: a checker
//! of a JSON value against the document's schemas, strict where the
//! document lists an object's properties (a property it does not name is a
//! mismatch, a required one missing is too), and the list of operations
//! that answer JSON.

use std::collections::BTreeSet;

use serde_json::Value;

/// The OpenAPI document of the tree under test.
pub const DOCUMENT: &str = include_str!("../../docs/openapi.json");

/// The parsed document.
pub fn document() -> Value {
    serde_json::from_str(DOCUMENT).expect("docs/openapi.json is JSON")
}

/// Every `(path, method)` whose 200 answer is documented as JSON, but the
/// document itself (`/api/openapi.json`).
pub fn json_operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let json = &op["responses"]["200"]["content"]["application/json"]["schema"];
            if json.is_object() && path != "/api/openapi.json" {
                out.insert((path.clone(), method.clone()));
            }
        }
    }
    out
}

/// Checks `answer` against the 200 schema of `method path` (the path as the
/// document writes it, `{hash}` and all).
pub fn check_answer(doc: &Value, path: &str, method: &str, answer: &Value) -> Result<(), String> {
    let op = &doc["paths"][path][method];
    if !op.is_object() {
        return Err(format!("{method} {path} is not documented"));
    }
    let schema = &op["responses"]["200"]["content"]["application/json"]["schema"];
    check(doc, answer, schema, &format!("{method} {path}"))
}

/// Checks `value` against the component schema `name`.
pub fn check_component(doc: &Value, name: &str, value: &Value) -> Result<(), String> {
    let schema = serde_json::json!({ "$ref": format!("#/components/schemas/{name}") });
    check(doc, value, &schema, name)
}

/// A schema with its `$ref` followed.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("a local reference");
            resolve(doc, doc.pointer(pointer).expect("the reference resolves"))
        }
        None => schema,
    }
}

fn type_matches(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        other => panic!("unknown JSON type {other}"),
    }
}

/// The property names a schema (and the parts of its `allOf`) declares.
fn declared<'a>(doc: &'a Value, schema: &'a Value, out: &mut BTreeSet<&'a str>) {
    let schema = resolve(doc, schema);
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        out.extend(props.keys().map(String::as_str));
    }
    for part in schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        declared(doc, part, out);
    }
}

/// Checks `v` against `schema`; the first mismatch, with where it is.
fn check(doc: &Value, v: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let s = resolve(doc, schema);
    let fail = |why: String| Err(format!("{at}: {why} (value {v})"));
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_matches(v, t),
            Value::Array(ts) => ts.iter().any(|t| type_matches(v, t.as_str().unwrap_or(""))),
            _ => false,
        };
        if !ok {
            return fail(format!("not of type {t}"));
        }
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        return fail(format!("not the constant {c}"));
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return fail(format!("not one of {e:?}"));
    }
    if let (Some(min), Some(n)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64())
        && n < min
    {
        return fail(format!("below the minimum {min}"));
    }
    if let Some(parts) = s.get("anyOf").and_then(Value::as_array)
        && !parts.iter().any(|p| check(doc, v, p, at).is_ok())
    {
        return fail("matches no schema of anyOf".into());
    }
    if let Some(parts) = s.get("oneOf").and_then(Value::as_array) {
        let n = parts
            .iter()
            .filter(|p| check(doc, v, p, at).is_ok())
            .count();
        if n != 1 {
            return fail(format!("matches {n} schemas of oneOf, not exactly one"));
        }
    }
    if let Some(parts) = s.get("allOf").and_then(Value::as_array) {
        for p in parts {
            check_loose(doc, v, p, at)?;
        }
    }
    if let Some(items) = s.get("items")
        && let Some(list) = v.as_array()
    {
        for (i, x) in list.iter().enumerate() {
            check(doc, x, items, &format!("{at}[{i}]"))?;
        }
    }
    if let Some(obj) = v.as_object() {
        check_object(doc, obj, s, at, true)?;
    }
    Ok(())
}

/// [`check`] for a part of an `allOf`: the other parts may declare the
/// properties this one does not.
fn check_loose(doc: &Value, v: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let s = resolve(doc, schema);
    match v.as_object() {
        Some(obj) => {
            let mut without_props = s.clone();
            if let Some(o) = without_props.as_object_mut() {
                o.remove("properties");
                o.remove("required");
            }
            check(doc, v, &without_props, at)?;
            check_object(doc, obj, s, at, false)
        }
        None => check(doc, v, s, at),
    }
}

fn check_object(
    doc: &Value,
    obj: &serde_json::Map<String, Value>,
    s: &Value,
    at: &str,
    strict: bool,
) -> Result<(), String> {
    for r in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let r = r.as_str().unwrap_or("");
        if !obj.contains_key(r) {
            return Err(format!("{at}: the required {r:?} is missing"));
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    let mut names = BTreeSet::new();
    declared(doc, s, &mut names);
    for (k, x) in obj {
        let here = format!("{at}.{k}");
        match props.and_then(|p| p.get(k)) {
            Some(p) => check(doc, x, p, &here)?,
            None => match s.get("additionalProperties") {
                Some(Value::Bool(false)) => return Err(format!("{here}: not allowed")),
                Some(Value::Bool(true)) => {}
                Some(extra) => check(doc, x, extra, &here)?,
                None if strict && !names.is_empty() && !names.contains(k.as_str()) => {
                    return Err(format!("{here}: not in the document"));
                }
                None => {}
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const RID: &str = "01M8N10DTXEQRADXEPK8EBGMCQ";

    #[test]
    fn the_checker_finds_what_the_document_does_not_say() {
        let d = document();
        let ok = json!({"success": true, "hashId": RID});
        assert!(check_answer(&d, "/meta/{hash}", "put", &ok).is_ok());
        for bad in [
            json!({"success": true}),
            json!({"success": false, "hashId": RID}),
            json!({"success": true, "hashId": RID, "extra": 1}),
            json!({"success": true, "hashId": 7}),
        ] {
            assert!(
                check_answer(&d, "/meta/{hash}", "put", &bad).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn objects_of_an_all_of_may_carry_what_any_part_declares() {
        let d = document();
        let leader = json!({
            "hostname": "h", "baseUrl": "b", "apiUrl": "a", "redisUrl": "",
            "webdavUrl": "w", "webdavUrlInternal": "i", "timestamp": 1, "pid": 2
        });
        assert!(check_component(&d, "LeaderInfo", &leader).is_ok());
        let mut extra = leader.clone();
        extra["surprise"] = json!(true);
        assert!(check_component(&d, "LeaderInfo", &extra).is_err());
        let mut missing = leader;
        missing.as_object_mut().unwrap().remove("pid");
        assert!(check_component(&d, "LeaderInfo", &missing).is_err());
    }
}
