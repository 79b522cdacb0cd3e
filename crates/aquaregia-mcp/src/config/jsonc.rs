//! JSON with comments (`//`, `/* */`) and trailing commas, as VS Code and many MCP clients
//! write their config files, turned into plain JSON with every line and column unchanged, and
//! parsed: [`parse_jsonc`].

use serde_json::Value;

use super::error::ConfigError;

/// Parses JSON with comments (`//`, `/* */`) and trailing commas, as VS Code, Cursor and many
/// MCP clients write their config files. A syntax error gives the line and column in `text`
/// itself.
///
/// ```
/// use aquaregia_mcp::{ConfigError, parse_jsonc};
/// let value = parse_jsonc("{\"a\": [1, 2,], // two\n}").unwrap();
/// assert_eq!(value, serde_json::json!({"a": [1, 2]}));
/// let error = parse_jsonc("{\n  \"a\": [1,, 2]\n}").unwrap_err();
/// assert!(matches!(error, ConfigError::Syntax { line: 2, column: 11, .. }));
/// ```
pub fn parse_jsonc(text: &str) -> Result<Value, ConfigError> {
    serde_json::from_str(&to_json(text)).map_err(|error| ConfigError::Syntax {
        line: error.line(),
        column: error.column(),
        message: error.to_string(),
    })
}

/// `text` with comments and trailing commas replaced by spaces (newlines kept), so a JSON
/// parser's line and column still point into the original file.
fn to_json(text: &str) -> String {
    let without_comments = blank_comments(text);
    blank_trailing_commas(&without_comments)
}

fn blank_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(escaped) = chars.next() {
                        out.push(escaped);
                    }
                }
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                out.push(' ');
                for next in chars.by_ref() {
                    if next == '\n' {
                        out.push('\n');
                        break;
                    }
                    out.push(' ');
                }
            }
            ('/', Some('*')) => {
                out.push(' ');
                let mut previous = '\0';
                for next in chars.by_ref() {
                    out.push(if next == '\n' { '\n' } else { ' ' });
                    if previous == '*' && next == '/' {
                        break;
                    }
                    previous = next;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn blank_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    // The last character outside strings that is not whitespace: `{,}` is an error, not a
    // trailing comma.
    let mut previous = '\0';
    for (index, &c) in chars.iter().enumerate() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            out.push(c);
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        let trailing = c == ','
            && !matches!(previous, '{' | '[' | ',')
            && chars
                .iter()
                .skip(index + 1)
                .find(|next| !next.is_whitespace())
                .is_some_and(|next| matches!(next, '}' | ']'));
        if !c.is_whitespace() {
            previous = c;
        }
        out.push(if trailing { ' ' } else { c });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::to_json;
    use serde_json::{Value, json};

    #[test]
    fn comments_and_trailing_commas_go_but_strings_stay() {
        let text = r#"{
  // the servers
  "servers": {
    "a": {"command": "x // not a comment", "args": ["/* nor this */", "\"q\"",],}, /* block
    comment */
  },
}"#;
        let plain = to_json(text);
        assert_eq!(plain.lines().count(), text.lines().count());
        let value: Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(
            value,
            json!({"servers": {"a": {"command": "x // not a comment", "args": ["/* nor this */", "\"q\""]}}})
        );
    }

    #[test]
    fn errors_keep_their_position() {
        let plain = to_json("{ // c\n  \"a\": [1,, 2]\n}");
        let error = serde_json::from_str::<Value>(&plain).unwrap_err();
        assert_eq!((error.line(), error.column()), (2, 11));
        assert!(serde_json::from_str::<Value>(&to_json("{,}")).is_err());
    }
}
