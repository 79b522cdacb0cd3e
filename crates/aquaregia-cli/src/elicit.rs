//! Answering a server's questions (MCP elicitation) in the terminal: form fields one by one
//! with their types and defaults, or a URL to visit, then send / decline / cancel.

use std::io::{BufRead, Write};

use aquaregia_mcp::{ElicitationRequest, ElicitationResponse};
use serde_json::{Map, Value};

/// Asks on stderr, reads stdin (the caller checked both are a terminal).
pub(crate) async fn ask(request: ElicitationRequest) -> ElicitationResponse {
    tokio::task::spawn_blocking(move || {
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines().map_while(Result::ok);
        answer(request, &mut lines, &mut std::io::stderr())
    })
    .await
    .unwrap_or(ElicitationResponse::Cancel)
}

/// The dialogue itself, over any input lines and output (the end of input cancels).
pub(crate) fn answer(
    request: ElicitationRequest,
    lines: &mut impl Iterator<Item = String>,
    out: &mut impl Write,
) -> ElicitationResponse {
    match request {
        ElicitationRequest::Form {
            server,
            message,
            schema,
        } => {
            let _ = writeln!(out, "\nServer `{server}` asks: {message}");
            let Some(values) = fill_form(&schema, lines, out) else {
                return ElicitationResponse::Cancel;
            };
            confirm(
                "Send these answers?",
                ElicitationResponse::Accept(Some(Value::Object(values))),
                lines,
                out,
            )
        }
        ElicitationRequest::Url {
            server,
            message,
            url,
            ..
        } => {
            let _ = writeln!(
                out,
                "\nServer `{server}` asks you to open:\n\n  {url}\n\n{message}"
            );
            confirm(
                "Go there (open it yourself)?",
                ElicitationResponse::Accept(None),
                lines,
                out,
            )
        }
        _ => ElicitationResponse::Decline,
    }
}

fn confirm(
    question: &str,
    accept: ElicitationResponse,
    lines: &mut impl Iterator<Item = String>,
    out: &mut impl Write,
) -> ElicitationResponse {
    loop {
        let _ = write!(out, "{question} [Y]es / [n]o, decline / [c]ancel: ");
        let _ = out.flush();
        let Some(line) = lines.next() else {
            return ElicitationResponse::Cancel;
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "" | "y" | "yes" => return accept,
            "n" | "no" => return ElicitationResponse::Decline,
            "c" | "cancel" => return ElicitationResponse::Cancel,
            _ => {}
        }
    }
}

/// Asks for each property; `None` when the input ends.
fn fill_form(
    schema: &Value,
    lines: &mut impl Iterator<Item = String>,
    out: &mut impl Write,
) -> Option<Map<String, Value>> {
    let mut values = Map::new();
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Some(values);
    };
    for (name, property) in properties {
        let kind = property["type"].as_str().unwrap_or("string");
        let title = property["title"].as_str().unwrap_or(name);
        let choices: Vec<&str> = property["enum"]
            .as_array()
            .map(|values| values.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let is_required = required.contains(&name.as_str());
        let mut label = format!("  {title} ({kind}");
        if !choices.is_empty() {
            label.push_str(&format!(": {}", choices.join(" | ")));
        }
        if is_required {
            label.push_str(", required");
        }
        label.push(')');
        if let Some(description) = property["description"].as_str() {
            label.push_str(&format!(" - {description}"));
        }
        if let Some(default) = property.get("default") {
            label.push_str(&format!(" [{}]", plain(default)));
        }
        loop {
            let _ = write!(out, "{label}: ");
            let _ = out.flush();
            let line = lines.next()?;
            let line = line.trim();
            if line.is_empty() {
                if let Some(default) = property.get("default") {
                    values.insert(name.clone(), default.clone());
                    break;
                }
                if !is_required {
                    break;
                }
                let _ = writeln!(out, "  (an answer is required)");
                continue;
            }
            match parse(kind, &choices, line) {
                Ok(value) => {
                    values.insert(name.clone(), value);
                    break;
                }
                Err(problem) => {
                    let _ = writeln!(out, "  {problem}");
                }
            }
        }
    }
    Some(values)
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn parse(kind: &str, choices: &[&str], line: &str) -> Result<Value, String> {
    if !choices.is_empty() && !choices.contains(&line) {
        return Err(format!("one of: {}", choices.join(", ")));
    }
    match kind {
        "integer" => line
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| "a whole number, please".to_owned()),
        "number" => line
            .parse::<f64>()
            .ok()
            .and_then(|number| serde_json::Number::from_f64(number).map(Value::Number))
            .ok_or_else(|| "a number, please".to_owned()),
        "boolean" => match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err("yes or no, please".to_owned()),
        },
        _ => Ok(Value::String(line.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(request: ElicitationRequest, input: &[&str]) -> (ElicitationResponse, String) {
        let mut lines = input.iter().map(|line| (*line).to_owned());
        let mut out = Vec::new();
        let response = answer(request, &mut lines, &mut out);
        (response, String::from_utf8(out).unwrap())
    }

    fn form() -> ElicitationRequest {
        ElicitationRequest::Form {
            server: "s".into(),
            message: "Who are you?".into(),
            schema: json!({"type": "object", "properties": {
                "name": {"type": "string", "title": "Name"},
                "age": {"type": "integer", "default": 30},
                "admin": {"type": "boolean"},
                "color": {"type": "string", "enum": ["red", "blue"]}
            }, "required": ["name"]}),
        }
    }

    #[test]
    fn form_fields_are_typed_checked_and_defaulted() {
        // name: empty (required, asked again), Ann; age: default; admin: bad, then yes;
        // color: not a choice, then blue; then send.
        let (response, shown) = run(form(), &["", "Ann", "", "maybe", "y", "green", "blue", ""]);
        assert_eq!(
            response,
            ElicitationResponse::Accept(Some(
                json!({"name": "Ann", "age": 30, "admin": true, "color": "blue"})
            ))
        );
        assert!(shown.contains("Server `s` asks: Who are you?"), "{shown}");
        assert!(shown.contains("age (integer) [30]"), "{shown}");
        assert!(shown.contains("(an answer is required)"), "{shown}");
        assert!(shown.contains("color (string: red | blue)"), "{shown}");
    }

    #[test]
    fn forms_can_be_declined_or_cancelled() {
        let all = ["Ann", "1", "n", "red"];
        let (declined, _) = run(form(), &[&all[..], &["n"]].concat());
        assert_eq!(declined, ElicitationResponse::Decline);
        let (cancelled, _) = run(form(), &[&all[..], &["c"]].concat());
        assert_eq!(cancelled, ElicitationResponse::Cancel);
        let (ended, _) = run(form(), &["Ann"]);
        assert_eq!(ended, ElicitationResponse::Cancel);
    }

    #[test]
    fn urls_are_shown_and_confirmed() {
        let request = ElicitationRequest::Url {
            server: "s".into(),
            message: "Sign in".into(),
            url: "https://auth.example/x".into(),
            elicitation_id: "1".into(),
        };
        let (response, shown) = run(request, &["yes"]);
        assert_eq!(response, ElicitationResponse::Accept(None));
        assert!(shown.contains("  https://auth.example/x"), "{shown}");
    }
}
