//! Session config options: the model and the mode (`configOptions`, categories `model` and
//! `mode`, changed with `session/set_config_option`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
};
use aquaregia::sync::lock;
use futures::future::BoxFuture;

use crate::state::{Mode, describe};

/// The config option ids.
pub(crate) const MODEL: &str = "model";
pub(crate) const MODE: &str = "mode";

/// How long listing the provider's models may take before the session gets only the
/// configured one.
const LIST_BOUND: Duration = Duration::from_secs(10);

/// Lists the models a session can switch to.
pub(crate) type ModelLister =
    Arc<dyn Fn() -> BoxFuture<'static, Result<Vec<String>, String>> + Send + Sync>;

/// The configured model and the provider's list, fetched once and cached.
pub(crate) struct Models {
    pub(crate) default: String,
    lister: ModelLister,
    cache: Mutex<Option<Vec<String>>>,
}

impl Models {
    pub(crate) fn new(default: String, lister: ModelLister) -> Self {
        Self {
            default,
            lister,
            cache: Mutex::default(),
        }
    }

    /// The configured model first, then the provider's others. A failed or slow listing is
    /// logged and not cached (the next session tries again).
    pub(crate) async fn list(&self) -> Vec<String> {
        if let Some(models) = lock(&self.cache).clone() {
            return models;
        }
        let listed = match tokio::time::timeout(LIST_BOUND, (self.lister)()).await {
            Ok(Ok(listed)) => Some(listed),
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot list the provider's models");
                None
            }
            Err(_) => {
                tracing::warn!(after = ?LIST_BOUND, "listing the provider's models timed out");
                None
            }
        };
        let mut models = vec![self.default.clone()];
        for model in listed.iter().flatten() {
            if !models.contains(model) {
                models.push(model.clone());
            }
        }
        if listed.is_some() {
            *lock(&self.cache) = Some(models.clone());
        }
        models
    }
}

/// A session's options: the model (when the agent offers a choice: the catalog and the
/// session's list) and the mode.
pub(crate) fn options(
    mode: Mode,
    model: Option<String>,
    models: Option<(&Models, &[String])>,
) -> Vec<SessionConfigOption> {
    let mut options = Vec::new();
    if let Some((catalog, list)) = models {
        let current = model.unwrap_or_else(|| catalog.default.clone());
        let choices: Vec<SessionConfigSelectOption> = list
            .iter()
            .map(|model| SessionConfigSelectOption::new(model.clone(), model.clone()))
            .collect();
        options.push(
            SessionConfigOption::select(MODEL, "Model", current, choices)
                .category(SessionConfigOptionCategory::Model)
                .description("The model the next prompt uses".to_owned()),
        );
    }
    let modes: Vec<SessionConfigSelectOption> = Mode::ALL
        .into_iter()
        .map(|mode| {
            let described = describe(mode);
            SessionConfigSelectOption::new(mode.id(), described.name)
                .description(described.description)
        })
        .collect();
    options.push(
        SessionConfigOption::select(MODE, "Mode", mode.id(), modes)
            .category(SessionConfigOptionCategory::Mode)
            .description("When the agent asks before running tools".to_owned()),
    );
    options
}
