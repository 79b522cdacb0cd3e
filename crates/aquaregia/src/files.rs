//! Replacing a file whole, so that a reader sees either the old contents or the new, never half
//! of them, and a crash mid-write leaves the old file in place.
//!
//! The session store's metadata, permission rules, tool pins and token stores are written this
//! way: the bytes go to a fresh temporary file in the same directory (unique per writer, so two
//! processes writing at once never share it), are synced to disk, and the file is then renamed
//! over the old one.

use std::io::{self, Write};
use std::path::Path;

/// Who may read the file written by [`replace`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only the owner (mode `0600` on Unix): tokens, keys, session contents.
    Private,
    /// As any new file (mode `0644` less the umask on Unix): settings meant to be shared.
    Shared,
}

/// Writes `contents` to `path` atomically, creating the parent directories if needed.
///
/// ```
/// # fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("settings/rules.json");
/// aquaregia::files::replace(&path, b"{}\n", aquaregia::files::Access::Shared)?;
/// assert_eq!(std::fs::read(&path)?, b"{}\n");
/// # Ok(()) }
/// ```
pub fn replace(path: &Path, contents: &[u8], access: Access) -> io::Result<()> {
    let file = synced_temporary(path, contents, access)?;
    file.persist(path).map_err(|error| error.error)?;
    Ok(())
}

/// Writes `contents` to a new file `path` whole, as [`replace`] does, failing with
/// [`io::ErrorKind::AlreadyExists`] (and leaving it alone) when `path` exists.
pub(crate) fn create_new(path: &Path, contents: &[u8], access: Access) -> io::Result<()> {
    let file = synced_temporary(path, contents, access)?;
    file.persist_noclobber(path).map_err(|error| error.error)?;
    Ok(())
}

/// A temporary file beside `path` holding `contents`, synced to disk.
fn synced_temporary(
    path: &Path,
    contents: &[u8],
    access: Access,
) -> io::Result<tempfile::NamedTempFile> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .map(|name| format!(".{}.", name.to_string_lossy()))
        .unwrap_or_else(|| ".aquaregia.".to_owned());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&name).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = match access {
            Access::Private => 0o600,
            Access::Shared => 0o644,
        };
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = access;
    let mut file = builder.tempfile_in(dir)?;
    file.write_all(contents)?;
    file.as_file().sync_all()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_whole_file_and_leaves_no_temporary_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.json");
        replace(&path, b"first, longer contents", Access::Private).unwrap();
        replace(&path, b"second", Access::Private).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, ["keys.json"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
