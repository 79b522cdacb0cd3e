//! Without the client's `fs` and `terminal` capabilities, the built-in tools work on the
//! local machine, confined to the session's `cwd`.

mod support;

use serde_json::json;

use aquaregia_test_support::mock_model::{MockServer, Reply, content_text, tool_messages};
use support::agent_for;
use support::raw::RawClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn local_tools_stay_in_the_working_directory() {
    let dir = std::env::temp_dir().join(format!("aquaregia-local-tools-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("project")).unwrap();
    std::fs::write(dir.join("project/notes.txt"), "alpha\nbeta\n").unwrap();
    std::fs::write(dir.join("secret.txt"), "outside").unwrap();
    let cwd = dir.join("project");

    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock).editor_tools(true));
    client.initialize().await;
    let session = client.new_session(cwd.to_str().unwrap(), json!([])).await;
    client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "bypass_permissions"}),
        )
        .await;

    mock.push(Reply::tool_call(
        "call-1",
        "edit_file",
        json!({"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}),
    ))
    .push(Reply::tool_call(
        "call-2",
        "read_file",
        json!({"path": "../secret.txt"}),
    ))
    .push(Reply::tool_call(
        "call-3",
        "run_command",
        json!({"command": "sh", "args": ["-c", "pwd; cat notes.txt"]}),
    ))
    .push(Reply::text("Done."));
    let answer = client.prompt(&session, "go").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    assert_eq!(
        std::fs::read_to_string(cwd.join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    let requests = mock.bodies();
    let outside = content_text(tool_messages(&requests[2]).last().unwrap());
    assert!(
        outside.contains("outside the working directory"),
        "{outside}"
    );
    assert!(
        !outside.contains("outside\n") && outside != "outside",
        "{outside}"
    );
    let ran = content_text(tool_messages(&requests[3]).last().unwrap());
    assert!(
        ran.contains(cwd.to_str().unwrap()),
        "runs in the cwd: {ran}"
    );
    assert!(
        ran.contains("gamma") && ran.contains("[exit code 0]"),
        "{ran}"
    );
    client.finish().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
