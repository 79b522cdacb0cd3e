//! The editor's files and terminal as built-in tools: `read_file`, `write_file`, `edit_file`
//! (exact string replacement) and `run_command`. With the client's `fs` and `terminal`
//! capabilities they go through `fs/*` and `terminal/*` (the editor sees unsaved buffers,
//! shows diffs and runs commands in its terminals); without, they are local and confined to
//! the session's `cwd`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, Diff, ReadTextFileRequest, ToolCallContent, ToolCallLocation,
    WriteTextFileRequest,
};
use aquaregia::policy::glob_match;
use aquaregia::workspace::{ResolvedPath, Workspace};
use aquaregia::{Tool, ToolAnnotations, ToolCall, ToolExecError, tool};
use serde_json::{Value, json};

use aquaregia_mcp::process::ProcessHook;

use crate::builtins::{EDIT, READ, RUN, WRITE, command_text};
use crate::state::SharedState;
use crate::updates;

/// One session's access to the editor (or the local machine).
pub(crate) struct Editor {
    pub(crate) cx: ConnectionTo<Client>,
    pub(crate) session_id: String,
    pub(crate) cwd: PathBuf,
    /// The boundary every file tool and the permission hook judge paths by.
    pub(crate) workspace: Workspace,
    pub(crate) capabilities: ClientCapabilities,
    /// The session's state: paths outside the workspace the user approved, and the ids of
    /// `run_command` calls the hook saw.
    pub(crate) state: SharedState,
    /// Told of the process groups local commands run in (as of MCP servers').
    pub(crate) on_process: Option<ProcessHook>,
    /// How local commands are confined (`None`: not at all).
    pub(crate) sandbox: Option<Arc<crate::Sandbox>>,
    /// Whether the tools the client cannot serve may run here, on this machine (see
    /// [`AcpServer::local_tools`](crate::AcpServer::local_tools)).
    pub(crate) local: bool,
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
    /// The built-in tools (`update_plan` included), minus those `disabled` matches, and
    /// minus those that would run on this machine when local tools are not allowed.
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
                        path.path().display()
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
                    Ok(format!("Edited {}", path.path().display()))
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
        [
            read,
            write,
            edit,
            run,
            crate::plan::tool_for(self.cx.clone(), self.session_id.clone()),
        ]
        .into_iter()
        .filter(|tool| self.local || self.served_by_client(tool.name()))
        .filter(|tool| {
            !disabled
                .iter()
                .any(|pattern| glob_match(pattern, tool.name()))
        })
        .collect()
    }

    /// Whether the built-in `name` goes through the client (not this machine) in every
    /// call: the file tools when it reads (and writes) files, `run_command` when it has a
    /// terminal, `update_plan` always.
    fn served_by_client(&self, name: &str) -> bool {
        let fs = &self.capabilities.fs;
        match name {
            READ => fs.read_text_file,
            WRITE => fs.write_text_file,
            EDIT => fs.read_text_file && fs.write_text_file,
            RUN => self.capabilities.terminal,
            _ => true,
        }
    }

    /// `path` resolved against the workspace (the session's cwd), symlinks and `..` followed.
    pub(crate) fn resolve(&self, path: &str) -> Result<ResolvedPath, ToolExecError> {
        self.workspace
            .resolve(path)
            .map_err(|error| format!("cannot resolve `{path}`: {error}").into())
    }

    /// The path a file tool works on: resolved, and, when it leads outside the workspace,
    /// only if the user approved that very path for this call (the permission hook records
    /// it). Resolved again here, so a symlink swapped after the approval is caught.
    pub(crate) fn path(&self, path: &str) -> Result<ResolvedPath, ToolExecError> {
        let resolved = self.resolve(path)?;
        if !resolved.is_inside() && !self.take_outside_approval(resolved.path()) {
            return Err(format!(
                "`{path}` leads to {}, outside the workspace {}, and that was not approved",
                resolved.path().display(),
                self.workspace.root().display()
            )
            .into());
        }
        Ok(resolved)
    }

    /// The user approved one call on `path`, outside the workspace.
    pub(crate) fn approve_outside(&self, path: PathBuf) {
        self.state.with(|state| state.approve_outside(path));
    }

    fn take_outside_approval(&self, path: &Path) -> bool {
        self.state.with(|state| state.take_outside_approval(path))
    }

    /// Where a built-in file call leads when that is outside the workspace (`None` for other
    /// calls, and for paths inside).
    pub(crate) fn outside(&self, call: &ToolCall) -> Option<ResolvedPath> {
        if !matches!(call.name.as_str(), READ | WRITE | EDIT) {
            return None;
        }
        let path = call.arguments.get("path").and_then(Value::as_str)?;
        self.resolve(path)
            .ok()
            .filter(|resolved| !resolved.is_inside())
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

    /// The whole file, through the editor when it can read. Read locally, the opened file is
    /// checked to be the one resolved (no symlink swapped in between).
    pub(crate) async fn read_text(&self, path: &ResolvedPath) -> Result<String, ToolExecError> {
        if self.capabilities.fs.read_text_file {
            let request = ReadTextFileRequest::new(self.session_id.clone(), path.path().to_owned());
            return self
                .cx
                .send_request(request)
                .block_task()
                .await
                .map(|response| response.content)
                .map_err(|error| format!("fs/read_text_file: {}", error.message).into());
        }
        let (workspace, path) = (self.workspace.clone(), path.clone());
        blocking(move || {
            let mut file = File::open(path.path())?;
            workspace.verify_open(&file, &path)?;
            let mut text = String::new();
            file.read_to_string(&mut text)?;
            Ok(text)
        })
        .await
    }

    async fn write_text(&self, path: &ResolvedPath, content: &str) -> Result<(), ToolExecError> {
        if self.capabilities.fs.write_text_file {
            let request =
                WriteTextFileRequest::new(self.session_id.clone(), path.path().to_owned(), content);
            return self
                .cx
                .send_request(request)
                .block_task()
                .await
                .map(|_| ())
                .map_err(|error| format!("fs/write_text_file: {}", error.message).into());
        }
        let (workspace, path, content) = (self.workspace.clone(), path.clone(), content.to_owned());
        blocking(move || {
            if let Some(parent) = path.path().parent() {
                std::fs::create_dir_all(parent)?;
            }
            // Not truncated before the opened file is known to be the approved one; a file
            // that did not exist is created exclusively (`O_EXCL` follows no symlink, so one
            // planted since the check cannot make it land elsewhere).
            let mut options = OpenOptions::new();
            options.write(true);
            match std::fs::symlink_metadata(path.path()) {
                Ok(_) => options.truncate(false),
                Err(_) => options.create_new(true),
            };
            let mut file = options.open(path.path())?;
            workspace.verify_open(&file, &path)?;
            file.set_len(0)?;
            file.write_all(content.as_bytes())
        })
        .await
    }

    /// An `edit_file` call's path, old and new text.
    async fn edited(&self, args: &Value) -> Result<(ResolvedPath, String, String), ToolExecError> {
        let path = self.path(&string(args, "path")?)?;
        let (old, new) = self.edit_of(&path, args).await?;
        Ok((path, old, new))
    }

    /// The file at `path` before and after an `edit_file` call's replacement.
    async fn edit_of(
        &self,
        path: &ResolvedPath,
        args: &Value,
    ) -> Result<(String, String), ToolExecError> {
        let (old_string, new_string) = (string(args, "old_string")?, string(args, "new_string")?);
        if old_string.is_empty() {
            return Err("`old_string` must not be empty".into());
        }
        let old = self.read_text(path).await?;
        let shown = path.path().display();
        match old.matches(old_string.as_str()).count() {
            1 => {}
            0 => return Err(format!("`old_string` is not in {shown}").into()),
            n => {
                return Err(
                    format!("`old_string` occurs {n} times in {shown}: give more context").into(),
                );
            }
        }
        let new = old.replacen(old_string.as_str(), &new_string, 1);
        Ok((old, new))
    }

    /// What the editor shows for a built-in call before it runs: a diff for edits, the file
    /// for reads.
    pub(crate) async fn present(
        &self,
        call: &ToolCall,
    ) -> (Vec<ToolCallContent>, Vec<ToolCallLocation>) {
        let args = &call.arguments;
        if call.name == RUN {
            let mut content: Vec<ToolCallContent> =
                vec![updates::text_block(&command_text(args)).into()];
            content.extend(self.run_note());
            return (content, Vec::new());
        }
        let Some(path) = args
            .get("path")
            .and_then(Value::as_str)
            .and_then(|path| self.resolve(path).ok())
        else {
            return (Vec::new(), Vec::new());
        };
        let location = vec![ToolCallLocation::new(path.path().to_owned())];
        if !path.is_inside() {
            // Nothing outside the workspace is read before the user says yes (through the
            // editor that would be an unasked `fs/read_text_file`).
            return (Vec::new(), location);
        }
        let content = match call.name.as_str() {
            EDIT => match self.edit_of(&path, args).await {
                Ok((old, new)) => vec![Diff::new(path.into_path(), new).old_text(old).into()],
                Err(_) => Vec::new(),
            },
            WRITE => {
                let old = self.read_text(&path).await.ok();
                let new = args
                    .get("content")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                vec![Diff::new(path.into_path(), new).old_text(old).into()]
            }
            _ => Vec::new(),
        };
        (content, location)
    }

    /// Remembers the call id of a `run_command` call, for the terminal it creates.
    pub(crate) fn expect_run(&self, call: &ToolCall) {
        let arguments = call.arguments.to_string();
        self.state
            .with(|state| state.expect_run(arguments, call.id.clone()));
    }

    /// The id of the `run_command` call with these arguments the hook saw.
    pub(crate) fn take_run(&self, args: &Value) -> Option<String> {
        let arguments = args.to_string();
        self.state.with(|state| state.take_run(&arguments))
    }
}

/// A blocking file operation off the async runtime.
async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ToolExecError> {
    match tokio::task::spawn_blocking(op).await {
        Ok(result) => Ok(result?),
        Err(error) => Err(format!("file operation failed: {error}").into()),
    }
}
