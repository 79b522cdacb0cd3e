//! Agent Skills: discovery from the skill folders (order, clashes, bad skills reported), paths
//! confined to a skill's folder, and progressive disclosure through the `skill` tool.

use std::path::{Path, PathBuf};

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{SKILL_TOOL, SkillError, SkillIssue, SkillOrigin, Skills};
use serde_json::json;

use crate::common::{scripted_agent, tool_results};

/// Writes `<root>/<folder>/SKILL.md` with this frontmatter and body.
fn write_skill(root: &Path, folder: &str, frontmatter: &str, body: &str) -> PathBuf {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\n{frontmatter}\n---\n{body}\n"),
    )
    .unwrap();
    dir
}

fn skill(root: &Path, name: &str, description: &str, body: &str) -> PathBuf {
    write_skill(
        root,
        name,
        &format!("name: {name}\ndescription: {description}"),
        body,
    )
}

fn origin_dir(skills: &Skills, name: &str) -> PathBuf {
    match skills.get(name).unwrap().origin() {
        SkillOrigin::Folder(dir) => dir.clone(),
        other => panic!("not a folder: {other:?}"),
    }
}

#[test]
fn more_local_skill_folders_win_and_clashes_are_reported() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path().canonicalize().unwrap();
    let user = scratch.join("config/aquaregia/skills");
    let project = scratch.join("project");
    let claude = project.join(".claude/skills");
    let native = project.join(".aquaregia/skills");
    skill(&user, "review", "user review", "user body");
    skill(&user, "only-user", "from the user", "u");
    skill(&claude, "review", "claude review", "claude body");
    skill(&claude, "only-claude", "from .claude", "c");
    skill(&native, "review", "project review", "project body");

    let skills = Skills::from_roots([&user, &claude, &native]);
    let names: Vec<&str> = skills.iter().map(|skill| skill.name()).collect();
    assert_eq!(names, ["only-claude", "only-user", "review"]);
    assert_eq!(
        skills.get("review").unwrap().description(),
        "project review"
    );
    assert_eq!(origin_dir(&skills, "review"), native.join("review"));
    assert_eq!(
        skills.issues(),
        [
            SkillIssue::Shadowed {
                name: "review".into(),
                kept: SkillOrigin::Folder(claude.join("review")),
                hidden: SkillOrigin::Folder(user.join("review")),
            },
            SkillIssue::Shadowed {
                name: "review".into(),
                kept: SkillOrigin::Folder(native.join("review")),
                hidden: SkillOrigin::Folder(claude.join("review")),
            },
        ]
    );
    assert!(
        skills.issues()[1]
            .to_string()
            .contains("skill `review` from")
    );

    // The default folders, least local first: the user's, then the project's `.claude`, then
    // its `.aquaregia`.
    let roots = Skills::default_roots(&project);
    let tail: Vec<&PathBuf> = roots.iter().rev().take(2).collect();
    assert_eq!(tail, [&native, &claude]);
    if roots.len() == 3 {
        assert!(roots[0].ends_with("aquaregia/skills"), "{roots:?}");
    }
}

#[test]
fn invalid_skills_are_reported_with_their_reason_and_the_others_still_load() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().canonicalize().unwrap();
    skill(&root, "good", "works", "body");
    write_skill(
        &root,
        "broken-yaml",
        "name: broken-yaml\ndescription: [oops",
        "b",
    );
    write_skill(&root, "no-description", "name: no-description", "b");
    write_skill(
        &root,
        "other-name",
        "name: not-the-folder\ndescription: d",
        "b",
    );
    write_skill(&root, "Bad_Name", "name: Bad_Name\ndescription: d", "b");
    std::fs::create_dir_all(root.join("no-frontmatter")).unwrap();
    std::fs::write(root.join("no-frontmatter/SKILL.md"), "# just text\n").unwrap();
    std::fs::create_dir_all(root.join("lower-case")).unwrap();
    std::fs::write(
        root.join("lower-case/skill.md"),
        "---\nname: lower-case\ndescription: d\n---\n",
    )
    .unwrap();
    // Not a skill (no SKILL.md), and hidden folders: nothing to report.
    std::fs::create_dir_all(root.join("shared")).unwrap();
    write_skill(&root, ".hidden", "oops", "b");

    let skills = Skills::from_roots([&root]);
    let names: Vec<&str> = skills.iter().map(|skill| skill.name()).collect();
    assert_eq!(names, ["good"]);
    let mut reasons: Vec<(String, String)> = skills
        .issues()
        .iter()
        .map(|issue| match issue {
            SkillIssue::Invalid { path, reason } => (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                reason.clone(),
            ),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    reasons.sort();
    let folders: Vec<&str> = reasons.iter().map(|(folder, _)| folder.as_str()).collect();
    assert_eq!(
        folders,
        [
            "Bad_Name",
            "broken-yaml",
            "lower-case",
            "no-description",
            "no-frontmatter",
            "other-name"
        ]
    );
    let reason = |folder: &str| {
        reasons
            .iter()
            .find(|(name, _)| name == folder)
            .map(|(_, reason)| reason.as_str())
            .unwrap()
    };
    assert!(reason("Bad_Name").contains("invalid name"), "{reasons:?}");
    assert!(
        reason("broken-yaml").contains("invalid YAML"),
        "{reasons:?}"
    );
    assert!(
        reason("lower-case").contains("must be named SKILL.md"),
        "{reasons:?}"
    );
    assert!(
        reason("no-description").contains("no `description`"),
        "{reasons:?}"
    );
    assert!(
        reason("no-frontmatter").contains("no frontmatter"),
        "{reasons:?}"
    );
    assert!(
        reason("other-name").contains("not the folder's name"),
        "{reasons:?}"
    );
    let shown = skills.issues()[0].to_string();
    assert!(shown.contains(&root.display().to_string()), "{shown}");
}

#[cfg(unix)]
#[tokio::test]
async fn paths_leading_out_of_a_skill_folder_are_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let scratch = scratch.path().canonicalize().unwrap();
    let outside = scratch.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "TOP SECRET").unwrap();
    let root = scratch.join("skills");
    let dir = skill(&root, "notes", "takes notes", "Read guide.md.");
    std::fs::write(dir.join("guide.md"), "the guide").unwrap();
    std::fs::create_dir_all(dir.join("refs")).unwrap();
    std::fs::write(dir.join("refs/deep.md"), "deep").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), dir.join("secret.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("escape")).unwrap();
    // A skill whose SKILL.md itself leads out of its folder.
    std::fs::create_dir_all(root.join("sneaky")).unwrap();
    std::fs::write(
        outside.join("SKILL.md"),
        "---\nname: sneaky\ndescription: d\n---\nbody\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.join("SKILL.md"), root.join("sneaky/SKILL.md")).unwrap();

    let skills = Skills::from_roots([&root]);
    assert_eq!(skills.len(), 1);
    assert!(
        matches!(&skills.issues()[0], SkillIssue::Invalid { path, reason }
            if path.ends_with("sneaky") && reason.contains("outside the skill's folder")),
        "{:?}",
        skills.issues()
    );
    let notes = skills.get("notes").unwrap();
    assert_eq!(notes.read_file("guide.md").await.unwrap(), "the guide");
    assert_eq!(notes.read_file("refs/deep.md").await.unwrap(), "deep");
    for path in [
        "secret.txt",
        "escape/secret.txt",
        "../../outside/secret.txt",
        "refs/../../../outside/secret.txt",
    ] {
        let error = notes.read_file(path).await.unwrap_err();
        assert!(
            matches!(&error, SkillError::OutsideSkill { skill, path: asked } if skill == "notes" && asked == path),
            "{path}: {error:?}"
        );
    }
    let absolute = outside.join("secret.txt").display().to_string();
    assert!(matches!(
        notes.read_file(&absolute).await.unwrap_err(),
        SkillError::OutsideSkill { .. }
    ));
    assert!(matches!(
        notes.read_file("missing.md").await.unwrap_err(),
        SkillError::NoFile { .. }
    ));
    // The listing leaves out what leads outside.
    let loaded = notes.load().await.unwrap();
    assert!(loaded.contains("- guide.md\n- refs/deep.md"), "{loaded}");
    assert!(!loaded.contains("secret"), "{loaded}");
    assert!(!loaded.contains("escape"), "{loaded}");

    // Through the tool, the model gets the refusal as the call's error.
    let tool = skills.tool().unwrap();
    let refused = tool
        .executor()
        .execute(json!({"name": "notes", "file": "secret.txt"}))
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("outside the folder"),
        "{refused}"
    );
}

const BODY: &str = "STEP-ONE: read the form fields with refs/fields.md.";

#[tokio::test]
async fn only_names_and_descriptions_reach_the_model_until_the_skill_tool_is_called() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().canonicalize().unwrap();
    let dir = skill(
        &root,
        "pdf-forms",
        "Fills PDF forms. Use for any .pdf form.",
        BODY,
    );
    std::fs::create_dir_all(dir.join("refs")).unwrap();
    std::fs::write(dir.join("refs/fields.md"), "FIELD-LIST: name, date").unwrap();
    skill(
        &root,
        "changelog",
        "Writes changelog entries.",
        "CHANGELOG-BODY",
    );
    let skills = Skills::from_roots([&root]);

    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_call(
            "c1",
            SKILL_TOOL,
            json!({"name": "pdf-forms"}),
        ))
        .reply(ScriptedReply::tool_call(
            "c2",
            SKILL_TOOL,
            json!({"name": "pdf-forms", "file": "refs/fields.md"}),
        ))
        .text("filled");
    let agent = scripted_agent(&model)
        .tool(skills.tool().unwrap())
        .build()
        .unwrap();
    let output = agent.run("Fill in form.pdf").await.unwrap();
    assert_eq!(output.text, "filled");

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let first = &requests[0];
    let tool = first
        .tools
        .iter()
        .find(|tool| tool.name == SKILL_TOOL)
        .unwrap();
    assert!(
        tool.description
            .contains("- changelog: Writes changelog entries.\n- pdf-forms: Fills PDF forms. Use for any .pdf form."),
        "{}",
        tool.description
    );
    let first_text = format!(
        "{}{}",
        serde_json::to_string(&first.messages).unwrap(),
        first.instructions.clone().unwrap_or_default()
    );
    assert!(!first_text.contains("STEP-ONE"), "{first_text}");
    assert!(!first_text.contains("CHANGELOG-BODY"));
    assert!(!first_text.contains("FIELD-LIST"));

    let results = tool_results(&requests[1]);
    assert_eq!(results.len(), 1);
    let (id, loaded, is_error) = &results[0];
    assert_eq!((id.as_str(), *is_error), ("c1", false));
    assert!(loaded.contains(BODY), "{loaded}");
    assert!(loaded.contains("- refs/fields.md"), "{loaded}");
    assert!(!loaded.contains("FIELD-LIST"), "{loaded}");
    assert!(
        !serde_json::to_string(&requests[1].messages)
            .unwrap()
            .contains("CHANGELOG-BODY")
    );

    let results = tool_results(&requests[2]);
    assert_eq!(results[1].1, "FIELD-LIST: name, date");

    // `/pdf-forms <task>` from a user: the instructions, then the task.
    let message = skills
        .get("pdf-forms")
        .unwrap()
        .prompt("the tax form")
        .await
        .unwrap();
    let text = message.text();
    assert!(
        text.contains(BODY) && text.ends_with("the tax form"),
        "{text}"
    );
}

#[test]
fn no_skills_no_tool() {
    assert!(Skills::new().tool().is_none());
    let scratch = tempfile::tempdir().unwrap();
    let skills = Skills::from_roots([scratch.path().join("missing")]);
    assert!(skills.is_empty() && skills.issues().is_empty());
}
