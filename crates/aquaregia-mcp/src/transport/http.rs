//! What the HTTP transports share: the Streamable HTTP session id as spans see it, the count of
//! re-established sessions, and reading a `WWW-Authenticate` challenge.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use aquaregia::sync::lock;

/// The Streamable HTTP session id (`Mcp-Session-Id`) a transport uses now, shared between
/// the transport that learns it and the spans that report it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionIdSlot(Arc<Mutex<Option<Arc<str>>>>);

impl SessionIdSlot {
    pub(crate) fn set(&self, id: &str) {
        let mut slot = lock(&self.0);
        if slot.as_deref() != Some(id) {
            *slot = Some(Arc::from(id));
        }
    }

    pub(crate) fn get(&self) -> Option<Arc<str>> {
        lock(&self.0).clone()
    }
}

/// Sessions re-established under a connection: HTTP sessions the transport re-initialised
/// after the server forgot them (404). Counts the `initialize` requests sent after one was
/// accepted; each is logged, and the tool call during which it happened is told.
///
/// A call whose answer was still on its way when the session was replaced may or may not
/// have run on the server: it is called again only when its tool is annotated read-only or
/// idempotent. A request the server refused with 404 never ran, and rmcp sends it again on the
/// new session.
#[derive(Debug, Default)]
pub(crate) struct Reconnects {
    established: AtomicBool,
    count: AtomicU64,
}

impl Reconnects {
    /// Notes an `initialize` sent to `url`: once a session was established, it re-establishes
    /// it. (Before, it is one more try of the handshake, say against a legacy server that
    /// answers 404 to every POST.)
    pub(crate) fn initializing(&self, url: &str) {
        if self.established.load(Ordering::SeqCst) {
            let count = self.count.fetch_add(1, Ordering::SeqCst) + 1;
            tracing::warn!(%url, count, "the MCP session expired; re-initialising it");
        }
    }

    /// Notes that the server accepted an `initialize`.
    pub(crate) fn established(&self) {
        self.established.store(true, Ordering::SeqCst);
    }

    /// How many times the session was re-established.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}

/// The parameters of a `WWW-Authenticate: Bearer ...` challenge that say how to authorize.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub(crate) resource_metadata: Option<String>,
    pub(crate) scope: Option<String>,
}

/// Reads `resource_metadata` and `scope` from a challenge (RFC 6750 `auth-param`s, quoted or
/// not).
pub(crate) fn parse_challenge(header: &str) -> Challenge {
    let mut challenge = Challenge::default();
    let mut rest = header.trim();
    // The scheme, then `name=value` pairs separated by commas.
    if let Some((scheme, params)) = rest.split_once(char::is_whitespace)
        && !scheme.contains('=')
    {
        rest = params;
    }
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        let Some((name, after)) = rest.split_once('=') else {
            break;
        };
        let name = name.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, remaining) = match after.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((index, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, escaped)) = chars.next() {
                                value.push(escaped);
                            }
                        }
                        '"' => {
                            end = index + 1;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                (value, &quoted[end..])
            }
            None => {
                let end = after.find(',').unwrap_or(after.len());
                (after[..end].trim().to_owned(), &after[end..])
            }
        };
        match name.as_str() {
            "resource_metadata" => challenge.resource_metadata = Some(value),
            "scope" => challenge.scope = Some(value),
            _ => {}
        }
        rest = remaining;
    }
    challenge
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_parsed() {
        assert_eq!(
            parse_challenge(
                r#"Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource", scope="read write""#
            ),
            Challenge {
                resource_metadata: Some(
                    "https://a.example/.well-known/oauth-protected-resource".into()
                ),
                scope: Some("read write".into()),
            }
        );
        assert_eq!(
            parse_challenge(r#"Bearer scope=files, realm="a\"b""#),
            Challenge {
                resource_metadata: None,
                scope: Some("files".into()),
            }
        );
        assert_eq!(parse_challenge("Bearer"), Challenge::default());
    }
}
