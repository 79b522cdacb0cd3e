//! The servers' skills (the MCP skills extension, SEP-2640) as [`aquaregia::Skill`]s, listed
//! beside local ones and read on use through the server.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use aquaregia::{
    MAX_SKILL_FILE_BYTES, Skill, SkillError, SkillIssue, SkillOrigin, SkillSource, Skills,
};
use futures::future::join_all;
use rmcp::model::{Skill as SkillEntry, SkillResources};
use serde_json::Value;

use super::McpToolset;
use crate::call::skills::SkillFileContents;
use crate::session::connection::McpConnection;

/// How long a server gets to list its skills or serve one of their files.
pub const SKILL_TIMEOUT: Duration = Duration::from_secs(30);

const SKILL_MD: &str = "SKILL.md";

impl McpToolset {
    /// Every connected server's skills, in server order: the `skills/list` entries of servers
    /// that declare the skills extension, the `skill://…/SKILL.md` resources of servers that
    /// only list them. A server that cannot list them within [`SKILL_TIMEOUT`], and entries
    /// that break the extension's rules, are in the result's [`Skills::issues`]; two servers'
    /// skills of the same name: the later server's is used.
    pub async fn skills(&self) -> Skills {
        let listings = self
            .connections()
            .iter()
            .map(|(server, connection)| async move {
                let listed = tokio::time::timeout(SKILL_TIMEOUT, connection.list_skills()).await;
                (server, connection, listed)
            });
        let mut skills = Skills::new();
        for (server, connection, listed) in join_all(listings).await {
            let entries = match listed {
                Ok(Ok(entries)) => entries,
                Ok(Err(error)) => {
                    skills.report(SkillIssue::Source {
                        source: format!("MCP server `{server}`"),
                        reason: error.to_string(),
                    });
                    continue;
                }
                Err(_) => {
                    skills.report(SkillIssue::Source {
                        source: format!("MCP server `{server}`"),
                        reason: format!("no answer within {} s", SKILL_TIMEOUT.as_secs()),
                    });
                    continue;
                }
            };
            for entry in entries {
                match skill(server, connection, entry) {
                    Ok(skill) => skills.insert(skill),
                    Err(issue) => skills.report(issue),
                }
            }
        }
        skills
    }
}

/// One listed skill, checked against the extension's rules.
fn skill(server: &str, connection: &McpConnection, entry: SkillEntry) -> Result<Skill, SkillIssue> {
    let invalid = |reason: String| SkillIssue::Source {
        source: format!("MCP server `{server}` ({})", entry.uri),
        reason,
    };
    // The earlier drafts' resources carry no frontmatter to check beyond the name.
    if !matches!(entry.resources, SkillResources::Dynamic)
        || !entry.frontmatter.description.is_empty()
    {
        entry
            .validate()
            .map_err(|error| invalid(error.to_string()))?;
    }
    let root = entry
        .uri
        .strip_suffix(SKILL_MD)
        .filter(|root| root.ends_with('/'))
        .ok_or_else(|| invalid(format!("the URI does not end in /{SKILL_MD}")))?
        .to_owned();
    let files = match &entry.resources {
        SkillResources::Files(files) => Some(
            files
                .iter()
                .filter_map(|file| file.uri.strip_prefix(&root))
                .filter(|path| *path != SKILL_MD)
                .map(str::to_owned)
                .collect(),
        ),
        _ => None,
    };
    let name = entry.frontmatter.name.clone();
    let description = entry.frontmatter.description.clone();
    let mut frontmatter = entry.frontmatter.extra.clone();
    frontmatter.insert("name".into(), Value::String(name.clone()));
    frontmatter.insert("description".into(), Value::String(description.clone()));
    let origin = SkillOrigin::McpServer {
        server: server.to_owned(),
        uri: entry.uri.clone(),
    };
    let source = McpSkill {
        name: name.clone(),
        origin: origin.clone(),
        connection: connection.clone(),
        uri: entry.uri,
        root,
        files,
    };
    Ok(Skill::new(name, description, origin, Arc::new(source)).with_frontmatter(frontmatter))
}

/// A server's skill, read through `resources/read` on use.
struct McpSkill {
    name: String,
    origin: SkillOrigin,
    connection: McpConnection,
    /// Its `SKILL.md`.
    uri: String,
    /// Its folder's URI, ending with `/`.
    root: String,
    /// Its other files, relative to the folder; `None` when the server lists none ("dynamic").
    files: Option<Vec<String>>,
}

impl fmt::Debug for McpSkill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpSkill")
            .field("name", &self.name)
            .field("uri", &self.uri)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

impl McpSkill {
    /// Reads `uri` as text, within [`SKILL_TIMEOUT`]; `path` names it in errors.
    async fn read_uri(&self, uri: &str, path: &str) -> Result<String, SkillError> {
        let (skill, path) = (self.name.clone(), path.to_owned());
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| SkillError::Source {
            skill: self.name.clone(),
            origin: self.origin.clone(),
            source,
        };
        let read = tokio::time::timeout(SKILL_TIMEOUT, self.connection.read_skill_file(uri))
            .await
            .map_err(|_| failed(format!("no answer within {} s", SKILL_TIMEOUT.as_secs()).into()))?
            .map_err(|error| failed(Box::new(error)))?;
        match read {
            SkillFileContents::Text(text) if text.len() as u64 > MAX_SKILL_FILE_BYTES => {
                Err(SkillError::TooLarge { skill, path })
            }
            SkillFileContents::Text(text) => Ok(text),
            SkillFileContents::NotText => Err(SkillError::NotText { skill, path }),
        }
    }
}

#[aquaregia::async_trait]
impl SkillSource for McpSkill {
    async fn instructions(&self) -> Result<String, SkillError> {
        let text = self.read_uri(&self.uri, SKILL_MD).await?;
        Ok(Skill::instructions_in(&text).to_owned())
    }

    async fn files(&self) -> Result<Vec<String>, SkillError> {
        Ok(self.files.clone().unwrap_or_default())
    }

    async fn read(&self, path: &str) -> Result<String, SkillError> {
        // Relative paths of plain names only: nothing can climb out of the skill's folder.
        let confined = !path.is_empty()
            && !path.contains("://")
            && !path.contains('\\')
            && path
                .split('/')
                .all(|segment| !matches!(segment, "" | "." | ".."));
        if !confined {
            return Err(SkillError::OutsideSkill {
                skill: self.name.clone(),
                path: path.to_owned(),
            });
        }
        if let Some(files) = &self.files
            && !files.iter().any(|file| file == path)
        {
            return Err(SkillError::NoFile {
                skill: self.name.clone(),
                path: path.to_owned(),
            });
        }
        self.read_uri(&format!("{}{path}", self.root), path).await
    }
}
