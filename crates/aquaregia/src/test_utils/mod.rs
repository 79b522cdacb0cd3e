//! Test helpers for code that runs agents (feature `test-utils`): [`ScriptedModel`], a
//! [`LanguageModel`](crate::LanguageModel) that answers from a script in-process, so agent
//! tests need no HTTP server.

mod scripted;

pub use scripted::{ScriptedCall, ScriptedModel, ScriptedReply};
