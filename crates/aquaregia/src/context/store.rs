//! [`ToolOutputStore`]: the full tool outputs that were cut or elided, and the built-in
//! `read_tool_output` tool that reads them.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::tool::{Tool, ToolAnnotations, ToolDescriptor, ToolExecError, ToolExecutor, ToolOutput};

use super::budget::{ceil_char_boundary, floor_char_boundary};
use crate::sync::lock;

/// The name of the built-in tool that reads kept outputs.
pub const READ_TOOL_OUTPUT: &str = "read_tool_output";

/// What an in-memory store keeps at most by default: 64 MiB.
const DEFAULT_MEMORY_LIMIT: usize = 64 << 20;

/// Where the full outputs of cut or elided tool results are kept, by call id.
///
/// In memory by default (the oldest outputs are dropped past a size limit), or one file per
/// output in a directory (a session's data directory, say). Cheap to clone; clones share the
/// outputs, so one store can serve several runs of a conversation.
///
/// ```
/// # async fn demo() {
/// use aquaregia::ToolOutputStore;
/// let store = ToolOutputStore::in_memory();
/// store.put("call_1", "0123456789".into()).await;
/// assert_eq!(store.read("call_1", 2, 3).await.unwrap().text, "234");
/// # }
/// ```
#[derive(Clone)]
pub struct ToolOutputStore {
    inner: Arc<StoreInner>,
}

enum StoreInner {
    Memory {
        limit: usize,
        entries: Mutex<Memory>,
    },
    Directory(PathBuf),
}

#[derive(Default)]
struct Memory {
    outputs: VecDeque<(String, Arc<str>)>,
    bytes: usize,
}

impl fmt::Debug for ToolOutputStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.inner {
            StoreInner::Memory { limit, entries } => f
                .debug_struct("ToolOutputStore")
                .field("limit", limit)
                .field("outputs", &lock(entries).outputs.len())
                .finish(),
            StoreInner::Directory(path) => f
                .debug_struct("ToolOutputStore")
                .field("directory", path)
                .finish(),
        }
    }
}

impl Default for ToolOutputStore {
    fn default() -> Self {
        Self::in_memory()
    }
}

/// A piece of a kept output, as [`ToolOutputStore::read`] returns it.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSlice {
    /// The text read.
    pub text: String,
    /// Where it starts, in bytes (moved back to a character boundary if needed).
    pub offset: usize,
    /// The whole output's length in bytes.
    pub total: usize,
}

impl ToolOutputStore {
    /// Outputs in memory, up to 64 MiB (older ones are dropped first).
    pub fn in_memory() -> Self {
        Self::in_memory_with_limit(DEFAULT_MEMORY_LIMIT)
    }

    /// Outputs in memory, up to `limit_bytes` (older ones are dropped first).
    pub fn in_memory_with_limit(limit_bytes: usize) -> Self {
        Self {
            inner: Arc::new(StoreInner::Memory {
                limit: limit_bytes,
                entries: Mutex::new(Memory::default()),
            }),
        }
    }

    /// Outputs as files in `directory` (created when the first output is kept), named after
    /// the hex of their call id; nothing is ever deleted.
    pub fn directory(directory: impl Into<PathBuf>) -> Self {
        Self {
            inner: Arc::new(StoreInner::Directory(directory.into())),
        }
    }

    /// Keeps `text` as the full output of call `id` (replacing any earlier one). A directory
    /// that cannot be written is logged; the output is then not readable later.
    pub async fn put(&self, id: &str, text: String) {
        match &*self.inner {
            StoreInner::Memory { limit, entries } => {
                let mut memory = lock(entries);
                if let Some(at) = memory.outputs.iter().position(|(key, _)| key == id)
                    && let Some((_, old)) = memory.outputs.remove(at)
                {
                    memory.bytes -= old.len();
                }
                memory.bytes += text.len();
                memory.outputs.push_back((id.to_owned(), text.into()));
                while memory.bytes > *limit && memory.outputs.len() > 1 {
                    if let Some((_, old)) = memory.outputs.pop_front() {
                        memory.bytes -= old.len();
                    }
                }
            }
            StoreInner::Directory(directory) => {
                let path = file_path(directory, id);
                let directory = directory.clone();
                let written = tokio::task::spawn_blocking(move || {
                    std::fs::create_dir_all(&directory)?;
                    std::fs::write(&path, text)
                })
                .await;
                match written {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        tracing::warn!(call = id, %error, "could not keep a tool output")
                    }
                    Err(error) => {
                        tracing::warn!(call = id, %error, "could not keep a tool output")
                    }
                }
            }
        }
    }

    /// Whether nothing was kept yet (a directory store always answers no: earlier sessions may
    /// have left outputs there).
    pub(crate) fn is_empty(&self) -> bool {
        match &*self.inner {
            StoreInner::Memory { entries, .. } => lock(entries).outputs.is_empty(),
            StoreInner::Directory(_) => false,
        }
    }

    /// Keeps `text` for call `id` unless an output is already kept for it (the full output of
    /// a result that was cut must not be replaced by the cut version).
    pub(crate) async fn keep(&self, id: &str, text: String) {
        let kept = match &*self.inner {
            StoreInner::Memory { entries, .. } => {
                lock(entries).outputs.iter().any(|(key, _)| key == id)
            }
            StoreInner::Directory(directory) => {
                let path = file_path(directory, id);
                tokio::task::spawn_blocking(move || path.exists())
                    .await
                    .unwrap_or(false)
            }
        };
        if !kept {
            self.put(id, text).await;
        }
    }

    /// Up to `length` bytes of call `id`'s output from byte `offset` (both moved to character
    /// boundaries).
    pub async fn read(
        &self,
        id: &str,
        offset: usize,
        length: usize,
    ) -> Result<OutputSlice, ToolExecError> {
        let full: Arc<str> = match &*self.inner {
            StoreInner::Memory { entries, .. } => lock(entries)
                .outputs
                .iter()
                .find(|(key, _)| key == id)
                .map(|(_, text)| text.clone())
                .ok_or_else(|| unknown(id))?,
            StoreInner::Directory(directory) => {
                let path = file_path(directory, id);
                match tokio::task::spawn_blocking(move || std::fs::read_to_string(path)).await {
                    Ok(Ok(text)) => text.into(),
                    Ok(Err(error)) if error.kind() == std::io::ErrorKind::NotFound => {
                        return Err(unknown(id));
                    }
                    Ok(Err(error)) => {
                        return Err(ToolExecError::Execution(format!(
                            "could not read the output of `{id}`: {error}"
                        )));
                    }
                    Err(error) => return Err(ToolExecError::failed(error)),
                }
            }
        };
        let start = floor_char_boundary(&full, offset);
        let mut end = floor_char_boundary(&full, start.saturating_add(length));
        if end == start && start < full.len() {
            // Less than one character asked for: give that one character.
            end = ceil_char_boundary(&full, start + 1);
        }
        Ok(OutputSlice {
            text: full.get(start..end).unwrap_or_default().to_owned(),
            offset: start,
            total: full.len(),
        })
    }

    /// The built-in `read_tool_output(id, offset, length)` tool over this store; each read
    /// returns at most `max_length` bytes.
    pub fn read_tool(&self, max_length: usize) -> Tool {
        let descriptor = ToolDescriptor {
            name: READ_TOOL_OUTPUT.to_owned(),
            description: format!(
                "Reads a part of a tool output that was cut or elided to save context. `id` is \
                 the tool call id named in the cut marker, `offset` a byte offset, `length` at \
                 most {max_length} bytes."
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The tool call id"},
                    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset"},
                    "length": {"type": "integer", "minimum": 1, "description": "Bytes to read"}
                },
                "required": ["id", "offset"],
                "additionalProperties": false
            }),
        };
        // Read-only: agents that ask before running tools need not ask for this one.
        let annotations = ToolAnnotations::new()
            .title("Read a kept tool output")
            .read_only(true);
        Tool::with_parts(
            descriptor,
            annotations,
            Arc::new(ReadToolOutput {
                store: self.clone(),
                max_length,
            }),
        )
    }
}

struct ReadToolOutput {
    store: ToolOutputStore,
    max_length: usize,
}

#[async_trait::async_trait]
impl ToolExecutor for ReadToolOutput {
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        let id = args["id"]
            .as_str()
            .ok_or_else(|| ToolExecError::InvalidArguments("`id` must be a string".into()))?;
        let number = |key: &str, default: u64| match &args[key] {
            Value::Null => Ok(default),
            value => value.as_u64().ok_or_else(|| {
                ToolExecError::InvalidArguments(format!("`{key}` must be a non-negative integer"))
            }),
        };
        let offset = usize::try_from(number("offset", 0)?).unwrap_or(usize::MAX);
        let length = usize::try_from(number("length", self.max_length as u64)?)
            .unwrap_or(usize::MAX)
            .clamp(1, self.max_length);
        let slice = self.store.read(id, offset, length).await?;
        let end = slice.offset + slice.text.len();
        let mut out = slice.text;
        let rest = if end < slice.total {
            "more follows"
        } else {
            "end of output"
        };
        let _ = write!(
            out,
            "\n\n[bytes {}..{end} of {}; {rest}]",
            slice.offset, slice.total
        );
        Ok(ToolOutput::Text(out))
    }
}

fn unknown(id: &str) -> ToolExecError {
    ToolExecError::Execution(format!("no kept output for tool call `{id}`"))
}

/// `<directory>/<hex of id>.txt`: any id maps to a distinct, safe file name.
fn file_path(directory: &Path, id: &str) -> PathBuf {
    let mut name = String::with_capacity(id.len() * 2 + 4);
    for byte in id.bytes() {
        let _ = write!(name, "{byte:02x}");
    }
    name.push_str(".txt");
    directory.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_directory_store_keeps_outputs_as_files_and_reads_them_back() {
        let scratch = tempfile::tempdir().unwrap();
        let directory = scratch.path().join("outputs");
        let store = ToolOutputStore::directory(&directory);
        store.put("call/1", "héllo world".into()).await;
        // Kept as `<hex of the id>.txt`, whatever the id's characters.
        assert!(directory.join("63616c6c2f31.txt").exists());
        // Byte offsets are moved to character boundaries.
        let slice = store.read("call/1", 2, 4).await.unwrap();
        assert_eq!(
            (slice.text.as_str(), slice.offset, slice.total),
            ("éll", 1, 12)
        );
        store.keep("call/1", "other".into()).await;
        assert_eq!(
            store.read("call/1", 0, 100).await.unwrap().text,
            "héllo world"
        );
        assert!(store.read("missing", 0, 1).await.is_err());
    }

    #[tokio::test]
    async fn a_memory_store_drops_the_oldest_outputs_past_its_limit() {
        let store = ToolOutputStore::in_memory_with_limit(10);
        store.put("a", "123456".into()).await;
        store.put("b", "123456".into()).await;
        assert!(store.read("a", 0, 1).await.is_err());
        assert_eq!(store.read("b", 0, 6).await.unwrap().text, "123456");
    }
}
