//! OpenAI's strict mode for JSON schemas: every object closed (`additionalProperties: false`)
//! with every property required, optional ones made nullable instead; and back again, for
//! answers given under it.

use serde_json::{Map, Value, json};

/// Keywords strict mode rejects; a schema using one is sent non-strict.
const UNSUPPORTED: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
];

/// The strict-mode form of `schema`, or `None` when it cannot have one (an open object such
/// as a map, an unsupported keyword, a root that is not an object).
pub(crate) fn strict_form(schema: &Value) -> Option<Value> {
    let mut strict = schema.clone();
    if let Value::Object(root) = &mut strict {
        root.remove("$schema");
    }
    let is_object = strict.get("type").and_then(Value::as_str) == Some("object");
    (is_object && make_strict(&mut strict)).then_some(strict)
}

/// Rewrites `node` in place; `false` when it cannot be made strict.
fn make_strict(node: &mut Value) -> bool {
    let Value::Object(map) = node else {
        return false; // `true`/`false` schemas accept anything or nothing: not strict
    };
    if UNSUPPORTED.iter().any(|key| map.contains_key(*key)) {
        return false;
    }
    if let Some(one_of) = map.remove("oneOf") {
        // Strict mode has no `oneOf`; schemars' tagged enums are disjoint, so `anyOf` is
        // the same.
        map.insert("anyOf".into(), one_of);
    }
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = map.get_mut(key)
            && !defs.values_mut().all(make_strict)
        {
            return false;
        }
    }
    if let Some(Value::Array(variants)) = map.get_mut("anyOf")
        && !variants.iter_mut().all(make_strict)
    {
        return false;
    }
    let items_ok = match map.get_mut("items") {
        Some(Value::Array(items)) => items.iter_mut().all(make_strict),
        Some(items @ Value::Object(_)) => make_strict(items),
        _ => true,
    };
    if !items_ok {
        return false;
    }
    let is_object =
        map.get("type").and_then(Value::as_str) == Some("object") || map.contains_key("properties");
    if is_object && !close_object(map) {
        return false;
    }
    true
}

fn close_object(map: &mut Map<String, Value>) -> bool {
    if map
        .get("additionalProperties")
        .is_some_and(|extra| extra != &Value::Bool(false))
    {
        return false;
    }
    map.insert("additionalProperties".into(), Value::Bool(false));
    let required: Vec<String> = match map.get("required") {
        Some(Value::Array(names)) => names
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    };
    let mut all = Vec::new();
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            if !make_strict(property) {
                return false;
            }
            if !required.contains(name) {
                make_nullable(property);
            }
            all.push(Value::String(name.clone()));
        }
    } else {
        map.insert("properties".into(), Value::Object(Map::new()));
    }
    map.insert("required".into(), Value::Array(all));
    true
}

/// Lets `schema` also accept `null`, the strict-mode stand-in for "absent".
fn make_nullable(schema: &mut Value) {
    let null = Value::String("null".into());
    if let Value::Object(map) = schema {
        match map.get_mut("type") {
            Some(Value::String(single)) if single != "null" => {
                let single = std::mem::take(single);
                map.insert("type".into(), json!([single, "null"]));
                add_null_to_enum(map);
                return;
            }
            Some(Value::Array(types)) => {
                if !types.contains(&null) {
                    types.push(null);
                }
                add_null_to_enum(map);
                return;
            }
            Some(_) => return,
            None => {}
        }
        if let Some(Value::Array(variants)) = map.get_mut("anyOf") {
            if !variants.iter().any(|v| v.get("type") == Some(&null)) {
                variants.push(json!({"type": "null"}));
            }
            return;
        }
    }
    let inner = std::mem::take(schema);
    *schema = json!({"anyOf": [inner, {"type": "null"}]});
}

fn add_null_to_enum(map: &mut Map<String, Value>) {
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.contains(&Value::Null)
    {
        values.push(Value::Null);
    }
}

/// Removes the `null`s strict mode made the model write for absent optional properties, so
/// the answer checks against the original schema (where those properties may simply be
/// missing). `root` resolves local `$ref`s.
pub(crate) fn remove_added_nulls(value: &mut Value, schema: &Value, root: &Value) {
    let schema = resolve(schema, root);
    match value {
        Value::Object(object) => {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                return;
            };
            let required = schema.get("required").and_then(Value::as_array);
            let is_required = |name: &str| {
                required.is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name)))
            };
            object.retain(|name, item| {
                !(item.is_null()
                    && !is_required(name)
                    && properties.get(name).is_some_and(|p| !accepts_null(p, root)))
            });
            for (name, item) in object.iter_mut() {
                if let Some(property) = properties.get(name) {
                    remove_added_nulls(item, property, root);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items").filter(|s| s.is_object()) {
                for item in items {
                    remove_added_nulls(item, item_schema, root);
                }
            }
        }
        _ => {}
    }
}

/// Follows a local `$ref` (`#/$defs/X`, `#/definitions/X`) to its schema.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference
            .strip_prefix('#')
            .and_then(|pointer| root.pointer(pointer))
            .unwrap_or(schema),
        None => schema,
    }
}

fn accepts_null(schema: &Value, root: &Value) -> bool {
    let schema = resolve(schema, root);
    match schema.get("type") {
        Some(Value::String(single)) => single == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        _ => {
            ["anyOf", "oneOf"].iter().any(|key| {
                schema
                    .get(*key)
                    .and_then(Value::as_array)
                    .is_some_and(|variants| variants.iter().any(|v| accepts_null(v, root)))
            }) || schema.as_object().is_none_or(|map| {
                !map.contains_key("enum") && !map.contains_key("const") && !map.contains_key("$ref")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_properties_become_required_and_nullable() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"]},
                "days": {"type": "array", "items": {"$ref": "#/$defs/Day"}},
                "note": {"$ref": "#/$defs/Day"}
            },
            "required": ["city", "days"],
            "$defs": {"Day": {"type": "object", "properties": {"high": {"type": "number"}}}}
        });
        let mut strict = strict_form(&schema).unwrap();
        // Property order follows serde_json's map (sorted, or as written with
        // `preserve_order`): compare `required` as a set.
        if let Some(Value::Array(required)) = strict.get_mut("required") {
            required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        }
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": ["string", "null"], "enum": ["c", "f", null]},
                    "days": {"type": "array", "items": {"$ref": "#/$defs/Day"}},
                    "note": {"anyOf": [{"$ref": "#/$defs/Day"}, {"type": "null"}]}
                },
                "required": ["city", "days", "note", "unit"],
                "additionalProperties": false,
                "$defs": {"Day": {
                    "type": "object",
                    "properties": {"high": {"type": ["number", "null"]}},
                    "required": ["high"],
                    "additionalProperties": false
                }}
            })
        );
        let mut answer =
            json!({"city": "Paris", "unit": null, "days": [{"high": null}], "note": null});
        remove_added_nulls(&mut answer, &schema, &schema);
        assert_eq!(answer, json!({"city": "Paris", "days": [{}]}));
    }

    #[test]
    fn open_objects_and_unsupported_keywords_stay_non_strict() {
        let map = json!({"type": "object", "additionalProperties": {"type": "number"}});
        assert!(strict_form(&map).is_none());
        let all_of =
            json!({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}});
        assert!(strict_form(&all_of).is_none());
        assert!(strict_form(&json!({"type": "array"})).is_none());
    }
}
