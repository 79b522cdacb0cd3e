//! The workspace boundary: where a session's files live, and whether a path a tool names is
//! inside it once symlinks and `..` are resolved.
//!
//! A path is judged by where it really leads, not by how it is spelled: `notes/link` is outside
//! the workspace when `notes/link` is a symlink to `/etc/passwd`. Paths that do not exist yet
//! (a file about to be written) are resolved as far as they exist, and the rest is taken as
//! written. Checking a path and then opening it leaves a window in which a component can be
//! swapped for a symlink; [`Workspace::verify_open`] closes it by checking the file that was
//! actually opened.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

/// How many symlinks one resolution follows before giving up (as Linux's `ELOOP` limit).
const MAX_SYMLINKS: usize = 40;

/// A workspace root: the directory a session's file tools are confined to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

/// A path resolved against a [`Workspace`]: absolute, with symlinks and `..` resolved as far
/// as the path exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    path: PathBuf,
    inside: bool,
}

impl ResolvedPath {
    /// The path the file operation really reaches.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether that path is inside the workspace (the root itself included).
    pub fn is_inside(&self) -> bool {
        self.inside
    }

    /// The resolved path, consumed.
    pub fn into_path(self) -> PathBuf {
        self.path
    }
}

impl fmt::Display for ResolvedPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if !self.inside {
            f.write_str(" (outside the workspace)")?;
        }
        Ok(())
    }
}

impl Workspace {
    /// The workspace rooted at `root`, itself resolved (a root reached through a symlink, as
    /// `/tmp` on macOS, is judged by its real location). A root that does not exist on this
    /// machine (an editor serving files from elsewhere) is taken lexically.
    pub fn new(root: impl AsRef<Path>) -> Self {
        let root = root.as_ref();
        let absolute = if root.is_absolute() {
            root.to_owned()
        } else {
            std::env::current_dir().unwrap_or_default().join(root)
        };
        let root = resolve(&absolute).unwrap_or_else(|_| lexical(&absolute));
        Self { root }
    }

    /// The resolved root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` (absolute, or relative to the root) resolved: symlinks followed and `..` applied
    /// as far as the path exists on disk. Fails only on a symlink loop or an unreadable link.
    pub fn resolve(&self, path: impl AsRef<Path>) -> io::Result<ResolvedPath> {
        let path = resolve(&self.root.join(path))?;
        let inside = path.starts_with(&self.root);
        Ok(ResolvedPath { path, inside })
    }

    /// Checks, after opening, that `file` is the file `expected` names: no component of the
    /// path was swapped for a symlink between resolving and opening. On Linux this reads the
    /// opened descriptor's real path from `/proc/self/fd`; elsewhere the path is resolved again.
    pub fn verify_open(&self, file: &File, expected: &ResolvedPath) -> io::Result<()> {
        let actual = opened_path(file).or_else(|_| resolve(&expected.path))?;
        let inside = actual.starts_with(&self.root);
        if actual == expected.path || (expected.inside && inside) {
            return Ok(());
        }
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} changed while it was opened: it now leads to {}{}",
                expected.path.display(),
                actual.display(),
                if inside {
                    ""
                } else {
                    " (outside the workspace)"
                }
            ),
        ))
    }
}

#[cfg(target_os = "linux")]
fn opened_path(file: &File) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
fn opened_path(_file: &File) -> io::Result<PathBuf> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// `path` (absolute) with `.` and `..` removed as text; for roots that are not on this machine.
fn lexical(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

/// `path` (absolute) resolved like `realpath`, except that components past the last existing
/// one are kept as written (with `..` among them applied as text: a missing directory cannot
/// be a symlink).
fn resolve(path: &Path) -> io::Result<PathBuf> {
    let mut pending: VecDeque<OsString> = VecDeque::new();
    let mut resolved = PathBuf::new();
    push_components(path, &mut resolved, &mut pending);
    let mut followed = 0;
    // Once a component is missing, nothing below it exists: the rest is lexical.
    let mut missing = false;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        if missing {
            resolved = candidate;
            continue;
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                followed += 1;
                if followed > MAX_SYMLINKS {
                    return Err(io::Error::other(format!(
                        "too many levels of symbolic links at {}",
                        candidate.display()
                    )));
                }
                let target = std::fs::read_link(&candidate)?;
                let mut rest = std::mem::take(&mut pending);
                if target.is_absolute() {
                    resolved = PathBuf::new();
                }
                push_components(&target, &mut resolved, &mut pending);
                pending.append(&mut rest);
            }
            Ok(_) => resolved = candidate,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                missing = true;
                resolved = candidate;
            }
            // Not a directory, no permission to look: judge the rest as written.
            Err(_) => {
                missing = true;
                resolved = candidate;
            }
        }
    }
    Ok(resolved)
}

/// Root and prefix components go to `resolved`, the rest (`..` as `".."`) to `pending`.
fn push_components(path: &Path, resolved: &mut PathBuf, pending: &mut VecDeque<OsString>) {
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => resolved.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => pending.push_back(OsString::from("..")),
            Component::Normal(part) => pending.push_back(part.to_owned()),
        }
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A scratch directory with `project/src/` and a file `outside.txt` beside the project;
    /// removed when dropped.
    fn scratch() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/src")).unwrap();
        std::fs::write(dir.path().join("outside.txt"), "secret").unwrap();
        dir
    }

    #[test]
    fn symlinks_are_judged_by_where_they_lead() {
        let scratch = scratch();
        let dir = scratch.path();
        let project = dir.join("project");
        symlink(dir.join("outside.txt"), project.join("link.txt")).unwrap();
        symlink(dir, project.join("up")).unwrap();
        symlink("src", project.join("relative")).unwrap();
        let workspace = Workspace::new(&project);
        let real = std::fs::canonicalize(dir).unwrap();

        let link = workspace.resolve("link.txt").unwrap();
        assert!(!link.is_inside());
        assert_eq!(link.path(), real.join("outside.txt"));
        assert!(link.to_string().ends_with("(outside the workspace)"));

        // A new file under a symlinked directory that leads out.
        let new = workspace.resolve("up/new.txt").unwrap();
        assert!(!new.is_inside());
        assert_eq!(new.path(), real.join("new.txt"));

        let inside = workspace.resolve("relative/../src/main.rs").unwrap();
        assert!(inside.is_inside());
        assert_eq!(inside.path(), real.join("project/src/main.rs"));

        assert!(!workspace.resolve("../outside.txt").unwrap().is_inside());
        assert!(!workspace.resolve("/etc/passwd").unwrap().is_inside());
        assert!(
            workspace
                .resolve("missing/dir/../file")
                .unwrap()
                .is_inside()
        );
        assert!(!workspace.resolve("missing/../../x").unwrap().is_inside());
    }

    #[test]
    fn a_symlink_loop_is_an_error() {
        let scratch = scratch();
        let dir = scratch.path();
        let project = dir.join("project");
        symlink(project.join("b"), project.join("a")).unwrap();
        symlink(project.join("a"), project.join("b")).unwrap();
        assert!(Workspace::new(&project).resolve("a/file").is_err());
    }

    #[test]
    fn a_root_not_on_this_machine_is_lexical() {
        let workspace = Workspace::new("/no/such/root/../project");
        assert_eq!(workspace.root(), Path::new("/no/such/project"));
        let path = workspace.resolve("src/../main.rs").unwrap();
        assert_eq!(path.path(), Path::new("/no/such/project/main.rs"));
        assert!(path.is_inside());
        assert!(!workspace.resolve("/etc/passwd").unwrap().is_inside());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_opened_file_that_leads_elsewhere_is_refused() {
        let scratch = scratch();
        let dir = scratch.path();
        let project = dir.join("project");
        std::fs::write(project.join("file.txt"), "inside").unwrap();
        let workspace = Workspace::new(&project);
        let expected = workspace.resolve("file.txt").unwrap();
        let file = File::open(expected.path()).unwrap();
        workspace.verify_open(&file, &expected).unwrap();
        // The path was swapped for a symlink out after it was checked.
        std::fs::remove_file(project.join("file.txt")).unwrap();
        symlink(dir.join("outside.txt"), project.join("file.txt")).unwrap();
        let swapped = File::open(project.join("file.txt")).unwrap();
        let error = workspace.verify_open(&swapped, &expected).unwrap_err();
        assert!(
            error.to_string().contains("outside the workspace"),
            "{error}"
        );
    }
}
