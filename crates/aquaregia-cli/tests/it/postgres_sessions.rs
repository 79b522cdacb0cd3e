//! Sessions in PostgreSQL (feature `postgres`): a config file's `"sessions": {"postgres":
//! "${VAR}"}` makes `run`, `chat`, `sessions` and `acp` keep them in a real database (a
//! throwaway cluster, `aquaregia_test_support::postgres`) instead of the data dir; processes
//! racing on one session lose no turn; a store that cannot be opened is a clear error. Skipped,
//! saying so, where PostgreSQL cannot be installed.

use crate::common;

use serde_json::{Value, json};

use aquaregia_test_support::acp_client::RawClient;
use aquaregia_test_support::mock_model::{MockServer, Reply};
use aquaregia_test_support::postgres::{PgCluster, database_name, unreachable_url};
use common::{BOUND, Scratch, cli, run, transcript, use_mock};

/// The variable the config files of these tests take the URL from.
const URL_VAR: &str = "AQUAREGIA_TEST_DATABASE_URL";

/// A scratch dir whose `aquaregia.json` keeps sessions in a fresh database, named through
/// `${AQUAREGIA_TEST_DATABASE_URL}`; the URL.
fn postgres_scratch(tag: &str) -> Option<(Scratch, &'static PgCluster, String)> {
    let cluster = PgCluster::shared()?;
    let url = cluster.database(tag);
    let scratch = Scratch::new();
    scratch.write(
        "aquaregia.json",
        &json!({"sessions": {"postgres": format!("${{{URL_VAR}}}")}}).to_string(),
    );
    Some((scratch, cluster, url))
}

/// `aquaregia <args>` in `scratch` with the database URL in the environment.
fn command(scratch: &Scratch, url: &str, args: &[&str]) -> std::process::Command {
    let mut command = cli(scratch);
    command.args(args).env(URL_VAR, url);
    command
}

#[tokio::test]
async fn run_continue_goes_on_with_a_session_kept_in_postgres() {
    let Some((scratch, cluster, url)) = postgres_scratch("cli_continue") else {
        return;
    };
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["Noted: blue."]),
        Reply::text_stream(&["Blue."]),
    ])
    .await;
    let mut first = command(&scratch, &url, &["run", "My favourite colour is blue."]);
    use_mock(&mut first, &model);
    let outcome = run(first, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");

    let mut again = command(
        &scratch,
        &url,
        &["run", "--continue", "What is my favourite colour?"],
    );
    use_mock(&mut again, &model);
    let outcome = run(again, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Blue.\n");
    let texts: Vec<String> = transcript(&model.bodies()[1])
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert_eq!(
        texts,
        [
            "My favourite colour is blue.",
            "Noted: blue.",
            "What is my favourite colour?"
        ],
        "the earlier turn came from the database"
    );

    let listed = run(command(&scratch, &url, &["sessions", "--json"]), "").await;
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let sessions: Value = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    assert_eq!(sessions[0]["turns"], 2);
    assert_eq!(sessions[0]["title"], "My favourite colour is blue.");
    // In the database, and nowhere else.
    assert_eq!(
        cluster.sql(
            database_name(&url),
            "SELECT count(*) FROM aquaregia_session_turns"
        ),
        "2"
    );
    assert!(!scratch.data_dir().join("sessions").exists());

    let config = run(command(&scratch, &url, &["config"]), "").await;
    assert!(
        config.stdout.contains("sessions:\n  PostgreSQL"),
        "{config:?}"
    );
    assert!(!config.stdout.contains(&url), "the URL is not shown");
}

#[tokio::test]
async fn two_processes_on_one_postgres_session_lose_no_turn() {
    let Some((scratch, _, url)) = postgres_scratch("cli_race") else {
        return;
    };
    // The race's commands come from `cli`, which knows no URL variable: the URL is written in.
    scratch.write(
        "aquaregia.json",
        &json!({"sessions": {"postgres": url}}).to_string(),
    );
    crate::session_continue::two_processes_race(&scratch).await;
}

/// `aquaregia acp` loads a session another process saved, and saves its next turn on top,
/// even when a stored turn no longer decodes (the count it appends on is the stored one, not
/// the number of turns that could be read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_continues_a_postgres_session_past_a_damaged_turn() {
    let Some((scratch, cluster, url)) = postgres_scratch("cli_acp") else {
        return;
    };
    let model = MockServer::with_replies(vec![
        Reply::text_stream(&["One."]),
        Reply::text_stream(&["Two."]),
        Reply::text_stream(&["Three."]),
        Reply::text("Four."),
    ])
    .await;
    for (n, prompt) in ["one", "two", "three"].into_iter().enumerate() {
        let args: &[&str] = if n == 0 {
            &["run", prompt]
        } else {
            &["run", "--continue", prompt]
        };
        let mut turn = command(&scratch, &url, args);
        use_mock(&mut turn, &model);
        let outcome = run(turn, "").await;
        assert_eq!(outcome.code, Some(0), "{outcome:?}");
    }
    let database = database_name(&url);
    let id = cluster.sql(database, "SELECT id FROM aquaregia_sessions");
    cluster.sql(
        database,
        "UPDATE aquaregia_session_turns SET turn = '{\"messages\": 5}' WHERE seq = 1",
    );

    let mut agent = command(&scratch, &url, &["acp"]);
    use_mock(&mut agent, &model);
    let client = RawClient::spawn(tokio::process::Command::from(agent));
    client.initialize().await;
    let loaded = client
        .request(
            "session/load",
            json!({"sessionId": id, "cwd": scratch.path, "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let answer = client.prompt(&id, "four").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let texts: Vec<String> = transcript(&model.bodies()[3])
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert_eq!(texts, ["one", "One.", "three", "Three.", "four"]);
    client.close_write().await;
    assert!(client.wait_exit(BOUND).await.success());

    assert_eq!(
        cluster.sql(
            database,
            "SELECT string_agg(seq::text, ',' ORDER BY seq) FROM aquaregia_session_turns"
        ),
        "0,1,2,3",
        "the turn was saved after the stored ones: {}",
        client.stderr()
    );
    assert_eq!(
        cluster.sql(
            database,
            "SELECT turn->'messages'->0->'content'->0->>'text' FROM aquaregia_session_turns \
             WHERE seq = 3"
        ),
        "four"
    );
    assert_eq!(
        cluster.sql(database, "SELECT turns FROM aquaregia_sessions"),
        "4"
    );
}

#[tokio::test]
async fn a_postgres_store_that_cannot_be_opened_is_a_clear_error() {
    let Some((scratch, _, _)) = postgres_scratch("cli_refused") else {
        return;
    };
    // The variable is not set.
    let mut sessions = cli(&scratch);
    sessions.arg("sessions").env_remove(URL_VAR);
    let outcome = run(sessions, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome.stderr.contains(&format!(
            "aquaregia.json: `sessions.postgres` uses `${{{URL_VAR}}}`, which is not set"
        )),
        "{outcome:?}"
    );

    // Nothing listens there.
    let (_closed, unreachable) = unreachable_url();
    let outcome = run(command(&scratch, &unreachable, &["sessions"]), "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(
        outcome.stderr.contains("cannot open the session store of")
            && outcome
                .stderr
                .contains("cannot connect to PostgreSQL at aquaregia@127.0.0.1:")
            && outcome.stderr.contains("Connection refused"),
        "{outcome:?}"
    );

    // Resuming needs the store; a new run goes on unsaved, saying so.
    let model = MockServer::with_replies(vec![Reply::text_stream(&["Hi."])]).await;
    let mut resume = command(&scratch, &unreachable, &["run", "--continue", "again"]);
    use_mock(&mut resume, &model);
    let outcome = run(resume, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(outcome.stderr.contains("Connection refused"), "{outcome:?}");
    let mut fresh = command(&scratch, &unreachable, &["run", "hello"]);
    use_mock(&mut fresh, &model);
    let outcome = run(fresh, "").await;
    assert_eq!(outcome.code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "Hi.\n");
    assert!(
        outcome
            .stderr
            .contains("this conversation will not be saved: cannot open the session store"),
        "{outcome:?}"
    );

    // The editor's agent does not start on a store it cannot open.
    let mut agent = command(&scratch, &unreachable, &["acp"]);
    use_mock(&mut agent, &model);
    let outcome = run(agent, "").await;
    assert_eq!(outcome.code, Some(1), "{outcome:?}");
    assert!(outcome.stdout.is_empty(), "{outcome:?}");
    assert!(outcome.stderr.contains("Connection refused"), "{outcome:?}");
}
