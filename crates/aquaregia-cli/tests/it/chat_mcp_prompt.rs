//! MCP prompts in `aquaregia chat`: `/prompts` lists them, `/<server>:<prompt> key=value`
//! sends the rendered prompt as a turn.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply};
use common::{Scratch, cli, run, server_everything_entry, transcript, use_mock};
use serde_json::json;

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn a_server_prompt_runs_as_a_slash_command() {
    let scratch = Scratch::new();
    scratch.config(&json!({"everything": server_everything_entry()}));
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Sunny in Oslo."])]).await;
    let mut command = cli(&scratch);
    command.arg("chat");
    use_mock(&mut command, &model);
    let outcome = run(
        command,
        "/prompts\n/everything:args-prompt city=Oslo\n/everything:no-such-prompt\n",
    )
    .await;

    assert!(
        outcome
            .stderr
            .contains("/everything:args-prompt city=… [state=…]"),
        "{outcome:?}"
    );
    assert_eq!(outcome.stdout, "Sunny in Oslo.\n", "{outcome:?}");
    let requests = model.bodies();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        transcript(&requests[0]),
        [("user".to_owned(), "What's weather in Oslo?".to_owned())]
    );
    // Scripted, an unknown prompt ends the chat with an error.
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("MCP server `everything` has no prompt `no-such-prompt`"),
        "{outcome:?}"
    );
}
