//! `session/load` replays a turn as the client saw it live: each tool call ends with the same
//! title (its arguments included), kind, status (a refusal `failed`, not `completed`),
//! content and raw output; the plan `update_plan` showed is shown again; the text is the same.
//! A plan-mode refusal tells the model the truth (plan mode), not that the user refused.

use crate::support;

use std::sync::Arc;

use serde_json::{Map, Value, json};

use aquaregia::FileSessionStore;
use aquaregia_test_support::processes::{assert_no_process_left, marker};
use support::model::{Model, transcript};
use support::raw::{RawClient, ok};
use support::scripts::marked_toolbox;
use support::{BOUND, updates};

/// What a client shows of a session's updates: each tool call's fields merged in order (by
/// id, in order of appearance), the plans, and the agent's text.
#[derive(Debug, PartialEq)]
struct Shown {
    calls: Vec<(String, Map<String, Value>)>,
    plans: Vec<Value>,
    text: String,
}

fn shown(updates: &[Value]) -> Shown {
    let mut calls: Vec<(String, Map<String, Value>)> = Vec::new();
    let mut plans = Vec::new();
    let mut text = String::new();
    for update in updates {
        match update["sessionUpdate"].as_str() {
            Some("tool_call" | "tool_call_update") => {
                let id = update["toolCallId"].as_str().unwrap().to_owned();
                let index = match calls.iter().position(|(known, _)| *known == id) {
                    Some(index) => index,
                    None => {
                        calls.push((id, Map::new()));
                        calls.len() - 1
                    }
                };
                for key in [
                    "title",
                    "kind",
                    "status",
                    "rawInput",
                    "rawOutput",
                    "content",
                ] {
                    if let Some(value) = update.get(key) {
                        calls[index].1.insert(key.to_owned(), value.clone());
                    }
                }
            }
            Some("plan") => plans.push(update["entries"].clone()),
            Some("agent_message_chunk") => {
                text.push_str(update["content"]["text"].as_str().unwrap_or_default());
            }
            _ => {}
        }
    }
    Shown { calls, plans, text }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_session_shows_what_the_live_one_showed() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let store = Arc::new(FileSessionStore::new(dir.path()));
    let model = Model::new();
    let agent = || {
        model
            .agent()
            .session_store(store.clone())
            .editor_tools(true)
            .trust_server("box")
    };
    let live = RawClient::connect(agent());
    live.initialize().await;
    // `echo` is allowed, `write_note` refused by the user.
    live.set_handler(|request| {
        (request["method"] == "session/request_permission").then(|| {
            let option = if request["params"]["toolCall"]["toolCallId"] == "call-2" {
                "allow_once"
            } else {
                "reject_once"
            };
            ok(
                request,
                json!({"outcome": {"outcome": "selected", "optionId": option}}),
            )
        })
    });
    let marker = marker("replay");
    let session = live
        .new_session("/tmp", json!([marked_toolbox("box", &marker)]))
        .await;

    let plan = json!({"entries": [
        {"content": "Look around", "status": "in_progress", "priority": "high"},
        {"content": "Write it down", "status": "pending", "priority": "low"}
    ]});
    model
        .tool_call("call-1", "update_plan", plan)
        .tool_call("call-2", "box__echo", json!({"text": "hello there"}))
        .tool_call("call-3", "box__write_note", json!({"text": "refused"}))
        .text("Done.");
    let answer = live.prompt(&session, "Plan, echo and write").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    // In plan mode a call that is not read-only is refused by the mode.
    let set = live
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        )
        .await;
    assert!(set.get("result").is_some(), "{set}");
    model
        .tool_call("call-4", "box__write_note", json!({"text": "in plan mode"}))
        .text("Planned.");
    let answer = live.prompt(&session, "Write in plan mode").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let told = transcript(model.requests().last().unwrap());
    let plan_refusal = told.split("call-4").last().unwrap_or_default().to_owned();
    assert!(
        plan_refusal.contains("plan mode") && !plan_refusal.contains("the user rejected"),
        "{plan_refusal}"
    );
    let seen_live = shown(&updates(&live.log(), &session));
    live.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;

    let reloaded = RawClient::connect(agent());
    reloaded.initialize().await;
    let loaded = reloaded
        .request(
            "session/load",
            json!({"sessionId": session, "cwd": "/tmp",
                   "mcpServers": [marked_toolbox("box", &marker)]}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    let seen_again = shown(&updates(&reloaded.log(), &session));
    reloaded.finish().await.unwrap();
    assert_no_process_left(&marker, BOUND).await;

    // What the live turn showed, to be sure the comparison compares something.
    assert_eq!(seen_live.calls.len(), 4, "{seen_live:#?}");
    let statuses: Vec<&Value> = seen_live.calls.iter().map(|(_, c)| &c["status"]).collect();
    assert_eq!(
        statuses,
        ["completed", "completed", "failed", "failed"],
        "{seen_live:#?}"
    );
    assert_eq!(seen_live.calls[1].1["title"], "echo: hello there");
    assert_eq!(seen_live.plans.len(), 1, "{seen_live:#?}");
    assert_eq!(seen_live.text, "Done.Planned.");

    assert_eq!(seen_again, seen_live);
}
