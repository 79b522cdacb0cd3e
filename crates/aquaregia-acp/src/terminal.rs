//! `run_command`: in the editor's terminal (`terminal/create`, shown as terminal content,
//! killed and released if the prompt is cancelled), or as a local process in the cwd, in a
//! process group of its own that ends with the call. Locally the command line runs in
//! `sh -c` (as in an editor's terminal), `args` quoted and appended, through the sandbox
//! launcher when one is configured ([`crate::Sandbox`]).

use std::process::Stdio;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, KillTerminalRequest, ReleaseTerminalRequest, SessionUpdate, Terminal,
    TerminalId, TerminalOutputRequest, ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
    WaitForTerminalExitRequest,
};
use aquaregia::ToolExecError;
use aquaregia_mcp::process::ProcessGroup;
use serde_json::Value;

use crate::editor::Editor;
use crate::updates;

/// The most output kept (the tail), for the model and the terminal.
const OUTPUT_LIMIT: u64 = 64 * 1024;

/// A local command's time limit.
const LOCAL_TIMEOUT: Duration = Duration::from_secs(600);

/// The last [`OUTPUT_LIMIT`] bytes `pipe` gives until it closes.
async fn tail(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;

    let limit = OUTPUT_LIMIT as usize;
    let mut kept = Vec::new();
    let Some(mut pipe) = pipe else {
        return kept;
    };
    let mut chunk = vec![0; 16 * 1024];
    while let Ok(read) = pipe.read(&mut chunk).await {
        if read == 0 {
            break;
        }
        kept.extend_from_slice(&chunk[..read]);
        if kept.len() > 2 * limit {
            kept.drain(..kept.len() - limit);
        }
    }
    if kept.len() > limit {
        kept.drain(..kept.len() - limit);
    }
    kept
}

/// Kills and releases the editor's terminal if the call is dropped before it ended (the
/// prompt was cancelled).
struct TerminalGuard<'a> {
    editor: &'a Editor,
    id: Option<TerminalId>,
}

impl Drop for TerminalGuard<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            let session = self.editor.session_id.clone();
            self.editor
                .cx
                .send_request(KillTerminalRequest::new(session.clone(), id.clone()))
                .detach();
            self.editor
                .cx
                .send_request(ReleaseTerminalRequest::new(session, id))
                .detach();
        }
    }
}

/// `command` (shell text) with each of `arguments` quoted for `sh` and appended.
fn shell_line(command: &str, arguments: &[String]) -> Result<String, ToolExecError> {
    if arguments.is_empty() {
        return Ok(command.to_owned());
    }
    let quoted = shlex::try_join(arguments.iter().map(String::as_str))
        .map_err(|_| ToolExecError::from("an argument in `args` contains a NUL byte"))?;
    Ok(format!("{command} {quoted}"))
}

impl Editor {
    /// What a local `run_command` call tells the user of its confinement before it runs
    /// (nothing when the editor's terminal runs it).
    pub(crate) fn run_note(&self) -> Option<ToolCallContent> {
        if self.capabilities.terminal {
            return None;
        }
        let note = match &self.sandbox {
            Some(sandbox) => sandbox.note(&self.cwd),
            None => "Runs unconfined: no sandbox is configured for local commands.".to_owned(),
        };
        Some(note.into())
    }

    pub(crate) async fn run(&self, args: &Value) -> Result<String, ToolExecError> {
        let command = args
            .get("command")
            .and_then(Value::as_str)
            .filter(|command| !command.trim().is_empty())
            .ok_or_else(|| ToolExecError::from("`command` (a string) is required"))?
            .to_owned();
        let arguments: Vec<String> = args
            .get("args")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let call_id = self.take_run(args);
        if self.capabilities.terminal {
            self.run_in_terminal(command, arguments, call_id).await
        } else {
            self.run_locally(&command, &arguments).await
        }
    }

    async fn run_in_terminal(
        &self,
        command: String,
        arguments: Vec<String>,
        call_id: Option<String>,
    ) -> Result<String, ToolExecError> {
        let session = self.session_id.clone();
        let request = CreateTerminalRequest::new(session.clone(), command)
            .args(arguments)
            .cwd(self.cwd.clone())
            .output_byte_limit(OUTPUT_LIMIT);
        let created = self
            .cx
            .send_request(request)
            .block_task()
            .await
            .map_err(|error| format!("terminal/create: {}", error.message))?;
        let id = created.terminal_id;
        let mut guard = TerminalGuard {
            editor: self,
            id: Some(id.clone()),
        };
        if let Some(call_id) = call_id {
            let content = vec![ToolCallContent::Terminal(Terminal::new(id.clone()))];
            updates::send(
                &self.cx,
                &session,
                SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                    call_id,
                    ToolCallUpdateFields::new().content(content),
                )),
            );
        }
        let exit = self
            .cx
            .send_request(WaitForTerminalExitRequest::new(session.clone(), id.clone()))
            .block_task()
            .await
            .map_err(|error| format!("terminal/wait_for_exit: {}", error.message))?;
        let output = self
            .cx
            .send_request(TerminalOutputRequest::new(session.clone(), id.clone()))
            .block_task()
            .await
            .map_err(|error| format!("terminal/output: {}", error.message))?;
        guard.id = None;
        self.cx
            .send_request(ReleaseTerminalRequest::new(session, id))
            .detach();
        let status = match (exit.exit_status.exit_code, &exit.exit_status.signal) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(signal)) => format!("killed by {signal}"),
            (None, None) => "ended".to_owned(),
        };
        let truncated = if output.truncated {
            " (output truncated)"
        } else {
            ""
        };
        Ok(format!("{}\n[{status}{truncated}]", output.output))
    }

    async fn run_locally(
        &self,
        command: &str,
        arguments: &[String],
    ) -> Result<String, ToolExecError> {
        let line = shell_line(command, arguments)?;
        let mut process = match &self.sandbox {
            Some(sandbox) => {
                let (launcher, args) = sandbox.command(&self.cwd, &line);
                let mut process = tokio::process::Command::new(launcher);
                process.args(args);
                process
            }
            None => {
                let mut process = tokio::process::Command::new("sh");
                process.arg("-c").arg(&line);
                process
            }
        };
        process
            .current_dir(&self.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // A process group of its own: what the command left running (a background job, a dev
        // server) is ended with the call, however the call ends (done, timed out,
        // cancelled), and the process hook (the CLI's reaper) hears of the group so that it
        // ends it if the agent is killed first.
        let mut group = ProcessGroup::spawn(process, self.on_process.clone())
            .map_err(|error| format!("cannot run `{command}`: {error}"))?;
        let (stdout, stderr) = (group.take_stdout(), group.take_stderr());
        // The call ends when the command exits, not when its pipes close: what it left running
        // in the background holds them open, and is ended (closing them) once it exits.
        let exited = async move {
            let status = group.wait().await;
            drop(group);
            status
        };
        let run = async { tokio::join!(exited, tail(stdout), tail(stderr)) };
        let (status, stdout, stderr) = tokio::time::timeout(LOCAL_TIMEOUT, run)
            .await
            .map_err(|_| format!("`{command}` did not finish within {LOCAL_TIMEOUT:?}"))?;
        let output = std::process::Output {
            status: status?,
            stdout,
            stderr,
        };
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        let limit = OUTPUT_LIMIT as usize;
        if text.len() > limit {
            let mut start = text.len() - limit;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            text = text.split_off(start);
        }
        let status = output.status.code().map_or_else(
            || "killed by a signal".to_owned(),
            |code| format!("exit code {code}"),
        );
        Ok(format!("{text}\n[{status}]"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_onto_the_line() {
        let args = ["a b".to_owned(), "it's".to_owned(), "$HOME".to_owned()];
        assert_eq!(
            shell_line("printf '%s\\n'", &args).unwrap(),
            r#"printf '%s\n' 'a b' "it's" '$HOME'"#
        );
        assert_eq!(shell_line("ls -la", &[]).unwrap(), "ls -la");
        assert!(shell_line("echo", &["a\0b".to_owned()]).is_err());
    }
}
