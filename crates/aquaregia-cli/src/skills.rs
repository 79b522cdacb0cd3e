//! Skills in `chat` and `run`: the MCP servers', the user's and the project's (more local ones
//! win), offered to the model through the skill tool, and in chat as `/<skill> task`.

use aquaregia::Skills;
use aquaregia_mcp::McpToolset;

use crate::output::{self, Styles};

/// The session's skills; what is wrong with them is printed as warnings.
pub(crate) async fn load(toolset: &McpToolset) -> Skills {
    let mut skills = toolset.skills().await;
    let cwd = std::env::current_dir().unwrap_or_default();
    match tokio::task::spawn_blocking(move || Skills::discover(cwd)).await {
        Ok(local) => skills.merge(local),
        Err(error) => tracing::warn!(%error, "skill discovery failed"),
    }
    let styles = Styles::stderr();
    for issue in skills.issues() {
        eprintln!(
            "{} {}",
            styles.yellow("warning:"),
            output::clean(&issue.to_string())
        );
    }
    skills
}

/// The skills as `/<name> <hint>  <description>` lines, for `/help`.
pub(crate) fn help_lines(skills: &Skills) -> Vec<String> {
    skills
        .iter()
        .map(|skill| {
            let hint = skill.argument_hint().unwrap_or("[task]");
            format!(
                "/{} {}  {}",
                skill.name(),
                output::clean(hint),
                output::clean(skill.description())
            )
        })
        .collect()
}
