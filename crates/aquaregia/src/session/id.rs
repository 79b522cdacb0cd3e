//! Session ids: generated as UUID v4, validated so they are safe as file names.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use super::SessionError;

const MAX_ID_LEN: usize = 128;

/// A session id: 1 to 128 ASCII letters, digits, `-` or `_`, so it is safe as a file name (no
/// `/`, no `..`) in any store.
///
/// ```
/// use aquaregia::SessionId;
/// let id = SessionId::generate();
/// assert_eq!(id.as_str().len(), 36);
/// assert!("../etc/passwd".parse::<SessionId>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// A fresh random id: a UUID v4 in its hyphenated form (`8-4-4-4-12` hex digits).
    pub fn generate() -> Self {
        Self(uuid::Uuid::new_v4().hyphenated().to_string())
    }

    /// Checks and wraps an id.
    pub fn new(id: impl Into<String>) -> Result<Self, SessionError> {
        let id = id.into();
        let valid = !id.is_empty()
            && id.len() <= MAX_ID_LEN
            && id
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_');
        if valid {
            Ok(Self(id))
        } else {
            Err(SessionError::InvalidId { id })
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SessionId {
    type Err = SessionError;

    fn from_str(id: &str) -> Result<Self, Self::Err> {
        Self::new(id)
    }
}

impl<'de> Deserialize<'de> for SessionId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        Self::new(id).map_err(serde::de::Error::custom)
    }
}
