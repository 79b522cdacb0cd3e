//! `aquaregia mcp call` arguments: `key=value` pairs typed by the tool's schema, the closest
//! tool names for a typo, and image results written to files.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use aquaregia::{ContentBlock, ToolOutput};
use base64::Engine;
use serde_json::{Map, Value};

/// The call's arguments: nothing (`{}`), one JSON object, or `key=value` pairs, each value
/// typed by the schema of its property.
pub(crate) fn parse(raw: &[String], schema: &Value) -> anyhow::Result<Value> {
    if let [only] = raw
        && only.trim_start().starts_with('{')
    {
        let value: Value = serde_json::from_str(only).context("not valid JSON")?;
        if !value.is_object() {
            bail!("give one JSON object, or key=value pairs");
        }
        return Ok(value);
    }
    let mut arguments = Map::new();
    for pair in raw {
        let (key, text) = pair
            .split_once('=')
            .ok_or_else(|| anyhow!("`{pair}` is not key=value (or give one JSON object)"))?;
        if key.is_empty() {
            bail!("`{pair}` has no key");
        }
        let property = &schema["properties"][key];
        let value = typed(text, property)
            .with_context(|| format!("`{key}` expects {}", expected(property)))?;
        arguments.insert(key.to_owned(), value);
    }
    Ok(Value::Object(arguments))
}

fn types_of(property: &Value) -> Vec<&str> {
    match &property["type"] {
        Value::String(kind) => vec![kind.as_str()],
        Value::Array(kinds) => kinds.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn expected(property: &Value) -> String {
    let kinds = types_of(property);
    if kinds.is_empty() {
        "a value".to_owned()
    } else {
        kinds.join(" or ")
    }
}

/// `text` as the schema's type: numbers and booleans parsed, objects and arrays as JSON,
/// strings as is; without a type, JSON when it parses, else a string.
fn typed(text: &str, property: &Value) -> anyhow::Result<Value> {
    let kinds = types_of(property);
    if kinds.is_empty() {
        return Ok(serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())));
    }
    for kind in &kinds {
        let value = match *kind {
            "string" => Some(Value::String(text.to_owned())),
            "integer" => text.parse::<i64>().ok().map(Value::from),
            "number" => serde_json::from_str::<Value>(text)
                .ok()
                .filter(Value::is_number),
            "boolean" => match text {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            "null" => (text == "null").then_some(Value::Null),
            "object" | "array" => serde_json::from_str::<Value>(text).ok().filter(|value| {
                value.is_object() == (*kind == "object") && (value.is_object() || value.is_array())
            }),
            _ => None,
        };
        if let Some(value) = value {
            return Ok(value);
        }
    }
    bail!("`{text}` is not one")
}

/// Up to three tool names close to `name` (edit distance, or one containing the other).
pub(crate) fn closest<'a>(name: &str, names: &[&'a str]) -> Vec<&'a str> {
    let wanted = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = names
        .iter()
        .map(|candidate| {
            let lower = candidate.to_lowercase();
            let distance = if lower.contains(&wanted) || wanted.contains(&lower) {
                0
            } else {
                edit_distance(&wanted, &lower)
            };
            (distance, *candidate)
        })
        .filter(|(distance, _)| *distance <= (wanted.chars().count() / 3).max(2))
        .collect();
    scored.sort();
    scored.into_iter().take(3).map(|(_, name)| name).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous.get(j).copied().unwrap_or(0) + usize::from(ca != *cb);
            let delete = previous.get(j + 1).copied().unwrap_or(0) + 1;
            let insert = current.get(j).copied().unwrap_or(0) + 1;
            current.push(substitute.min(delete).min(insert));
        }
        previous = current;
    }
    previous.last().copied().unwrap_or(0)
}

/// Writes each image block of `result` to `dir` as `image-<n>.<ext>`, saying so on stderr.
pub(crate) fn save_images(result: &ToolOutput, dir: &Path) -> anyhow::Result<()> {
    let (ToolOutput::Content(blocks)
    | ToolOutput::Structured {
        content: blocks, ..
    }) = result
    else {
        return Ok(());
    };
    let images = blocks.iter().filter_map(|block| match block {
        ContentBlock::Image { mime_type, data } => Some((mime_type, data)),
        _ => None,
    });
    for (index, (mime_type, data)) in images.enumerate() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        // Lenient on padding: servers get it wrong.
        let engine = base64::engine::GeneralPurpose::new(
            &base64::alphabet::STANDARD,
            base64::engine::GeneralPurposeConfig::new()
                .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
        );
        let bytes = engine
            .decode(data.trim().trim_end_matches('='))
            .with_context(|| format!("image {} is not valid base64", index + 1))?;
        let extension = mime_type
            .strip_prefix("image/")
            .map(|kind| kind.split(['+', ';']).next().unwrap_or(kind))
            .filter(|kind| !kind.is_empty() && kind.chars().all(|c| c.is_ascii_alphanumeric()))
            .unwrap_or("bin");
        let path = dir.join(format!("image-{}.{extension}", index + 1));
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("saved {mime_type} image to {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pairs_are_typed_by_the_schema() {
        let schema = json!({"properties": {
            "a": {"type": "number"}, "n": {"type": "integer"}, "on": {"type": "boolean"},
            "s": {"type": "string"}, "o": {"type": "object"}, "maybe": {"type": ["integer", "string"]}
        }});
        let raw: Vec<String> = [
            "a=2.5",
            "n=40",
            "on=true",
            "s=42",
            "o={\"k\":1}",
            "maybe=x",
            "free=[1]",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            parse(&raw, &schema).unwrap(),
            json!({"a": 2.5, "n": 40, "on": true, "s": "42", "o": {"k": 1}, "maybe": "x", "free": [1]})
        );
        let error = parse(&["n=forty".to_owned()], &schema).unwrap_err();
        assert!(
            format!("{error:#}").contains("`n` expects integer"),
            "{error:#}"
        );
        assert!(parse(&["novalue".to_owned()], &schema).is_err());
        assert_eq!(
            parse(&["{\"x\": 1}".to_owned()], &schema).unwrap(),
            json!({"x": 1})
        );
        assert_eq!(parse(&[], &schema).unwrap(), json!({}));
    }

    #[test]
    fn typos_find_the_closest_names() {
        let names = ["get-sum", "echo", "get-tiny-image", "longRunningOperation"];
        assert_eq!(closest("get_sum", &names), ["get-sum"]);
        assert_eq!(closest("ecko", &names), ["echo"]);
        assert_eq!(closest("image", &names), ["get-tiny-image"]);
        assert!(closest("zzzzzz", &names).is_empty());
    }
}
