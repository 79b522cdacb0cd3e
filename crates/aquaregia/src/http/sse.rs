//! Incremental Server-Sent Events decoding: the one decoder behind every provider stream and
//! the legacy MCP SSE transport.
//!
//! Bytes go in as they arrive (split anywhere, even inside a UTF-8 character or a `\r\n`);
//! complete events come out. Lines end with `\n`, `\r\n` or a lone `\r`, as the SSE grammar
//! says. An event larger than the size limit is skipped without being buffered, and reported
//! once.

/// One dispatched SSE event.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; empty when the event had none.
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// An event of type `event` (empty for none) carrying `data`.
    pub fn new(event: impl Into<String>, data: impl Into<String>) -> Self {
        Self {
            event: event.into(),
            data: data.into(),
        }
    }
}

/// An event grew past the decoder's size limit; it was skipped.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTooLarge {
    /// The limit in bytes.
    pub limit: usize,
}

/// The default per-event limit: far above any model's stream event, small enough that a
/// runaway stream cannot exhaust memory.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 64 << 20;

/// Turns a byte stream into [`SseEvent`]s.
///
/// ```
/// use aquaregia::http::sse::SseDecoder;
/// let mut decoder = SseDecoder::new();
/// decoder.feed(b"event: endpoint\ndata: /mess");
/// assert_eq!(decoder.next_event(), Ok(None));
/// decoder.feed(b"age\n\n");
/// let event = decoder.next_event().unwrap().unwrap();
/// assert_eq!((event.event.as_str(), event.data.as_str()), ("endpoint", "/message"));
/// ```
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the first byte not yet consumed in `buf`.
    pos: usize,
    event: String,
    data: String,
    has_data: bool,
    max_event_bytes: usize,
    /// Bytes of the fields of the event being read.
    event_bytes: usize,
    /// The event being read went over the limit: its lines are dropped up to the blank line.
    skipping: bool,
    /// The line being read went over the limit: its bytes are dropped up to its end.
    skipping_line: bool,
    /// The last line ended with `\r`: a `\n` right after it belongs to that line ending.
    after_cr: bool,
    /// An oversized event not yet reported.
    pending_error: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder with the default event size limit.
    pub fn new() -> Self {
        Self::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder that skips (and reports) events over `max_event_bytes`.
    pub fn with_max_event_bytes(max_event_bytes: usize) -> Self {
        Self {
            buf: Vec::new(),
            pos: 0,
            event: String::new(),
            data: String::new(),
            has_data: false,
            max_event_bytes,
            event_bytes: 0,
            skipping: false,
            skipping_line: false,
            after_cr: false,
            pending_error: false,
        }
    }

    /// Appends received bytes.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 4096 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, if the bytes fed so far hold one. An event over the size limit
    /// is reported once as [`EventTooLarge`]; decoding goes on after it.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, EventTooLarge> {
        loop {
            if self.after_cr && self.pos < self.buf.len() {
                self.after_cr = false;
                if self.buf.get(self.pos) == Some(&b'\n') {
                    self.pos += 1;
                }
            }
            let rest = self.buf.get(self.pos..).unwrap_or_default();
            let Some(offset) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.check_partial_line();
                return self.report(None);
            };
            let (start, end) = (self.pos, self.pos + offset);
            self.after_cr = self.buf.get(end) == Some(&b'\r');
            self.pos = end + 1;
            if let Some(event) = self.line(start, end) {
                return self.report(Some(event));
            }
            if self.pending_error {
                return self.report(None);
            }
        }
    }

    /// Call at end of stream: the last event when it was not followed by a blank line.
    pub fn finish(&mut self) -> Result<Option<SseEvent>, EventTooLarge> {
        if let Some(event) = self.next_event()? {
            return Ok(Some(event));
        }
        if self.pos < self.buf.len() {
            let (start, end) = (self.pos, self.buf.len());
            self.pos = end;
            if let Some(event) = self.line(start, end) {
                return self.report(Some(event));
            }
        }
        let event = if self.skipping { None } else { self.dispatch() };
        self.report(event)
    }

    /// Hands out `event`, or the pending oversized-event report. The two never meet: an event
    /// going over the limit stops decoding at once, before any later event can complete.
    fn report(&mut self, event: Option<SseEvent>) -> Result<Option<SseEvent>, EventTooLarge> {
        if std::mem::take(&mut self.pending_error) {
            return Err(EventTooLarge {
                limit: self.max_event_bytes,
            });
        }
        Ok(event)
    }

    /// An unfinished line that takes the event over the limit, or belongs to an event being
    /// skipped, is dropped now instead of buffered.
    fn check_partial_line(&mut self) {
        let partial = self.buf.len() - self.pos;
        if partial == 0
            || !(self.skipping_line
                || self.skipping
                || self.event_bytes + partial > self.max_event_bytes)
        {
            return;
        }
        self.start_skipping();
        self.skipping_line = true;
        self.pos = self.buf.len();
    }

    fn start_skipping(&mut self) {
        if !self.skipping {
            self.pending_error = true;
        }
        self.skipping = true;
        self.event.clear();
        self.data.clear();
        self.has_data = false;
    }

    /// Handles the line `buf[start..end]`; returns an event when it is a blank line ending one.
    fn line(&mut self, start: usize, end: usize) -> Option<SseEvent> {
        if std::mem::take(&mut self.skipping_line) {
            return None; // the tail of an oversized line
        }
        if end == start {
            self.event_bytes = 0;
            if std::mem::take(&mut self.skipping) {
                return None;
            }
            return self.dispatch();
        }
        if self.skipping {
            return None;
        }
        self.event_bytes += end - start;
        if self.event_bytes > self.max_event_bytes {
            self.start_skipping();
            return None;
        }
        self.field(start, end);
        None
    }

    fn field(&mut self, start: usize, end: usize) {
        let Some(line) = self.buf.get(start..end) else {
            return;
        };
        if line.first() == Some(&b':') {
            return; // comment / keep-alive
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &line[line.len()..]),
        };
        match name {
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                push_utf8(&mut self.data, value);
            }
            b"event" => {
                self.event.clear();
                push_utf8(&mut self.event, value);
            }
            _ => {} // id, retry and unknown fields are not used by these streams
        }
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if !self.has_data {
            self.event.clear();
            return None;
        }
        self.has_data = false;
        Some(SseEvent {
            event: std::mem::take(&mut self.event),
            data: std::mem::take(&mut self.data),
        })
    }
}

fn push_utf8(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_chunks(decoder: &mut SseDecoder, input: &[u8], chunk: usize) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for piece in input.chunks(chunk) {
            decoder.feed(piece);
            while let Some(event) = decoder.next_event().expect("within the limit") {
                events.push(event);
            }
        }
        events.extend(decoder.finish().expect("within the limit"));
        events
    }

    fn event(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: event.into(),
            data: data.into(),
        }
    }

    #[test]
    fn decodes_events_split_at_every_byte_boundary() {
        let input = "event: a\r\ndata: {\"x\":\"héllo\"}\r\n\r\n: keep-alive\n\ndata: one\ndata:two\n\nevent: b\rdata: cr\r\rdata: last";
        let expected = vec![
            event("a", "{\"x\":\"héllo\"}"),
            event("", "one\ntwo"),
            event("b", "cr"),
            event("", "last"),
        ];
        for chunk in 1..=input.len() {
            assert_eq!(
                decode_in_chunks(&mut SseDecoder::new(), input.as_bytes(), chunk),
                expected,
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert!(decode_in_chunks(&mut SseDecoder::new(), b"event: ping\n\n", 3).is_empty());
    }

    /// A body ending in `"\n\r"` used to panic in `finish` (an empty line indexed at 0).
    #[test]
    fn body_ending_in_newline_carriage_return_does_not_panic() {
        for input in [
            &b"data: x\n\r"[..],
            b"data: x\r\n\r",
            b"\r",
            b"\n\r",
            b"data: x\n\r\r",
        ] {
            for chunk in 1..=input.len() {
                let events = decode_in_chunks(&mut SseDecoder::new(), input, chunk);
                let expected: Vec<SseEvent> = if input.starts_with(b"data") {
                    vec![event("", "x")]
                } else {
                    vec![]
                };
                assert_eq!(events, expected, "{input:?} in chunks of {chunk}");
            }
        }
    }

    #[test]
    fn oversized_events_are_skipped_and_reported_once() {
        let big = "x".repeat(100);
        let input = format!("data: small\n\ndata: {big}\ndata: more\n\ndata: after\n\n");
        for chunk in [1, 7, 64, input.len()] {
            let mut decoder = SseDecoder::with_max_event_bytes(50);
            let mut events = Vec::new();
            let mut errors = 0;
            for piece in input.as_bytes().chunks(chunk) {
                decoder.feed(piece);
                loop {
                    match decoder.next_event() {
                        Ok(Some(event)) => events.push(event),
                        Ok(None) => break,
                        Err(error) => {
                            assert_eq!(error.limit, 50);
                            errors += 1;
                        }
                    }
                }
                // Nothing past the limit is kept in memory.
                assert!(
                    decoder.buf.len() - decoder.pos <= 50 + chunk,
                    "chunk {chunk}"
                );
            }
            assert_eq!(decoder.finish(), Ok(None));
            assert_eq!(errors, 1, "chunk {chunk}");
            assert_eq!(
                events,
                vec![event("", "small"), event("", "after")],
                "chunk {chunk}"
            );
        }
    }
}
