//! Secrets kept out of every output: logs, error messages, session files, exported spans.
//!
//! Two kinds of rules, applied by [`redact`] where text leaves the process:
//! - **known values**: each secret this process was given (a provider's API key, a header
//!   value that carries credentials, a `${VAR}` resolved into a server's `env` or headers, an
//!   OAuth token once obtained) is [`register`]ed and replaced wherever it appears, whatever
//!   surrounds it;
//! - **patterns**: text that is a credential by its shape: `Authorization: <anything>`,
//!   `Bearer <token>`, credential parameters in URLs and forms (`?key=`, `api_key=`,
//!   `access_token=`, `code=`...), credential fields in JSON (`"access_token": "..."`) and
//!   provider keys by their prefix (`sk-...`, `AIza...`, `ghp_...`).
//!
//! Each match becomes [`REDACTED`]. Values shorter than [`MIN_SECRET_LEN`] bytes are not
//! registered: they would be found in ordinary words. [`redact_known`] replaces the known
//! values only. Text that arrives in pieces goes through a [`StreamRedactor`], which holds
//! back the end of a piece that could begin a known secret until the next piece shows
//! whether it does (a credential shape split between two pieces is not caught).
//!
//! The registry is process-wide: the SDK registers what it resolves itself; an application
//! that gets secrets by other ways calls [`register`] too.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;

use crate::SessionTurn;
use crate::session::{
    NewSession, SessionError, SessionId, SessionMeta, SessionPage, SessionQuery, SessionStore,
    SessionUpdate, StoredSession,
};

/// What every secret is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// The shortest value [`register`] accepts, in bytes.
pub const MIN_SECRET_LEN: usize = 8;

/// The known secret values, and a matcher built over them.
#[derive(Default)]
struct Known {
    values: Vec<String>,
    matcher: Option<AhoCorasick>,
}

static KNOWN: LazyLock<RwLock<Arc<Known>>> = LazyLock::new(RwLock::default);

/// One shape of credential: the text kept before it (`Authorization: `), the secret after.
struct Rule {
    regex: Regex,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        // A header line or a header map entry, debug-printed or not: the credential, with
        // its scheme (prose such as "requires authorization: run ..." does not match).
        r#"(?i)(\b(?:proxy-)?authorization"?\s*[:=]\s*"?)(?:[A-Za-z]+ +)?[A-Za-z0-9._~+/=-]{8,}"#,
        // Bearer and Basic credentials wherever they stand (not a challenge's parameters:
        // `Bearer error="invalid_token"`).
        r"(?i)(\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{12,}",
        // Credential parameters in URLs and form bodies.
        r#"(?i)((?:^|[?&#;\s])(?:api[_-]?key|apikey|access[_-]?token|refresh[_-]?token|id[_-]?token|code[_-]verifier|client[_-]secret|password|client[_-]assertion|subject[_-]token|actor[_-]token)=)[^&\s"'#]+"#,
        // Short names only in a query string or form (`?key=`, `&code=`).
        r#"(?i)((?:[?&#;])(?:key|token|code|assertion|sig|signature)=)[^&\s"'#]+"#,
        // Credential fields in JSON.
        r#"(?i)("(?:access_token|refresh_token|id_token|client_secret|api_key|apikey|password|code_verifier|assertion|subject_token)"\s*:\s*")[^"]*"#,
        // Provider keys by their prefix.
        r"()\b(?:sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|xox[abpr]-[A-Za-z0-9-]{10,})",
    ]
    .into_iter()
    .filter_map(|pattern| Regex::new(pattern).ok())
    .map(|regex| Rule { regex })
    .collect()
});

/// Remembers `value` as a secret: from now on [`redact`] replaces it wherever it appears.
/// Leading and trailing whitespace is ignored; values shorter than [`MIN_SECRET_LEN`] bytes
/// and values already known are ignored.
pub fn register(value: &str) {
    let value = value.trim();
    if value.len() < MIN_SECRET_LEN {
        return;
    }
    let Ok(mut known) = KNOWN.write() else {
        return;
    };
    if known.values.iter().any(|known| known == value) {
        return;
    }
    let mut values = known.values.clone();
    values.push(value.to_owned());
    let matcher = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostLongest)
        .build(&values)
        .ok();
    *known = Arc::new(Known { values, matcher });
}

/// Registers the credential in a header: its whole value, and for `<scheme> <credential>`
/// values (`Bearer xyz`) the credential alone. Headers whose name does not suggest
/// credentials (`Content-Type`, `Accept`...) are registered only when they are
/// `Authorization`-like or their name says key, token, secret, auth, cookie, session,
/// password or signature.
pub fn register_header(name: &str, value: &str) {
    if !is_secret_name(name) {
        return;
    }
    register(value);
    if let Some((_, credential)) = value.trim().split_once(' ') {
        register(credential);
    }
}

/// Registers an environment variable's value when its name suggests a credential
/// (key, token, secret, password, auth, credential, session, pat, cookie).
pub fn register_env(name: &str, value: &str) {
    if is_secret_name(name) {
        register(value);
    }
}

/// Whether a header or variable name suggests its value is a credential.
pub fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "auth",
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "cookie",
        "session",
        "signature",
    ]
    .iter()
    .any(|part| name.contains(part))
        || name.split(['_', '-']).any(|part| part == "pat")
}

/// `text` with every registered secret and every credential-shaped substring replaced by
/// [`REDACTED`]. Borrows `text` when nothing is found (the common case: one scan over the
/// known values and one per pattern).
pub fn redact(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().map(|known| Arc::clone(&known)).ok();
    let mut out: Cow<'_, str> = Cow::Borrowed(text);
    if let Some(matcher) = known.as_ref().and_then(|known| known.matcher.as_ref())
        && matcher.is_match(text)
    {
        out = Cow::Owned(matcher.replace_all(text, &vec![REDACTED; matcher.patterns_len()]));
    }
    for rule in RULES.iter() {
        if rule.regex.is_match(&out) {
            let replaced = rule
                .regex
                .replace_all(&out, |captures: &regex::Captures<'_>| {
                    let kept = captures.get(1).map_or("", |kept| kept.as_str());
                    if captures
                        .get(0)
                        .is_some_and(|whole| whole.as_str()[kept.len()..].starts_with(REDACTED))
                    {
                        return captures
                            .get(0)
                            .map_or(String::new(), |whole| whole.as_str().to_owned());
                    }
                    format!("{kept}{REDACTED}")
                })
                .into_owned();
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// `text` with every registered secret replaced by [`REDACTED`], and nothing else: for text
/// shown to a user who may need to see credential-shaped text that is not a secret of theirs
/// (an editor showing tool output). Borrows `text` when no known secret is in it.
pub fn redact_known(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().map(|known| Arc::clone(&known)).ok();
    match known.as_ref().and_then(|known| known.matcher.as_ref()) {
        Some(matcher) if matcher.is_match(text) => {
            Cow::Owned(matcher.replace_all(text, &vec![REDACTED; matcher.patterns_len()]))
        }
        _ => Cow::Borrowed(text),
    }
}

/// Every string in `value` (object keys kept) passed through [`redact_known`]; `true` when
/// something was replaced.
pub fn redact_known_json(value: &mut serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => match redact_known(text) {
            Cow::Owned(redacted) => {
                *text = redacted;
                true
            }
            Cow::Borrowed(_) => false,
        },
        serde_json::Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, item| redact_known_json(item) | changed),
        serde_json::Value::Object(map) => map
            .values_mut()
            .fold(false, |changed, item| redact_known_json(item) | changed),
        _ => false,
    }
}

/// Redacts text that arrives in pieces (a model's answer, streamed), so that a registered
/// secret split between two pieces is replaced too: [`push`](Self::push) returns what can be
/// shown now, redacted, and holds back only the end of the text that could be the start of a
/// registered secret (never more than the longest one, less one byte); [`finish`](Self::finish)
/// returns what is held, at the end of the text or before something else is shown.
///
/// ```
/// use aquaregia::redact::{StreamRedactor, register};
///
/// register("stream-doc-secret-0042");
/// let mut stream = StreamRedactor::new();
/// let mut shown = stream.push("the key is stream-doc-");
/// assert_eq!(shown, "the key is ");
/// shown += &stream.push("secret-0042, keep it");
/// shown += &stream.finish();
/// assert_eq!(shown, "the key is [REDACTED], keep it");
/// ```
#[derive(Debug, Clone, Default)]
pub struct StreamRedactor {
    /// Text not shown yet: a tail that may begin a secret.
    held: String,
    /// Only registered secrets ([`redact_known`]), not credential shapes.
    known_only: bool,
}

impl StreamRedactor {
    /// Pieces redacted as [`redact`] does (registered secrets and credential shapes).
    pub fn new() -> Self {
        Self::default()
    }

    /// Pieces redacted as [`redact_known`] does (registered secrets only).
    pub fn known_only() -> Self {
        Self {
            held: String::new(),
            known_only: true,
        }
    }

    /// The part of the text so far that can be shown, redacted; the rest is held.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        let text = std::mem::take(&mut self.held);
        let redacted = self.apply(&text).into_owned();
        let keep = secret_prefix_len(&redacted);
        let cut = redacted.len() - keep;
        self.held = redacted[cut..].to_owned();
        let mut shown = redacted;
        shown.truncate(cut);
        shown
    }

    /// Everything held, redacted: the text is complete (or something else is shown next).
    pub fn finish(&mut self) -> String {
        let held = std::mem::take(&mut self.held);
        self.apply(&held).into_owned()
    }

    fn apply<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.known_only {
            redact_known(text)
        } else {
            redact(text)
        }
    }
}

/// The length of the longest end of `text` that is the beginning (not the whole) of a
/// registered secret.
fn secret_prefix_len(text: &str) -> usize {
    let Ok(known) = KNOWN.read().map(|known| Arc::clone(&known)) else {
        return 0;
    };
    let mut longest = 0;
    for value in &known.values {
        let most = (value.len() - 1).min(text.len());
        for len in (longest + 1..=most).rev() {
            if value.is_char_boundary(len) && text.ends_with(&value[..len]) {
                longest = len;
                break;
            }
        }
    }
    longest
}

/// Every string in `value` (object keys kept) passed through [`redact`].
pub fn redact_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(text) => {
            if let Cow::Owned(redacted) = redact(text) {
                *text = redacted;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_json),
        _ => {}
    }
}

/// `turn` with every string in it (prompts, answers, tool arguments and results) redacted.
/// A turn that cannot be converted to JSON and back (it always can) is returned as it was.
pub fn redact_turn(turn: SessionTurn) -> SessionTurn {
    let Ok(mut value) = serde_json::to_value(&turn) else {
        return turn;
    };
    let before = value.clone();
    redact_json(&mut value);
    if value == before {
        return turn;
    }
    serde_json::from_value(value).unwrap_or(turn)
}

/// A [`SessionStore`] that redacts each turn (see [`redact_turn`]) and each title before the
/// store it wraps writes them. Reads pass through unchanged.
#[derive(Debug, Clone)]
pub struct RedactingStore<S> {
    inner: S,
}

impl<S> RedactingStore<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> Self {
        Self { inner }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

#[async_trait::async_trait]
impl<S: SessionStore> SessionStore for RedactingStore<S> {
    async fn create(&self, mut new: NewSession) -> Result<SessionMeta, SessionError> {
        if let Some(title) = new.title.as_mut()
            && let Cow::Owned(redacted) = redact(title)
        {
            *title = redacted;
        }
        self.inner.create(new).await
    }

    async fn append_turn(
        &self,
        id: &SessionId,
        turn: SessionTurn,
    ) -> Result<SessionMeta, SessionError> {
        self.inner.append_turn(id, redact_turn(turn)).await
    }

    async fn append_turn_checked(
        &self,
        id: &SessionId,
        turn: SessionTurn,
        expected_turns: u64,
    ) -> Result<SessionMeta, SessionError> {
        // The inner store's own check, which is atomic where the store makes it so.
        self.inner
            .append_turn_checked(id, redact_turn(turn), expected_turns)
            .await
    }

    async fn create_with_turns(
        &self,
        mut new: NewSession,
        turns: Vec<SessionTurn>,
    ) -> Result<SessionMeta, SessionError> {
        if let Some(title) = new.title.as_mut()
            && let Cow::Owned(redacted) = redact(title)
        {
            *title = redacted;
        }
        let turns = turns.into_iter().map(redact_turn).collect();
        self.inner.create_with_turns(new, turns).await
    }

    async fn load(&self, id: &SessionId) -> Result<StoredSession, SessionError> {
        self.inner.load(id).await
    }

    async fn list(&self, query: SessionQuery) -> Result<SessionPage, SessionError> {
        self.inner.list(query).await
    }

    async fn update(
        &self,
        id: &SessionId,
        mut update: SessionUpdate,
    ) -> Result<SessionMeta, SessionError> {
        if let Some(title) = update.title.as_mut()
            && let Cow::Owned(redacted) = redact(title)
        {
            *title = redacted;
        }
        self.inner.update(id, update).await
    }

    async fn delete(&self, id: &SessionId) -> Result<(), SessionError> {
        self.inner.delete(id).await
    }

    async fn latest(&self, cwd: std::path::PathBuf) -> Result<Option<SessionMeta>, SessionError> {
        self.inner.latest(cwd).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_and_shapes_are_redacted() {
        register("unit-test-secret-4711");
        register("short");
        assert_eq!(redact("a unit-test-secret-4711 b"), "a [REDACTED] b");
        assert_eq!(redact("short words stay"), "short words stay");
        assert!(matches!(redact("nothing here"), Cow::Borrowed(_)));
        assert_eq!(
            redact("Authorization: Bearer abcdefgh12345"),
            "Authorization: [REDACTED]"
        );
        assert_eq!(
            redact(r#"{"authorization": "Bearer xyz12345"}"#),
            r#"{"authorization": "[REDACTED]"}"#
        );
        assert_eq!(
            redact("sent Bearer abcdefgh12345 ok"),
            "sent Bearer [REDACTED] ok"
        );
        assert_eq!(
            redact("https://x.test/v1?alt=sse&key=AIzaSecret"),
            "https://x.test/v1?alt=sse&key=[REDACTED]"
        );
        assert_eq!(
            redact("GET /callback?code=abc123&state=s1"),
            "GET /callback?code=[REDACTED]&state=s1"
        );
        assert_eq!(
            redact(r#"{"access_token":"tok-1","token_type":"Bearer"}"#),
            r#"{"access_token":"[REDACTED]","token_type":"Bearer"}"#
        );
        assert_eq!(
            redact("Incorrect API key provided: sk-proj-abcdefghijklmnop1234."),
            "Incorrect API key provided: [REDACTED]."
        );
        assert_eq!(redact("exit code 1, key: none"), "exit code 1, key: none");
        for prose in [
            "server `x` requires authorization: run `aquaregia mcp login x`",
            r#"WWW-Authenticate: Bearer error="invalid_token", scope="files:read""#,
            "key=value name=Ann",
        ] {
            assert_eq!(redact(prose), prose);
        }
    }

    #[test]
    fn names_that_suggest_credentials() {
        for name in [
            "Authorization",
            "X-Api-Key",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "GH_PAT",
        ] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["Content-Type", "PATH", "HOME", "NODE_ENV", "X-Team"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn a_secret_split_between_pieces_is_redacted_and_nothing_else_waits() {
        register("split-secret-value-1234");
        let mut stream = StreamRedactor::known_only();
        // Held: only the end that could begin the secret.
        assert_eq!(stream.push("key: spl"), "key: ");
        assert_eq!(stream.push("it-secret-va"), "");
        assert_eq!(stream.push("lue-1234 and more"), "[REDACTED] and more");
        // Text that cannot begin a secret is shown at once.
        assert_eq!(stream.push(" plain words."), " plain words.");
        // An unfinished beginning is shown at the end, as it was.
        assert_eq!(stream.push(" split-sec"), " ");
        assert_eq!(stream.finish(), "split-sec");
        assert_eq!(stream.finish(), "");
        // Known-only leaves credential shapes; the full redactor does not.
        let mut known = StreamRedactor::known_only();
        assert_eq!(known.push("password=hunter22 "), "password=hunter22 ");
        let mut full = StreamRedactor::new();
        assert_eq!(full.push("password=hunter22 "), "password=[REDACTED] ");
        // Non-ASCII text around a held tail stays whole.
        let mut stream = StreamRedactor::new();
        let shown =
            stream.push("é split-secret-value-12") + &stream.push("34 ü") + &stream.finish();
        assert_eq!(shown, "é [REDACTED] ü");
    }

    #[test]
    fn turns_are_redacted_string_by_string() {
        register("turn-secret-value-99");
        let turn = SessionTurn::new(vec![crate::Message::user("my key is turn-secret-value-99")]);
        let redacted = redact_turn(turn);
        let text = serde_json::to_string(&redacted).unwrap();
        assert!(!text.contains("turn-secret-value-99"), "{text}");
        assert!(text.contains("my key is [REDACTED]"), "{text}");
    }
}
