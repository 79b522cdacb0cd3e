//! A line of stdin that is not UTF-8 is answered with a parse error and `aquaregia acp` keeps
//! serving (the SDK's own reader would end the connection on it).

use crate::common;

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use aquaregia_test_support::mock_model::MockServer;
use common::{BOUND, Scratch, cli, use_mock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_utf8_gets_a_parse_error() {
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.arg("acp");
    use_mock(&mut command, &mock);
    let mut agent = tokio::process::Command::from(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start aquaregia acp");
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap()).lines();

    let mut input = Vec::new();
    input.extend_from_slice(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}})
        .to_string()
        .as_bytes(),
    );
    input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"\xff\xfe\"}\n");
    input.extend_from_slice(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/new",
               "params": {"cwd": scratch.path, "mcpServers": []}})
        .to_string()
        .as_bytes(),
    );
    input.push(b'\n');
    stdin.write_all(&input).await.unwrap();

    let mut answers: Vec<Value> = Vec::new();
    tokio::time::timeout(BOUND, async {
        while answers.len() < 3 {
            let line = stdout
                .next_line()
                .await
                .unwrap()
                .expect("the agent keeps serving");
            answers.push(serde_json::from_str(&line).expect("stdout carries JSON-RPC only"));
        }
    })
    .await
    .expect("three answers in time");
    assert_eq!(answers[0]["id"], 1, "{answers:?}");
    assert_eq!(answers[1]["error"]["code"], -32700, "{answers:?}");
    assert!(answers[1]["id"].is_null(), "{answers:?}");
    assert_eq!(answers[2]["id"], 3, "{answers:?}");
    assert!(answers[2]["result"]["sessionId"].is_string(), "{answers:?}");

    drop(stdin);
    let status = tokio::time::timeout(BOUND, agent.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// A huge line that is not JSON, and a huge request with invalid params, are answered with
/// errors that quote a short start of what was sent, never the whole (20 MiB in must not
/// mean 20 MiB out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_for_huge_bad_input_stay_short() {
    let mock = MockServer::start().await;
    let scratch = Scratch::new();
    let mut command = cli(&scratch);
    command.arg("acp");
    use_mock(&mut command, &mock);
    let mut agent = tokio::process::Command::from(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start aquaregia acp");
    let mut stdin = agent.stdin.take().unwrap();
    let mut stdout = BufReader::new(agent.stdout.take().unwrap()).lines();

    let filler = "x".repeat(4 << 20);
    let mut input = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    .to_string();
    input.push('\n');
    // Not JSON: the closing quote and braces never come.
    input.push_str(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/new\",\"params\":\"{filler}\n"
    ));
    // JSON, but `cwd` is not a path.
    input.push_str(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/new",
               "params": {"cwd": 7, "mcpServers": [], "note": filler}})
        .to_string(),
    );
    input.push('\n');
    let writer = tokio::spawn(async move {
        stdin.write_all(input.as_bytes()).await.unwrap();
        stdin
    });

    let mut answers: Vec<String> = Vec::new();
    tokio::time::timeout(BOUND, async {
        while answers.len() < 3 {
            let line = stdout
                .next_line()
                .await
                .unwrap()
                .expect("the agent keeps serving");
            answers.push(line);
        }
    })
    .await
    .expect("three answers in time");
    let stdin = writer.await.unwrap();
    let parsed: Vec<Value> = answers
        .iter()
        .map(|line| serde_json::from_str(line).expect("JSON-RPC"))
        .collect();
    assert_eq!(parsed[1]["error"]["code"], -32700, "{:.300}", answers[1]);
    assert_eq!(parsed[2]["error"]["code"], -32602, "{:.300}", answers[2]);
    assert_eq!(parsed[2]["id"], 3);
    for answer in &answers[1..] {
        assert!(
            answer.len() < 2048,
            "{} bytes: {:.300}",
            answer.len(),
            answer
        );
    }
    assert!(
        answers[1].contains("xxxx"),
        "quotes the start: {}",
        answers[1]
    );

    drop(stdin);
    let status = tokio::time::timeout(BOUND, agent.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}
