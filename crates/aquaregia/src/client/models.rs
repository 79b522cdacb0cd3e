//! [`Client::list_models`]: the models a provider offers.

use serde::Deserialize;

use super::Client;
use crate::error::Error;
use crate::http::{self, Route, truncate};

/// `{"data": [...]}`, or the bare array Together AI answers with.
#[derive(Deserialize)]
#[serde(untagged)]
enum ModelList {
    Wrapped { data: Vec<ModelEntry> },
    Bare(Vec<ModelEntry>),
}

#[derive(Deserialize)]
struct ModelEntry {
    id: String,
}

impl Client {
    /// The models this provider offers: `GET /models` for OpenAI-compatible servers and
    /// Ollama, a short built-in list for Anthropic and Gemini.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), aquaregia::Error> {
    /// let (client, _model) = aquaregia::Client::from_env()?;
    /// for model in client.list_models().await? {
    ///     println!("{model}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_models(&self) -> Result<Vec<String>, Error> {
        if let Some(models) = self.inner.provider.known_models {
            return Ok(models.iter().map(|model| (*model).to_owned()).collect());
        }
        let config = &self.inner.http;
        let url = match &config.route {
            Route::Plain => config.url("/models"),
            Route::Deployment { query } => config.url(&format!("/models?{query}")),
        };
        let response = tokio::time::timeout(
            config.timeout,
            config
                .reqwest()?
                .get(&url)
                .headers(config.headers.clone())
                .send(),
        )
        .await
        .map_err(|_| Error::Timeout {
            after: config.timeout,
        })?
        .map_err(|error| http::transport_error(&url, error))?;
        let status = response.status().as_u16();
        let retry_after = http::retry_after_header(response.headers());
        let body = config.read_body(response).await?;
        if !(200..300).contains(&status) {
            let text = String::from_utf8_lossy(&body).into_owned();
            return Err(Error::Provider {
                provider: self.provider_id(),
                status,
                message: truncate(&text, 200),
                code: None,
                body: text,
                request_id: None,
                retry_after,
            });
        }
        let list: ModelList = serde_json::from_slice(&body).map_err(|error| Error::Decode {
            provider: self.provider_id(),
            message: error.to_string(),
            body: String::from_utf8_lossy(&body).into_owned(),
        })?;
        let (ModelList::Wrapped { data: entries } | ModelList::Bare(entries)) = list;
        Ok(entries.into_iter().map(|entry| entry.id).collect())
    }
}
