//! Tool names as models accept them: [`prefixed_name`].

use aquaregia::MAX_TOOL_NAME_LEN;

/// `<prefix>_<name>` sanitised to `[A-Za-z0-9_-]`; over 64 characters it is cut and ends
/// with a hash of the full name, so distinct long names stay distinct and stable.
///
/// ```
/// use aquaregia_mcp::prefixed_name;
/// assert_eq!(prefixed_name("fs", "read file"), "fs_read_file");
/// let long = prefixed_name("server", &"x".repeat(100));
/// assert_eq!(long.len(), 64);
/// assert_eq!(long, prefixed_name("server", &"x".repeat(100)));
/// ```
pub fn prefixed_name(prefix: &str, name: &str) -> String {
    sanitized_name(&format!("{prefix}_{name}"))
}

/// `name` sanitised like [`prefixed_name`], without a prefix: unchanged when it is already
/// a valid tool name.
pub(crate) fn sanitized_name(full: &str) -> String {
    let mut sanitized: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if sanitized.len() > MAX_TOOL_NAME_LEN {
        let hash = format!("_{:08x}", fnv1a(full.as_bytes()) as u32);
        sanitized.truncate(MAX_TOOL_NAME_LEN - hash.len());
        sanitized.push_str(&hash);
    }
    sanitized
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
