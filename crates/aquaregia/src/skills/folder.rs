//! Skills in folders on this machine: finding them under a root, and reading their files
//! without ever leaving the skill's folder (symlinks resolved, as the workspace rules do).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::frontmatter;
use super::{MAX_SKILL_FILE_BYTES, Skill, SkillError, SkillIssue, SkillOrigin, SkillSource};
use crate::workspace::Workspace;

/// The skill's instructions file.
const SKILL_MD: &str = "SKILL.md";
/// How many files of one skill are listed (the MCP skills extension's limit).
const MAX_LISTED_FILES: usize = 512;
/// How deep below the skill's folder files are listed.
const MAX_LISTED_DEPTH: usize = 8;

/// The skills in the folders directly under `root`, and what is wrong with the others. A
/// root that does not exist has none.
pub(super) fn discover(root: &Path) -> (Vec<Skill>, Vec<SkillIssue>) {
    let mut skills = Vec::new();
    let mut issues = Vec::new();
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return (skills, issues),
        Err(error) => {
            issues.push(SkillIssue::Invalid {
                path: root.to_owned(),
                reason: format!("cannot read the skills folder: {error}"),
            });
            return (skills, issues);
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            let hidden = path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with('.'));
            // Following a symlinked skill folder: where it leads becomes the skill's folder.
            !hidden && path.is_dir()
        })
        .collect();
    dirs.sort();
    for dir in dirs {
        match load(&dir) {
            Ok(Some(skill)) => skills.push(skill),
            Ok(None) => {}
            Err(reason) => issues.push(SkillIssue::Invalid { path: dir, reason }),
        }
    }
    (skills, issues)
}

/// The skill in `dir`; `None` when it has no `SKILL.md` (not a skill folder).
fn load(dir: &Path) -> Result<Option<Skill>, String> {
    let folder = Workspace::new(dir);
    let wrong_case = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot read the folder: {error}"))?
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .find(|name| name.eq_ignore_ascii_case(SKILL_MD));
    match wrong_case.as_deref() {
        None => return Ok(None),
        Some(SKILL_MD) => {}
        Some(other) => {
            return Err(format!(
                "its instructions must be named {SKILL_MD}, not {other}"
            ));
        }
    }
    let text = read_inside(&folder, SKILL_MD).map_err(|error| match error {
        ReadError::Outside => format!("{SKILL_MD} leads outside the skill's folder"),
        other => format!("{SKILL_MD}: {}", other.describe()),
    })?;
    let parsed = frontmatter::parse(&text)?;
    let dir_name = dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    if parsed.name != dir_name {
        return Err(format!(
            "its name `{}` is not the folder's name `{dir_name}`",
            parsed.name
        ));
    }
    let origin = SkillOrigin::Folder(folder.root().to_owned());
    let source = FolderSkill {
        name: parsed.name.clone(),
        folder,
    };
    Ok(Some(
        Skill::new(parsed.name, parsed.description, origin, Arc::new(source))
            .with_frontmatter(parsed.frontmatter),
    ))
}

/// A skill's folder, read on use.
#[derive(Debug)]
struct FolderSkill {
    name: String,
    folder: Workspace,
}

impl FolderSkill {
    fn error(&self, path: &str, error: ReadError) -> SkillError {
        let (skill, path) = (self.name.clone(), path.to_owned());
        match error {
            ReadError::Outside => SkillError::OutsideSkill { skill, path },
            ReadError::Missing => SkillError::NoFile { skill, path },
            ReadError::TooLarge => SkillError::TooLarge { skill, path },
            ReadError::NotText => SkillError::NotText { skill, path },
            ReadError::Io(source) => SkillError::Io {
                skill,
                path,
                source,
            },
        }
    }
}

#[async_trait::async_trait]
impl SkillSource for FolderSkill {
    async fn instructions(&self) -> Result<String, SkillError> {
        let text = self.read(SKILL_MD).await?;
        frontmatter::split(&text)
            .map(|(_, body)| body.trim().to_owned())
            .ok_or_else(|| SkillError::Invalid {
                skill: self.name.clone(),
                reason: format!("{SKILL_MD} no longer has its frontmatter"),
            })
    }

    async fn files(&self) -> Result<Vec<String>, SkillError> {
        let folder = self.folder.clone();
        tokio::task::spawn_blocking(move || list(&folder))
            .await
            .map_err(|error| SkillError::Io {
                skill: self.name.clone(),
                path: ".".into(),
                source: std::io::Error::other(error),
            })
    }

    async fn read(&self, path: &str) -> Result<String, SkillError> {
        let (folder, owned) = (self.folder.clone(), path.to_owned());
        tokio::task::spawn_blocking(move || read_inside(&folder, &owned))
            .await
            .map_err(|error| ReadError::Io(std::io::Error::other(error)))
            .and_then(|read| read)
            .map_err(|error| self.error(path, error))
    }
}

#[derive(Debug)]
enum ReadError {
    Outside,
    Missing,
    TooLarge,
    NotText,
    Io(std::io::Error),
}

impl ReadError {
    fn describe(&self) -> String {
        match self {
            Self::Outside => "outside the skill's folder".into(),
            Self::Missing => "no such file".into(),
            Self::TooLarge => format!("larger than {MAX_SKILL_FILE_BYTES} bytes"),
            Self::NotText => "not UTF-8 text".into(),
            Self::Io(error) => error.to_string(),
        }
    }
}

/// Reads `path` (relative to the folder) if it really is inside the folder, symlinks and `..`
/// resolved, and checks the file opened is the one resolved.
fn read_inside(folder: &Workspace, path: &str) -> Result<String, ReadError> {
    if Path::new(path).is_absolute() {
        return Err(ReadError::Outside);
    }
    let resolved = folder.resolve(path).map_err(ReadError::Io)?;
    if !resolved.is_inside() {
        return Err(ReadError::Outside);
    }
    let file = File::open(resolved.path()).map_err(|error| match error.kind() {
        std::io::ErrorKind::NotFound => ReadError::Missing,
        _ => ReadError::Io(error),
    })?;
    folder
        .verify_open(&file, &resolved)
        .map_err(|_| ReadError::Outside)?;
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::Missing);
    }
    if meta.len() > MAX_SKILL_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    let mut bytes = Vec::new();
    file.take(MAX_SKILL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > MAX_SKILL_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotText)
}

/// The skill's files other than `SKILL.md`, relative to its folder: hidden names and symlinks
/// leading outside the folder are left out.
fn list(folder: &Workspace) -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![(folder.root().to_owned(), String::new(), 0)];
    while let Some((dir, prefix, depth)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = format!("{prefix}{name}");
            if name.starts_with('.') || relative == SKILL_MD {
                continue;
            }
            let Ok(resolved) = folder.resolve(&relative) else {
                continue;
            };
            if !resolved.is_inside() {
                continue;
            }
            if resolved.path().is_dir() {
                if depth < MAX_LISTED_DEPTH {
                    pending.push((entry.path(), format!("{relative}/"), depth + 1));
                }
            } else if files.len() < MAX_LISTED_FILES {
                files.push(relative);
            }
        }
    }
    files.sort();
    files
}
