//! [`OutputBudget`]: how much of one tool result may enter the model's context.

/// Bytes of text counted as one token by [`estimate_tokens`](crate::estimate_tokens).
pub const BYTES_PER_TOKEN: u64 = 4;

/// How much of one tool result may go into the model's context.
///
/// A result over it reaches the model as its head and tail with a marker saying how much was
/// cut; the whole output is kept in the agent's
/// [`ToolOutputStore`](crate::ToolOutputStore) and the built-in `read_tool_output` tool reads
/// the rest. Images count by their provider-specific token cost.
///
/// ```
/// use aquaregia::OutputBudget;
/// assert_eq!(OutputBudget::tokens(25_000).max_bytes(), 100_000);
/// assert_eq!(OutputBudget::bytes(8_192).max_tokens(), 2_048);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputBudget {
    /// Estimated tokens (see [`estimate_tokens`](crate::estimate_tokens)).
    Tokens(u64),
    /// Bytes of text.
    Bytes(u64),
}

impl OutputBudget {
    /// A budget in estimated tokens.
    pub const fn tokens(tokens: u64) -> Self {
        Self::Tokens(tokens)
    }

    /// A budget in bytes of text.
    pub const fn bytes(bytes: u64) -> Self {
        Self::Bytes(bytes)
    }

    /// The budget in estimated tokens.
    pub fn max_tokens(self) -> u64 {
        match self {
            Self::Tokens(tokens) => tokens,
            Self::Bytes(bytes) => bytes / BYTES_PER_TOKEN,
        }
    }

    /// The budget in bytes of text.
    pub fn max_bytes(self) -> u64 {
        match self {
            Self::Tokens(tokens) => tokens.saturating_mul(BYTES_PER_TOKEN),
            Self::Bytes(bytes) => bytes,
        }
    }

    pub(crate) fn max_bytes_usize(self) -> usize {
        usize::try_from(self.max_bytes()).unwrap_or(usize::MAX)
    }
}
