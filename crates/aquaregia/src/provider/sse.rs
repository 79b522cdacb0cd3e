//! Incremental Server-Sent Events decoding, shared by every provider.
//!
//! Bytes go in as they arrive (split anywhere, even inside a UTF-8 character or a `\r\n`);
//! complete events come out.

/// One dispatched SSE event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    /// The `event:` field; empty when the event had none.
    pub(crate) event: String,
    /// The `data:` lines, joined with `\n`.
    pub(crate) data: String,
}

/// Turns a byte stream into [`SseEvent`]s.
#[derive(Debug, Default)]
pub(crate) struct SseDecoder {
    buf: Vec<u8>,
    /// Start of the first byte not yet consumed in `buf`.
    pos: usize,
    event: String,
    data: String,
    has_data: bool,
}

impl SseDecoder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 4096 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete event, if the bytes fed so far hold one.
    pub(crate) fn next_event(&mut self) -> Option<SseEvent> {
        while let Some(offset) = memchr::memchr(b'\n', &self.buf[self.pos..]) {
            let start = self.pos;
            let mut end = start + offset;
            self.pos = end + 1;
            if end > start && self.buf[end - 1] == b'\r' {
                end -= 1;
            }
            if end == start {
                if let Some(event) = self.dispatch() {
                    return Some(event);
                }
                continue;
            }
            self.field(start, end);
        }
        None
    }

    /// Call at end of stream: the last event when it was not followed by a blank line.
    pub(crate) fn finish(&mut self) -> Option<SseEvent> {
        if self.pos < self.buf.len() {
            let (start, mut end) = (self.pos, self.buf.len());
            self.pos = end;
            if self.buf[end - 1] == b'\r' {
                end -= 1;
            }
            self.field(start, end);
        }
        self.dispatch()
    }

    fn field(&mut self, start: usize, end: usize) {
        let line = &self.buf[start..end];
        if line[0] == b':' {
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
            _ => {} // id, retry and unknown fields do not matter to LLM streams
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

    fn decode_in_chunks(input: &[u8], chunk: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for piece in input.chunks(chunk) {
            decoder.feed(piece);
            while let Some(event) = decoder.next_event() {
                events.push(event);
            }
        }
        events.extend(decoder.finish());
        events
    }

    #[test]
    fn decodes_events_split_at_every_byte_boundary() {
        let input = "event: a\r\ndata: {\"x\":\"héllo\"}\r\n\r\n: keep-alive\n\ndata: one\ndata:two\n\nevent: b\ndata: last";
        let expected = vec![
            SseEvent {
                event: "a".into(),
                data: "{\"x\":\"héllo\"}".into(),
            },
            SseEvent {
                event: String::new(),
                data: "one\ntwo".into(),
            },
            SseEvent {
                event: "b".into(),
                data: "last".into(),
            },
        ];
        for chunk in 1..=input.len() {
            assert_eq!(
                decode_in_chunks(input.as_bytes(), chunk),
                expected,
                "chunk size {chunk}"
            );
        }
    }

    #[test]
    fn event_without_data_is_not_dispatched() {
        assert!(decode_in_chunks(b"event: ping\n\n", 3).is_empty());
    }
}
