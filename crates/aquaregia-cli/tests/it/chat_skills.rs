//! Skills in the CLI: `chat`'s `/help` lists the project's and the user's skills, `/<skill>
//! task` runs a turn starting with the skill's instructions, a broken skill is a warning, and
//! `run` offers the model the skill tool.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names};
use common::{Scratch, cli, run, transcript, use_mock};

const RELEASE_BODY: &str = "RELEASE-BODY: list every merged change under its heading.";

fn skills(scratch: &Scratch) {
    scratch.write(
        ".aquaregia/skills/release-notes/SKILL.md",
        &format!(
            "---\nname: release-notes\ndescription: Writes release notes.\nargument-hint: <version>\n---\n{RELEASE_BODY}\n"
        ),
    );
    scratch.write(
        "xdg/aquaregia/skills/tidy/SKILL.md",
        "---\nname: tidy\ndescription: Tidies the imports of a file.\n---\nTIDY-BODY\n",
    );
    scratch.write(
        ".aquaregia/skills/broken/SKILL.md",
        "---\nname: broken\n---\nno description\n",
    );
}

#[tokio::test]
async fn chat_help_lists_the_skills_and_a_skill_command_runs_a_turn_with_it() {
    let scratch = Scratch::new();
    skills(&scratch);
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Notes written."])]).await;
    let mut command = cli(&scratch);
    command.arg("chat");
    use_mock(&mut command, &model);
    let outcome = run(command, "/help\n/release-notes 1.2.0\n").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Notes written.\n", "{outcome:?}");
    let stderr = &outcome.stderr;
    assert!(stderr.contains("\nSkills:\n"), "{stderr}");
    assert!(
        stderr.contains("/release-notes <version>  Writes release notes."),
        "{stderr}"
    );
    assert!(
        stderr.contains("/tidy [task]  Tidies the imports of a file."),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning: skill ")
            && stderr.contains("broken is ignored: the frontmatter has no `description`"),
        "{stderr}"
    );

    let requests = model.bodies();
    assert_eq!(requests.len(), 1);
    let turn = transcript(&requests[0]);
    assert_eq!(turn.len(), 1, "{turn:?}");
    assert!(turn[0].1.contains(RELEASE_BODY), "{turn:?}");
    assert!(turn[0].1.ends_with("1.2.0"), "{turn:?}");
    assert!(!requests[0].to_string().contains("TIDY-BODY"));
    assert!(tool_names(&requests[0]).contains(&"skill".to_owned()));
}

#[tokio::test]
async fn run_offers_the_skill_tool_with_names_and_descriptions_only() {
    let scratch = Scratch::new();
    skills(&scratch);
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Done."])]).await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Write the notes."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let requests = model.bodies();
    let tools = requests[0]["tools"].as_array().unwrap();
    let skill = tools
        .iter()
        .find(|tool| tool["function"]["name"] == "skill")
        .unwrap_or_else(|| panic!("no skill tool: {tools:?}"));
    let description = skill["function"]["description"].as_str().unwrap();
    assert!(
        description.contains(
            "- release-notes: Writes release notes.\n- tidy: Tidies the imports of a file."
        ),
        "{description}"
    );
    let all = requests[0].to_string();
    assert!(
        !all.contains("RELEASE-BODY") && !all.contains("TIDY-BODY"),
        "{all}"
    );
}
