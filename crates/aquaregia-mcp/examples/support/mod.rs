//! What every example shares: picking the model and explaining failures in one line.

use aquaregia::{Client, Error};

/// The client and model from `AQUAREGIA_MODEL` (e.g. `openai:gpt-5-mini`), else the provider
/// whose key is set, else local Ollama.
pub(crate) fn model() -> Result<(Client, String), Error> {
    Client::from_env()
}

/// Prints `error` as one line, with what to set when no model was reachable, and exits 1.
pub(crate) fn exit_with(error: &Error) -> ! {
    let hint = match error {
        Error::Transport { .. } | Error::Config(_) => {
            " (set AQUAREGIA_MODEL, e.g. openai:gpt-5-mini with OPENAI_API_KEY, \
             anthropic:claude-sonnet-4-5 with ANTHROPIC_API_KEY, or start Ollama for ollama:llama3.2)"
        }
        _ => "",
    };
    eprintln!("error: {error}{hint}");
    std::process::exit(1)
}
