//! Rows that no longer decode (edited by hand, written by an incompatible version): reported,
//! not fatal. A damaged turn is skipped and counted; the session goes on, and the next append
//! lands after it. A session with damaged metadata fails alone and is left out of listings.

use aquaregia::{NewSession, SessionError, SessionQuery, SessionStore};
use aquaregia_postgres::PostgresStoreError;
use aquaregia_test_support::session_contract::{prompts, tool_turn};

use crate::support::Database;

#[tokio::test]
async fn a_damaged_turn_row_is_skipped_and_the_session_goes_on() {
    let Some(database) = Database::new("damaged_turn") else {
        return;
    };
    let store = database.store().await;
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    for prompt in ["one", "two", "three"] {
        store
            .append_turn(&meta.id, tool_turn(prompt))
            .await
            .unwrap();
    }
    // Valid JSON, but not a turn.
    database.sql(&format!(
        "UPDATE aquaregia_session_turns SET turn = '{{\"messages\": 5}}' \
             WHERE session_id = '{}' AND seq = 1",
        meta.id
    ));

    let fresh = database.store().await;
    let loaded = fresh.load(&meta.id).await.unwrap();
    assert_eq!(prompts(&loaded), ["one", "three"]);
    assert_eq!(loaded.skipped, 1);
    // The stored count still counts it: it is what the next append is checked against.
    assert_eq!(loaded.meta.turns, 3);
    let listed = fresh.list(SessionQuery::new()).await.unwrap();
    assert_eq!(listed.sessions.len(), 1);
    assert_eq!(listed.sessions[0].turns, 3);

    // Appending on top of what was loaded works, and lands after the damaged row.
    fresh
        .append_turn_checked(&meta.id, tool_turn("four"), loaded.meta.turns)
        .await
        .unwrap();
    let loaded = fresh.load(&meta.id).await.unwrap();
    assert_eq!(prompts(&loaded), ["one", "three", "four"]);
    assert_eq!(loaded.skipped, 1);
    assert_eq!(loaded.meta.turns, 4);
}

#[tokio::test]
async fn a_session_with_damaged_metadata_fails_alone() {
    let Some(database) = Database::new("damaged_meta") else {
        return;
    };
    let store = database.store().await;
    let broken = store.create(NewSession::new("/p")).await.unwrap();
    store
        .append_turn(&broken.id, tool_turn("lost"))
        .await
        .unwrap();
    let intact = store.create(NewSession::new("/p")).await.unwrap();
    store
        .append_turn(&intact.id, tool_turn("kept"))
        .await
        .unwrap();
    database.sql(&format!(
        // Newest of all too, so listing has to read past it.
        "UPDATE aquaregia_sessions SET meta = '[\"not\", \"metadata\"]', \
             updated_at = 9999999999999 WHERE id = '{}'",
        broken.id
    ));

    let error = store.load(&broken.id).await.unwrap_err();
    let SessionError::Backend(inner) = &error else {
        panic!("expected a backend error, got {error:?}");
    };
    assert!(
        matches!(
            inner.downcast_ref::<PostgresStoreError>(),
            Some(PostgresStoreError::DamagedSession { id, .. }) if *id == broken.id.to_string()
        ),
        "{error}"
    );
    assert!(error.to_string().contains("damaged metadata"), "{error}");
    assert!(matches!(
        store.append_turn(&broken.id, tool_turn("more")).await,
        Err(SessionError::Backend(_))
    ));

    let listed = store.list(SessionQuery::new()).await.unwrap();
    let ids: Vec<_> = listed.sessions.iter().map(|meta| meta.id.clone()).collect();
    assert_eq!(ids, vec![intact.id.clone()]);
    assert_eq!(listed.next_cursor, None);
    let one = store.list(SessionQuery::new().limit(1)).await.unwrap();
    assert_eq!(
        one.sessions.len(),
        1,
        "the damaged row does not shorten the page"
    );
    assert_eq!(one.sessions[0].id, intact.id);
    assert_eq!(
        store.latest("/p".into()).await.unwrap().unwrap().id,
        intact.id
    );
    assert_eq!(prompts(&store.load(&intact.id).await.unwrap()), ["kept"]);
}
