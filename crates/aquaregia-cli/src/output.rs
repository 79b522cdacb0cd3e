//! How things look: colours, error lines, argument signatures and result summaries.

use std::borrow::Cow;
use std::io::{IsTerminal, Write};

use aquaregia::{ContentBlock, ToolOutput};
use serde_json::Value;

/// ANSI styling for one output stream: on only for a terminal, and never with `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Styles {
    enabled: bool,
}

impl Styles {
    pub(crate) fn stdout() -> Self {
        Self::for_terminal(std::io::stdout().is_terminal())
    }

    pub(crate) fn stderr() -> Self {
        Self::for_terminal(std::io::stderr().is_terminal())
    }

    fn for_terminal(terminal: bool) -> Self {
        // https://no-color.org: set and not empty.
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        Self {
            enabled: terminal && !no_color,
        }
    }

    pub(crate) fn enabled(self) -> bool {
        self.enabled
    }

    fn paint(self, code: &str, text: &str) -> String {
        if self.enabled {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub(crate) fn bold(self, text: &str) -> String {
        self.paint("1", text)
    }

    pub(crate) fn dim(self, text: &str) -> String {
        self.paint("2", text)
    }

    pub(crate) fn red(self, text: &str) -> String {
        self.paint("31", text)
    }

    pub(crate) fn green(self, text: &str) -> String {
        self.paint("32", text)
    }

    pub(crate) fn yellow(self, text: &str) -> String {
        self.paint("33", text)
    }
}

/// `text` without anything a terminal would act on: escape sequences (CSI, OSC such as OSC 52,
/// which writes the clipboard, DCS...), C0 and C1 control characters, carriage returns.
/// Newlines and tabs stay. Everything a server or model sent goes through this before it is
/// printed.
pub(crate) fn clean(text: &str) -> Cow<'_, str> {
    match aquaregia::redact::redact(text) {
        Cow::Borrowed(text) => strip_controls(text),
        Cow::Owned(text) => Cow::Owned(strip_controls(&text).into_owned()),
    }
}

/// [`clean`] without the redaction of secrets.
fn strip_controls(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_control_string(&mut chars),
                _ => {} // a two-character sequence, or a lone ESC at the end
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_control_string(&mut chars),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Skips a CSI sequence's parameter and intermediate bytes and its final byte.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(&c) = chars.peek() {
        chars.next();
        if !('\u{20}'..='\u{3f}').contains(&c) {
            return; // the final byte (or something that ends the sequence anyway)
        }
    }
}

/// Skips an OSC/DCS/SOS/PM/APC string up to its terminator (BEL, ST or ESC \\).
fn skip_control_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            _ => {}
        }
    }
}

/// Writes and flushes `text` on stdout. Unlike `print!`, a closed pipe is an error to handle,
/// not a panic.
pub(crate) fn write_stdout(text: &str) -> anyhow::Result<()> {
    let text = aquaregia::redact::redact(text);
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// The log writer: each formatted event goes to stderr with its secrets redacted
/// ([`aquaregia::redact`]). The formatter writes an event in one `write`, so a secret is never
/// split between two.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RedactingStderr;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for RedactingStderr {
    type Writer = RedactingStderr;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingStderr
    }
}

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(aquaregia::redact::redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// `error: <message>` on stderr; continuation lines (a server's stderr tail) are indented.
pub(crate) fn print_error(error: &anyhow::Error) {
    let styles = Styles::stderr();
    let text = error_text(error);
    let text = clean(&text);
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    eprintln!(
        "{} {}",
        styles.red(&styles.bold("error:")),
        lines.next().unwrap_or("unknown error")
    );
    for line in lines {
        eprintln!("  {line}");
    }
}

/// The error and its causes, `error: cause: cause`, as `{:#}` writes them, except for a
/// cause the text already tells (many errors put their cause in their message too).
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// A tool's arguments as a compact signature, `(path: string, recursive?: boolean)`:
/// required ones first in their `required` order, then the optional ones.
pub(crate) fn signature(schema: &Value) -> String {
    clean(&signature_of(schema)).into_owned()
}

fn signature_of(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "()".to_owned();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let required_first = required
        .iter()
        .filter_map(|name| properties.get_key_value(*name))
        .map(|(name, property)| format!("{name}: {}", type_name(property, 0)));
    let optional = properties
        .iter()
        .filter(|(name, _)| !required.contains(&name.as_str()))
        .map(|(name, property)| format!("{name}?: {}", type_name(property, 0)));
    format!(
        "({})",
        required_first
            .chain(optional)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A short type for one JSON schema: `string`, `integer[]`, `"a"|"b"`, `string|null`...
fn type_name(schema: &Value, depth: usize) -> String {
    const MAX_DEPTH: usize = 3;
    const MAX_ENUM: usize = 4;
    let Value::Object(schema) = schema else {
        return "any".to_owned();
    };
    if depth > MAX_DEPTH {
        return "…".to_owned();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let mut shown: Vec<String> = values.iter().take(MAX_ENUM).map(Value::to_string).collect();
        if values.len() > MAX_ENUM {
            shown.push("…".to_owned());
        }
        return shown.join("|");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        return reference.rsplit('/').next().unwrap_or(reference).to_owned();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(variants) = schema.get(key).and_then(Value::as_array) {
            let names: Vec<String> = variants.iter().map(|v| type_name(v, depth + 1)).collect();
            return names.join("|");
        }
    }
    let array_of = || {
        let items = schema
            .get("items")
            .map_or_else(|| "any".to_owned(), |items| type_name(items, depth + 1));
        if items.contains('|') {
            format!("({items})[]")
        } else {
            format!("{items}[]")
        }
    };
    match schema.get("type") {
        Some(Value::String(kind)) if kind == "array" => array_of(),
        Some(Value::String(kind)) => kind.clone(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .map(|kind| {
                if kind == "array" {
                    array_of()
                } else {
                    kind.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("|"),
        _ if schema.contains_key("properties") => "object".to_owned(),
        _ => "any".to_owned(),
    }
}

/// A call's arguments on one line, `path: "/tmp", recursive: true`, long values cut.
pub(crate) fn arguments_summary(arguments: &Value) -> String {
    const MAX_VALUE: usize = 40;
    const MAX_TOTAL: usize = 120;
    let text = match arguments {
        Value::Object(arguments) => arguments
            .iter()
            .map(|(name, value)| format!("{name}: {}", truncate(&value.to_string(), MAX_VALUE)))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    truncate(&clean(&text), MAX_TOTAL)
}

/// A call's arguments in full, `path: "/tmp", content: "..."`, for permission questions.
pub(crate) fn arguments_full(arguments: &Value) -> String {
    let text = match arguments {
        Value::Object(arguments) => arguments
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    clean(&text).into_owned()
}

/// Columns `text` takes on a terminal.
pub(crate) fn display_width(text: &str) -> usize {
    text.chars()
        .map(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0))
        .sum()
}

/// `text` cut into lines of at most `first` columns, then `rest`: at the last space that
/// leaves the line at least half full, else mid-word.
pub(crate) fn wrap_text(text: &str, first: usize, rest: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut remaining = text;
    while !remaining.is_empty() {
        let limit = if lines.is_empty() { first } else { rest }.max(10);
        let mut end = remaining.len();
        let mut columns = 0;
        for (index, c) in remaining.char_indices() {
            columns += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
            if columns > limit {
                end = index;
                break;
            }
        }
        if end < remaining.len()
            && let Some(space) = remaining[..end].rfind(' ')
            && display_width(&remaining[..space]) >= limit / 2
        {
            end = space + 1;
        }
        let (line, tail) =
            remaining.split_at(end.max(remaining.chars().next().map_or(1, char::len_utf8)));
        lines.push(line.trim_end().to_owned());
        remaining = tail;
    }
    lines
}

/// A tool result for people: text as text, media and resources as one-line summaries,
/// JSON as pretty JSON.
pub(crate) fn render_result(result: &ToolOutput) -> String {
    let text = match result {
        ToolOutput::Text(text) => text.clone(),
        ToolOutput::Json(value) => {
            serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
        }
        ToolOutput::Content(blocks) => render_blocks(blocks),
        ToolOutput::Structured {
            content,
            structured,
        } => format!(
            "{}\n{}",
            render_blocks(content),
            serde_json::to_string_pretty(structured).unwrap_or_else(|_| structured.to_string())
        ),
        other => other.to_text(),
    };
    clean(&text).into_owned()
}

fn render_blocks(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .map(render_block)
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tool result as pretty JSON, the whole of it in MCP's `CallToolResult` shape (content
/// blocks, `structuredContent`, `isError`; see [`ToolOutput::to_call_tool_result`]).
pub(crate) fn result_json(result: &ToolOutput) -> String {
    clean(&format!("{:#}", result.to_call_tool_result())).into_owned()
}

/// One block of a multi-part result.
fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text { text } => text.clone(),
        ContentBlock::Image { mime_type, data } => {
            format!(
                "[image {mime_type}, {}]",
                human_size(base64_decoded_len(data))
            )
        }
        ContentBlock::Audio { mime_type, data } => {
            format!(
                "[audio {mime_type}, {}]",
                human_size(base64_decoded_len(data))
            )
        }
        ContentBlock::Resource {
            uri,
            mime_type,
            text,
            ..
        } => {
            let mut line = match mime_type {
                Some(mime) => format!("[resource {uri} {mime}]"),
                None => format!("[resource {uri}]"),
            };
            // Embedded text is printed under its header.
            if let Some(text) = text {
                line.push('\n');
                line.push_str(text);
            }
            line
        }
        ContentBlock::ResourceLink { uri, .. } => format!("[link {uri}]"),
        other => other.to_text().into_owned(),
    }
}

/// A result in one short line, for progress output.
pub(crate) fn result_summary(result: &ToolOutput) -> String {
    const MAX: usize = 80;
    let rendered = render_result(result);
    let lines: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    match lines.as_slice() {
        [] => "(empty)".to_owned(),
        [line] => truncate(line, MAX),
        [line, rest @ ..] => format!("{} (+{} lines)", truncate(line, MAX), rest.len()),
    }
}

/// The first line of `text`, cut to `max` characters with an ellipsis.
pub(crate) fn first_line(text: &str, max: usize) -> String {
    let text = clean(text);
    truncate(text.lines().next().unwrap_or_default().trim(), max)
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

fn base64_decoded_len(data: &str) -> usize {
    let symbols = data.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    let padding = data
        .trim_end()
        .bytes()
        .rev()
        .take_while(|&b| b == b'=')
        .count();
    (symbols * 3 / 4).saturating_sub(padding)
}

/// `512 B`, `1.2 KB`, `3.4 MB`.
pub(crate) fn human_size(bytes: usize) -> String {
    const UNITS: [&str; 3] = ["KB", "MB", "GB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut size = bytes as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_error_text_tells_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        // A cause already in the message (as MCP connect errors have it) is not repeated.
        let told = anyhow::Error::new(io).context("connect: connection refused");
        assert_eq!(error_text(&told), "connect: connection refused");
        // One that is not is appended, as `{:#}` does.
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let untold = anyhow::Error::new(io).context("could not connect");
        assert_eq!(error_text(&untold), "could not connect: connection refused");
    }

    #[test]
    fn signatures_summarise_schemas() {
        let schema = json!({
            "type": "object",
            // In alphabetical order: serde_json's map order depends on its features.
            "properties": {
                "limit": {"type": ["integer", "null"]},
                "mode": {"enum": ["r", "w"]},
                "path": {"type": "string"},
                "recursive": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "target": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/Point"}]}
            },
            "required": ["path"]
        });
        assert_eq!(
            signature(&schema),
            r#"(path: string, limit?: integer|null, mode?: "r"|"w", recursive?: boolean, tags?: string[], target?: string|Point)"#
        );
        assert_eq!(signature(&json!({"type": "object"})), "()");
        assert_eq!(signature(&json!(true)), "()");
    }

    #[test]
    fn results_render_media_as_summaries() {
        let result = json!([
            {"type": "text", "text": "here"},
            {"type": "image", "mimeType": "image/png", "data": "A".repeat(1638) + "=="},
            {"type": "resource", "uri": "file:///x", "mimeType": "text/plain", "text": "hi"},
            {"type": "resource_link", "uri": "file:///y", "name": "y"}
        ]);
        let result = ToolOutput::Content(serde_json::from_value(result).expect("blocks"));
        assert_eq!(
            render_result(&result),
            "here\n[image image/png, 1.2 KB]\n[resource file:///x text/plain]\nhi\n[link file:///y]"
        );
        assert_eq!(render_result(&ToolOutput::text("plain")), "plain");
        assert_eq!(
            render_result(&ToolOutput::Json(json!({"a": 1}))),
            "{\n  \"a\": 1\n}"
        );
    }

    #[test]
    fn summaries_are_short() {
        assert_eq!(
            arguments_summary(&json!({"n": 3, "path": "/tmp"})),
            r#"n: 3, path: "/tmp""#
        );
        assert_eq!(result_summary(&ToolOutput::text("a\nb\nc")), "a (+2 lines)");
        assert_eq!(first_line(&"x".repeat(10), 4), "xxxx…");
        assert_eq!(human_size(100), "100 B");
        assert_eq!(human_size(1229), "1.2 KB");
        assert_eq!(human_size(5 * 1024 * 1024), "5.0 MB");
    }

    #[test]
    fn text_wraps_at_spaces_or_mid_word() {
        assert_eq!(
            wrap_text("alpha beta gamma delta", 12, 10),
            ["alpha beta", "gamma", "delta"]
        );
        assert_eq!(
            wrap_text(&"x".repeat(25), 10, 10),
            ["x".repeat(10), "x".repeat(10), "x".repeat(5)]
        );
        assert_eq!(wrap_text("", 10, 10), Vec::<String>::new());
    }
}
