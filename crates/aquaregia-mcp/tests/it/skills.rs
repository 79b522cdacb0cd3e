//! MCP servers' skills (the skills extension, SEP-2640): listed through `skills/list` (or, on a
//! server that only lists `skill://` resources, `resources/list`) without reading a file, and
//! read through `resources/read` when used, confined to the skill's folder.

use aquaregia::{SkillError, SkillOrigin};
use aquaregia_mcp as mcp;
use aquaregia_test_support::mcp_servers::skills_server::{CHECKLIST, DEPLOY_BODY, SkillsServer};

async fn toolset(server: &SkillsServer) -> mcp::McpToolset {
    let connection = mcp::connect(server.serve_duplex()).await.unwrap();
    mcp::McpToolset::builder()
        .connection("ops", connection)
        .connect()
        .await
        .unwrap()
}

#[tokio::test]
async fn skills_of_a_server_with_the_extension_are_listed_then_read_on_use() {
    let server = SkillsServer::extension();
    let toolset = toolset(&server).await;
    let skills = toolset.skills().await;
    assert!(skills.issues().is_empty(), "{:?}", skills.issues());
    let listed: Vec<(&str, &str)> = skills
        .iter()
        .map(|skill| (skill.name(), skill.description()))
        .collect();
    assert_eq!(
        listed,
        [
            ("deploy", "Deploys the service. Use when asked to ship."),
            ("review", "Reviews a change."),
        ]
    );
    let deploy = skills.get("deploy").unwrap();
    assert_eq!(
        deploy.origin(),
        &SkillOrigin::McpServer {
            server: "ops".into(),
            uri: "skill://deploy/SKILL.md".into()
        }
    );
    assert_eq!(
        skills.get("review").unwrap().frontmatter()["license"],
        "MIT"
    );
    // Listing reads no file: the instructions come only when the skill is used.
    assert_eq!(server.reads(), 0);

    let loaded = deploy.load().await.unwrap();
    assert!(loaded.contains(DEPLOY_BODY), "{loaded}");
    assert!(!loaded.contains("description:"), "{loaded}");
    assert!(loaded.contains("- references/checklist.md"), "{loaded}");
    assert_eq!(server.reads(), 1);
    assert_eq!(
        deploy.read_file("references/checklist.md").await.unwrap(),
        CHECKLIST
    );
    for outside in [
        "../review/SKILL.md",
        "/etc/passwd",
        "skill://review/SKILL.md",
        "./x",
    ] {
        assert!(
            matches!(
                deploy.read_file(outside).await.unwrap_err(),
                SkillError::OutsideSkill { .. }
            ),
            "{outside}"
        );
    }
    assert!(matches!(
        deploy.read_file("missing.md").await.unwrap_err(),
        SkillError::NoFile { .. }
    ));
    assert_eq!(server.reads(), 2);
    toolset.close().await;
}

#[tokio::test]
async fn skill_resources_of_a_server_without_the_extension_are_listed_too() {
    let server = SkillsServer::resources_only();
    let toolset = toolset(&server).await;
    let skills = toolset.skills().await;
    let names: Vec<&str> = skills.iter().map(|skill| skill.name()).collect();
    assert_eq!(names, ["deploy", "review"]);
    let loaded = skills.get("deploy").unwrap().load().await.unwrap();
    assert!(loaded.contains(DEPLOY_BODY), "{loaded}");
    // With no manifest, any file of the folder can be asked for; the server says if it exists.
    assert_eq!(
        skills
            .get("deploy")
            .unwrap()
            .read_file("references/checklist.md")
            .await
            .unwrap(),
        CHECKLIST
    );
    let missing = skills
        .get("deploy")
        .unwrap()
        .read_file("missing.md")
        .await
        .unwrap_err();
    assert!(matches!(missing, SkillError::Source { .. }), "{missing:?}");
    toolset.close().await;
}
