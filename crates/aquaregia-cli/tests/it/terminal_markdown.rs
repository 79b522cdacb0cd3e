//! The answer's Markdown is rendered on a terminal (headings, bold, code, lists styled, prose
//! wrapped to the width) and left as written when stdout is piped or `NO_COLOR` is set.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, on_pty, run, use_mock};
use tokio::io::AsyncReadExt;

/// Streamed in pieces that split lines and markup.
const PIECES: &[&str] = &[
    "# Ti",
    "tle\nSome **bo",
    "ld** and `code`.\n\n- first\n",
    "- second item that is long enough to wrap on a narrow screen\n```sh\necho **raw**\n```\nDone.",
];

fn answer() -> String {
    PIECES.concat()
}

async fn screen_of_run(no_color: bool) -> (Option<i32>, String) {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text_stream(PIECES)]).await;
    let mut command = cli(&scratch);
    command.args(["run", "Hello?"]);
    use_mock(&mut command, &model);
    let mut pty = on_pty(&command, 40);
    if no_color {
        pty.env("NO_COLOR", "1");
    }
    let mut child = pty.spawn().expect("start script");
    let mut screen = child.stdout.take().expect("piped stdout");
    let mut seen = Vec::new();
    tokio::time::timeout(common::BOUND, screen.read_to_end(&mut seen))
        .await
        .expect("the run ends")
        .expect("read the pty output");
    let status = child.wait().await.expect("wait for script");
    (status.code(), String::from_utf8_lossy(&seen).into_owned())
}

#[tokio::test]
async fn markdown_is_rendered_on_a_terminal() {
    let (code, screen) = screen_of_run(false).await;
    assert_eq!(code, Some(0), "{screen}");
    // A level-1 heading is bold and underlined, without its `#`.
    assert!(screen.contains("\x1b[1;4mTitle\x1b[0m"), "{screen:?}");
    assert!(
        screen.contains("Some \x1b[1mbold\x1b[0m and \x1b[36mcode\x1b[0m."),
        "{screen:?}"
    );
    assert!(screen.contains("• first"), "{screen:?}");
    // Wrapped to the 40 columns, with a hanging indent.
    assert!(
        screen.contains("• second item that is long enough to\r\n  wrap on a narrow screen"),
        "{screen:?}"
    );
    // Code is shown as written.
    assert!(screen.contains("\x1b[36mecho **raw**\x1b[0m"), "{screen:?}");
    // The last line, which had no newline, is rendered too.
    assert!(screen.contains("\x1b[JDone.\r\n"), "{screen:?}");
}

#[tokio::test]
async fn markdown_stays_raw_with_no_color() {
    let (code, screen) = screen_of_run(true).await;
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        screen.contains(&format!("{}\r\n", answer().replace('\n', "\r\n"))),
        "{screen:?}"
    );
    assert!(!screen.contains("\x1b[1m"), "{screen:?}");
}

#[tokio::test]
async fn markdown_stays_raw_when_piped() {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text_stream(PIECES)]).await;
    let mut command = cli(&scratch);
    command.args(["run", "Hello?"]).env_remove("NO_COLOR");
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, format!("{}\n", answer()));
}
