//! Nothing a server sends reaches the terminal as a control sequence: escape sequences
//! (OSC 52 writes the clipboard, CSI clears the screen), C1 controls and carriage returns are
//! stripped from descriptions, results and errors.

use crate::common;

use common::{Scratch, cli, run, test_server_command};

async fn aquaregia(args: &[&str]) -> common::Outcome {
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.args(args);
    run(command, "").await
}

fn assert_clean(text: &str) {
    for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\r'] {
        assert!(
            !text.contains(bad),
            "{bad:?} reached the terminal: {text:?}"
        );
    }
}

#[tokio::test]
async fn descriptions_results_and_errors_are_stripped_of_control_sequences() {
    let server = test_server_command();
    let tools = aquaregia(&["mcp", "tools", "--stdio", &server]).await;
    assert_eq!(tools.code, Some(0), "{tools:?}");
    assert_clean(&tools.stdout);
    assert!(tools.stdout.contains("Looks harmless."), "{}", tools.stdout);

    let ok = aquaregia(&["mcp", "call", "--stdio", &server, "spoof"]).await;
    assert_eq!(ok.code, Some(0), "{ok:?}");
    assert_clean(&ok.stdout);
    assert_eq!(ok.stdout, "okred done\n");

    let json = aquaregia(&["mcp", "call", "--stdio", &server, "spoof", "--json"]).await;
    assert_eq!(json.code, Some(0), "{json:?}");
    assert_clean(&json.stdout);

    let failed = aquaregia(&[
        "mcp",
        "call",
        "--stdio",
        &server,
        "spoof",
        r#"{"fail": true}"#,
    ])
    .await;
    assert_eq!(failed.code, Some(1), "{failed:?}");
    assert_clean(&failed.stderr);
    assert!(failed.stderr.contains("okred done"), "{}", failed.stderr);
}
