//! Permission requests: the `bypass_permissions` mode, and rejections as the model and the
//! client see them.

use crate::support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use aquaregia_test_support::mock_model::{MockServer, Reply, content_text, tool_messages};
use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::raw::{RawClient, ok};
use support::scripts::marked_toolbox;
use support::{BOUND, agent_for, answer_with, permission_requests, tool_updates, updates};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bypass_permissions_mode_runs_tools_without_asking() {
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock));
    answer_with(&client, "allow_once");
    client.initialize().await;
    let marker = marker("bypass");
    let response = client
        .request(
            "session/new",
            json!({"cwd": "/tmp", "mcpServers": [marked_toolbox("box", &marker)]}),
        )
        .await;
    let session = response["result"]["sessionId"].as_str().unwrap().to_owned();
    let modes = &response["result"]["modes"];
    assert_eq!(modes["currentModeId"], "default");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["default", "accept_edits", "bypass_permissions", "plan"]
    );

    // Default mode: asked.
    mock.push(Reply::tool_call(
        "call-1",
        "box__write_note",
        json!({"text": "one"}),
    ))
    .push(Reply::text("Done."));
    let answer = client.prompt(&session, "write").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(permission_requests(&client).len(), 1);

    let unknown = client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "yolo"}),
        )
        .await;
    assert!(unknown.get("error").is_some(), "{unknown}");
    let set = client
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "bypass_permissions"}),
        )
        .await;
    assert_eq!(set["result"], json!({}), "{set}");
    assert!(
        updates(&client.log(), &session)
            .iter()
            .any(|u| u["sessionUpdate"] == "current_mode_update"
                && u["currentModeId"] == "bypass_permissions")
    );

    // Bypass mode: not asked, and the tool runs.
    mock.push(Reply::tool_call(
        "call-2",
        "box__write_note",
        json!({"text": "two"}),
    ))
    .push(Reply::text("Done again."));
    let answer = client.prompt(&session, "write again").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(permission_requests(&client).len(), 1, "no new request");
    let statuses: Vec<Value> = tool_updates(&updates(&client.log(), &session))
        .iter()
        .filter(|u| u["toolCallId"] == "call-2")
        .map(|u| u["status"].clone())
        .collect();
    assert_eq!(statuses, ["pending", "in_progress", "completed"]);
    let requests = mock.bodies();
    assert_eq!(content_text(&tool_messages(&requests[3])[1]), "written");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rejected_call_is_reported_to_the_model_and_fails() {
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock));
    let answers = Arc::new(Mutex::new(vec!["reject_always", "reject_once"]));
    client.set_handler({
        let answers = answers.clone();
        move |request| {
            (request["method"] == "session/request_permission").then(|| {
                let option = answers.lock().unwrap().pop().expect("an answer left");
                ok(
                    request,
                    json!({"outcome": {"outcome": "selected", "optionId": option}}),
                )
            })
        }
    });
    client.initialize().await;
    let marker = marker("reject");
    // The "always" rules are stored in the project (cwd): a fresh directory per run.
    let scratch = tempfile::tempdir().unwrap();
    let project = scratch.path();
    let session = client
        .new_session(
            project.to_str().unwrap(),
            json!([marked_toolbox("box", &marker)]),
        )
        .await;

    // reject_once: the model is told, the update fails, the tool never ran.
    mock.push(Reply::tool_call(
        "call-1",
        "box__write_note",
        json!({"text": "secret"}),
    ))
    .push(Reply::text("Understood."));
    let answer = client.prompt(&session, "write").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = mock.bodies();
    let told = tool_messages(&requests[1]);
    assert_eq!(told.len(), 1);
    assert_eq!(told[0]["tool_call_id"], "call-1");
    let text = content_text(&told[0]);
    assert!(
        text.contains("rejected"),
        "the model sees a rejection: {text}"
    );
    assert!(!text.contains("written"), "the tool did not run: {text}");
    let failed: Vec<Value> = tool_updates(&updates(&client.log(), &session))
        .into_iter()
        .filter(|u| u["toolCallId"] == "call-1")
        .collect();
    let statuses: Vec<&Value> = failed.iter().map(|u| &u["status"]).collect();
    assert_eq!(statuses, ["pending", "failed"], "{failed:#?}");

    // reject_always is remembered for this tool with these arguments: the same call again is
    // rejected without asking.
    mock.push(Reply::tool_call(
        "call-2",
        "box__write_note",
        json!({"text": "again"}),
    ))
    .push(Reply::text("Fine."));
    let answer = client.prompt(&session, "write again").await; // answered reject_always
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    mock.push(Reply::tool_call(
        "call-3",
        "box__write_note",
        json!({"text": "again"}),
    ))
    .push(Reply::text("Fine."));
    let answer = client.prompt(&session, "and again").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(permission_requests(&client).len(), 2);
    let last = tool_messages(&mock.bodies()[5]);
    assert!(
        content_text(last.last().unwrap()).contains("rejected"),
        "{last:?}"
    );
    let stored = std::fs::read_to_string(project.join(".aquaregia/permissions.json")).unwrap();
    assert!(stored.contains("\"reject\""), "{stored}");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

/// A Cedar policy is consulted before the mode: a forbid by argument value refuses the call
/// without asking and the model gets its reason; a permit runs a call without asking; a call
/// it does not match is left to the mode, which asks.
#[cfg(feature = "cedar")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cedar_policy_decides_before_the_mode() {
    use aquaregia::policy::{CedarPolicy, PermissionPolicy};

    let cedar = CedarPolicy::parse(
        r#"
        @reason("secrets are not written down")
        forbid(principal, action == Action::"call", resource)
        when { resource.name == "box__write_note" && context.args.text like "secret*" };

        permit(principal, action == Action::"call", resource)
        when { resource.name == "box__write_note" && context.args.text like "public*" };
        "#,
    )
    .unwrap();
    let mock = MockServer::start().await;
    let client = RawClient::connect(
        agent_for(&mock).permission_policy(PermissionPolicy::new().cedar(cedar)),
    );
    answer_with(&client, "reject_once");
    client.initialize().await;
    let marker = marker("policy");
    let session = client
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;

    mock.push(Reply::tool_call(
        "call-1",
        "box__write_note",
        json!({"text": "secret plans"}),
    ))
    .push(Reply::text("Understood."));
    let answer = client.prompt(&session, "write").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let text = content_text(&tool_messages(&mock.bodies()[1])[0]);
    assert!(text.contains("secrets are not written down"), "{text}");
    assert_ne!(text, "written", "the tool did not run");
    assert_eq!(permission_requests(&client).len(), 0, "not asked");

    mock.push(Reply::tool_call(
        "call-2",
        "box__write_note",
        json!({"text": "public notice"}),
    ))
    .push(Reply::text("Done."));
    client.prompt(&session, "write public").await;
    assert_eq!(
        content_text(&tool_messages(&mock.bodies()[3])[1]),
        "written"
    );
    assert_eq!(
        permission_requests(&client).len(),
        0,
        "allowed without asking"
    );

    mock.push(Reply::tool_call(
        "call-3",
        "box__write_note",
        json!({"text": "other"}),
    ))
    .push(Reply::text("Fine."));
    client.prompt(&session, "write other").await;
    assert_eq!(permission_requests(&client).len(), 1, "left to the mode");
    client.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;
}

/// The text of the agent's messages in `session` so far.
fn agent_text(client: &RawClient, session: &str) -> String {
    updates(&client.log(), session)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn always_allow_is_a_readable_project_rule_not_the_whole_tool() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let cwd = dir.to_str().unwrap().to_owned();
    let mock = MockServer::start().await;
    let client = RawClient::connect(agent_for(&mock).editor_tools(true));
    let answers = Arc::new(Mutex::new(vec![
        "reject_once",
        "reject_once",
        "allow_always",
    ]));
    client.set_handler({
        let answers = answers.clone();
        move |request| {
            (request["method"] == "session/request_permission").then(|| {
                let option = answers.lock().unwrap().pop().expect("an answer left");
                ok(
                    request,
                    json!({"outcome": {"outcome": "selected", "optionId": option}}),
                )
            })
        }
    });
    client.initialize().await;
    let session = client.new_session(&cwd, json!([])).await;
    let run =
        |id: &str, command: &str| Reply::tool_call(id, "run_command", json!({"command": command}));
    mock.push(run("call-1", "echo harmless"))
        .push(run("call-2", "echo other"))
        .push(run("call-3", "echo a; touch pwned"))
        .push(run("call-4", "rm -rf x"))
        .push(Reply::text("Done."));
    let answer = client.prompt(&session, "go").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let asked: Vec<Value> = permission_requests(&client);
    let ids: Vec<&str> = asked
        .iter()
        .map(|r| r["params"]["toolCall"]["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["call-1", "call-3", "call-4"],
        "echo other matched the rule"
    );
    let label = asked[0]["params"]["options"][1]["name"].as_str().unwrap();
    assert!(label.contains("echo"), "the option names the rule: {label}");
    assert!(!dir.join("pwned").exists());

    // Kept in the project: a new session there knows it, and /permissions lists it.
    let again = client.new_session(&cwd, json!([])).await;
    mock.push(run("call-5", "echo third"))
        .push(Reply::text("Done."));
    let answer = client.prompt(&again, "go").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(permission_requests(&client).len(), 3, "not asked again");
    let answer = client.prompt(&again, "/permissions").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let listed = agent_text(&client, &again);
    assert!(listed.contains("1.") && listed.contains("echo"), "{listed}");

    // Cleared, the same call asks again.
    client.prompt(&again, "/permissions clear").await;
    answers.lock().unwrap().push("reject_once");
    mock.push(run("call-6", "echo fourth"))
        .push(Reply::text("Done."));
    client.prompt(&again, "go").await;
    assert_eq!(permission_requests(&client).len(), 4, "asked after clear");
    client.finish().await.unwrap();
}

/// A policy can refuse writes outside the workspace outright: the resolved path is in the
/// context as `inside_workspace` (a symlink out counts as outside).
#[cfg(feature = "cedar")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_policy_refuses_writes_outside_the_workspace_without_asking() {
    use aquaregia::policy::{CedarPolicy, PermissionPolicy};

    let cedar = CedarPolicy::parse(
        r#"
        @reason("no writes outside the workspace")
        forbid(principal, action == Action::"call", resource)
        when { (resource.name == "write_file" || resource.name == "edit_file")
               && context has inside_workspace && !context.inside_workspace };
        "#,
    )
    .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("project")).unwrap();
    std::os::unix::fs::symlink(dir, dir.join("project/up")).unwrap();
    let mock = MockServer::start().await;
    let client = RawClient::connect(
        agent_for(&mock)
            .editor_tools(true)
            .permission_policy(PermissionPolicy::new().cedar(cedar)),
    );
    answer_with(&client, "allow_once");
    client.initialize().await;
    let session = client
        .new_session(dir.join("project").to_str().unwrap(), json!([]))
        .await;
    mock.push(Reply::tool_call(
        "call-1",
        "write_file",
        json!({"path": "up/planted.txt", "content": "x"}),
    ))
    .push(Reply::tool_call(
        "call-2",
        "write_file",
        json!({"path": "kept.txt", "content": "y"}),
    ))
    .push(Reply::text("Done."));
    let answer = client.prompt(&session, "write").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let told = tool_messages(&mock.bodies()[1]);
    assert!(
        content_text(&told[0]).contains("no writes outside the workspace"),
        "{told:?}"
    );
    assert!(!dir.join("planted.txt").exists());
    assert!(
        dir.join("project/kept.txt").exists(),
        "inside is left to the mode"
    );
    let asked = permission_requests(&client);
    assert_eq!(asked.len(), 1, "only the write inside asked: {asked:#?}");
    client.finish().await.unwrap();
}
