//! Approvals that survive a restart: a run paused on a tool call that needs approval is saved
//! in a session store, and a fresh agent and store resume it with a signed approval bound to
//! that exact call. Edited runs and edited or foreign approvals are refused.

use std::sync::{Arc, Mutex};

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{
    Agent, AgentRun, Approval, ApprovalKey, Error, FileSessionStore, NewSession, NextAction,
    PAUSED_RUN_METADATA_KEY, SessionId, SessionStore, SessionUpdate, StopReason, Tool, ToolCall,
    ToolExecError, tool,
};
use serde_json::{Value, json};

use crate::common::scripted_agent;

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef-test-only";

/// Paths the `delete` tool was run on.
#[derive(Clone, Default)]
struct Deleted(Arc<Mutex<Vec<String>>>);

impl Deleted {
    fn paths(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

fn delete(deleted: &Deleted) -> Tool {
    let deleted = deleted.clone();
    tool("delete")
        .description("Deletes a file")
        .execute_raw(move |args: Value| {
            deleted
                .0
                .lock()
                .unwrap()
                .push(args["path"].as_str().unwrap_or_default().to_owned());
            async { Ok(json!("deleted")) }
        })
}

fn list() -> Tool {
    tool("list")
        .description("Lists files")
        .execute_raw(|_| async { Ok(json!(["a.txt", "b.txt"])) })
}

/// A list call and a delete call in one answer, then the final answer.
fn script() -> ScriptedModel {
    ScriptedModel::new()
        .reply(ScriptedReply::tool_calls([
            ("c1", "list", json!({})),
            ("c2", "delete", json!({"path": "a.txt"})),
        ]))
        .reply(ScriptedReply::text("a.txt is gone"))
}

fn agent_on(model: &ScriptedModel, deleted: &Deleted) -> Agent {
    scripted_agent(model)
        .tool(list())
        .tool(delete(deleted))
        .require_approval(ApprovalKey::new(SECRET).unwrap(), ["delete"])
        .build()
        .unwrap()
}

/// The first process: runs until the run waits for approval, saves it in the store. Returns
/// the session id and the call waiting.
async fn pause(
    model: &ScriptedModel,
    deleted: &Deleted,
    store: &dyn SessionStore,
) -> (SessionId, ToolCall) {
    let session = store.create(NewSession::new("/project")).await.unwrap();
    let agent = agent_on(model, deleted);
    let mut stepper = agent.stepper(agent.start("delete a.txt"));
    // The model call, then the call that needs no approval.
    assert!(!stepper.advance().await.unwrap());
    let NextAction::AwaitApproval { step, calls } = stepper.next_action() else {
        panic!(
            "expected to wait for approval, got {:?}",
            stepper.next_action()
        );
    };
    assert_eq!(step, 0);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "c2");
    let error = stepper.advance().await.unwrap_err();
    assert!(error.to_string().contains("waits for approval"), "{error}");
    stepper.run().save_paused(store, &session.id).await.unwrap();
    (session.id, calls[0].clone())
}

/// The second process: a fresh agent and store load the run, apply `approval`, finish.
async fn resume(
    model: &ScriptedModel,
    deleted: &Deleted,
    store: &dyn SessionStore,
    id: &SessionId,
    approval: &Approval,
) -> Result<aquaregia::AgentOutput, Error> {
    let run = AgentRun::load_paused(store, id)
        .await?
        .expect("a paused run");
    let agent = agent_on(model, deleted);
    let mut stepper = agent.stepper(run);
    stepper.approve(approval).await?;
    while !stepper.advance().await? {}
    stepper.finish().await
}

fn store_in(dir: &tempfile::TempDir) -> FileSessionStore {
    FileSessionStore::new(dir.path().join("sessions"))
}

#[tokio::test]
async fn an_approval_given_after_a_restart_resumes_the_paused_run() {
    let dir = tempfile::tempdir().unwrap();
    let model = script();
    let deleted = Deleted::default();
    let (id, call) = pause(&model, &deleted, &store_in(&dir)).await;
    assert!(
        deleted.paths().is_empty(),
        "nothing deleted before approval"
    );

    // Whoever approves holds the key; the approval travels as JSON.
    let key = ApprovalKey::new(SECRET).unwrap();
    let approval: Approval =
        serde_json::from_str(&serde_json::to_string(&key.approve(&call)).unwrap()).unwrap();

    let output = resume(&model, &deleted, &store_in(&dir), &id, &approval)
        .await
        .unwrap();
    assert_eq!(output.stop_reason, StopReason::Finished);
    assert_eq!(output.text, "a.txt is gone");
    assert_eq!(deleted.paths(), ["a.txt"]);
    let outcomes: Vec<_> = output.steps[0]
        .tool_calls
        .iter()
        .map(|outcome| (outcome.call.id.as_str(), outcome.result.is_ok()))
        .collect();
    assert_eq!(outcomes, [("c1", true), ("c2", true)]);
    // The model saw both results, in call order.
    let requests = model.requests();
    let last = requests.last().unwrap();
    assert_eq!(crate::common::tool_results(last).len(), 2);
}

#[tokio::test]
async fn a_denial_answers_the_model_without_running_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let model = script();
    let deleted = Deleted::default();
    let (id, call) = pause(&model, &deleted, &store_in(&dir)).await;
    let key = ApprovalKey::new(SECRET).unwrap();
    let denial = key.deny(&call, "keep a.txt");
    let output = resume(&model, &deleted, &store_in(&dir), &id, &denial)
        .await
        .unwrap();
    assert!(deleted.paths().is_empty());
    assert_eq!(
        output.steps[0].tool_calls[1].result,
        Err(ToolExecError::Denied("keep a.txt".into()))
    );
}

#[tokio::test]
async fn an_edited_paused_run_or_approval_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = script();
    let deleted = Deleted::default();
    let store = store_in(&dir);
    let (id, call) = pause(&model, &deleted, &store).await;
    let key = ApprovalKey::new(SECRET).unwrap();
    let approval = key.approve(&call);
    let refused = |result: Result<aquaregia::AgentOutput, Error>, what: &str| {
        let error = result.unwrap_err();
        assert!(
            matches!(&error, Error::InvalidRequest(message) if message.contains(what)),
            "expected `{what}`: {error}"
        );
    };

    // Someone with write access to the store points the approved call at another file.
    let saved = store.load(&id).await.unwrap().meta.metadata[PAUSED_RUN_METADATA_KEY].clone();
    let mut edited = saved.clone();
    edited["phase"]["calls"][1]["call"]["arguments"] = json!({"path": "/etc/passwd"});
    let mut update = SessionUpdate::new();
    update
        .metadata
        .insert(PAUSED_RUN_METADATA_KEY.to_owned(), edited.clone());
    store.update(&id, update).await.unwrap();
    refused(
        resume(&model, &deleted, &store_in(&dir), &id, &approval).await,
        "other arguments",
    );

    // ... and edits the approval to match, without the key.
    let mut forged = approval.clone();
    let edited_call: ToolCall =
        serde_json::from_value(edited["phase"]["calls"][1]["call"].clone()).unwrap();
    forged.arguments_sha256 = ApprovalKey::new(b"an attacker's own key, 32 bytes long".to_vec())
        .unwrap()
        .approve(&edited_call)
        .arguments_sha256;
    refused(
        resume(&model, &deleted, &store_in(&dir), &id, &forged).await,
        "not signed with this key",
    );

    // An approval signed with another key, for the call as it now stands.
    let other_key = ApprovalKey::new(b"another key of at least 32 bytes!!".to_vec()).unwrap();
    refused(
        resume(
            &model,
            &deleted,
            &store_in(&dir),
            &id,
            &other_key.approve(&edited_call),
        )
        .await,
        "not signed with this key",
    );

    // The original run back: an approval moved to another call id, or turned from a denial
    // into an approval, does not pass either.
    let mut update = SessionUpdate::new();
    update
        .metadata
        .insert(PAUSED_RUN_METADATA_KEY.to_owned(), saved);
    store.update(&id, update).await.unwrap();
    let mut moved = approval.clone();
    moved.call_id = "c1".into();
    refused(
        resume(&model, &deleted, &store_in(&dir), &id, &moved).await,
        "no tool call `c1`",
    );
    let mut flipped = key.deny(&call, "no");
    flipped.decision = aquaregia::ApprovalDecision::Approved;
    refused(
        resume(&model, &deleted, &store_in(&dir), &id, &flipped).await,
        "not signed with this key",
    );
    assert!(
        deleted.paths().is_empty(),
        "no refused approval ran the call"
    );

    // The genuine approval still works on the genuine run.
    resume(&model, &deleted, &store_in(&dir), &id, &approval)
        .await
        .unwrap();
    assert_eq!(deleted.paths(), ["a.txt"]);
}

#[tokio::test]
async fn a_short_key_is_refused_and_run_stops_at_a_call_needing_approval() {
    let error = ApprovalKey::new(b"short".to_vec()).unwrap_err();
    assert!(error.to_string().contains("at least 32 bytes"), "{error}");
    assert!(!format!("{:?}", ApprovalKey::new(SECRET).unwrap()).contains("0123"));

    let model = script();
    let deleted = Deleted::default();
    let error = agent_on(&model, &deleted)
        .run("delete a.txt")
        .await
        .unwrap_err();
    assert!(error.to_string().contains("waits for approval"), "{error}");
    assert!(deleted.paths().is_empty());
}

#[tokio::test]
async fn a_saved_run_edited_to_skip_its_approval_still_waits() {
    let dir = tempfile::tempdir().unwrap();
    let model = script();
    let deleted = Deleted::default();
    let store = store_in(&dir);
    let (id, call) = pause(&model, &deleted, &store).await;
    let saved = store.load(&id).await.unwrap().meta.metadata[PAUSED_RUN_METADATA_KEY].clone();
    assert_eq!(saved["phase"]["calls"][1]["awaiting_approval"], true);

    // The flag dropped, and an approval of that call signed with another key slipped in.
    let other_key = ApprovalKey::new(b"another key of at least 32 bytes!!".to_vec()).unwrap();
    let mut edited = saved.clone();
    let pending = &mut edited["phase"]["calls"][1];
    pending["awaiting_approval"] = json!(false);
    pending["approval"] = serde_json::to_value(other_key.approve(&call)).unwrap();
    let mut update = SessionUpdate::new();
    update
        .metadata
        .insert(PAUSED_RUN_METADATA_KEY.to_owned(), edited);
    store.update(&id, update).await.unwrap();

    let run = AgentRun::load_paused(&store_in(&dir), &id)
        .await
        .unwrap()
        .unwrap();
    let agent = agent_on(&model, &deleted);
    let mut stepper = agent.stepper(run.clone());
    assert!(
        matches!(stepper.next_action(), NextAction::AwaitApproval { .. }),
        "{:?}",
        stepper.next_action()
    );
    let error = stepper.advance().await.unwrap_err();
    assert!(error.to_string().contains("waits for approval"), "{error}");
    let error = agent.resume(run).await.unwrap_err();
    assert!(error.to_string().contains("waits for approval"), "{error}");
    assert!(deleted.paths().is_empty(), "the call never ran");

    // A genuine approval, kept in the saved run, still counts after another save and load.
    let key = ApprovalKey::new(SECRET).unwrap();
    stepper.approve(&key.approve(&call)).await.unwrap();
    // c1 ran in the first process; c2 is now the only call left, and it is approved: the
    // step is still open until it runs. Save and load once more before running it.
    let saved_again = serde_json::to_string(stepper.run()).unwrap();
    let mut stepper = agent.stepper(serde_json::from_str(&saved_again).unwrap());
    assert!(
        matches!(stepper.next_action(), NextAction::RunTools { ref calls, .. } if calls.len() == 1),
        "{:?}",
        stepper.next_action()
    );
    while !stepper.advance().await.unwrap() {}
    assert_eq!(deleted.paths(), ["a.txt"]);
}
