//! The answer's Markdown, rendered for a terminal as it streams.
//!
//! Rendering goes line by line: a line is rendered once it is complete (its newline arrived),
//! so the answer appears as fast as the model writes lines. The line still being written is
//! shown raw as it grows, then erased and replaced by its rendering when it ends, so nothing
//! waits for the whole answer (the way Claude Code and glow-style viewers show a stream).
//! Block structure is read per line (headings, lists, quotes, rules, fenced code, tables);
//! inline markup (bold, italic, code, links, strikethrough) within a line goes through
//! pulldown-cmark. Markup spanning lines (a `**` opened on one line and closed on the next) is
//! shown as written. Prose is wrapped to the terminal's width; code and tables are not.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use unicode_width::UnicodeWidthChar;

/// A style: which SGR attributes are on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Style {
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    strike: bool,
    code: bool,
    link: bool,
}

impl Style {
    fn paint(self, text: &str) -> String {
        let codes: Vec<&str> = [
            (self.bold, "1"),
            (self.dim, "2"),
            (self.italic, "3"),
            (self.underline || self.link, "4"),
            (self.strike, "9"),
            (self.code, "36"),
            (self.link, "34"),
        ]
        .into_iter()
        .filter_map(|(on, code)| on.then_some(code))
        .collect();
        if codes.is_empty() || text.is_empty() {
            text.to_owned()
        } else {
            format!("\x1b[{}m{text}\x1b[0m", codes.join(";"))
        }
    }
}

/// Streams Markdown to a terminal `width` columns wide: [`push`](Self::push) each piece of
/// text and write what it returns; [`finish`](Self::finish) renders the last open line.
#[derive(Debug)]
pub(crate) struct MarkdownStream {
    width: usize,
    /// The text of the line being written (no newline yet).
    pending: String,
    /// How much of `pending` is on the screen, raw.
    shown: usize,
    /// The fence (```` ``` ```` or `~~~`, as long as written) of the code block we are in.
    fence: Option<String>,
}

impl MarkdownStream {
    pub(crate) fn new(width: usize) -> Self {
        Self {
            width: width.max(20),
            pending: String::new(),
            shown: 0,
            fence: None,
        }
    }

    /// What to write for `text`: the rendering of the lines it completes, and the raw text of
    /// the line still open.
    pub(crate) fn push(&mut self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(end) = rest.find('\n') {
            self.pending.push_str(&rest[..end]);
            rest = &rest[end + 1..];
            out.push_str(&self.erase_shown());
            let line = std::mem::take(&mut self.pending);
            out.push_str(&self.render_line(&line));
        }
        self.pending.push_str(rest);
        if let Some(new) = self.pending.get(self.shown..) {
            out.push_str(new);
        }
        self.shown = self.pending.len();
        out
    }

    /// Renders the open line, if any: the answer ends, or tool output follows.
    pub(crate) fn finish(&mut self) -> String {
        if self.pending.is_empty() {
            return String::new();
        }
        let mut out = self.erase_shown();
        let line = std::mem::take(&mut self.pending);
        out.push_str(&self.render_line(&line));
        out
    }

    /// Whether a line is open on the screen.
    pub(crate) fn is_open(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes the raw open line off the screen (it starts at the first column).
    fn erase_shown(&mut self) -> String {
        let shown = self.pending.get(..self.shown).unwrap_or_default();
        self.shown = 0;
        if shown.is_empty() {
            return String::new();
        }
        let columns = display_width(shown);
        let up = columns.saturating_sub(1) / self.width;
        if up == 0 {
            "\r\x1b[J".to_owned()
        } else {
            format!("\r\x1b[{up}A\x1b[J")
        }
    }

    /// One complete line, rendered, with its newline.
    fn render_line(&mut self, line: &str) -> String {
        let dim = Style {
            dim: true,
            ..Style::default()
        };
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(fence) = &self.fence {
            if trimmed.starts_with(fence.as_str())
                && trimmed.trim_end().chars().all(|c| c == '`' || c == '~')
            {
                self.fence = None;
                return format!("{}\n", dim.paint(line));
            }
            let code = Style {
                code: true,
                ..Style::default()
            };
            return format!("{}\n", code.paint(line));
        }
        if let Some(fence) = opening_fence(trimmed) {
            self.fence = Some(fence);
            return format!("{}\n", dim.paint(line));
        }
        if trimmed.is_empty() {
            return "\n".to_owned();
        }
        if indent >= 4 && !is_list_item(trimmed) {
            // An indented code block, or a deep continuation: as written.
            return format!("{line}\n");
        }
        if is_rule(trimmed) {
            return format!("{}\n", dim.paint(&"─".repeat(self.width.min(80))));
        }
        if trimmed.starts_with('|') {
            return format!("{line}\n");
        }
        if let Some((level, text)) = heading(trimmed) {
            let style = Style {
                bold: true,
                underline: level == 1,
                ..Style::default()
            };
            return wrap(&inline(text, style), "", "", self.width);
        }
        if let Some(quoted) = trimmed.strip_prefix('>') {
            let quoted = quoted.strip_prefix(' ').unwrap_or(quoted);
            let bar = dim.paint("│ ");
            let style = Style {
                italic: true,
                ..Style::default()
            };
            return wrap(&inline(quoted, style), &bar, &bar, self.width);
        }
        let pad = " ".repeat(indent);
        if let Some((marker, text)) = list_item(trimmed) {
            let first = format!("{pad}{marker} ");
            let hanging = " ".repeat(indent + display_width(&marker) + 1);
            return wrap(
                &inline(text, Style::default()),
                &first,
                &hanging,
                self.width,
            );
        }
        wrap(&inline(trimmed, Style::default()), &pad, &pad, self.width)
    }
}

/// The fence a line opens, if it opens a fenced code block.
fn opening_fence(trimmed: &str) -> Option<String> {
    let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let fence: String = trimmed.chars().take_while(|c| *c == marker).collect();
    let info = &trimmed[fence.len()..];
    (fence.len() >= 3 && !(marker == '`' && info.contains('`'))).then_some(fence)
}

fn is_rule(trimmed: &str) -> bool {
    let marks: Vec<char> = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
    marks.len() >= 3
        && matches!(marks.first(), Some('-' | '*' | '_'))
        && marks.iter().all(|c| Some(c) == marks.first())
}

/// `## Title ##` as `(2, "Title")`.
fn heading(trimmed: &str) -> Option<(usize, &str)> {
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    let rest = trimmed.get(level..)?;
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let text = rest.trim();
    let text = text.trim_end_matches('#');
    Some((level, text.trim_end()))
}

fn is_list_item(trimmed: &str) -> bool {
    list_item(trimmed).is_some()
}

/// A list item's marker as shown (`•`, `3.`) and its text.
fn list_item(trimmed: &str) -> Option<(String, &str)> {
    for bullet in ["- ", "* ", "+ "] {
        if let Some(text) = trimmed.strip_prefix(bullet) {
            return Some(("•".to_owned(), text.trim_start()));
        }
    }
    let digits = trimmed.chars().take_while(char::is_ascii_digit).count();
    let rest = trimmed.get(digits..)?;
    if (1..=9).contains(&digits)
        && let Some(text) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") "))
    {
        return Some((format!("{}.", &trimmed[..digits]), text.trim_start()));
    }
    None
}

/// The inline markup of `text`, as styled pieces on top of `base`.
fn inline(text: &str, base: Style) -> Vec<(String, Style)> {
    let mut pieces = Vec::new();
    let mut style = base;
    let mut links: Vec<String> = Vec::new();
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(text, options) {
        match event {
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => {
                pieces.push((text.into_string(), style));
            }
            Event::Code(code) => pieces.push((
                code.into_string(),
                Style {
                    code: true,
                    ..style
                },
            )),
            Event::SoftBreak | Event::HardBreak => pieces.push((" ".to_owned(), style)),
            Event::TaskListMarker(done) => {
                pieces.push((if done { "[x] " } else { "[ ] " }.to_owned(), style));
            }
            Event::Start(Tag::Strong) => style.bold = true,
            Event::End(TagEnd::Strong) => style.bold = base.bold,
            Event::Start(Tag::Emphasis) => style.italic = true,
            Event::End(TagEnd::Emphasis) => style.italic = base.italic,
            Event::Start(Tag::Strikethrough) => style.strike = true,
            Event::End(TagEnd::Strikethrough) => style.strike = base.strike,
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                style.link = true;
                links.push(dest_url.into_string());
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                style.link = base.link;
                let url = links.pop().unwrap_or_default();
                // `<https://...>` shows its URL already.
                let shown = pieces.last().is_some_and(|(text, _)| *text == url);
                if !url.is_empty() && !shown {
                    let dim = Style { dim: true, ..base };
                    pieces.push((format!(" ({url})"), dim));
                }
            }
            Event::FootnoteReference(label) => pieces.push((format!("[^{label}]"), style)),
            _ => {}
        }
    }
    pieces
}

/// Word-wraps styled pieces to `width` columns: the first line starts with `first`, the
/// others with `hanging`; each line ends with a newline.
fn wrap(pieces: &[(String, Style)], first: &str, hanging: &str, width: usize) -> String {
    let mut out = String::from(first);
    let mut column = display_width(&strip_sgr(first));
    let hanging_width = display_width(&strip_sgr(hanging));
    let line_start = |column: usize, is_first: bool| {
        column
            == if is_first {
                display_width(&strip_sgr(first))
            } else {
                hanging_width
            }
    };
    let mut is_first = true;
    // The word being gathered: its pieces and width.
    let mut word: Vec<(String, Style)> = Vec::new();
    let mut word_width = 0;
    let mut flush = |word: &mut Vec<(String, Style)>,
                     word_width: &mut usize,
                     out: &mut String,
                     column: &mut usize| {
        if word.is_empty() {
            return;
        }
        let at_start = line_start(*column, is_first);
        if !at_start && *column + 1 + *word_width > width {
            out.push('\n');
            out.push_str(hanging);
            *column = hanging_width;
            is_first = false;
        } else if !at_start {
            out.push(' ');
            *column += 1;
        }
        for (text, style) in word.drain(..) {
            out.push_str(&style.paint(&text));
        }
        *column += *word_width;
        *word_width = 0;
    };
    for (text, style) in pieces {
        let mut current = String::new();
        for c in text.chars() {
            if c.is_whitespace() {
                if !current.is_empty() {
                    word.push((std::mem::take(&mut current), *style));
                }
                flush(&mut word, &mut word_width, &mut out, &mut column);
            } else {
                current.push(c);
                word_width += c.width().unwrap_or(0);
            }
        }
        if !current.is_empty() {
            word.push((current, *style));
        }
    }
    flush(&mut word, &mut word_width, &mut out, &mut column);
    out.push('\n');
    out
}

/// Columns `text` takes on a terminal (tabs to the next multiple of 8).
fn display_width(text: &str) -> usize {
    text.chars().fold(0, |column, c| match c {
        '\t' => (column / 8 + 1) * 8,
        c => column + c.width().unwrap_or(0),
    })
}

/// `text` without its SGR sequences (`ESC [ ... m`).
fn strip_sgr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(text: &str, width: usize) -> String {
        let mut stream = MarkdownStream::new(width);
        let mut out = stream.push(text);
        out.push_str(&stream.finish());
        out
    }

    #[test]
    fn blocks_and_inline_markup_are_styled() {
        let out = render(
            "# Title\nSome **bold**, *it* and `code`.\n- one\n2. two\n> quoted\n---\n",
            40,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "\x1b[1;4mTitle\x1b[0m");
        assert_eq!(
            lines[1],
            "Some \x1b[1mbold\x1b[0m, \x1b[3mit\x1b[0m and \x1b[36mcode\x1b[0m."
        );
        assert_eq!(lines[2], "• one");
        assert_eq!(lines[3], "2. two");
        assert_eq!(lines[4], "\x1b[2m│ \x1b[0m\x1b[3mquoted\x1b[0m");
        assert_eq!(strip_sgr(lines[5]), "─".repeat(40));
    }

    #[test]
    fn links_show_their_url() {
        let out = render("see [the docs](https://x.test/d) or <https://y.test>\n", 80);
        assert_eq!(
            strip_sgr(&out),
            "see the docs (https://x.test/d) or https://y.test\n"
        );
    }

    #[test]
    fn code_blocks_are_kept_as_written() {
        let out = render("```rust\nlet x = **y**;\n```\nafter *it*\n", 40);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "\x1b[2m```rust\x1b[0m");
        assert_eq!(lines[1], "\x1b[36mlet x = **y**;\x1b[0m");
        assert_eq!(lines[2], "\x1b[2m```\x1b[0m");
        assert_eq!(lines[3], "after \x1b[3mit\x1b[0m");
    }

    #[test]
    fn prose_wraps_to_the_width_with_hanging_indents() {
        let out = render("- alpha beta gamma delta epsilon\n", 20);
        assert_eq!(out, "• alpha beta gamma\n  delta epsilon\n");
        let out = render("aaaa bbbb cccc dddd eeee ffff\n", 20);
        assert_eq!(out, "aaaa bbbb cccc dddd\neeee ffff\n");
    }

    #[test]
    fn the_open_line_is_raw_then_replaced() {
        let mut stream = MarkdownStream::new(40);
        assert_eq!(stream.push("Some **bo"), "Some **bo");
        assert_eq!(stream.push("ld**"), "ld**");
        assert!(stream.is_open());
        assert_eq!(
            stream.push(" end\nnext"),
            "\r\x1b[JSome \x1b[1mbold\x1b[0m end\nnext"
        );
        assert_eq!(stream.finish(), "\r\x1b[Jnext\n");
        assert!(!stream.is_open());
        assert_eq!(stream.finish(), "");
    }

    #[test]
    fn an_open_line_longer_than_the_screen_is_erased_whole() {
        let mut stream = MarkdownStream::new(20);
        let long = "x".repeat(45);
        stream.push(&long);
        assert!(stream.finish().starts_with("\r\x1b[2A\x1b[J"));
    }
}
