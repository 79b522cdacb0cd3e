//! Many tools: [`ToolDeferral`] settings, the `search_tools` tool and the per-run choice of
//! which tools a request carries.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::error::Error;
use crate::message::Message;
use crate::tool::{
    Tool, ToolAnnotations, ToolDescriptor, ToolExecError, ToolExecutor, ToolOutput, ToolRegistry,
};

use super::store::READ_TOOL_OUTPUT;
use super::tokens::estimate_descriptor_tokens;
use crate::sync::lock;

/// The most tools one request may carry: OpenAI rejects more than 128.
pub const MAX_REQUEST_TOOLS: usize = 128;

/// The name of the built-in tool that finds deferred tools.
pub const SEARCH_TOOLS: &str = "search_tools";

/// Longest description `search_tools` returns per tool, in bytes.
const DESCRIPTION_PREVIEW: usize = 300;

/// When an agent defers its tools, and which ones it always sends.
///
/// With more tools than the threshold (default 64), or tool definitions over the token budget
/// when one is set, a request carries only the always-loaded tools, the built-in ones and a
/// `search_tools(query)` tool; the tools a search finds (ranked by name and description) are
/// sent from the next step on, after the ones found before, so the tool list only grows and
/// prompt caches keep hitting. No request ever carries more than [`MAX_REQUEST_TOOLS`]: past
/// it, the tools found first are dropped first. A deferred tool the model calls by name
/// without searching runs anyway.
///
/// ```
/// use aquaregia::ToolDeferral;
/// let deferral = ToolDeferral::new().threshold(32).always_load(["read_file", "write_file"]);
/// # let _ = deferral;
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDeferral {
    pub(crate) enabled: bool,
    pub(crate) threshold: usize,
    pub(crate) max_definition_tokens: Option<u64>,
    pub(crate) always_loaded: Vec<String>,
    pub(crate) search_results: usize,
}

impl Default for ToolDeferral {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolDeferral {
    /// Defers above 64 tools; 10 results per search.
    pub fn new() -> Self {
        Self {
            enabled: true,
            threshold: 64,
            max_definition_tokens: None,
            always_loaded: Vec::new(),
            search_results: 10,
        }
    }

    /// Never defers. A step with more than [`MAX_REQUEST_TOOLS`] tools then fails before
    /// anything is sent.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::new()
        }
    }

    /// Defers when a step has more than `max_tools` tools (1 to 127).
    #[must_use]
    pub fn threshold(mut self, max_tools: usize) -> Self {
        self.threshold = max_tools;
        self
    }

    /// Also defers when the tool definitions are estimated at more than `tokens`.
    #[must_use]
    pub fn definition_token_budget(mut self, tokens: u64) -> Self {
        self.max_definition_tokens = Some(tokens);
        self
    }

    /// Tools (by name) that every request carries, deferred or not.
    #[must_use]
    pub fn always_load<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.always_loaded.extend(names.into_iter().map(Into::into));
        self
    }

    /// How many tools one search returns at most (default 10).
    #[must_use]
    pub fn search_results(mut self, results: usize) -> Self {
        self.search_results = results;
        self
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if !(1..MAX_REQUEST_TOOLS).contains(&self.threshold) {
            return Err(Error::InvalidRequest(format!(
                "the tool deferral threshold must be 1 to {}",
                MAX_REQUEST_TOOLS - 1
            )));
        }
        if self.search_results == 0 {
            return Err(Error::InvalidRequest(
                "search_tools must return at least one result".into(),
            ));
        }
        Ok(())
    }
}

/// Lower-cased names and descriptions of a registry's tools, for ranking.
struct SearchIndex {
    registry: Arc<ToolRegistry>,
    entries: Vec<(String, String)>,
}

impl SearchIndex {
    fn new(registry: Arc<ToolRegistry>) -> Self {
        let entries = registry
            .tools()
            .iter()
            .map(|tool| {
                let descriptor = tool.descriptor();
                (
                    descriptor.name.to_lowercase(),
                    descriptor.description.to_lowercase(),
                )
            })
            .collect();
        Self { registry, entries }
    }

    /// Indices of the best matches for `query`, best first; ties keep registry order.
    fn rank(&self, query: &str, limit: usize) -> Vec<usize> {
        let query = query.to_lowercase();
        let terms: Vec<&str> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|term| !term.is_empty())
            .collect();
        let joined = terms.join("_");
        let mut scored: Vec<(u32, usize)> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(index, (name, description))| {
                let mut score: u32 = terms
                    .iter()
                    .map(|term| {
                        // Short words match inside too many descriptions to mean anything.
                        let in_description = term.len() >= 3 && description.contains(term);
                        3 * u32::from(name.contains(term)) + u32::from(in_description)
                    })
                    .sum();
                if *name == joined {
                    score += 10;
                }
                (score > 0).then_some((score, index))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored
            .into_iter()
            .take(limit)
            .map(|(_, index)| index)
            .collect()
    }
}

/// What the run and its `search_tools` tool share.
#[derive(Default)]
struct Shared {
    index: Option<Arc<SearchIndex>>,
    /// Tools found or called, in the order they were first found.
    loaded: Vec<String>,
    /// Moves whenever `loaded` changes.
    version: u64,
}

/// The tools one run's requests carry when there are too many to send them all.
pub(crate) struct Deferral {
    settings: ToolDeferral,
    shared: Arc<Mutex<Shared>>,
    /// `search_tools`, made the first time deferral applies (most runs never need it).
    search_tool: Option<Tool>,
    /// The step registry the fields below were computed for.
    built_for: Option<Arc<ToolRegistry>>,
    active: bool,
    /// Always-loaded and built-in tools of `built_for`, in its order.
    always: Vec<Tool>,
    exec: Arc<ToolRegistry>,
    advertised: Arc<ToolRegistry>,
    advertised_version: Option<u64>,
}

impl Deferral {
    /// A run's deferral; tools already called in `history` start out loaded.
    pub(crate) fn new(settings: &ToolDeferral, history: &[Message]) -> Self {
        let mut loaded = Vec::new();
        let mut seen = HashSet::new();
        for call in history.iter().flat_map(Message::tool_calls) {
            if seen.insert(call.name.as_str()) {
                loaded.push(call.name.clone());
            }
        }
        let shared = Arc::new(Mutex::new(Shared {
            loaded,
            ..Shared::default()
        }));
        Self {
            settings: settings.clone(),
            shared,
            search_tool: None,
            built_for: None,
            active: false,
            always: Vec::new(),
            exec: Arc::default(),
            advertised: Arc::default(),
            advertised_version: None,
        }
    }

    /// The tools this step's request carries and the tools its calls may run, for a step
    /// whose tools are `registry`.
    pub(crate) fn select(
        &mut self,
        registry: &Arc<ToolRegistry>,
    ) -> Result<(Arc<ToolRegistry>, Arc<ToolRegistry>), Error> {
        if !self
            .built_for
            .as_ref()
            .is_some_and(|built| Arc::ptr_eq(built, registry))
        {
            self.rebuild(registry)?;
        }
        if !self.active {
            return Ok((registry.clone(), registry.clone()));
        }
        let version = lock(&self.shared).version;
        if self.advertised_version != Some(version) {
            self.advertise()?;
            self.advertised_version = Some(version);
        }
        Ok((self.advertised.clone(), self.exec.clone()))
    }

    /// Takes the loaded tools of a saved run (what [`loaded`](Self::loaded) gave), in place
    /// of those read from its history; an empty list keeps those.
    pub(crate) fn restore_loaded(&self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let mut shared = lock(&self.shared);
        shared.loaded = names.to_vec();
        shared.version += 1;
    }

    /// The tools found or called so far, in the order found, while deferral applies.
    pub(crate) fn loaded(&self) -> Option<Vec<String>> {
        self.active.then(|| lock(&self.shared).loaded.clone())
    }

    /// Marks a tool the model called as loaded (it may have called it without searching).
    pub(crate) fn note_called(&self, name: &str) {
        if !self.active || self.advertised.get(name).is_some() || self.exec.get(name).is_none() {
            return;
        }
        let mut shared = lock(&self.shared);
        if !shared.loaded.iter().any(|loaded| loaded == name) {
            shared.loaded.push(name.to_owned());
            shared.version += 1;
        }
    }

    fn rebuild(&mut self, registry: &Arc<ToolRegistry>) -> Result<(), Error> {
        self.built_for = Some(registry.clone());
        self.advertised_version = None;
        let over_tokens = || {
            self.settings.max_definition_tokens.is_some_and(|budget| {
                registry
                    .tools()
                    .iter()
                    .map(|tool| estimate_descriptor_tokens(tool.descriptor()))
                    .sum::<u64>()
                    > budget
            })
        };
        self.active =
            self.settings.enabled && (registry.len() > self.settings.threshold || over_tokens());
        if !self.active {
            if registry.len() > MAX_REQUEST_TOOLS {
                return Err(Error::InvalidRequest(format!(
                    "{} tools in one request; providers accept at most {MAX_REQUEST_TOOLS} \
                     (tool deferral is disabled)",
                    registry.len()
                )));
            }
            let mut shared = lock(&self.shared);
            shared.index = None;
            return Ok(());
        }
        if registry.get(SEARCH_TOOLS).is_some() {
            return Err(Error::ToolRegistry(format!(
                "`{SEARCH_TOOLS}` is the built-in tool of tool deferral; rename the agent's own"
            )));
        }
        self.always = registry
            .tools()
            .iter()
            .filter(|tool| {
                tool.name() == READ_TOOL_OUTPUT
                    || self.settings.always_loaded.iter().any(|n| n == tool.name())
            })
            .take(MAX_REQUEST_TOOLS - 1)
            .cloned()
            .collect();
        let mut all = registry.tools().to_vec();
        all.push(self.search_tool());
        self.exec = Arc::new(ToolRegistry::from_tools(all)?);
        lock(&self.shared).index = Some(Arc::new(SearchIndex::new(registry.clone())));
        Ok(())
    }

    /// The `search_tools` tool of this run.
    fn search_tool(&mut self) -> Tool {
        self.search_tool
            .get_or_insert_with(|| search_tool(self.shared.clone(), self.settings.search_results))
            .clone()
    }

    /// Always-loaded tools, `search_tools`, then the loaded ones in the order found.
    fn advertise(&mut self) -> Result<(), Error> {
        if self.built_for.is_none() {
            return Ok(());
        }
        let search = self.search_tool();
        let Some(registry) = &self.built_for else {
            return Ok(());
        };
        let mut tools = self.always.clone();
        tools.push(search);
        let room = MAX_REQUEST_TOOLS.saturating_sub(tools.len());
        let mut shared = lock(&self.shared);
        let present: Vec<Tool> = shared
            .loaded
            .iter()
            .filter(|name| !tools.iter().any(|tool| tool.name() == name.as_str()))
            .filter_map(|name| registry.get(name).cloned())
            .collect();
        let skip = present.len().saturating_sub(room);
        if skip > 0 {
            // Over the hard limit: the tools found first go first.
            let dropped: HashSet<&str> = present.iter().take(skip).map(Tool::name).collect();
            shared
                .loaded
                .retain(|name| !dropped.contains(name.as_str()));
        }
        tools.extend(present.into_iter().skip(skip));
        drop(shared);
        self.advertised = Arc::new(ToolRegistry::from_tools(tools)?);
        Ok(())
    }
}

fn search_tool(shared: Arc<Mutex<Shared>>, results: usize) -> Tool {
    let descriptor = ToolDescriptor {
        name: SEARCH_TOOLS.to_owned(),
        description: "Finds tools by what they do. Only some tools are loaded; search with a few \
                      keywords (e.g. `weather forecast`) and the tools found can be called from \
                      the next step on."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Keywords for the tools you need"}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    };
    let annotations = ToolAnnotations::new().title("Search tools").read_only(true);
    Tool::with_parts(
        descriptor,
        annotations,
        Arc::new(SearchTools { shared, results }),
    )
}

struct SearchTools {
    shared: Arc<Mutex<Shared>>,
    results: usize,
}

#[async_trait::async_trait]
impl ToolExecutor for SearchTools {
    async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
        let query = args["query"].as_str().unwrap_or_default().trim();
        if query.is_empty() {
            return Err(ToolExecError::InvalidArguments(
                "`query` must name what the tools should do".into(),
            ));
        }
        let Some(index) = lock(&self.shared).index.clone() else {
            return Ok(ToolOutput::Json(json!({"tools": []})));
        };
        let found = index.rank(query, self.results);
        let tools = index.registry.tools();
        let mut listed = Vec::with_capacity(found.len());
        let mut names = Vec::with_capacity(found.len());
        for tool in found.iter().filter_map(|&position| tools.get(position)) {
            let description = &tool.descriptor().description;
            let end = super::budget::floor_char_boundary(description, DESCRIPTION_PREVIEW);
            listed.push(json!({
                "name": tool.name(),
                "description": description.get(..end).unwrap_or_default(),
            }));
            names.push(tool.name().to_owned());
        }
        {
            let mut shared = lock(&self.shared);
            let before = shared.loaded.len();
            for name in names {
                if !shared.loaded.contains(&name) {
                    shared.loaded.push(name);
                }
            }
            if shared.loaded.len() != before {
                shared.version += 1;
            }
        }
        let note = if listed.is_empty() {
            "No tool matches; try other keywords."
        } else {
            "These tools can be called from the next step on."
        };
        Ok(ToolOutput::Json(json!({"tools": listed, "note": note})))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::tool;

    #[test]
    fn ranking_prefers_name_matches() {
        let make = |name: &str, description: &str| {
            tool(name)
                .description(description)
                .execute_raw(|_| async { Ok(()) })
        };
        let registry = Arc::new(
            ToolRegistry::from_tools(vec![
                make("send_mail", "Sends an email about the weather"),
                make("get_weather", "Current weather for a city"),
                make("list_files", "Lists files"),
            ])
            .unwrap(),
        );
        let index = SearchIndex::new(registry);
        assert_eq!(index.rank("weather", 5), [1, 0]);
        assert_eq!(index.rank("get weather", 5), [1, 0]);
        assert!(index.rank("nothing-like-it", 5).is_empty());
    }
}
