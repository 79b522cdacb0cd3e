//! `aquaregia run` reads its prompt from stdin (`-`, or nothing but a pipe), and appends piped
//! stdin to a prompt argument as context.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, transcript, use_mock};

async fn prompt_sent(args: &[&str], stdin: &str) -> (common::Outcome, Vec<(String, String)>) {
    let scratch = Scratch::new();
    let model = MockServer::with_replies(vec![Reply::text_stream(&["ok"])]).await;
    let mut command = cli(&scratch);
    command.arg("run").args(args);
    use_mock(&mut command, &model);
    let outcome = run(command, stdin).await;
    let sent = model.bodies().first().map(transcript).unwrap_or_default();
    (outcome, sent)
}

fn user(text: &str) -> Vec<(String, String)> {
    vec![("user".to_owned(), text.to_owned())]
}

#[tokio::test]
async fn a_dash_reads_the_prompt_from_stdin() {
    let (outcome, sent) = prompt_sent(&["-"], "Summarise this.\nIt has two lines.\n").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "ok\n");
    assert_eq!(sent, user("Summarise this.\nIt has two lines."));
}

#[tokio::test]
async fn no_argument_with_a_pipe_reads_stdin() {
    let (outcome, sent) = prompt_sent(&[], "What is 2 + 2?").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(sent, user("What is 2 + 2?"));
}

#[tokio::test]
async fn piped_stdin_with_an_argument_is_context() {
    let (outcome, sent) = prompt_sent(&["why did this fail?"], "error: disk full\n").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(sent, user("why did this fail?\n\nerror: disk full"));
}

#[tokio::test]
async fn an_empty_stdin_prompt_is_an_error() {
    let (outcome, sent) = prompt_sent(&["-"], "  \n").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert_eq!(
        outcome.stderr,
        "error: the prompt read from stdin is empty\n"
    );
    assert!(sent.is_empty());
}
