//! The behaviour every [`SessionStore`] shares, as one suite run against each store: the file
//! store (`crates/aquaregia`) and the Postgres store (`crates/aquaregia-postgres`).
//!
//! A store's test module implements [`StoreFixture`] (fresh, empty storage; a new handle on it
//! as another process would open it) and expands [`session_store_contract!`](crate::session_store_contract) with an
//! expression making one, which writes one `#[tokio::test]` per case of this module. What only
//! one store has (files cut short by a crash, migrations, rows edited by hand) stays in that
//! store's own tests.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aquaregia::{
    ContentPart, Message, NewSession, Role, SessionError, SessionId, SessionQuery, SessionStore,
    SessionTurn, SessionUpdate, StoredSession, ToolCall, ToolOutput, ToolResult, Usage,
};
use serde_json::json;

/// Fresh, empty storage for one test.
pub trait StoreFixture: Sync {
    /// A new handle on this storage, as another process would open it (a new store value:
    /// no cache or connection shared with earlier handles).
    fn open(&self) -> impl Future<Output = Arc<dyn SessionStore>> + Send;
}

/// One `#[tokio::test]` per case of [`session_contract`](crate::session_contract), each run on
/// the fixture `$fixture` makes: an expression of type `impl Future<Output =
/// Option<impl StoreFixture>>` (`None` skips the test, as when PostgreSQL is missing).
#[macro_export]
macro_rules! session_store_contract {
    ($fixture:expr) => {
        $crate::session_store_contract!(@cases $fixture;
            turns_with_tool_calls_survive_a_new_store,
            lists_newest_first_filtered_by_cwd_in_pages,
            metadata_updates_and_deletes_persist,
            ids_are_chosen_or_generated_and_never_reused,
            two_stores_on_one_session_conflict_instead_of_diverging,
            racing_checked_appends_from_two_stores_lose_no_turn,
            unchecked_appends_from_many_stores_all_land,
            any_text_round_trips_exactly,
            a_200_turn_session_loads_in_well_under_a_second,
            a_session_created_with_turns_holds_them_all,
        );
    };
    (@cases $fixture:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let Some(fixture) = $fixture.await else { return };
                $crate::session_contract::$case(&fixture).await;
            }
        )*
    };
}

/// A turn with a prompt, a tool call, its result and an answer.
pub fn tool_turn(prompt: &str) -> SessionTurn {
    SessionTurn::new(vec![
        Message::user(prompt),
        Message::new(
            Role::Assistant,
            vec![ContentPart::ToolCall(ToolCall {
                id: "call_1".into(),
                name: "get-sum".into(),
                arguments: json!({"a": 2, "b": 40}),
            })],
        ),
        Message::new(
            Role::Tool,
            vec![ContentPart::ToolResult(ToolResult {
                call_id: "call_1".into(),
                name: "get-sum".into(),
                output: ToolOutput::Json(json!({"sum": 42})),
                is_error: false,
            })],
        ),
        Message::assistant("The sum is 42."),
    ])
}

/// The prompts of a loaded session's turns.
pub fn prompts(session: &StoredSession) -> Vec<String> {
    session
        .turns
        .iter()
        .map(|turn| turn.messages[0].text())
        .collect()
}

/// Turns written one by one through different handles come back whole, tool calls, usage
/// and timestamps included, with the metadata kept up to date.
pub async fn turns_with_tool_calls_survive_a_new_store(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let created = store
        .create(NewSession::new("/work/project").model("openai:gpt-4o-mini"))
        .await
        .unwrap();
    assert_eq!(created.turns, 0);
    assert_eq!(created.title, None);
    assert_eq!(created.created_at, created.updated_at);
    let first = tool_turn("What is 2 + 40?\nuse the tool").usage(Usage::new(120, 30));
    fixture
        .open()
        .await
        .append_turn(&created.id, first.clone())
        .await
        .unwrap();
    let second = SessionTurn::new(vec![
        Message::user("thanks"),
        Message::assistant("You're welcome."),
    ]);
    let after = store
        .append_turn(&created.id, second.clone())
        .await
        .unwrap();
    assert_eq!(after.turns, 2);
    assert!(after.updated_at > created.updated_at);

    let loaded = fixture.open().await.load(&created.id).await.unwrap();
    assert_eq!(loaded.turns, vec![first, second]);
    assert_eq!(loaded.skipped, 0);
    assert_eq!(loaded.meta, after);
    assert_eq!(loaded.meta.turns, 2);
    assert_eq!(loaded.meta.title.as_deref(), Some("What is 2 + 40?"));
    assert_eq!(loaded.meta.model.as_deref(), Some("openai:gpt-4o-mini"));
    assert_eq!(loaded.meta.cwd, PathBuf::from("/work/project"));
    assert_eq!(loaded.meta.created_at, created.created_at);
    let history = loaded.messages();
    assert_eq!(history.len(), 6);
    assert_eq!(
        history[1].tool_calls().next().unwrap().arguments,
        json!({"a": 2, "b": 40})
    );
}

/// Listing: newest first, one cwd or all, in pages whose cursors another handle accepts;
/// `latest` is the newest of a cwd; a cursor the store did not hand out is refused.
pub async fn lists_newest_first_filtered_by_cwd_in_pages(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let mut in_a = Vec::new();
    for n in 0..5 {
        let meta = store.create(NewSession::new("/a")).await.unwrap();
        store
            .append_turn(
                &meta.id,
                SessionTurn::new(vec![Message::user(format!("prompt {n}"))]),
            )
            .await
            .unwrap();
        in_a.push(meta.id);
    }
    let in_b = store.create(NewSession::new("/b")).await.unwrap();
    // Touch the first session: it becomes the newest.
    store
        .update(&in_a[0], SessionUpdate::new().title("renamed"))
        .await
        .unwrap();

    let other = fixture.open().await;
    let mut seen = Vec::new();
    let mut query = SessionQuery::new().cwd("/a").limit(2);
    let mut pages = 0;
    loop {
        let page = other.list(query.clone()).await.unwrap();
        pages += 1;
        assert!(page.sessions.len() <= 2);
        seen.extend(page.sessions);
        match page.next_cursor {
            Some(cursor) => query = query.cursor(cursor),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let ids: Vec<_> = seen.iter().map(|meta| meta.id.clone()).collect();
    let newest_first = [&in_a[0], &in_a[4], &in_a[3], &in_a[2], &in_a[1]];
    assert_eq!(ids.iter().collect::<Vec<_>>(), newest_first);
    assert_eq!(seen[0].title.as_deref(), Some("renamed"));
    assert_eq!(seen[1].title.as_deref(), Some("prompt 4"));
    assert!(
        seen.windows(2)
            .all(|pair| pair[0].updated_at > pair[1].updated_at)
    );
    assert!(seen.iter().all(|meta| meta.turns == 1));

    // The session in /b was never prompted: listed only when asked for, and not what
    // `--continue` picks.
    let all = store.list(SessionQuery::new()).await.unwrap();
    assert_eq!(all.sessions.len(), 5);
    assert_eq!(all.next_cursor, None);
    assert_eq!(all.sessions[0].id, in_a[0]);
    let with_empty = store
        .list(SessionQuery::new().include_empty(true))
        .await
        .unwrap();
    assert_eq!(with_empty.sessions.len(), 6);
    assert!(with_empty.sessions.iter().any(|meta| meta.id == in_b.id));
    assert_eq!(store.latest("/b".into()).await.unwrap(), None);
    store
        .append_turn(&in_b.id, SessionTurn::new(vec![Message::user("now")]))
        .await
        .unwrap();
    assert_eq!(
        store.latest("/b".into()).await.unwrap().unwrap().id,
        in_b.id
    );
    assert_eq!(store.latest("/c".into()).await.unwrap(), None);
    for bad in ["not a cursor", "12:../x", "x:abc"] {
        assert!(
            matches!(
                store.list(SessionQuery::new().cursor(bad)).await,
                Err(SessionError::InvalidCursor { .. })
            ),
            "{bad}"
        );
    }
}

/// Updates keep what they do not name (a given title is not replaced by the first prompt);
/// a deleted session is gone for every operation, its turns with it.
pub async fn metadata_updates_and_deletes_persist(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let meta = store
        .create(NewSession::new("/p").title("given title").mode("default"))
        .await
        .unwrap();
    store
        .append_turn(
            &meta.id,
            tool_turn("a prompt that must not replace the title"),
        )
        .await
        .unwrap();
    let updated = store
        .update(
            &meta.id,
            SessionUpdate::new()
                .model("anthropic:claude")
                .mode("plan")
                .metadata("servers", json!(["memory"])),
        )
        .await
        .unwrap();
    assert_eq!(updated.title.as_deref(), Some("given title"));
    assert_eq!(updated.turns, 1);

    let loaded = fixture.open().await.load(&meta.id).await.unwrap();
    assert_eq!(loaded.meta.model.as_deref(), Some("anthropic:claude"));
    assert_eq!(loaded.meta.mode.as_deref(), Some("plan"));
    assert_eq!(loaded.meta.metadata["servers"], json!(["memory"]));
    assert_eq!(loaded.meta.turns, 1);
    assert_eq!(loaded.meta, updated);

    fixture.open().await.delete(&meta.id).await.unwrap();
    assert!(matches!(
        store.load(&meta.id).await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        store.delete(&meta.id).await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        store.append_turn(&meta.id, tool_turn("late")).await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        store
            .append_turn_checked(&meta.id, tool_turn("late"), 1)
            .await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        store
            .update(&meta.id, SessionUpdate::new().title("gone"))
            .await,
        Err(SessionError::NotFound { .. })
    ));
    assert!(
        store
            .list(SessionQuery::new())
            .await
            .unwrap()
            .sessions
            .is_empty()
    );
    // Its turns went with it: a new session under the same id starts empty.
    store
        .create(NewSession::new("/p").id(meta.id.clone()))
        .await
        .unwrap();
    let reborn = store.load(&meta.id).await.unwrap();
    assert!(reborn.turns.is_empty());
    assert_eq!(reborn.meta.turns, 0);
    assert_eq!(reborn.meta.title, None);
}

/// A client may choose an id once; a refused create changes nothing; generated ids are v4
/// UUIDs, distinct.
pub async fn ids_are_chosen_or_generated_and_never_reused(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let chosen = SessionId::new("client_chosen-1").unwrap();
    let meta = store
        .create(NewSession::new("/p").id(chosen.clone()))
        .await
        .unwrap();
    assert_eq!(meta.id, chosen);
    assert!(matches!(
        fixture
            .open()
            .await
            .create(NewSession::new("/q").id(chosen.clone()))
            .await,
        Err(SessionError::AlreadyExists { .. })
    ));
    assert_eq!(
        store.load(&chosen).await.unwrap().meta.cwd,
        PathBuf::from("/p")
    );
    let one = store.create(NewSession::new("/p")).await.unwrap();
    let two = store.create(NewSession::new("/p")).await.unwrap();
    assert_ne!(one.id, two.id);
    assert_ne!(one.id, chosen);
    assert_eq!(one.id.as_str().len(), 36);
    assert_eq!(
        one.id.as_str().as_bytes()[14],
        b'4',
        "{} is a v4 uuid",
        one.id
    );
}

/// Two handles that loaded the same session: the second append carrying a stale count is
/// refused with [`SessionError::Conflict`] and stores nothing; reloading and appending on
/// top works; a count ahead of the stored one is refused too.
pub async fn two_stores_on_one_session_conflict_instead_of_diverging(fixture: &impl StoreFixture) {
    let (a, b) = (fixture.open().await, fixture.open().await);
    let meta = a.create(NewSession::new("/p")).await.unwrap();
    a.append_turn_checked(&meta.id, tool_turn("a1"), 0)
        .await
        .unwrap();
    // B opened the session when it had one turn; A then adds a second.
    let seen_by_b = b.load(&meta.id).await.unwrap();
    assert_eq!(seen_by_b.meta.turns, 1);
    a.append_turn_checked(&meta.id, tool_turn("a2"), 1)
        .await
        .unwrap();
    match b.append_turn_checked(&meta.id, tool_turn("b2"), 1).await {
        Err(SessionError::Conflict {
            id,
            expected,
            actual,
        }) => {
            assert_eq!((expected, actual), (1, 2));
            assert_eq!(id, meta.id);
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    // Nothing was written by the refused append; B reloads and appends on top.
    let latest = b.load(&meta.id).await.unwrap();
    assert_eq!(prompts(&latest), ["a1", "a2"]);
    let saved = b
        .append_turn_checked(&meta.id, tool_turn("b2"), latest.meta.turns)
        .await
        .unwrap();
    assert_eq!(saved.turns, 3);
    let loaded = fixture.open().await.load(&meta.id).await.unwrap();
    assert_eq!(prompts(&loaded), ["a1", "a2", "b2"]);
    assert_eq!(loaded.skipped, 0);
    assert!(matches!(
        a.append_turn_checked(&meta.id, tool_turn("ahead"), 7).await,
        Err(SessionError::Conflict {
            expected: 7,
            actual: 3,
            ..
        })
    ));
}

/// Turns each writer appends in the race.
const RACE_TURNS: usize = 20;

/// Two handles appending to one session at once, each reloading after a conflict as the CLI
/// and the ACP agent do: every turn is stored exactly once, each writer's in its order, and
/// the count the check compares is the one `load` reports.
pub async fn racing_checked_appends_from_two_stores_lose_no_turn(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let meta = store.create(NewSession::new("/shared")).await.unwrap();
    store
        .append_turn(&meta.id, tool_turn("first"))
        .await
        .unwrap();
    // Both read the count before either writes (a writer spawned early could otherwise finish
    // before the other has read it), so their first appends collide.
    let mut starts = Vec::new();
    for name in ["alpha", "beta"] {
        let store = fixture.open().await;
        let seen = store.load(&meta.id).await.unwrap().meta.turns;
        starts.push((name, store, seen));
    }
    let mut writers = Vec::new();
    for (name, store, mut seen) in starts {
        let id = meta.id.clone();
        writers.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for n in 0..RACE_TURNS {
                let turn = tool_turn(&format!("{name} {n}"));
                loop {
                    match store.append_turn_checked(&id, turn.clone(), seen).await {
                        Ok(saved) => {
                            seen = saved.turns;
                            break;
                        }
                        Err(SessionError::Conflict { .. }) => {
                            conflicts += 1;
                            seen = store.load(&id).await.unwrap().meta.turns;
                        }
                        Err(other) => panic!("{name}: {other}"),
                    }
                }
                // Let the other writer in between appends.
                tokio::task::yield_now().await;
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for writer in writers {
        conflicts += writer.await.unwrap();
    }
    assert!(conflicts >= 1, "the writers never collided");
    let loaded = fixture.open().await.load(&meta.id).await.unwrap();
    assert_eq!(loaded.turns.len(), 1 + 2 * RACE_TURNS);
    assert_eq!(
        loaded.meta.turns,
        u64::try_from(loaded.turns.len()).unwrap()
    );
    let prompts = prompts(&loaded);
    assert_eq!(prompts[0], "first");
    for name in ["alpha", "beta"] {
        let mine: Vec<_> = prompts
            .iter()
            .filter(|prompt| prompt.starts_with(name))
            .cloned()
            .collect();
        let expected: Vec<_> = (0..RACE_TURNS).map(|n| format!("{name} {n}")).collect();
        assert_eq!(mine, expected, "{name}'s turns, each once and in order");
    }
}

/// Plain appends from many handles at once all land, none twice, and the count agrees.
pub async fn unchecked_appends_from_many_stores_all_land(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let meta = store.create(NewSession::new("/shared")).await.unwrap();
    let mut tasks = Vec::new();
    for writer in 0..6 {
        let store = fixture.open().await;
        let id = meta.id.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..8 {
                store
                    .append_turn(&id, tool_turn(&format!("w{writer} {n}")))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let loaded = fixture.open().await.load(&meta.id).await.unwrap();
    assert_eq!(loaded.turns.len(), 48);
    assert_eq!(loaded.meta.turns, 48);
    let mut prompts = prompts(&loaded);
    prompts.sort();
    prompts.dedup();
    assert_eq!(prompts.len(), 48, "every turn once");
}

/// Text is stored as written: a NUL (which PostgreSQL's `jsonb` and `text` refuse), other
/// control characters, and characters beyond the BMP, in turns, titles and the cwd.
pub async fn any_text_round_trips_exactly(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let text = "nul \u{0} bell \u{7} emoji 🦀 quote \" backslash \\ é\r\nnext line";
    let meta = store
        .create(NewSession::new("/p/with ünïcode").title(text))
        .await
        .unwrap();
    let turn = SessionTurn::new(vec![
        Message::user(text),
        Message::assistant(text),
        Message::new(
            Role::Tool,
            vec![ContentPart::ToolResult(ToolResult {
                call_id: "c".into(),
                name: "t".into(),
                output: ToolOutput::Text(text.into()),
                is_error: false,
            })],
        ),
    ]);
    store.append_turn(&meta.id, turn.clone()).await.unwrap();
    let loaded = fixture.open().await.load(&meta.id).await.unwrap();
    assert_eq!(loaded.turns, vec![turn]);
    assert_eq!(loaded.meta.title.as_deref(), Some(text));
    assert_eq!(loaded.meta.cwd, PathBuf::from("/p/with ünïcode"));
    let listed = store
        .list(SessionQuery::new().cwd("/p/with ünïcode"))
        .await
        .unwrap();
    assert_eq!(listed.sessions.len(), 1);
}

/// Targets are measured by the benches; this bound only catches a pathological regression
/// (quadratic parsing, a query per turn) on a busy machine.
pub async fn a_200_turn_session_loads_in_well_under_a_second(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    for n in 0..200 {
        let turn = tool_turn(&format!("prompt {n}: {}", "lorem ipsum ".repeat(20)));
        store.append_turn(&meta.id, turn).await.unwrap();
    }
    let fresh = fixture.open().await;
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        let loaded = fresh.load(&meta.id).await.unwrap();
        best = best.min(started.elapsed());
        assert_eq!(loaded.turns.len(), 200);
        assert_eq!(loaded.messages().len(), 800);
        assert_eq!(loaded.meta.turns, 200);
    }
    assert!(best <= Duration::from_secs(1), "loading took {best:?}");
}

/// [`SessionStore::create_with_turns`] (what a fork writes): the new session holds every turn
/// as given (timestamps and usage kept), counts them, takes the first turn's title when it has
/// none, lists, and takes a checked append on top; an id in use is refused with nothing
/// changed, and no turns at all makes an empty session.
pub async fn a_session_created_with_turns_holds_them_all(fixture: &impl StoreFixture) {
    let store = fixture.open().await;
    let turns: Vec<SessionTurn> = (0..3)
        .map(|n| tool_turn(&format!("copied {n}")).usage(Usage::new(10 + n, 5)))
        .collect();
    let meta = store
        .create_with_turns(
            NewSession::new("/forks").metadata("origin", json!({"parent": "p-1"})),
            turns.clone(),
        )
        .await
        .unwrap();
    assert_eq!(meta.turns, 3);
    assert_eq!(meta.title.as_deref(), Some("copied 0"));
    let loaded = fixture.open().await.load(&meta.id).await.unwrap();
    assert_eq!(
        loaded.turns, turns,
        "every turn as given, timestamps and usage kept"
    );
    assert_eq!(loaded.meta.turns, 3);
    assert_eq!(loaded.meta.metadata["origin"], json!({"parent": "p-1"}));
    assert_eq!(loaded.meta.cwd, PathBuf::from("/forks"));
    let listed = store.list(SessionQuery::new().cwd("/forks")).await.unwrap();
    assert_eq!(listed.sessions.len(), 1);
    assert_eq!(listed.sessions[0].id, meta.id);
    let after = store
        .append_turn_checked(&meta.id, tool_turn("on top"), 3)
        .await
        .unwrap();
    assert_eq!(after.turns, 4);
    assert_eq!(prompts(&store.load(&meta.id).await.unwrap()).len(), 4);

    let refused = store
        .create_with_turns(NewSession::new("/elsewhere").id(meta.id.clone()), turns)
        .await;
    assert!(
        matches!(refused, Err(SessionError::AlreadyExists { .. })),
        "{refused:?}"
    );
    let kept = store.load(&meta.id).await.unwrap();
    assert_eq!(
        (kept.turns.len(), kept.meta.cwd),
        (4, PathBuf::from("/forks"))
    );

    let titled = store
        .create_with_turns(NewSession::new("/forks").title("Mine"), Vec::new())
        .await
        .unwrap();
    assert_eq!((titled.turns, titled.title.as_deref()), (0, Some("Mine")));
    assert!(store.load(&titled.id).await.unwrap().turns.is_empty());
}
