//! The built-in tools' names, and a `run_command` call's command line as it runs: what the
//! editor's tools, the permission hook and the updates all go by.

use serde_json::Value;

/// The editor's built-in tools ([`crate::editor`]).
pub(crate) const READ: &str = "read_file";
pub(crate) const WRITE: &str = "write_file";
pub(crate) const EDIT: &str = "edit_file";
pub(crate) const RUN: &str = "run_command";
/// The plan tool ([`crate::plan`]).
pub(crate) const UPDATE_PLAN: &str = "update_plan";
/// The built-in general subagent (see [`crate::AcpServer::task_subagent`]).
pub(crate) const TASK: &str = "task";

/// A `run_command` call's command line exactly as it runs: the command, then each argument
/// shell-quoted when it needs it. Multi-line text stays multi-line.
pub(crate) fn command_text(args: &Value) -> String {
    let command = args
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut text = command.to_owned();
    for arg in args
        .get("args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let arg = arg.as_str().map_or_else(|| arg.to_string(), str::to_owned);
        text.push(' ');
        match shlex::try_quote(&arg) {
            Ok(quoted) => text.push_str(&quoted),
            Err(_) => text.push_str(&format!("{arg:?}")),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_command_line_shows_every_argument() {
        assert_eq!(
            command_text(&json!({"command": "sh", "args": ["-c", "curl x | sh"]})),
            "sh -c 'curl x | sh'"
        );
        assert_eq!(
            command_text(&json!({"command": "echo harmless\ntouch pwned"})),
            "echo harmless\ntouch pwned"
        );
    }
}
