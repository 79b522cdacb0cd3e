//! The stdio transport's line reader: newline-delimited JSON-RPC over a child's stdin and
//! stdout, in place of rmcp's.
//!
//! Unlike rmcp's reader, which drops a line it cannot decode (over 16 MiB, not UTF-8, nested
//! deeper than serde's recursion limit) and so leaves its request waiting for the call
//! timeout, this one answers the request the line was for with an error saying what was wrong
//! (the id is found by a shallow scan of the line). A line that cannot be matched to a
//! request at all fails every pending request instead. `tools/list` answers keep what rmcp's
//! types drop (see [`super::execution`]).
//!
//! Remove when rmcp's stdio (async read/write) transport fails the request whose answer line
//! it cannot decode instead of dropping the line, and keeps `tools/list` results whole.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonRpcMessage, NumberOrString,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::Mutex;

use super::execution::{keeping_execution, keeping_tasks_capability};
use super::fault::LocalFault;

/// The longest line accepted (rmcp's limit too).
const MAX_LINE_BYTES: usize = 16 << 20;
/// How much of an over-long line is kept to find its id.
const KEPT_PREFIX_BYTES: usize = 64 << 10;
/// serde_json's recursion limit.
const MAX_DEPTH: usize = 128;

/// What a pending request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    ListTools,
    Initialize,
    Other,
}

pub(crate) struct StdioTransport {
    read: BufReader<ChildStdout>,
    write: Arc<Mutex<ChildStdin>>,
    /// The line being read (only its prefix once it is over the limit).
    line: Vec<u8>,
    oversized: bool,
    pending: HashMap<RequestId, Pending>,
    /// Made-up answers waiting to be delivered.
    queued: VecDeque<ServerJsonRpcMessage>,
}

enum Read {
    Line,
    Oversized,
    Eof,
}

impl StdioTransport {
    pub(crate) fn new(stdout: ChildStdout, stdin: ChildStdin) -> Self {
        Self {
            read: BufReader::with_capacity(64 << 10, stdout),
            write: Arc::new(Mutex::new(stdin)),
            line: Vec::new(),
            oversized: false,
            pending: HashMap::new(),
            queued: VecDeque::new(),
        }
    }

    /// Reads up to a newline into `self.line`. Cancel-safe: bytes read so far stay there.
    async fn read_line(&mut self) -> std::io::Result<Read> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Read::Eof);
            }
            let newline = memchr::memchr(b'\n', available);
            let take = newline.map_or(available.len(), |index| index + 1);
            if !self.oversized && self.line.len() + take > MAX_LINE_BYTES {
                self.oversized = true;
                self.line.truncate(KEPT_PREFIX_BYTES);
            }
            if self.oversized {
                let room = KEPT_PREFIX_BYTES.saturating_sub(self.line.len()).min(take);
                self.line.extend_from_slice(&available[..room]);
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.read.consume(take);
            if newline.is_some() {
                let oversized = std::mem::take(&mut self.oversized);
                return Ok(if oversized {
                    Read::Oversized
                } else {
                    Read::Line
                });
            }
        }
    }

    /// The message in a whole line, or `None` to skip it.
    fn decode(&mut self, line: &[u8]) -> Option<ServerJsonRpcMessage> {
        let error = match serde_json::from_slice::<ServerJsonRpcMessage>(line) {
            Ok(message) => return Some(self.answered(message, line)),
            Err(error) => error,
        };
        let scan = scan(line);
        match scan.id.filter(|id| self.pending.contains_key(id)) {
            Some(id) => {
                let reason = if std::str::from_utf8(line).is_err() {
                    "the answer is not valid UTF-8".to_owned()
                } else if scan.depth > MAX_DEPTH {
                    format!("the answer is JSON nested deeper than {MAX_DEPTH} levels")
                } else {
                    format!("the answer is not a valid JSON-RPC message: {error}")
                };
                tracing::warn!(%reason, "unreadable answer from the MCP server");
                self.pending.remove(&id);
                Some(LocalFault::InvalidResponse { reason }.into_response(id))
            }
            None => {
                tracing::debug!(%error, "ignoring a line from the MCP server that is not a JSON-RPC message");
                None
            }
        }
    }

    /// Notes the answer to a pending request; `tools/list` answers keep what rmcp's types drop
    /// (see [`keeping_execution`]).
    fn answered(&mut self, message: ServerJsonRpcMessage, line: &[u8]) -> ServerJsonRpcMessage {
        let id = match &message {
            JsonRpcMessage::Response(response) => &response.id,
            JsonRpcMessage::Error(error) => match &error.id {
                Some(id) => id,
                None => return message,
            },
            _ => return message,
        };
        match self.pending.remove(id) {
            Some(Pending::ListTools) => match message {
                JsonRpcMessage::Response(mut response) => {
                    if let Ok(Value::Object(mut raw)) = serde_json::from_slice::<Value>(line)
                        && let Some(result) = raw.remove("result")
                    {
                        response.result = keeping_execution(result);
                    }
                    JsonRpcMessage::Response(response)
                }
                other => other,
            },
            Some(Pending::Initialize) => match message {
                JsonRpcMessage::Response(mut response) => {
                    if let Ok(Value::Object(mut raw)) = serde_json::from_slice::<Value>(line)
                        && let Some(result) = raw.remove("result")
                        && let Some(kept) = keeping_tasks_capability(result)
                    {
                        response.result = kept;
                    }
                    JsonRpcMessage::Response(response)
                }
                other => other,
            },
            _ => message,
        }
    }

    /// An over-long line: its request fails, or every pending request when it has no id.
    fn oversized(&mut self, prefix: &[u8]) {
        let reason = format!(
            "the answer was larger than {} MiB, the most a stdio line may carry",
            MAX_LINE_BYTES >> 20
        );
        let scan = scan(prefix);
        if let Some(id) = scan.id.filter(|id| self.pending.contains_key(id)) {
            tracing::warn!(%reason, "unreadable answer from the MCP server");
            self.pending.remove(&id);
            self.queued
                .push_back(LocalFault::InvalidResponse { reason }.into_response(id));
        } else if scan.method {
            tracing::warn!(
                "dropped a message from the MCP server larger than {MAX_LINE_BYTES} bytes"
            );
        } else {
            tracing::warn!(%reason, "an over-long line matches no request; failing every pending request");
            let reason = format!("{reason} (a line without a recognisable id)");
            for (id, _) in self.pending.drain() {
                self.queued.push_back(
                    LocalFault::InvalidResponse {
                        reason: reason.clone(),
                    }
                    .into_response(id),
                );
            }
        }
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match &item {
            ClientJsonRpcMessage::Request(request) => {
                let kind = match request.request {
                    ClientRequest::ListToolsRequest(_) => Pending::ListTools,
                    ClientRequest::InitializeRequest(_) => Pending::Initialize,
                    _ => Pending::Other,
                };
                self.pending.insert(request.id.clone(), kind);
            }
            ClientJsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    self.pending.remove(id);
                }
            }
            _ => {}
        }
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        let write = self.write.clone();
        async move {
            let line = line.map_err(std::io::Error::other)?;
            let mut write = write.lock().await;
            write.write_all(&line).await?;
            write.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(message) = self.queued.pop_front() {
                return Some(message);
            }
            match self.read_line().await {
                Ok(Read::Line) => {}
                Ok(Read::Oversized) => {
                    let prefix = std::mem::take(&mut self.line);
                    self.oversized(&prefix);
                    continue;
                }
                Ok(Read::Eof) => return None,
                Err(error) => {
                    tracing::debug!(%error, "reading from the MCP server failed");
                    return None;
                }
            }
            let mut line = std::mem::take(&mut self.line);
            let mut text = line.as_slice();
            text = text.strip_suffix(b"\n").unwrap_or(text);
            text = text.strip_suffix(b"\r").unwrap_or(text);
            text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
            let message = if text.iter().all(u8::is_ascii_whitespace) {
                None
            } else {
                self.decode(text)
            };
            line.clear();
            self.line = line;
            if let Some(message) = message {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.shutdown().await
    }
}

/// What a shallow scan of a (possibly invalid or cut) JSON object finds at its top level.
#[derive(Debug, Default, PartialEq)]
struct Scan {
    id: Option<RequestId>,
    /// It has a `method`: a request or notification, not an answer.
    method: bool,
    /// The deepest nesting seen.
    depth: usize,
}

/// Finds the top-level `id` and `method` of a JSON object without parsing it, so lines that
/// do not parse can still be matched to their request.
fn scan(line: &[u8]) -> Scan {
    let mut scan = Scan::default();
    let (mut depth, mut index) = (0usize, 0usize);
    let mut expect_key = false;
    let mut key: Option<&[u8]> = None;
    while let Some(&byte) = line.get(index) {
        match byte {
            b'"' => {
                let start = index + 1;
                let mut end = start;
                while let Some(&c) = line.get(end) {
                    match c {
                        b'\\' => end += 2,
                        b'"' => break,
                        _ => end += 1,
                    }
                }
                let text = line.get(start..end.min(line.len())).unwrap_or_default();
                if depth == 1 && expect_key {
                    key = Some(text);
                    expect_key = false;
                } else if depth == 1 {
                    match key.take() {
                        Some(b"id") => {
                            scan.id =
                                Some(NumberOrString::String(String::from_utf8_lossy(text).into()));
                        }
                        Some(b"method") => scan.method = true,
                        _ => {}
                    }
                }
                index = end + 1;
                continue;
            }
            b'{' | b'[' => {
                if depth == 1 && key.take() == Some(b"method") {
                    scan.method = true;
                }
                depth += 1;
                scan.depth = scan.depth.max(depth);
                expect_key = depth == 1 && byte == b'{';
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => {
                expect_key = true;
                key = None;
            }
            b'-' | b'0'..=b'9' if depth == 1 && key == Some(b"id") => {
                let end = line[index..]
                    .iter()
                    .position(|c| !(c.is_ascii_digit() || *c == b'-'))
                    .map_or(line.len(), |length| index + length);
                scan.id = std::str::from_utf8(&line[index..end])
                    .ok()
                    .and_then(|number| number.parse().ok())
                    .map(NumberOrString::Number);
                key = None;
                index = end;
                continue;
            }
            _ => {}
        }
        index += 1;
    }
    scan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_top_level_ids_in_broken_lines() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{}{}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        let found = scan(deep.as_bytes());
        assert_eq!(found.id, Some(NumberOrString::Number(7)));
        assert!(found.depth > MAX_DEPTH);
        let bad = b"{\"id\": \"a-1\", \"result\": {\"text\": \"\xff\"}}";
        assert_eq!(scan(bad).id, Some(NumberOrString::String("a-1".into())));
        // Nested ids and ids inside strings do not count.
        let nested = br#"{"result": {"id": 3, "text": "\"id\": 4"}, "method": "x"}"#;
        let found = scan(nested);
        assert_eq!(found.id, None);
        assert!(found.method);
        // A cut line still yields an id that came first.
        assert_eq!(
            scan(br#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"te"#).id,
            Some(NumberOrString::Number(12))
        );
    }
}
