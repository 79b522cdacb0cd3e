//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout, read defensively. A line
//! that is not UTF-8, or longer than the bound, becomes a line the SDK cannot parse, so the
//! client gets a parse error (-32700) for it and the agent keeps serving.

use std::io;

use std::io::{BufRead, Write};

use futures::Stream;

/// The longest line read (64 MiB: room for large embedded resources and images).
pub(crate) const MAX_LINE_BYTES: usize = 64 << 20;

/// What replaces a line that cannot be a JSON-RPC message (the SDK answers it with a parse
/// error).
const NOT_UTF8: &str = "<a line that is not UTF-8>";
const TOO_LONG: &str = "<a line longer than the limit>";

/// One line of input, read within `max` bytes.
enum Line {
    Bytes(Vec<u8>),
    TooLong,
}

/// Reads the next line (without its `\n`, or `\r\n`); `None` at the end of input.
fn next_line(reader: &mut impl BufRead, max: usize) -> io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok(read_any.then(|| finish(line, too_long)));
        }
        read_any = true;
        let (chunk, found) = match available.iter().position(|byte| *byte == b'\n') {
            Some(end) => (available.get(..end).unwrap_or_default(), Some(end + 1)),
            None => (available, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = found.unwrap_or(available.len());
        reader.consume(consumed);
        if found.is_some() {
            return Ok(Some(finish(line, too_long)));
        }
    }
}

fn finish(mut line: Vec<u8>, too_long: bool) -> Line {
    if too_long {
        return Line::TooLong;
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Line::Bytes(line)
}

/// Lines up to this long go to the SDK as they are, JSON or not (its parse error quotes the
/// line back, a few hundred bytes at most).
const QUOTED_BYTES: usize = 256;

/// A longer line that is not JSON goes to the SDK as a short stand-in naming its size and
/// quoting its start, so the parse error does not send the whole line back (20 MiB in,
/// 20 MiB out).
pub(crate) fn bounded(line: String) -> String {
    if line.len() <= QUOTED_BYTES || serde_json::from_str::<serde::de::IgnoredAny>(&line).is_ok() {
        return line;
    }
    let mut end = 64.min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    let start = line.get(..end).unwrap_or_default();
    format!(
        "<a message that is not JSON, {} bytes, beginning {start:?}>",
        line.len()
    )
}

/// The next line as the SDK's `Lines` transport wants it; `None` at the end of input.
fn next_text(reader: &mut impl BufRead, max: usize) -> Option<io::Result<String>> {
    match next_line(reader, max) {
        Ok(Some(Line::Bytes(bytes))) => Some(Ok(match String::from_utf8(bytes) {
            Ok(line) => bounded(line),
            Err(_) => {
                tracing::warn!("a line of input is not UTF-8; answered with a parse error");
                NOT_UTF8.to_owned()
            }
        })),
        Ok(Some(Line::TooLong)) => {
            tracing::warn!(
                max,
                "a line of input is too long; answered with a parse error"
            );
            Some(Ok(TOO_LONG.to_owned()))
        }
        Ok(None) => None,
        Err(error) => Some(Err(error)),
    }
}

/// The lines of stdin, read on a thread of their own (a blocking read must not hold up the
/// runtime's shutdown when the agent stops on a signal).
pub(crate) fn stdin_lines(max: usize) -> impl Stream<Item = io::Result<String>> + Send {
    let (sender, receiver) = tokio::sync::mpsc::channel(16);
    let reader = std::thread::Builder::new()
        .name("acp-stdin".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            while let Some(line) = next_text(&mut stdin, max) {
                let failed = line.is_err();
                if sender.blocking_send(line).is_err() || failed {
                    break;
                }
            }
        });
    if let Err(error) = reader {
        tracing::error!(%error, "cannot start the stdin reader");
    }
    futures::stream::unfold(receiver, async |mut receiver| {
        receiver.recv().await.map(|line| (line, receiver))
    })
}

/// Outgoing lines, written to stdout on a thread of their own: tokio's stdout hands every
/// write to the blocking pool and waits for it, a thread round trip per message (most of the
/// time of a 200-turn `session/load` replay). Lines that wait together are written at once,
/// then flushed. The receiver completes once everything sent was written (or stdout failed).
pub(crate) fn stdout_lines() -> (
    impl futures::Sink<String, Error = io::Error> + Send,
    tokio::sync::oneshot::Receiver<()>,
) {
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<String>(64);
    let (done, written) = tokio::sync::oneshot::channel();
    let writer = std::thread::Builder::new()
        .name("acp-stdout".into())
        .spawn(move || {
            let mut stdout = io::stdout().lock();
            let mut batch = Vec::new();
            while let Some(line) = receiver.blocking_recv() {
                batch.clear();
                batch.extend_from_slice(line.as_bytes());
                batch.push(b'\n');
                while let Ok(line) = receiver.try_recv() {
                    batch.extend_from_slice(line.as_bytes());
                    batch.push(b'\n');
                }
                if let Err(error) = stdout.write_all(&batch).and_then(|()| stdout.flush()) {
                    tracing::debug!(%error, "stdout is closed");
                    break;
                }
            }
            let _ = done.send(());
        });
    if let Err(error) = writer {
        tracing::error!(%error, "cannot start the stdout writer");
    }
    let sink = futures::sink::unfold(sender, async |sender, line: String| {
        sender
            .send(line)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed"))?;
        Ok::<_, io::Error>(sender)
    });
    (sink, written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(mut input: &[u8], max: usize) -> Vec<String> {
        std::iter::from_fn(|| next_text(&mut input, max))
            .map(|line| line.expect("no I/O error"))
            .collect()
    }

    #[test]
    fn bad_lines_become_unparseable_lines() {
        let input: &[u8] = b"{\"a\":1}\r\n\xff\xfe\n0123456789abc\n{}";
        assert_eq!(read(input, 10), ["{\"a\":1}", NOT_UTF8, TOO_LONG, "{}"]);
        assert_eq!(read(b"", 10), Vec::<String>::new());
        assert_eq!(read(b"\n", 10), [""]);
        // A long line read in pieces smaller than the buffer is still bounded.
        let long = [b'x'; 100];
        let mut reader = std::io::BufReader::with_capacity(8, &long[..]);
        assert!(matches!(
            next_line(&mut reader, 50),
            Ok(Some(Line::TooLong))
        ));
    }

    #[test]
    fn a_long_line_that_is_not_json_is_quoted_short() {
        let long_json = format!("{{\"text\":\"{}\"}}", "é".repeat(1000));
        assert_eq!(bounded(long_json.clone()), long_json);
        assert_eq!(bounded("not json".into()), "not json");
        let bad = format!("{{\"a\": {}", "é".repeat(1 << 20));
        let quoted = bounded(bad.clone());
        assert!(quoted.len() < 200, "{quoted}");
        assert!(quoted.starts_with('<') && quoted.contains(&bad.len().to_string()));
    }
}
