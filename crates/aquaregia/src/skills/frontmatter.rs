//! `SKILL.md`: YAML frontmatter between `---` lines, then the instructions, checked against
//! the Agent Skills specification's rules for `name` and `description`.

use serde_json::{Map, Value};

/// The longest skill name the specification allows, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 64;
/// The longest description the specification allows, in characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 1024;

/// A parsed `SKILL.md`.
#[derive(Debug)]
pub(crate) struct SkillFile {
    pub(crate) name: String,
    pub(crate) description: String,
    /// Every frontmatter field, `name` and `description` included.
    pub(crate) frontmatter: Map<String, Value>,
}

/// Splits `text` into the frontmatter's YAML and the body; `None` when it does not start with
/// a `---` line closed by another `---` (or `...`) line.
pub(crate) fn split(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (first, rest) = text.split_once('\n')?;
    if first.trim_end() != "---" {
        return None;
    }
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if matches!(line.trim_end(), "---" | "...") {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

/// Reads a `SKILL.md`: the frontmatter parsed as YAML, `name` and `description` checked.
/// The error says what is wrong, for the user.
pub(crate) fn parse(text: &str) -> Result<SkillFile, String> {
    let Some((yaml, _body)) = split(text) else {
        return Err(
            "no frontmatter: SKILL.md must start with a `---` line, the YAML fields, and a \
             closing `---` line"
                .into(),
        );
    };
    let value: Value = serde_saphyr::from_str(yaml)
        .map_err(|error| format!("invalid YAML frontmatter: {error}"))?;
    let Value::Object(frontmatter) = value else {
        return Err("the frontmatter is not a mapping of fields".into());
    };
    let field = |key: &str| match frontmatter.get(key) {
        Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.trim().to_owned()),
        Some(Value::String(_)) | None => Err(format!("the frontmatter has no `{key}`")),
        Some(_) => Err(format!("`{key}` is not a string")),
    };
    let name = field("name")?;
    check_name(&name)?;
    let description = field("description")?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "`description` is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    Ok(SkillFile {
        name,
        description,
        frontmatter,
    })
}

/// The specification's name rules: 1-64 characters, lowercase letters, digits and hyphens,
/// no hyphen first, last or twice in a row.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if valid {
        Ok(())
    } else {
        Err(format!(
            "invalid name `{name}`: use 1-{MAX_NAME_CHARS} lowercase letters, digits and single \
             hyphens, not first or last"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_and_body_are_split() {
        let text = "---\nname: pdf-tools\ndescription: >\n  Fills PDF forms.\nlicense: MIT\n---\n\n# Steps\n1. Read\n";
        let parsed = parse(text).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(parsed.name, "pdf-tools");
        assert_eq!(parsed.description, "Fills PDF forms.");
        assert_eq!(parsed.frontmatter["license"], "MIT");
        assert_eq!(
            split(text).map(|(_, body)| body.trim()),
            Some("# Steps\n1. Read")
        );
    }

    #[test]
    fn bad_skill_files_say_why() {
        let reason = |text: &str| parse(text).err().unwrap_or_default();
        assert!(reason("# no frontmatter").contains("no frontmatter"));
        assert!(reason("---\nname: x\n").contains("no frontmatter"));
        assert!(reason("---\nname: [x\n---\n").contains("invalid YAML"));
        assert!(reason("---\n- a\n---\n").contains("not a mapping"));
        assert!(reason("---\ndescription: d\n---\n").contains("no `name`"));
        assert!(reason("---\nname: a\n---\n").contains("no `description`"));
        assert!(reason("---\nname: A_b\ndescription: d\n---\n").contains("invalid name"));
        assert!(reason("---\nname: a--b\ndescription: d\n---\n").contains("invalid name"));
        assert!(reason("---\nname: -a\ndescription: d\n---\n").contains("invalid name"));
    }
}
