//! The `*`/`?` globs tool filters are written in (`--disable-tool`, permissions).

/// `*` (any run) and `?` (one character) globs; everything else literal.
///
/// ```
/// use aquaregia::mcp::glob_match;
/// assert!(glob_match("fs__*", "fs__read_file"));
/// assert!(glob_match("e?ho", "echo"));
/// assert!(!glob_match("echo", "echo2"));
/// ```
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (pattern, text): (Vec<char>, Vec<char>) =
        (pattern.chars().collect(), text.chars().collect());
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match (pattern.get(p), text.get(t)) {
            (Some(&c), Some(&x)) if c == '?' || (c != '*' && c == x) => {
                p += 1;
                t += 1;
            }
            (Some('*'), _) => {
                backtrack = Some((p, t));
                p += 1;
            }
            _ => match backtrack {
                Some((star, matched)) => {
                    p = star + 1;
                    t = matched + 1;
                    backtrack = Some((star, matched + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .unwrap_or_default()
        .iter()
        .all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("fs__*", "fs__read_file"));
        assert!(glob_match("*write*", "fs__write_file"));
        assert!(glob_match("echo", "echo"));
        assert!(glob_match("e?ho", "echo"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("fs__*", "git__status"));
        assert!(!glob_match("echo", "echo2"));
        assert!(!glob_match("a*b", "a"));
    }
}
