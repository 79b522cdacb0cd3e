//! [`ConfigError`]: why a config file was rejected.

/// Why a config file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file is not valid JSON.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What the JSON parser said.
        message: String,
    },
    /// The JSON is valid but an entry is not a server.
    #[error("{0}")]
    Invalid(String),
    /// A server's entry uses `${VAR}` for a variable that is not set, without a default.
    #[error(
        "server `{server}`: `{field}` uses `${{{variable}}}`, which is not set \
         (set it, or give a default: `${{{variable}:-default}}`)"
    )]
    UnsetVariable {
        /// The server's name.
        server: String,
        /// Where the variable is used: `command`, `args[1]`, `env.API_KEY`, `url`,
        /// `headers.Authorization`.
        field: String,
        /// The variable's name.
        variable: String,
    },
}
