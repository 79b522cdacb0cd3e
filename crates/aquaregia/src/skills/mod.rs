//! Agent Skills: folders of instructions (`SKILL.md`) and the files that come with them, which
//! the model loads only when a task calls for one (progressive disclosure).
//!
//! A skill is a folder holding a `SKILL.md` whose YAML frontmatter has a `name` (the folder's
//! name: lowercase letters, digits and hyphens) and a `description` (what it is for and when to
//! use it), followed by the instructions (the [Agent Skills
//! specification](https://agentskills.io/specification)). [`Skills::discover`] reads them from
//! the user's and the project's skill folders; MCP servers offer theirs through the
//! `aquaregia-mcp` crate (the MCP skills extension, SEP-2640), as [`Skill`]s with their own
//! [`SkillSource`].
//!
//! Until a skill is used only its name and description reach the model, in the description of
//! one tool, [`Skills::tool`] (named [`SKILL_TOOL`]). The model calls it with a skill's name to
//! get the instructions and the list of bundled files, and with `file` to read one of them;
//! a user's `/name text` gets the same through [`Skill::prompt`].
//!
//! ```no_run
//! use aquaregia::{Client, Skills};
//!
//! # async fn demo() -> Result<(), aquaregia::Error> {
//! let skills = Skills::discover(std::env::current_dir().unwrap_or_default());
//! for issue in skills.issues() {
//!     eprintln!("warning: {issue}");
//! }
//! let (client, model) = Client::from_model_spec("openai-chat:gpt-4o-mini")?;
//! let mut agent = client.agent(model);
//! if let Some(tool) = skills.tool() {
//!     agent = agent.tool(tool);
//! }
//! let output = agent.build()?.run("Fill in form.pdf").await?;
//! # let _ = output;
//! # Ok(()) }
//! ```

mod folder;
mod frontmatter;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::message::Message;
use crate::tool::{Tool, ToolAnnotations, ToolDescriptor, ToolExecError, ToolExecutor, ToolOutput};

/// The name of the tool that loads skills ([`Skills::tool`]).
pub const SKILL_TOOL: &str = "skill";

/// Why a skill, or a file of one, could not be read.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// No skill has this name.
    #[error("no skill `{0}`")]
    NotFound(String),
    /// The path leads outside the skill's folder (through `..`, an absolute path or a symlink).
    #[error("`{path}` is outside the folder of skill `{skill}`")]
    OutsideSkill {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
    },
    /// The skill has no such file.
    #[error("skill `{skill}` has no file `{path}`")]
    NoFile {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
    },
    /// The file is larger than [`MAX_SKILL_FILE_BYTES`].
    #[error("`{path}` of skill `{skill}` is larger than {MAX_SKILL_FILE_BYTES} bytes")]
    TooLarge {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
    },
    /// The file is not UTF-8 text.
    #[error("`{path}` of skill `{skill}` is not text")]
    NotText {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
    },
    /// Reading the file failed.
    #[error("cannot read `{path}` of skill `{skill}`: {source}")]
    Io {
        /// The skill.
        skill: String,
        /// The path asked for.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `SKILL.md` is no longer a valid skill file.
    #[error("skill `{skill}`: {reason}")]
    Invalid {
        /// The skill.
        skill: String,
        /// What is wrong.
        reason: String,
    },
    /// Where the skill comes from failed (an MCP server, say).
    #[error("skill `{skill}` ({origin}): {source}")]
    Source {
        /// The skill.
        skill: String,
        /// Where it comes from.
        origin: SkillOrigin,
        /// Its error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The largest file of a skill that is read, `SKILL.md` included: 1 MiB.
pub const MAX_SKILL_FILE_BYTES: u64 = 1024 * 1024;

/// Where a skill comes from.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillOrigin {
    /// A folder on this machine (its real location, symlinks resolved).
    Folder(PathBuf),
    /// An MCP server (the skills extension, SEP-2640).
    McpServer {
        /// The server's name.
        server: String,
        /// The URI of the skill's `SKILL.md`.
        uri: String,
    },
}

impl fmt::Display for SkillOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Folder(dir) => write!(f, "{}", dir.display()),
            Self::McpServer { server, .. } => write!(f, "MCP server `{server}`"),
        }
    }
}

/// Reads a skill's instructions and files, wherever they live. Implemented for folders here
/// and for MCP servers' skills in `aquaregia-mcp`.
#[async_trait::async_trait]
pub trait SkillSource: Send + Sync + fmt::Debug {
    /// The instructions: `SKILL.md` after its frontmatter.
    async fn instructions(&self) -> Result<String, SkillError>;
    /// The other files of the skill, as paths relative to its folder with `/` between names.
    async fn files(&self) -> Result<Vec<String>, SkillError>;
    /// One of those files, as text. A path that leads outside the skill is refused.
    async fn read(&self, path: &str) -> Result<String, SkillError>;
}

/// One skill: its name and description (all the model sees until it is used), and where its
/// instructions are read from when it is.
#[derive(Clone)]
pub struct Skill {
    name: String,
    description: String,
    frontmatter: Map<String, Value>,
    origin: SkillOrigin,
    source: Arc<dyn SkillSource>,
}

impl fmt::Debug for Skill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Skill")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Skill {
    /// A skill read from `source`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        origin: SkillOrigin,
        source: Arc<dyn SkillSource>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            frontmatter: Map::new(),
            origin,
            source,
        }
    }

    /// Sets the frontmatter's fields (`license`, `allowed-tools`, `metadata`...).
    #[must_use]
    pub fn with_frontmatter(mut self, frontmatter: Map<String, Value>) -> Self {
        self.frontmatter = frontmatter;
        self
    }

    /// The skill's name, which is also its slash command.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it is for and when to use it.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Every field of its frontmatter.
    pub fn frontmatter(&self) -> &Map<String, Value> {
        &self.frontmatter
    }

    /// The frontmatter's `argument-hint`, if any: what to type after `/name`.
    pub fn argument_hint(&self) -> Option<&str> {
        self.frontmatter
            .get("argument-hint")
            .and_then(Value::as_str)
            .filter(|hint| !hint.trim().is_empty())
    }

    /// Where it comes from.
    pub fn origin(&self) -> &SkillOrigin {
        &self.origin
    }

    /// Reads one of its files (a path relative to its folder), as text.
    pub async fn read_file(&self, path: &str) -> Result<String, SkillError> {
        self.source.read(path).await
    }

    /// What using the skill puts into the conversation: its instructions and the list of its
    /// files, readable through the skill tool.
    pub async fn load(&self) -> Result<String, SkillError> {
        let instructions = self.source.instructions().await?;
        let files = self.source.files().await?;
        let mut text = format!(
            "<skill name=\"{}\" origin=\"{}\">\n{}\n</skill>",
            self.name,
            self.origin,
            instructions.trim()
        );
        if let SkillOrigin::Folder(dir) = &self.origin {
            text.push_str(&format!(
                "\nRelative paths in these instructions are relative to the skill's folder, {}.",
                dir.display()
            ));
        }
        if !files.is_empty() {
            text.push_str(&format!(
                "\nFiles of this skill (read one with the `{SKILL_TOOL}` tool's `file` argument):"
            ));
            for file in files {
                text.push_str("\n- ");
                text.push_str(&file);
            }
        }
        Ok(text)
    }

    /// The instructions in a `SKILL.md`'s text: what follows its frontmatter (all of it when
    /// it has none).
    pub fn instructions_in(text: &str) -> &str {
        frontmatter::split(text)
            .map_or(text, |(_, body)| body)
            .trim()
    }

    /// The user message for `/name text`: the skill's instructions, then the text (the task).
    pub async fn prompt(&self, text: &str) -> Result<Message, SkillError> {
        let loaded = self.load().await?;
        let task = if text.trim().is_empty() {
            format!("Use the skill `{}`.", self.name)
        } else {
            text.trim().to_owned()
        };
        Ok(Message::user(format!("{loaded}\n\n{task}")))
    }
}

/// Something wrong found while discovering skills: nothing is dropped without one.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillIssue {
    /// A folder that looks like a skill but is not a valid one.
    Invalid {
        /// The folder or file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A source of skills (an MCP server) could not list them, or listed one that breaks the
    /// rules.
    Source {
        /// Where they come from (`MCP server `name``, with the skill's URI when it is one).
        source: String,
        /// What is wrong.
        reason: String,
    },
    /// Two skills have the same name: the one found later (more local) is used.
    Shadowed {
        /// The name.
        name: String,
        /// The skill used.
        kept: SkillOrigin,
        /// The skill hidden by it.
        hidden: SkillOrigin,
    },
}

impl fmt::Display for SkillIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid { path, reason } => {
                write!(f, "skill {} is ignored: {reason}", path.display())
            }
            Self::Source { source, reason } => write!(f, "skills of {source}: {reason}"),
            Self::Shadowed { name, kept, hidden } => {
                write!(f, "skill `{name}` from {kept} hides the one from {hidden}")
            }
        }
    }
}

/// A set of skills with distinct names, and what was wrong while finding them.
#[derive(Debug, Clone, Default)]
pub struct Skills {
    skills: Vec<Skill>,
    issues: Vec<SkillIssue>,
}

impl Skills {
    /// No skills.
    pub fn new() -> Self {
        Self::default()
    }

    /// The folders skills are read from for a project at `project`, the least local first
    /// (later ones win on a name clash): `<user config dir>/aquaregia/skills` (on Linux
    /// `$XDG_CONFIG_HOME/aquaregia/skills`, by default `~/.config/aquaregia/skills`), then
    /// `<project>/.claude/skills` (read for compatibility), then `<project>/.aquaregia/skills`.
    pub fn default_roots(project: impl AsRef<Path>) -> Vec<PathBuf> {
        let project = project.as_ref();
        let mut roots = Vec::new();
        if let Some(config) = dirs::config_dir() {
            roots.push(config.join("aquaregia").join("skills"));
        }
        roots.push(project.join(".claude").join("skills"));
        roots.push(project.join(".aquaregia").join("skills"));
        roots
    }

    /// Every skill of [`default_roots`](Self::default_roots). Reads the disk (blocking).
    pub fn discover(project: impl AsRef<Path>) -> Self {
        Self::from_roots(Self::default_roots(project))
    }

    /// Every skill in these folders (each a folder of skill folders), the least local first.
    /// A folder that does not exist has none; anything else wrong is in
    /// [`issues`](Self::issues). Reads the disk (blocking).
    pub fn from_roots(roots: impl IntoIterator<Item = impl AsRef<Path>>) -> Self {
        let mut skills = Self::new();
        for root in roots {
            let (found, issues) = folder::discover(root.as_ref());
            skills.issues.extend(issues);
            skills.extend(found);
        }
        skills
    }

    /// Adds a skill; one of the same name already here is hidden by it (reported in
    /// [`issues`](Self::issues)).
    pub fn insert(&mut self, skill: Skill) {
        match self
            .skills
            .iter_mut()
            .find(|known| known.name == skill.name)
        {
            Some(known) => {
                self.issues.push(SkillIssue::Shadowed {
                    name: skill.name.clone(),
                    kept: skill.origin.clone(),
                    hidden: known.origin.clone(),
                });
                *known = skill;
            }
            None => self.skills.push(skill),
        }
    }

    /// Records an issue found by whoever adds skills from elsewhere (an MCP server).
    pub fn report(&mut self, issue: SkillIssue) {
        self.issues.push(issue);
    }

    /// Adds `other`'s skills after these (they win on a clash) and its issues.
    pub fn merge(&mut self, other: Self) {
        self.issues.extend(other.issues);
        self.extend(other.skills);
    }

    /// The skill of this name.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|skill| skill.name == name)
    }

    /// The skills, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        let mut sorted: Vec<&Skill> = self.skills.iter().collect();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        sorted.into_iter()
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.skills.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// What was wrong while finding them: invalid skills and name clashes.
    pub fn issues(&self) -> &[SkillIssue] {
        &self.issues
    }

    /// The tool that loads these skills ([`SKILL_TOOL`]): its description lists each skill's
    /// name and description; a call with `name` returns the instructions and the list of
    /// files, a call with `name` and `file` one of those files. `None` when there are no
    /// skills. It reads nothing but the skills, so it is annotated read-only.
    pub fn tool(&self) -> Option<Tool> {
        if self.is_empty() {
            return None;
        }
        let mut description = String::from(
            "Loads a skill: instructions for one kind of task, with files that come with them. \
             When the task matches a skill's description, call this with the skill's `name` \
             before starting and follow the instructions it returns; call it with `name` and \
             `file` to read a file the instructions mention.\n\nAvailable skills:",
        );
        for skill in self.iter() {
            description.push_str(&format!("\n- {}: {}", skill.name, skill.description));
        }
        let names: Vec<&str> = self.iter().map(Skill::name).collect();
        let descriptor = ToolDescriptor {
            name: SKILL_TOOL.to_owned(),
            description,
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": names, "description": "The skill's name"},
                    "file": {
                        "type": "string",
                        "description": "A file of the skill, relative to its folder (leave out \
                                        to load the instructions)"
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        };
        let annotations = ToolAnnotations::new()
            .title("Load a skill")
            .read_only(true)
            .destructive(false);
        Some(Tool::new(descriptor, Arc::new(SkillTool(self.clone()))).with_annotations(annotations))
    }
}

impl Extend<Skill> for Skills {
    fn extend<I: IntoIterator<Item = Skill>>(&mut self, skills: I) {
        for skill in skills {
            self.insert(skill);
        }
    }
}

impl FromIterator<Skill> for Skills {
    fn from_iter<I: IntoIterator<Item = Skill>>(skills: I) -> Self {
        let mut set = Self::new();
        set.extend(skills);
        set
    }
}

/// Runs [`Skills::tool`].
#[derive(Debug)]
struct SkillTool(Skills);

#[async_trait::async_trait]
impl ToolExecutor for SkillTool {
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        let name = args.get("name").and_then(Value::as_str).unwrap_or_default();
        let skill = self
            .0
            .get(name)
            .ok_or_else(|| ToolExecError::failed(SkillError::NotFound(name.to_owned())))?;
        let text = match args.get("file").and_then(Value::as_str) {
            Some(file) if !file.is_empty() => skill.read_file(file).await,
            _ => skill.load().await,
        };
        text.map(ToolOutput::Text).map_err(ToolExecError::failed)
    }
}
