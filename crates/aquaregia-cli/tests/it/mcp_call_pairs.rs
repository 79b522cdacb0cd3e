//! `aquaregia mcp call` ergonomics: `key=value` arguments typed by the tool's schema, the
//! closest names for an unknown tool, image results saved with `--save-images`.

use crate::common;

use common::{Scratch, cli, run, server_everything_entry, test_server_command};
use serde_json::json;

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn key_value_pairs_are_typed_by_the_schema() {
    let scratch = Scratch::new();
    scratch.config(&json!({"everything": server_everything_entry()}));
    let mut command = cli(&scratch);
    command.args(["mcp", "call", "everything", "get-sum", "a=2", "b=40"]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert!(outcome.stdout.contains("42"), "{outcome:?}");

    // A number the schema wants, given as a word, is refused before the call.
    let mut command = cli(&scratch);
    command.args(["mcp", "call", "everything", "get-sum", "a=two", "b=40"]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(outcome.stderr.contains("`a` expects number"), "{outcome:?}");
}

#[tokio::test]
async fn an_unknown_tool_suggests_the_closest_names() {
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.args([
        "mcp",
        "call",
        "--stdio",
        &test_server_command(),
        "greeet",
        "name=Ann",
    ]);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("has no tool `greeet`; did you mean `greet`?"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn save_images_writes_image_results_to_files() {
    let scratch = Scratch::new();
    let dir = scratch.path.join("images");
    let mut command = cli(&scratch);
    command
        .args([
            "mcp",
            "call",
            "--stdio",
            &test_server_command(),
            "media",
            "--save-images",
        ])
        .arg(&dir);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    let image = dir.join("image-1.png");
    assert!(
        outcome.stderr.contains("saved image/png image to "),
        "{outcome:?}"
    );
    // 1636 base64 characters are 1227 bytes.
    assert_eq!(std::fs::metadata(&image).unwrap().len(), 1227);
    assert!(std::fs::read(&image).unwrap().iter().all(|byte| *byte == 0));
}
