//! `FileSessionStore`: the behaviour every store shares
//! (`aquaregia_test_support::session_contract`), then what only files have: lines cut short
//! or damaged, permissions, paths.

use std::sync::Arc;

use aquaregia::{
    FileSessionStore, NewSession, SessionError, SessionId, SessionQuery, SessionStore,
};
use aquaregia_test_support::session_contract::{StoreFixture, prompts, tool_turn};
use serde_json::json;

/// A fresh directory, removed when dropped.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Self {
        Self(tempfile::tempdir().expect("a scratch directory"))
    }

    fn store(&self) -> FileSessionStore {
        FileSessionStore::new(self.0.path().join("sessions"))
    }
}

impl StoreFixture for Scratch {
    async fn open(&self) -> Arc<dyn SessionStore> {
        Arc::new(self.store())
    }
}

// The behaviour every store shares, on a fresh directory each.
aquaregia_test_support::session_store_contract!(async { Some(Scratch::new()) });

#[tokio::test]
async fn a_deleted_session_leaves_no_file() {
    let scratch = Scratch::new();
    let store = scratch.store();
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    store
        .append_turn(&meta.id, tool_turn("gone soon"))
        .await
        .unwrap();
    scratch.store().delete(&meta.id).await.unwrap();
    assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 0);
}

#[tokio::test]
async fn ids_are_validated_and_name_files_inside_the_store() {
    let scratch = Scratch::new();
    let store = scratch.store();
    let a = SessionId::generate();
    let b = SessionId::generate();
    assert_ne!(a, b);
    assert_eq!(a.as_str().as_bytes()[14], b'4', "{a} is a v4 uuid");
    assert_eq!(a.as_str().parse::<SessionId>().unwrap(), a);
    for bad in [
        "",
        "../escape",
        "a/b",
        "a.b",
        "..",
        "with space",
        &"x".repeat(129),
    ] {
        assert!(
            matches!(SessionId::new(bad), Err(SessionError::InvalidId { .. })),
            "{bad:?} accepted"
        );
        assert!(serde_json::from_value::<SessionId>(json!(bad)).is_err());
    }
    let chosen = SessionId::new("client_chosen-1").unwrap();
    store
        .create(NewSession::new("/p").id(chosen.clone()))
        .await
        .unwrap();
    assert!(store.session_path(&chosen).starts_with(store.dir()));
}

#[tokio::test]
async fn a_line_cut_short_by_a_crash_is_skipped_and_appending_continues() {
    let scratch = Scratch::new();
    let store = scratch.store();
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    store
        .append_turn(&meta.id, tool_turn("first"))
        .await
        .unwrap();
    // A crash in the middle of writing the second turn.
    let path = store.session_path(&meta.id);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(br#"{"type":"turn","turn":{"messages":[{"role":"user","con"#);
    std::fs::write(&path, bytes).unwrap();
    // And the metadata cache is gone too.
    std::fs::remove_file(store.dir().join(format!("{}.meta.json", meta.id))).unwrap();

    let loaded = scratch.store().load(&meta.id).await.unwrap();
    assert_eq!(loaded.turns.len(), 1);
    assert_eq!(loaded.turns[0].messages[0].text(), "first");
    let listed = store.list(SessionQuery::new()).await.unwrap();
    assert_eq!(listed.sessions.len(), 1);

    store
        .append_turn(&meta.id, tool_turn("third"))
        .await
        .unwrap();
    let loaded = scratch.store().load(&meta.id).await.unwrap();
    let prompts: Vec<_> = loaded.turns.iter().map(|t| t.messages[0].text()).collect();
    assert_eq!(prompts, ["first", "third"]);
    assert_eq!(loaded.meta.turns, 2);

    std::fs::write(&path, "not json\n").unwrap();
    assert!(matches!(
        store.load(&meta.id).await,
        Err(SessionError::Corrupt { .. })
    ));
}

#[cfg(unix)]
#[tokio::test]
async fn files_are_private_to_the_user() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    let store = scratch.store();
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    store
        .append_turn(&meta.id, tool_turn("secret"))
        .await
        .unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(store.dir()), 0o700);
    for entry in std::fs::read_dir(store.dir()).unwrap() {
        assert_eq!(mode(&entry.unwrap().path()), 0o600);
    }
}

#[tokio::test]
async fn a_torn_utf8_character_in_the_last_turn_loses_only_that_turn() {
    let scratch = Scratch::new();
    let store = scratch.store();
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    for prompt in ["première", "zweite Frage"] {
        store
            .append_turn(&meta.id, tool_turn(prompt))
            .await
            .unwrap();
    }
    // A crash while writing a third turn, cut inside the two bytes of "é".
    let path = store.session_path(&meta.id);
    let mut bytes = std::fs::read(&path).unwrap();
    let line =
        serde_json::to_vec(&json!({"type": "turn", "turn": tool_turn("troisième")})).unwrap();
    let cut = line.windows(2).position(|w| w == "è".as_bytes()).unwrap() + 1;
    bytes.extend_from_slice(&line[..cut]);
    std::fs::write(&path, bytes).unwrap();

    let loaded = scratch.store().load(&meta.id).await.unwrap();
    assert_eq!(prompts(&loaded), ["première", "zweite Frage"]);
    assert_eq!(loaded.skipped, 1);
    let listed = scratch.store().list(SessionQuery::new()).await.unwrap();
    assert_eq!(listed.sessions.len(), 1);

    // The next turn starts on a line of its own, not glued to the torn one.
    store
        .append_turn_checked(&meta.id, tool_turn("quatrième"), 2)
        .await
        .unwrap();
    let loaded = scratch.store().load(&meta.id).await.unwrap();
    assert_eq!(prompts(&loaded), ["première", "zweite Frage", "quatrième"]);
    assert_eq!(loaded.skipped, 1);
}

#[tokio::test]
async fn a_damaged_middle_line_is_skipped_and_every_other_turn_loads() {
    let scratch = Scratch::new();
    let store = scratch.store();
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    for prompt in ["one", "two", "three"] {
        store
            .append_turn(&meta.id, tool_turn(prompt))
            .await
            .unwrap();
    }
    let path = store.session_path(&meta.id);
    let text = std::fs::read(&path).unwrap();
    let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    // Lines: meta, turn one, meta, turn two, meta, turn three, meta. Damage turn two with a
    // byte that is not UTF-8, and a meta line with bad JSON.
    let two = lines
        .iter()
        .position(|l| l.windows(5).any(|w| w == b"\"two\""))
        .unwrap();
    lines[two].insert(10, 0xff);
    lines[two - 1] = b"{\"type\":\"meta\",".to_vec();
    std::fs::write(&path, lines.join(&b'\n')).unwrap();

    let loaded = scratch.store().load(&meta.id).await.unwrap();
    assert_eq!(prompts(&loaded), ["one", "three"]);
    assert_eq!(loaded.skipped, 2);
    assert_eq!(loaded.meta.turns, 2);
}

/// How long a test waits for a store operation that should go on.
#[cfg(target_os = "linux")]
const BOUND: std::time::Duration = std::time::Duration::from_secs(20);

/// Waits (within [`BOUND`]) until someone waits for a `flock` on `path`: the kernel lists
/// each waiter in `/proc/locks` as `-> FLOCK ... <dev>:<inode> ...`.
#[cfg(target_os = "linux")]
async fn until_a_writer_waits_for(path: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    let inode = format!(":{}", std::fs::metadata(path).unwrap().ino());
    let waiting = || {
        std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.get(1) == Some(&"->")
                    && fields.get(2) == Some(&"FLOCK")
                    && fields.get(6).is_some_and(|file| file.ends_with(&inode))
            })
    };
    tokio::time::timeout(BOUND, async {
        while !waiting() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the append waits for the session's lock");
}

/// Takes the exclusive lock on a session's file, as another process appending to it does.
#[cfg(target_os = "linux")]
fn hold_lock(store: &FileSessionStore, id: &SessionId) -> std::fs::File {
    let record = std::fs::OpenOptions::new()
        .append(true)
        .open(store.session_path(id))
        .unwrap();
    record.lock().unwrap();
    record
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_another_writer_holds_keeps_no_other_session_waiting() {
    let scratch = Scratch::new();
    let store = scratch.store();
    let held = store.create(NewSession::new("/p")).await.unwrap();
    let free = store.create(NewSession::new("/p")).await.unwrap();
    let record = hold_lock(&store, &held.id);
    let waiting = tokio::spawn({
        let (store, id) = (store.clone(), held.id.clone());
        async move { store.append_turn(&id, tool_turn("after the other")).await }
    });
    until_a_writer_waits_for(&store.session_path(&held.id)).await;

    // Another session is written, listed and read meanwhile.
    tokio::time::timeout(BOUND, async {
        store
            .append_turn(&free.id, tool_turn("meanwhile"))
            .await
            .unwrap();
        let listed = store.list(SessionQuery::new()).await.unwrap();
        assert_eq!(listed.sessions.len(), 1);
        assert_eq!(prompts(&store.load(&free.id).await.unwrap()), ["meanwhile"]);
    })
    .await
    .expect("the other session did not wait for the locked one");
    assert!(!waiting.is_finished());

    drop(record);
    let appended = waiting.await.unwrap().unwrap();
    assert_eq!(appended.turns, 1);
    assert_eq!(
        prompts(&store.load(&held.id).await.unwrap()),
        ["after the other"]
    );
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_waiting_on_a_session_deleted_meanwhile_is_not_written() {
    let scratch = Scratch::new();
    let store = scratch.store();
    let meta = store.create(NewSession::new("/p")).await.unwrap();
    let record = hold_lock(&store, &meta.id);
    let waiting = tokio::spawn({
        let (store, id) = (store.clone(), meta.id.clone());
        async move { store.append_turn(&id, tool_turn("too late")).await }
    });
    until_a_writer_waits_for(&store.session_path(&meta.id)).await;
    // Another process deletes the session while holding its lock.
    std::fs::remove_file(store.session_path(&meta.id)).unwrap();
    std::fs::remove_file(store.dir().join(format!("{}.meta.json", meta.id))).unwrap();
    drop(record);

    assert!(matches!(
        waiting.await.unwrap(),
        Err(SessionError::NotFound { .. })
    ));
    // Nothing came back: no metadata without its session.
    assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 0);
}
