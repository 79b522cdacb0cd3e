//! Tool schemas for Gemini function declarations (see
//! `tests/fixtures/providers/gemini/schema_notes.md`).
//!
//! A schema goes as `parametersJsonSchema` (plain JSON Schema) when every `$ref` in it
//! resolves, with a few rewrites the API needs (draft-07 tuples, `true` sub-schemas). Otherwise
//! it is fitted to the `parameters` field's OpenAPI subset: references inlined, unsupported
//! keywords dropped, `const` as `enum`, type arrays and null branches as `nullable`. A
//! declaration never carries both fields, and a tool without parameters carries neither.

use serde_json::{Map, Value, json};

/// How deep references are inlined when fitting to `parameters` (cyclic schemas stop here).
const MAX_INLINE_DEPTH: usize = 12;

/// The keys a `parameters` schema may have.
const OPENAPI_KEYS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "items",
    "minItems",
    "maxItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "anyOf",
    "propertyOrdering",
    "default",
    "example",
];

/// Keys whose value is a map of names to sub-schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];
/// Keys whose value is a list of sub-schemas.
const SCHEMA_LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keys whose value is one sub-schema.
const SCHEMA_ONE: &[&str] = &[
    "items",
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
];

/// The declaration field and schema for a tool's input schema, or `None` for a tool without
/// parameters.
pub(crate) fn declaration_schema(schema: &Value) -> Option<(&'static str, Value)> {
    if !has_parameters(schema) {
        return None;
    }
    if refs_resolve(schema, schema) {
        let mut schema = schema.clone();
        rewrite_json_schema(&mut schema);
        if let Value::Object(map) = &mut schema {
            map.entry("type").or_insert_with(|| json!("object"));
        }
        Some(("parametersJsonSchema", schema))
    } else {
        let mut fitted = fit(schema, schema, 0);
        if let Value::Object(map) = &mut fitted {
            map.insert("type".into(), json!("OBJECT"));
        }
        Some(("parameters", fitted))
    }
}

/// Whether an object schema declares any property (or anything beyond an empty object).
fn has_parameters(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    match map.get("properties") {
        Some(Value::Object(properties)) if !properties.is_empty() => true,
        _ => ["anyOf", "oneOf", "allOf", "$ref", "additionalProperties"]
            .iter()
            .any(|key| map.get(*key).is_some_and(|v| v != &Value::Bool(false))),
    }
}

/// Whether every `$ref` in `schema` points inside `root`.
fn refs_resolve(schema: &Value, root: &Value) -> bool {
    let Value::Object(map) = schema else {
        return true;
    };
    if let Some(reference) = map.get("$ref")
        && reference.as_str().and_then(|r| resolve(root, r)).is_none()
    {
        return false;
    }
    sub_schemas(map).all(|sub| refs_resolve(sub, root))
}

/// Every direct sub-schema of a schema object.
fn sub_schemas(map: &Map<String, Value>) -> impl Iterator<Item = &Value> {
    let maps = SCHEMA_MAPS
        .iter()
        .filter_map(|key| map.get(*key).and_then(Value::as_object))
        .flat_map(Map::values);
    let lists = SCHEMA_LISTS
        .iter()
        .chain(&["items"])
        .filter_map(|key| map.get(*key).and_then(Value::as_array))
        .flatten();
    let ones = SCHEMA_ONE
        .iter()
        .filter_map(|key| map.get(*key).filter(|v| v.is_object()));
    maps.chain(lists).chain(ones)
}

/// A local reference (`#`, `#/$defs/Name`) looked up in `root`.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    let decoded = percent_decode(pointer);
    root.pointer(&decoded)
}

/// `%XX` escapes in a URI fragment.
fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(byte) = text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The rewrites `parametersJsonSchema` needs: `true`/`false` sub-schemas as objects and
/// draft-07 tuples (`items: [...]`) as 2020-12 `prefixItems`.
fn rewrite_json_schema(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    if map.get("items").is_some_and(Value::is_array)
        && let Some(tuple) = map.remove("items")
    {
        map.insert("prefixItems".into(), tuple);
        if let Some(rest) = map.remove("additionalItems") {
            map.insert("items".into(), rest);
        }
    }
    let mut fix = |sub: &mut Value| match sub {
        Value::Bool(true) => *sub = json!({}),
        Value::Bool(false) => *sub = json!({"not": {}}),
        _ => rewrite_json_schema(sub),
    };
    for key in SCHEMA_MAPS {
        if let Some(Value::Object(subs)) = map.get_mut(*key) {
            subs.values_mut().for_each(&mut fix);
        }
    }
    for key in SCHEMA_LISTS {
        if let Some(Value::Array(subs)) = map.get_mut(*key) {
            subs.iter_mut().for_each(&mut fix);
        }
    }
    for key in SCHEMA_ONE {
        // `additionalProperties: false` is meaningful and accepted as is.
        if *key == "additionalProperties" && map.get(*key).is_some_and(Value::is_boolean) {
            continue;
        }
        if let Some(sub) = map.get_mut(*key) {
            fix(sub);
        }
    }
}

/// `schema` fitted to the `parameters` OpenAPI subset, references resolved against `root`.
pub(crate) fn fit(schema: &Value, root: &Value, depth: usize) -> Value {
    let Value::Object(source) = schema else {
        return json!({});
    };
    let mut source = source.clone();
    // A reference is replaced by its target; sibling keys (a description...) win.
    if let Some(reference) = source.remove("$ref") {
        let target = reference.as_str().and_then(|r| resolve(root, r));
        if let Some(Value::Object(target)) = target.filter(|_| depth < MAX_INLINE_DEPTH) {
            for (key, value) in target {
                source.entry(key.clone()).or_insert_with(|| value.clone());
            }
            return fit(&Value::Object(source), root, depth + 1);
        }
    }
    if let Some(Value::Array(parts)) = source.remove("allOf") {
        for part in parts {
            let part = fit(&part, root, depth + 1);
            merge_into(&mut source, part);
        }
    }
    let mut out = Map::new();
    let mut nullable = source.get("nullable") == Some(&Value::Bool(true));

    // `type`: upper case; a type array becomes one type plus `nullable`, or `anyOf`.
    let mut types: Vec<String> = match source.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    if types.iter().any(|t| t == "null") {
        nullable = true;
        types.retain(|t| t != "null");
    }
    let mut variants: Vec<Value> = Vec::new();
    match types.as_slice() {
        [] => {}
        [one] => {
            out.insert("type".into(), json!(one.to_uppercase()));
        }
        many => variants.extend(many.iter().map(|t| json!({"type": t.to_uppercase()}))),
    }

    // `anyOf`/`oneOf`: null branches become `nullable`, a single branch is inlined.
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = source.get(key) {
            for branch in branches {
                if branch.get("type").and_then(Value::as_str) == Some("null") {
                    nullable = true;
                } else {
                    variants.push(fit(branch, root, depth + 1));
                }
            }
        }
    }
    if variants.len() == 1 && !out.contains_key("type") {
        if let Some(Value::Object(only)) = variants.pop() {
            for (key, value) in only {
                out.entry(key).or_insert(value);
            }
        }
    } else if !variants.is_empty() {
        out.insert("anyOf".into(), Value::Array(variants));
    }

    // `const` and `enum`: strings only.
    let mut values: Vec<Value> = Vec::new();
    if let Some(value) = source.get("const") {
        values.push(value.clone());
    } else if let Some(Value::Array(all)) = source.get("enum") {
        values.clone_from(all);
    }
    if values.iter().any(Value::is_null) {
        nullable = true;
        values.retain(|v| !v.is_null());
    }
    if !values.is_empty() && values.iter().all(Value::is_string) {
        out.insert("enum".into(), Value::Array(values));
        out.entry("type").or_insert_with(|| json!("STRING"));
    }

    if let Some(Value::Object(properties)) = source.get("properties") {
        let fitted: Map<String, Value> = properties
            .iter()
            .map(|(name, sub)| (name.clone(), fit(sub, root, depth + 1)))
            .collect();
        if !fitted.is_empty() {
            if let Some(Value::Array(required)) = source.get("required") {
                let required: Vec<Value> = required
                    .iter()
                    .filter(|name| name.as_str().is_some_and(|n| fitted.contains_key(n)))
                    .cloned()
                    .collect();
                if !required.is_empty() {
                    out.insert("required".into(), Value::Array(required));
                }
            }
            out.insert("properties".into(), Value::Object(fitted));
            out.entry("type").or_insert_with(|| json!("OBJECT"));
        }
    }
    match source.get("items") {
        Some(Value::Array(tuple)) => {
            let mut items: Vec<Value> = tuple.iter().map(|s| fit(s, root, depth + 1)).collect();
            let items = match items.len() {
                0 => json!({}),
                1 => items.remove(0),
                _ => json!({"anyOf": items}),
            };
            out.insert("items".into(), items);
        }
        Some(items @ Value::Object(_)) => {
            out.insert("items".into(), fit(items, root, depth + 1));
        }
        _ => {}
    }
    if out.get("type") == Some(&json!("ARRAY")) && !out.contains_key("items") {
        out.insert("items".into(), json!({}));
    }

    // Exclusive bounds become inclusive ones (lossy: `> 0` becomes `>= 0`).
    for (exclusive, inclusive) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if let Some(bound) = source.get(exclusive).filter(|v| v.is_number()).cloned() {
            source.entry(inclusive).or_insert(bound);
        }
    }
    if let Some(Value::String(format)) = source.get("format") {
        let kept = match out.get("type").and_then(Value::as_str) {
            Some("STRING") => matches!(format.as_str(), "enum" | "date-time"),
            Some("INTEGER") => matches!(format.as_str(), "int32" | "int64"),
            Some("NUMBER") => matches!(format.as_str(), "float" | "double"),
            _ => false,
        };
        if kept {
            out.insert("format".into(), json!(format));
        }
    }
    for key in OPENAPI_KEYS {
        if matches!(
            *key,
            "type" | "format" | "nullable" | "enum" | "items" | "properties" | "required" | "anyOf"
        ) {
            continue;
        }
        if let Some(value) = source.get(*key) {
            let keep = match *key {
                "title" | "description" | "pattern" => value.is_string(),
                "propertyOrdering" => value.is_array(),
                "default" | "example" => true,
                _ => value.is_number(),
            };
            if keep {
                out.insert((*key).into(), value.clone());
            }
        }
    }
    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    Value::Object(out)
}

/// Merges an `allOf` part into a schema: properties and `required` are united, other keys
/// keep their first value.
fn merge_into(target: &mut Map<String, Value>, part: Value) {
    let Value::Object(part) = part else {
        return;
    };
    for (key, value) in part {
        match (key.as_str(), target.get_mut(&key), value) {
            ("properties", Some(Value::Object(mine)), Value::Object(theirs)) => {
                for (name, schema) in theirs {
                    mine.entry(name).or_insert(schema);
                }
            }
            ("required", Some(Value::Array(mine)), Value::Array(theirs)) => {
                for name in theirs {
                    if !mine.contains(&name) {
                        mine.push(name);
                    }
                }
            }
            ("type", _, value) => {
                // Fitted parts have upper-case types; the source keeps JSON Schema's.
                if let Some(t) = value.as_str() {
                    target
                        .entry("type")
                        .or_insert_with(|| json!(t.to_lowercase()));
                }
            }
            (_, Some(_), _) => {}
            (_, None, value) => {
                target.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mcp_schema() -> Value {
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "A file path"},
                "mode": {"anyOf": [{"const": "read"}, {"const": "write"}]},
                "limit": {"type": ["integer", "null"], "exclusiveMinimum": 0},
                "options": {"$ref": "#/$defs/Options"},
                "pair": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]},
                "anything": true
            },
            "required": ["path", "gone"],
            "additionalProperties": false,
            "$defs": {
                "Options": {
                    "type": "object",
                    "properties": {
                        "recursive": {"type": "boolean", "default": false},
                        "kind": {"const": "fast"}
                    },
                    "additionalProperties": false
                }
            }
        })
    }

    #[test]
    fn resolvable_schemas_go_as_json_schema_with_rewrites() {
        let (field, schema) = declaration_schema(&mcp_schema()).unwrap();
        assert_eq!(field, "parametersJsonSchema");
        assert_eq!(schema["$defs"], mcp_schema()["$defs"]);
        assert_eq!(
            schema["properties"]["options"],
            json!({"$ref": "#/$defs/Options"})
        );
        assert_eq!(schema["properties"]["anything"], json!({}));
        assert_eq!(
            schema["properties"]["pair"],
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]})
        );
        assert_eq!(schema["additionalProperties"], json!(false));
        let list = json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}}}});
        assert_eq!(declaration_schema(&list).unwrap().1, list);
    }

    #[test]
    fn dangling_refs_fall_back_to_the_openapi_subset() {
        let mut schema = mcp_schema();
        schema["properties"]["lost"] = json!({"$ref": "#/$defs/Missing", "description": "gone"});
        let (field, fitted) = declaration_schema(&schema).unwrap();
        assert_eq!(field, "parameters");
        assert_eq!(
            fitted,
            json!({
                "type": "OBJECT",
                "properties": {
                    "path": {"type": "STRING", "description": "A file path"},
                    "mode": {"anyOf": [
                        {"type": "STRING", "enum": ["read"]},
                        {"type": "STRING", "enum": ["write"]}
                    ]},
                    "limit": {"type": "INTEGER", "minimum": 0, "nullable": true},
                    "options": {
                        "type": "OBJECT",
                        "properties": {
                            "recursive": {"type": "BOOLEAN", "default": false},
                            "kind": {"type": "STRING", "enum": ["fast"]}
                        }
                    },
                    "pair": {"type": "ARRAY", "items": {"anyOf": [
                        {"type": "STRING"}, {"type": "NUMBER"}
                    ]}},
                    "anything": {},
                    "lost": {"description": "gone"}
                },
                "required": ["path"]
            })
        );
    }

    #[test]
    fn cyclic_refs_are_cut_when_inlined() {
        let schema = json!({
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}, "x": {"$ref": "#/nope"}},
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}}
        });
        let (field, fitted) = declaration_schema(&schema).unwrap();
        assert_eq!(field, "parameters");
        assert!(fitted.to_string().len() < 10_000);
        assert!(!fitted.to_string().contains("$ref"));
    }

    #[test]
    fn parameterless_tools_have_no_schema() {
        assert!(declaration_schema(&json!({"type": "object", "properties": {}})).is_none());
        assert!(declaration_schema(&json!({"type": "object"})).is_none());
    }
}
