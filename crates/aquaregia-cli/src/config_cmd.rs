//! `aquaregia config`: the config files read, each server with the file it came from, and the
//! permission rules.

use std::path::Path;

use aquaregia_mcp::McpServerSpec;

use crate::config::Config;
use crate::output::{self, Styles};

pub(crate) fn run(explicit: Option<&Path>) -> anyhow::Result<()> {
    let Some(config) = Config::load(explicit)? else {
        // The same error as naming a server would give: where the files were looked for.
        return Config::require(explicit).map(drop);
    };
    let styles = Styles::stdout();
    let mut text = String::from("files (later ones win):\n");
    for file in config.files() {
        text.push_str(&format!("  {}\n", file.display()));
    }
    text.push_str("servers:\n");
    for (name, spec, file) in config.origins() {
        text.push_str(&format!(
            "  {}  {}  {}\n",
            styles.bold(name),
            describe(spec),
            styles.dim(&format!("from {}", file.display()))
        ));
    }
    for (name, file) in config.disabled() {
        text.push_str(&format!(
            "  {name}  (disabled)  {}\n",
            styles.dim(&format!("from {}", file.display()))
        ));
    }
    if let Some((sessions, file)) = &config.sessions {
        text.push_str(&format!(
            "sessions:\n  {}  {}\n",
            sessions.describe(),
            styles.dim(&format!("from {}", file.display()))
        ));
    }
    if !config.allow.is_empty() || !config.deny.is_empty() {
        text.push_str(&format!(
            "permissions:\n  allow: {}\n  deny: {}\n",
            config.allow.join(", "),
            config.deny.join(", ")
        ));
    }
    output::write_stdout(&output::clean(&text))
}

/// A server in a few words: its command line or URL (never its env or headers).
fn describe(spec: &McpServerSpec) -> String {
    match spec {
        McpServerSpec::Stdio { command, args, .. } => {
            let mut line = vec![command.clone()];
            line.extend(args.iter().cloned());
            format!("stdio: {}", line.join(" "))
        }
        McpServerSpec::Http { url, .. } => format!("http: {url}"),
        McpServerSpec::Sse { url, .. } => format!("sse: {url}"),
        _ => "custom".to_owned(),
    }
}
