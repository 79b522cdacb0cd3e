//! `aquaregia run` cuts a long tool result to its 25k-token budget before the model sees it,
//! and the model reads the rest with `read_tool_output` without a permission question.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_results};
use common::{Scratch, cli, run, server_everything_entry, use_mock};
use serde_json::json;

#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs the npm/PyPI peers: --features real-peers"
)]
#[tokio::test]
async fn a_long_tool_result_reaches_the_model_cut_and_the_rest_is_readable() {
    let scratch = Scratch::new();
    scratch.config(&json!({"everything": server_everything_entry()}));
    // 200 KB of numbered 8-byte pieces.
    let long: String = (0..25_000).map(|n| format!("{n:07} ")).collect();
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "echo", json!({"message": long}))]),
        Reply::tool_stream(&[(
            "call_2",
            "read_tool_output",
            json!({"id": "call_1", "offset": 6 + 12_500 * 8, "length": 16}),
        )]),
        Reply::text_stream(&["Long."]),
    ])
    .await;
    let mut command = cli(&scratch);
    // `--ask-all`: even the read-only echo is asked about, the built-in never is.
    command.args([
        "run",
        "--ask-all",
        "--answers-from-stdin",
        "Echo something long.",
    ]);
    use_mock(&mut command, &model);
    let outcome = run(command, "y\n").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Long.\n");
    let results = tool_results(&model.bodies()[1]);
    let (id, cut) = &results[0];
    assert_eq!(id, "call_1");
    assert!(cut.len() <= 100_000, "{} bytes", cut.len());
    assert!(cut.len() > 90_000, "{} bytes", cut.len());
    assert!(cut.starts_with("Echo: 0000000 ") && cut.ends_with("0024999 "));
    assert!(cut.contains("read_tool_output {\"id\": \"call_1\""));
    // Only the echo was asked about.
    assert_eq!(outcome.stderr.matches("Allow ").count(), 1, "{outcome:?}");
    let results = tool_results(&model.bodies()[2]);
    assert_eq!(results[1].0, "call_2");
    assert!(
        results[1].1.starts_with("0012500 0012501 \n\n[bytes"),
        "{results:?}"
    );
}
