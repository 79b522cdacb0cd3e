//! Deferred tools never push a request past 128 tools: always-loaded tools stay, and the
//! tools found first are dropped first.

use crate::common;

use aquaregia::test_utils::{ScriptedModel, ScriptedReply};
use aquaregia::{MAX_REQUEST_TOOLS, SEARCH_TOOLS, ToolDeferral, tool};
use common::scripted_agent;
use serde_json::json;

#[tokio::test]
async fn searches_that_find_too_much_stay_under_the_provider_limit() {
    // 100 "alpha" tools, 100 "beta" tools, and 100 others.
    let tools: Vec<_> = ["alpha", "beta", "gamma"]
        .iter()
        .flat_map(|group| {
            (0..100).map(move |n| {
                tool(format!("{group}_{n:03}"))
                    .description(format!("The {group} operation number {n}"))
                    .execute_raw(|_| async { Ok(json!("ok")) })
            })
        })
        .collect();
    let model = ScriptedModel::new().id("gpt-4o");
    model.push(ScriptedReply::tool_calls([(
        "s1",
        SEARCH_TOOLS,
        json!({"query": "alpha"}),
    )]));
    model.push(ScriptedReply::tool_calls([(
        "s2",
        SEARCH_TOOLS,
        json!({"query": "beta"}),
    )]));
    model.push(ScriptedReply::tool_calls([("c1", "beta_099", json!({}))]));
    model.push(ScriptedReply::text("done"));
    let agent = scripted_agent(&model)
        .tools(tools)
        .tool_deferral(
            ToolDeferral::new()
                .threshold(32)
                .search_results(100)
                .always_load(["gamma_050"]),
        )
        .build()
        .unwrap();
    let output = agent.run("go").await.unwrap();
    assert_eq!(output.text, "done");

    let requests: Vec<Vec<String>> = model
        .requests()
        .iter()
        .map(|request| request.tools.iter().map(|tool| tool.name.clone()).collect())
        .collect();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0], ["gamma_050", SEARCH_TOOLS]);
    for (n, names) in requests.iter().enumerate() {
        assert!(
            names.len() <= MAX_REQUEST_TOOLS,
            "request {n}: {}",
            names.len()
        );
        assert_eq!(names[..2], ["gamma_050", SEARCH_TOOLS], "request {n}");
    }
    // After "alpha": its 100 tools.
    assert_eq!(requests[1].len(), 102);
    assert_eq!(requests[1][2], "alpha_000");
    // After "beta": 200 found, 126 fit; the earliest alpha ones made room.
    assert_eq!(requests[2].len(), MAX_REQUEST_TOOLS);
    assert!(!requests[2].contains(&"alpha_000".to_owned()));
    assert!(requests[2].contains(&"alpha_099".to_owned()));
    assert_eq!(requests[2].last().unwrap(), "beta_099");
    // The found tool ran.
    assert_eq!(output.steps[2].tool_calls[0].result, Ok(json!("ok").into()));
}
