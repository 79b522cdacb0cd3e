//! `aquaregia sessions`: the saved conversations of `run`, `chat` and `acp`, in the store the
//! config files name (the file store by default).

use std::path::Path;

use anyhow::Context;
use aquaregia::{ForkOrigin, SessionQuery};
use clap::Args;
use serde_json::Value;

use crate::output::{self, Styles};

#[derive(Debug, Args)]
pub(crate) struct SessionsArgs {
    /// Only the sessions of the current directory.
    #[arg(long)]
    here: bool,
    /// At most this many, newest first.
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(1..))]
    limit: u64,
    /// Print them as JSON (id, title, cwd, model, createdAt, updatedAt, turns, and for a fork
    /// forkedFrom: the parent session and its turn count when forked).
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: SessionsArgs, config: Option<&Path>) -> anyhow::Result<()> {
    let open = crate::session_store::open(config, crate::session_store::default_file_dir).await?;
    let store = open.store;
    let mut query = SessionQuery::new().limit(usize::try_from(args.limit).unwrap_or(usize::MAX));
    if args.here {
        query = query.cwd(std::env::current_dir().context("cannot read the current directory")?);
    }
    let page = store.list(query).await?;
    if args.json {
        let sessions: Vec<Value> = page
            .sessions
            .iter()
            .map(|meta| {
                let mut value = serde_json::to_value(meta).unwrap_or_default();
                value["createdAt"] = meta.created_at.to_string().into();
                value["updatedAt"] = meta.updated_at.to_string().into();
                if let Some(origin) = ForkOrigin::of(meta) {
                    value["forkedFrom"] = serde_json::json!({
                        "session": origin.parent,
                        "turns": origin.turns,
                    });
                }
                value
            })
            .collect();
        return output::write_stdout(&output::clean(&format!("{:#}\n", Value::from(sessions))));
    }
    if page.sessions.is_empty() {
        eprintln!("no saved sessions in {}", open.place);
        return Ok(());
    }
    let styles = Styles::stdout();
    let mut text = String::new();
    for meta in &page.sessions {
        let updated = meta.updated_at.to_string();
        let updated = updated.get(..16).unwrap_or(&updated).replace('T', " ");
        let title = meta.title.as_deref().unwrap_or("(untitled)");
        text.push_str(&format!(
            "{}  {}  {:>4} turns  {}\n    {}\n",
            styles.bold(meta.id.as_str()),
            updated,
            meta.turns,
            output::clean(&output::first_line(title, 60)),
            styles.dim(&output::clean(&meta.cwd.display().to_string())),
        ));
        if let Some(origin) = ForkOrigin::of(meta) {
            text.push_str(&format!(
                "    {}\n",
                styles.dim(&format!(
                    "forked from {} after turn {}",
                    origin.parent, origin.turns
                ))
            ));
        }
    }
    output::write_stdout(&text)
}
