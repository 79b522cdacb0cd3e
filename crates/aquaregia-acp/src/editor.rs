//! The editor's files and terminal as built-in tools: `read_file`, `write_file`, `edit_file`
//! (exact string replacement) and `run_command`. With the client's `fs` and `terminal`
//! capabilities they go through `fs/*` and `terminal/*` (the editor sees unsaved buffers,
//! shows diffs and runs commands in its terminals); without, they are local and confined to
//! the session's `cwd`.

use std::collections::{HashMap, VecDeque};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, Diff, ReadTextFileRequest, ToolCallContent, ToolCallLocation,
    WriteTextFileRequest,
};
use aquaregia::mcp::glob_match;
use aquaregia::{Tool, ToolAnnotations, ToolCall, ToolExecError, tool};
use serde_json::{Value, json};

use crate::servers::ProcessHook;
use crate::session::lock;

/// The built-in tools' names.
pub(crate) const READ: &str = "read_file";
pub(crate) const WRITE: &str = "write_file";
pub(crate) const EDIT: &str = "edit_file";
pub(crate) const RUN: &str = "run_command";

/// One session's access to the editor (or the local machine).
pub(crate) struct Editor {
    pub(crate) cx: ConnectionTo<Client>,
    pub(crate) session_id: String,
    pub(crate) cwd: PathBuf,
    pub(crate) capabilities: ClientCapabilities,
    /// `run_command` calls by arguments, so the tool finds the call id the hook saw.
    pub(crate) calls: Mutex<HashMap<String, VecDeque<String>>>,
    /// Told of the process groups local commands run in (as of MCP servers').
    pub(crate) on_process: Option<ProcessHook>,
    /// How local commands are confined (`None`: not at all).
    pub(crate) sandbox: Option<Arc<crate::Sandbox>>,
}

fn string(args: &Value, name: &str) -> Result<String, ToolExecError> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ToolExecError::from(format!("`{name}` (a string) is required")))
}

fn schema(properties: &Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

impl Editor {
    /// The built-in tools (`update_plan` included), minus those `disabled` matches.
    pub(crate) fn tools(self: &Arc<Self>, disabled: &[String]) -> Vec<Tool> {
        let read_only = {
            let mut annotations = ToolAnnotations::new();
            annotations.read_only = Some(true);
            annotations
        };
        let path = json!({"type": "string", "description": "File path, absolute or relative to the working directory"});
        let editor = self.clone();
        let read = tool(READ)
            .description("Read a text file (the editor's unsaved changes included)")
            .raw_schema(schema(
                &json!({"path": path, "line": {"type": "integer", "description": "First line (1-based)"},
                       "limit": {"type": "integer", "description": "Most lines to read"}}),
                &["path"],
            ))
            .annotations(read_only)
            .execute_raw(move |args| {
                let editor = editor.clone();
                async move { editor.read(&args).await }
            });
        let editor = self.clone();
        let write = tool(WRITE)
            .description("Write a whole text file (created if missing)")
            .raw_schema(schema(
                &json!({"path": path, "content": {"type": "string"}}),
                &["path", "content"],
            ))
            .execute_raw(move |args| {
                let editor = editor.clone();
                async move {
                    let path = editor.path(&string(&args, "path")?)?;
                    let content = string(&args, "content")?;
                    editor.write_text(&path, &content).await?;
                    Ok(format!(
                        "Wrote {} bytes to {}",
                        content.len(),
                        path.display()
                    ))
                }
            });
        let editor = self.clone();
        let edit = tool(EDIT)
            .description("Replace one exact occurrence of `old_string` with `new_string` in a file")
            .raw_schema(schema(
                &json!({"path": path, "old_string": {"type": "string"}, "new_string": {"type": "string"}}),
                &["path", "old_string", "new_string"],
            ))
            .execute_raw(move |args| {
                let editor = editor.clone();
                async move {
                    let (path, _, new) = editor.edited(&args).await?;
                    editor.write_text(&path, &new).await?;
                    Ok(format!("Edited {}", path.display()))
                }
            });
        let editor = self.clone();
        let run = tool(RUN)
            .description(
                "Run a command (in the editor's terminal when it has one) and return its output \
                 once it exits. Run locally, `command` is a shell command line (`sh -c`, `args` \
                 quoted and appended) and what it leaves in the background is stopped then",
            )
            .raw_schema(schema(
                &json!({"command": {"type": "string"}, "args": {"type": "array", "items": {"type": "string"}}}),
                &["command"],
            ))
            .execute_raw(move |args| {
                let editor = editor.clone();
                async move { editor.run(&args).await }
            });
        [read, write, edit, run, crate::plan::tool_for(self)]
            .into_iter()
            .filter(|tool| {
                !disabled
                    .iter()
                    .any(|pattern| glob_match(pattern, tool.name()))
            })
            .collect()
    }

    /// `path` resolved against the cwd; outside the cwd only when the editor does the I/O.
    pub(crate) fn path(&self, path: &str) -> Result<PathBuf, ToolExecError> {
        let joined = normalize(&self.cwd.join(path));
        let through_editor =
            self.capabilities.fs.read_text_file && self.capabilities.fs.write_text_file;
        if !through_editor && !joined.starts_with(normalize(&self.cwd)) {
            return Err(format!(
                "`{path}` is outside the working directory {}",
                self.cwd.display()
            )
            .into());
        }
        Ok(joined)
    }

    async fn read(&self, args: &Value) -> Result<String, ToolExecError> {
        let path = self.path(&string(args, "path")?)?;
        let line = args.get("line").and_then(Value::as_u64);
        let limit = args.get("limit").and_then(Value::as_u64);
        let text = self.read_text(&path).await?;
        let skip = line.map_or(0, |line| line.saturating_sub(1)) as usize;
        let take = limit.map_or(usize::MAX, |limit| limit as usize);
        Ok(text
            .lines()
            .skip(skip)
            .take(take)
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// The whole file, through the editor when it can read.
    pub(crate) async fn read_text(&self, path: &Path) -> Result<String, ToolExecError> {
        if self.capabilities.fs.read_text_file {
            let request = ReadTextFileRequest::new(self.session_id.clone(), path.to_owned());
            return self
                .cx
                .send_request(request)
                .block_task()
                .await
                .map(|response| response.content)
                .map_err(|error| format!("fs/read_text_file: {}", error.message).into());
        }
        Ok(tokio::fs::read_to_string(path).await?)
    }

    async fn write_text(&self, path: &Path, content: &str) -> Result<(), ToolExecError> {
        if self.capabilities.fs.write_text_file {
            let request =
                WriteTextFileRequest::new(self.session_id.clone(), path.to_owned(), content);
            return self
                .cx
                .send_request(request)
                .block_task()
                .await
                .map(|_| ())
                .map_err(|error| format!("fs/write_text_file: {}", error.message).into());
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        Ok(tokio::fs::write(path, content).await?)
    }

    /// An `edit_file` call's path, old and new text.
    async fn edited(&self, args: &Value) -> Result<(PathBuf, String, String), ToolExecError> {
        let path = self.path(&string(args, "path")?)?;
        let (old_string, new_string) = (string(args, "old_string")?, string(args, "new_string")?);
        if old_string.is_empty() {
            return Err("`old_string` must not be empty".into());
        }
        let old = self.read_text(&path).await?;
        match old.matches(old_string.as_str()).count() {
            1 => {}
            0 => return Err(format!("`old_string` is not in {}", path.display()).into()),
            n => {
                return Err(format!(
                    "`old_string` occurs {n} times in {}: give more context",
                    path.display()
                )
                .into());
            }
        }
        let new = old.replacen(old_string.as_str(), &new_string, 1);
        Ok((path, old, new))
    }

    /// What the editor shows for a built-in call before it runs: a diff for edits, the file
    /// for reads.
    pub(crate) async fn present(
        &self,
        call: &ToolCall,
    ) -> (Vec<ToolCallContent>, Vec<ToolCallLocation>) {
        let args = &call.arguments;
        if call.name == RUN {
            return (self.run_note().into_iter().collect(), Vec::new());
        }
        let Some(path) = args
            .get("path")
            .and_then(Value::as_str)
            .and_then(|path| self.path(path).ok())
        else {
            return (Vec::new(), Vec::new());
        };
        let location = vec![ToolCallLocation::new(path.clone())];
        let content = match call.name.as_str() {
            EDIT => match self.edited(args).await {
                Ok((path, old, new)) => vec![Diff::new(path, new).old_text(old).into()],
                Err(_) => Vec::new(),
            },
            WRITE => {
                let old = self.read_text(&path).await.ok();
                let new = args
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                vec![Diff::new(path, new).old_text(old).into()]
            }
            _ => Vec::new(),
        };
        (content, location)
    }

    /// Remembers the call id of a `run_command` call, for the terminal it creates.
    pub(crate) fn expect_run(&self, call: &ToolCall) {
        lock(&self.calls)
            .entry(call.arguments.to_string())
            .or_default()
            .push_back(call.id.clone());
    }

    pub(crate) fn take_run(&self, args: &Value) -> Option<String> {
        lock(&self.calls)
            .get_mut(&args.to_string())
            .and_then(VecDeque::pop_front)
    }
}

/// `path` without `.` and `..` (lexically: the file may not exist yet).
fn normalize(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalized() {
        assert_eq!(normalize(Path::new("/a/b/../c/./d")), Path::new("/a/c/d"));
        assert!(!normalize(Path::new("/work/../etc/passwd")).starts_with("/work"));
    }
}
