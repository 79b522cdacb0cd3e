//! Skills through the official TypeScript SDK client against the binary: the project's and the
//! user's skills are announced as slash commands (`available_commands_update`, with their
//! descriptions and an input hint), `/skill task` starts the turn with the skill's
//! instructions, and only names and descriptions reach the model until a skill is used.

use serde_json::{Value, json};

use aquaregia_test_support::mock_model::{Reply, content_text, tool_results};

use crate::acp_typescript_sdk::Drive;

const RELEASE_BODY: &str = "RELEASE-BODY: list every merged change under its heading.";
const TIDY_BODY: &str = "TIDY-BODY: sort the imports.";

fn write_skill(root: &std::path::Path, name: &str, frontmatter: &str, body: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\n{frontmatter}\n---\n{body}\n"),
    )
    .unwrap();
}

/// The last `available_commands_update` the client got, as (name, description, hint).
fn commands(report: &Value) -> Vec<(String, String, String)> {
    let update = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|u| u["update"]["sessionUpdate"] == "available_commands_update")
        .unwrap_or_else(|| panic!("no available_commands_update: {report:#}"));
    update["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|command| {
            (
                command["name"].as_str().unwrap().to_owned(),
                command["description"].as_str().unwrap().to_owned(),
                command["input"]["hint"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn skills_are_slash_commands_and_load_only_when_used_under_the_typescript_sdk() {
    let drive = Drive::new("ts-skills").await;
    let cwd = drive.project();
    write_skill(
        &cwd.join(".aquaregia/skills"),
        "release-notes",
        "description: Writes release notes from the merged changes.\nargument-hint: <version>",
        RELEASE_BODY,
    );
    std::fs::write(
        cwd.join(".aquaregia/skills/release-notes/template.md"),
        "## Changes",
    )
    .unwrap();
    // The user's skills, under $XDG_CONFIG_HOME (the driver points it into the scratch dir).
    write_skill(
        &drive.root().join("xdg/aquaregia/skills"),
        "tidy",
        "description: Tidies the imports of a file.",
        TIDY_BODY,
    );
    drive
        .mock
        .push(Reply::text("Notes written."))
        .push(Reply::tool_call(
            "call-skill",
            "skill",
            json!({"name": "tidy"}),
        ))
        .push(Reply::text("Tidied."));
    let plan = json!({
        "steps": [
            {"op": "new", "cwd": cwd},
            {"op": "prompt", "session": 0, "text": "/release-notes 1.2.0"},
            {"op": "prompt", "session": 0, "text": "Tidy main.rs"},
        ],
    });
    let report = drive.run(&plan, &[]).await;

    let commands = commands(&report);
    let find = |name: &str| {
        commands
            .iter()
            .find(|(known, _, _)| known == name)
            .unwrap_or_else(|| panic!("no /{name}: {commands:?}"))
            .clone()
    };
    assert_eq!(
        find("release-notes"),
        (
            "release-notes".into(),
            "Writes release notes from the merged changes.".into(),
            "<version>".into()
        )
    );
    assert_eq!(
        find("tidy"),
        (
            "tidy".into(),
            "Tidies the imports of a file.".into(),
            "task for the skill".into()
        )
    );
    // The built-ins are still there.
    find("clear");

    let bodies = drive.mock.bodies();
    assert_eq!(bodies.len(), 3, "{report:#}");
    // `/release-notes 1.2.0`: the turn starts with the skill's instructions, then the task.
    let messages = bodies[0]["messages"].as_array().unwrap();
    let user = messages.iter().rfind(|m| m["role"] == "user").unwrap();
    let text = content_text(user);
    assert!(text.contains(RELEASE_BODY), "{text}");
    assert!(text.contains("- template.md"), "{text}");
    assert!(text.trim_end().ends_with("1.2.0"), "{text}");
    // The other skill is only named and described, in the skill tool.
    let all = bodies[0].to_string();
    assert!(!all.contains("TIDY-BODY"), "{all}");
    let skill_tool = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "skill")
        .unwrap_or_else(|| panic!("no skill tool: {all}"));
    let description = skill_tool["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("- tidy: Tidies the imports of a file."),
        "{description}"
    );

    // The model loads `tidy` itself: read-only, so no permission question, and the body
    // comes back as the call's result.
    assert!(!bodies[1].to_string().contains("TIDY-BODY"));
    let results = tool_results(&bodies[2]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, "call-skill");
    assert!(results[0].1.contains(TIDY_BODY), "{results:?}");
    assert!(
        report["permissions"].as_array().unwrap().is_empty(),
        "{report:#}"
    );
}
