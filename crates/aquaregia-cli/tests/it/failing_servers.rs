//! A server that fails to start is reported and left out; the run answers with the others'
//! tools. `--strict` makes it all or nothing again.

use crate::common;

use aquaregia_test_support::mock_model::{MockServer, Reply, tool_names};
use common::{Scratch, cli, run, test_server_entry, use_mock};
use serde_json::json;

fn config(scratch: &Scratch) {
    scratch.config(&json!({
        "broken": {"command": "aquaregia-no-such-program-xyz"},
        "test": test_server_entry(),
    }));
}

#[tokio::test]
async fn the_other_servers_tools_still_answer() {
    let scratch = Scratch::new();
    config(&scratch);
    let model = MockServer::with_replies(vec![
        Reply::tool_stream(&[("call_1", "test__greet", json!({"name": "Ann"}))]),
        Reply::text_stream(&["Greeted."]),
    ])
    .await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "Greet Ann."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Greeted.\n");
    assert!(
        outcome
            .stderr
            .contains("✗ server `broken` is unavailable: "),
        "{outcome:?}"
    );
    let requests = model.bodies();
    let names = tool_names(&requests[0]);
    assert!(names.contains(&"test__greet".to_owned()), "{names:?}");
    assert!(names.iter().all(|name| !name.starts_with("broken")));
    assert_eq!(
        aquaregia_test_support::mock_model::tool_results(&requests[1])[0].1,
        "Hello, Ann."
    );
}

#[tokio::test]
async fn strict_stops_before_the_model_is_called() {
    let scratch = Scratch::new();
    config(&scratch);
    let model = MockServer::with_replies(vec![Reply::text_stream(&["never"])]).await;
    let mut command = cli(&scratch);
    command.args(["run", "--yes", "--strict", "Greet Ann."]);
    use_mock(&mut command, &model);
    let outcome = run(command, "").await;

    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(outcome.stderr.contains("broken"), "{outcome:?}");
    assert_eq!(model.request_count(), 0);
}
