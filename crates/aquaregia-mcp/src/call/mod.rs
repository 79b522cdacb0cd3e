//! The call layer: what is done on a session. A connection's tools ([`tools`], named by
//! [`naming`]), each call ([`executor`]) with its tasks ([`task`]), `input_required` rounds
//! ([`input`]) and result mapping ([`content`]), and prompts ([`prompts`]). It builds on
//! `session` and `transport`.

pub(crate) mod content;
pub(crate) mod executor;
pub(crate) mod input;
pub(crate) mod naming;
pub(crate) mod prompts;
pub(crate) mod skills;
pub(crate) mod task;
pub(crate) mod tools;
