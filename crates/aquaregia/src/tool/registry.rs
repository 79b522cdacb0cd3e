//! [`ToolRegistry`]: the validated, name-indexed tool set of a step.

use std::collections::HashMap;

use crate::error::Error;

use super::{MAX_TOOL_NAME_LEN, Tool};

/// A validated set of tools, looked up by name.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
}

impl ToolRegistry {
    /// Checks names (1-64 characters of `[A-Za-z0-9_-]`, no duplicates) and indexes the tools.
    ///
    /// The error names every offending tool.
    ///
    /// ```
    /// use aquaregia::{ToolRegistry, tool};
    /// use serde_json::json;
    ///
    /// let make = |name: &str| tool(name).execute_raw(|_| async { Ok(json!(null)) });
    /// assert!(ToolRegistry::from_tools(vec![make("a"), make("b")]).is_ok());
    /// let err = ToolRegistry::from_tools(vec![make("a"), make("a"), make("b c")]).unwrap_err();
    /// assert!(err.to_string().contains("`a`") && err.to_string().contains("`b c`"));
    /// ```
    pub fn from_tools(tools: Vec<Tool>) -> Result<Self, Error> {
        let mut by_name = HashMap::with_capacity(tools.len());
        let mut invalid = Vec::new();
        let mut duplicates = Vec::new();
        for (index, tool) in tools.iter().enumerate() {
            let name = tool.name();
            if !is_valid_tool_name(name) {
                invalid.push(format!("`{name}`"));
            } else if by_name.insert(name.to_owned(), index).is_some()
                && !duplicates.contains(&format!("`{name}`"))
            {
                duplicates.push(format!("`{name}`"));
            }
        }
        let mut problems = Vec::new();
        if !invalid.is_empty() {
            problems.push(format!(
                "invalid tool names (need 1-{MAX_TOOL_NAME_LEN} characters of A-Z a-z 0-9 _ -): {}",
                invalid.join(", ")
            ));
        }
        if !duplicates.is_empty() {
            problems.push(format!("duplicate tool names: {}", duplicates.join(", ")));
        }
        if !problems.is_empty() {
            return Err(Error::ToolRegistry(problems.join("; ")));
        }
        Ok(Self { tools, by_name })
    }

    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// All tools, in the order given.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Keeps only the tools whose names are listed.
    #[must_use]
    pub(crate) fn retain_names<S: AsRef<str>>(self, names: &[S]) -> Self {
        let tools: Vec<Tool> = self
            .tools
            .into_iter()
            .filter(|tool| names.iter().any(|name| name.as_ref() == tool.name()))
            .collect();
        let by_name = tools
            .iter()
            .enumerate()
            .map(|(index, tool)| (tool.name().to_owned(), index))
            .collect();
        Self { tools, by_name }
    }
}

/// Whether `name` is 1-64 characters of `[A-Za-z0-9_-]`.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
