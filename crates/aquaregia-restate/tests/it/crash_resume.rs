//! Kill the service process in the middle of a run and start it again: the run finishes with
//! the answer an uninterrupted run gives, completed tool calls are not made again, completed
//! model calls are not sent again.

use aquaregia_test_support::mock_model::Reply;

use crate::support::{Setup, answer, call};

/// The replies of one run: two steps calling a tool with a side effect, then the answer.
fn script() -> Vec<Reply> {
    vec![
        call("call-1", "append_line", "one"),
        call("call-2", "append_line", "two"),
        answer("Wrote one and two."),
    ]
}

#[tokio::test(flavor = "multi_thread")]
#[cfg_attr(
    not(feature = "real-peers"),
    ignore = "needs restate-server (scripts/test-deps.sh restate): --features real-peers"
)]
async fn a_run_killed_mid_way_resumes_without_repeating_completed_steps() {
    let mut setup = Setup::start(script()).await;

    // An uninterrupted run, for reference.
    setup.send_run("reference", "Write one, then two.").await;
    let reference = setup.result("reference").await;
    assert_eq!(reference["text"], "Wrote one and two.");
    assert_eq!(reference["steps"], 3);
    assert_eq!(setup.side_effects(), ["one", "two"]);
    assert_eq!(setup.model.request_count(), 3);

    // The same run, killed while its third model call is in flight: both tool calls and
    // two model calls completed by then.
    let [first, second, last] = <[Reply; 3]>::try_from(script()).unwrap();
    for reply in [first, second, Reply::Hang, last] {
        setup.model.push(reply);
    }
    setup.send_run("crashed", "Write one, then two.").await;
    setup.model.wait_requests(6).await;
    assert_eq!(setup.side_effects(), ["one", "two", "one", "two"]);
    setup.service.kill().await;
    setup.service.restart().await;

    let crashed = setup.result("crashed").await;
    assert_eq!(
        crashed, reference,
        "the resumed run ends as the uninterrupted one"
    );
    assert_eq!(
        setup.side_effects(),
        ["one", "two", "one", "two"],
        "no tool call was made again"
    );
    // Only the call in flight at the kill was sent again, as it was.
    let bodies = setup.model.bodies();
    assert_eq!(bodies.len(), 7, "model requests: {bodies:#?}");
    assert_eq!(bodies[5], bodies[6]);
    assert_eq!(
        &bodies[3..6],
        &bodies[0..3],
        "the same requests as the reference run"
    );
}
