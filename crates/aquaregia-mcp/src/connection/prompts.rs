//! Prompts (`prompts/list`, `prompts/get`): what a front end offers as slash commands.

use rmcp::model::{GetPromptRequestParams, GetPromptResponse, GetPromptResult, JsonObject, Prompt};

use super::McpConnection;
use crate::McpError;

impl McpConnection {
    /// The server's prompts, every page; empty when the server has no prompts capability.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let has_prompts = self
            .shared
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.prompts.is_some());
        if !has_prompts {
            return Ok(Vec::new());
        }
        match self.shared.peer.list_all_prompts().await {
            Ok(prompts) => Ok(prompts),
            Err(error) => Err(self.shared.session_error(error, "prompts/list").await),
        }
    }

    /// Runs prompt `name` with `arguments` (`prompts/get`). A prompt that asks the client
    /// for input first is an error.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: JsonObject,
    ) -> Result<GetPromptResult, McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let params = GetPromptRequestParams::new(name).with_arguments(arguments);
        match self.shared.peer.get_prompt_once(params).await {
            Ok(GetPromptResponse::Complete(result)) => Ok(result),
            Ok(_) => Err(McpError::Protocol {
                server: self.shared.name.clone(),
                method: "prompts/get",
                code: -32600,
                message: "the prompt asks for input, which is not supported here".into(),
            }),
            Err(error) => Err(self.shared.session_error(error, "prompts/get").await),
        }
    }
}
