//! An in-process MCP server offering skills (the skills extension, SEP-2640): `deploy`
//! (`SKILL.md` and `references/checklist.md`) and `review` (`SKILL.md` only). As
//! [`SkillsServer::extension`] it declares `io.modelcontextprotocol/skills` and answers
//! `skills/list` and `skills/get`; as [`SkillsServer::resources_only`] it only lists the
//! `skill://…/SKILL.md` resources (the extension's earlier drafts). Both serve the files on
//! `resources/read`, and count the reads.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, Implementation, ListResourcesResult, ListSkillsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ServerCapabilities, ServerConfig, Skill, SkillFrontmatter,
    SkillResource, SkillResources,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use sha2::{Digest, Sha256};
use tokio::io::DuplexStream;

/// The instructions of `deploy`, after its frontmatter.
pub const DEPLOY_BODY: &str = "DEPLOY-STEPS: run the checklist in references/checklist.md.";
/// The text of `deploy`'s `references/checklist.md`.
pub const CHECKLIST: &str = "CHECKLIST: tests green, tag pushed.";

const FILES: &[(&str, &str)] = &[
    (
        "skill://deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploys the service. Use when asked to ship.\n---\nDEPLOY-STEPS: run the checklist in references/checklist.md.\n",
    ),
    ("skill://deploy/references/checklist.md", CHECKLIST),
    (
        "skill://review/SKILL.md",
        "---\nname: review\ndescription: Reviews a change.\nlicense: MIT\n---\nREVIEW-STEPS\n",
    ),
];

#[derive(Clone)]
pub struct SkillsServer {
    extension: bool,
    reads: Arc<AtomicUsize>,
}

impl SkillsServer {
    /// Declares the skills extension.
    pub fn extension() -> Self {
        Self {
            extension: true,
            reads: Arc::default(),
        }
    }

    /// Lists the skills as resources only.
    pub fn resources_only() -> Self {
        Self {
            extension: false,
            reads: Arc::default(),
        }
    }

    /// How many `resources/read` requests it answered.
    pub fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }

    pub fn serve_duplex(&self) -> DuplexStream {
        let (client, server) = tokio::io::duplex(1 << 16);
        let this = self.clone();
        tokio::spawn(async move {
            if let Ok(running) = this.serve(server).await {
                let _ = running.waiting().await;
            }
        });
        client
    }
}

fn digest(text: &str) -> String {
    let hash = Sha256::digest(text.as_bytes());
    let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

fn entries() -> Vec<Skill> {
    let file = |uri: &str| {
        let (_, text) = FILES
            .iter()
            .find(|(known, _)| *known == uri)
            .copied()
            .unwrap_or_default();
        SkillResource::new(uri, digest(text), text.len() as u64)
    };
    vec![
        Skill::new(
            "skill://deploy/SKILL.md",
            SkillFrontmatter::new("deploy", "Deploys the service. Use when asked to ship."),
            SkillResources::Files(vec![
                file("skill://deploy/SKILL.md"),
                file("skill://deploy/references/checklist.md"),
            ]),
        ),
        Skill::new(
            "skill://review/SKILL.md",
            SkillFrontmatter::new("review", "Reviews a change.").with_field("license", "MIT"),
            SkillResources::Files(vec![file("skill://review/SKILL.md")]),
        ),
    ]
}

impl ServerHandler for SkillsServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_resources();
        let capabilities = if self.extension {
            capabilities.enable_skills().build()
        } else {
            capabilities.build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("skills-server", "0.0.0"))
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(ListSkillsResult::with_all_items(entries()))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        entries()
            .into_iter()
            .find(|skill| skill.uri == request.uri)
            .map(GetSkillResult::new)
            .ok_or_else(|| ErrorData::invalid_params("no such skill", None))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new("skill://deploy/SKILL.md", "deploy")
                .with_description("Deploys the service. Use when asked to ship."),
            Resource::new("skill://review/SKILL.md", "review")
                .with_description("Reviews a change."),
            Resource::new("file:///notes.txt", "notes"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        FILES
            .iter()
            .find(|(uri, _)| *uri == request.uri)
            .map(|(uri, text)| {
                ReadResourceResult::new(vec![ResourceContents::text(*text, *uri)]).into()
            })
            .ok_or_else(|| ErrorData::resource_not_found(request.uri, None))
    }
}
