//! Skills (the MCP skills extension, SEP-2640): `skills/list` on servers that declare
//! `io.modelcontextprotocol/skills`, `skill://…/SKILL.md` resources on servers that only list
//! them, and `resources/read` for a skill's files.

use rmcp::model::{
    PaginatedRequestParams, ReadResourceRequestParams, ResourceContents, Skill, SkillFrontmatter,
    SkillResources,
};

use crate::error::McpError;
use crate::session::connection::McpConnection;

/// The URI scheme of skills served as resources.
pub(crate) const SKILL_SCHEME: &str = "skill://";
/// How many pages of `skills/list` are read before giving up on a server that keeps paging.
const MAX_PAGES: usize = 100;

/// A resource read as a skill's file.
#[derive(Debug)]
pub(crate) enum SkillFileContents {
    /// Text.
    Text(String),
    /// Bytes that are not text (a blob), or no contents at all.
    NotText,
}

impl McpConnection {
    /// The server's skills: its `skills/list` entries when it declares the skills extension;
    /// else its `skill://<path>/SKILL.md` resources (the extension's earlier drafts), named by
    /// their folder with the resource's description and no file list; else none.
    pub async fn list_skills(&self) -> Result<Vec<Skill>, McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let peer = &self.shared.peer;
        let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
        let Some(capabilities) = capabilities else {
            return Ok(Vec::new());
        };
        if capabilities.supports_skills() {
            let mut skills = Vec::new();
            let mut cursor = None;
            for _ in 0..MAX_PAGES {
                let params = PaginatedRequestParams::default().with_cursor(cursor);
                let page = match peer.list_skills(Some(params)).await {
                    Ok(page) => page,
                    Err(error) => {
                        return Err(self.shared.session_error(error, "skills/list").await);
                    }
                };
                skills.extend(page.skills);
                cursor = page.next_cursor;
                if cursor.is_none() {
                    return Ok(skills);
                }
            }
            return Err(McpError::InvalidResponse {
                server: self.name().to_owned(),
                method: "skills/list",
                reason: format!("still paging after {MAX_PAGES} pages"),
            });
        }
        if capabilities.resources.is_none() {
            return Ok(Vec::new());
        }
        let resources = match peer.list_all_resources().await {
            Ok(resources) => resources,
            Err(error) => return Err(self.shared.session_error(error, "resources/list").await),
        };
        Ok(resources
            .into_iter()
            .filter_map(|resource| {
                let path = resource
                    .uri
                    .strip_prefix(SKILL_SCHEME)?
                    .strip_suffix("/SKILL.md")?;
                let name = path.rsplit('/').next()?.to_owned();
                let description = resource.description.clone().unwrap_or_default();
                Some(Skill::new(
                    resource.uri.clone(),
                    SkillFrontmatter::new(name, description),
                    SkillResources::Dynamic,
                ))
            })
            .collect())
    }

    /// Reads the resource at `uri` (`resources/read`): its first text contents.
    pub(crate) async fn read_skill_file(&self, uri: &str) -> Result<SkillFileContents, McpError> {
        if self.shared.closed.is_cancelled() {
            return Err(McpError::Disconnected);
        }
        let read = self
            .shared
            .peer
            .read_resource(ReadResourceRequestParams::new(uri))
            .await;
        let result = match read {
            Ok(result) => result,
            Err(error) => return Err(self.shared.session_error(error, "resources/read").await),
        };
        Ok(result
            .contents
            .into_iter()
            .find_map(|contents| match contents {
                ResourceContents::TextResourceContents { text, .. } => {
                    Some(SkillFileContents::Text(text))
                }
                _ => None,
            })
            .unwrap_or(SkillFileContents::NotText))
    }
}
