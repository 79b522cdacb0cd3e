//! [`Cassette`]: model answers recorded to a file and replayed from it, for tests.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::error::Error;
use crate::message::Message;
use crate::model::{
    FinishReason, LanguageModel, ModelRequest, ModelResponse, ModelState, ModelStream,
    ProviderKind, StreamEvent, response_events,
};
use crate::redact::{REDACTED, redact};
use crate::usage::Usage;

/// The version of the cassette file format this crate writes and reads.
const FORMAT: u32 = 1;

/// What a [`Cassette`] does with a request.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CassetteMode {
    /// Every call goes to the model and is recorded; the file is rewritten from scratch.
    Record,
    /// Every call is answered from the file; no model is called (none is needed, nor a key or
    /// a network). A request the file does not hold is an error ([`Error::Cassette`]).
    Replay,
    /// Answered from the file when it holds the request, otherwise sent to the model and
    /// recorded (appended).
    RecordIfMissing,
}

/// A [`LanguageModel`] that records its model's answers to a JSON file (a cassette) and
/// replays them, for tests that run agents without a network, a key or a bill.
///
/// A call is matched by a hash of its request, normalised (model, instructions, messages,
/// tools, tool choice, sampling settings, extra body, output schema; object keys sorted) and
/// scrubbed. Calls repeating one request get the recorded answers in order, then the last one
/// again. A streamed call is recorded as its events and replayed as the same events; a whole
/// answer is replayed to a streamed call as the events that would have brought it, and
/// events to a whole call as their final answer. Failed calls are not recorded.
///
/// Before anything is written, secrets are scrubbed from every string of the request and the
/// answer: the values and credential shapes the core's [`redact`](crate::redact) knows (API
/// keys, bearer tokens, `?key=` parameters...), and the strings and patterns given to
/// [`scrub`](CassetteBuilder::scrub) and [`scrub_pattern`](CassetteBuilder::scrub_pattern).
/// The API key itself never reaches a cassette: it lives in the client, not in requests.
/// Requests are matched scrubbed, so give a replaying cassette the same scrubs as the one
/// that recorded (build both from one function), or a request holding a scrubbed string
/// will not match.
///
/// The file is human-readable, pretty-printed JSON with a stable order (interactions in the
/// order they were recorded, keys sorted), one file per cassette, rewritten whole (through a
/// temporary file) after each recorded call.
///
/// ```no_run
/// # async fn demo() -> Result<(), aquaregia::Error> {
/// use std::sync::Arc;
/// use aquaregia::{AgentBuilder, Cassette, CassetteMode, Client};
///
/// // Record once with a key (`CassetteMode::Record`), then replay in CI without one.
/// let mode = if std::env::var_os("RECORD").is_some() {
///     CassetteMode::Record
/// } else {
///     CassetteMode::Replay
/// };
/// let mut cassette = Cassette::builder("tests/cassettes/weather.json").mode(mode);
/// if mode == CassetteMode::Record {
///     cassette = cassette.model(Arc::new(Client::openai().build()?.model("gpt-5-mini")));
/// }
/// let agent = AgentBuilder::new(Arc::new(cassette.scrub("my-org-id").build()?)).build()?;
/// let output = agent.run("What is the weather in Paris?").await?;
/// # let _ = output;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Cassette {
    inner: Arc<CassetteInner>,
}

struct CassetteInner {
    path: PathBuf,
    mode: CassetteMode,
    model: Option<Arc<dyn LanguageModel>>,
    model_id: String,
    provider: String,
    scrubber: Scrubber,
    tape: tokio::sync::Mutex<Tape>,
}

impl fmt::Debug for Cassette {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cassette")
            .field("path", &self.inner.path)
            .field("mode", &self.inner.mode)
            .field("model", &self.inner.model_id)
            .field("provider", &self.inner.provider)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Cassette`]: [`Cassette::builder`].
#[must_use]
pub struct CassetteBuilder {
    path: PathBuf,
    mode: CassetteMode,
    model: Option<Arc<dyn LanguageModel>>,
    scrub: Vec<String>,
    patterns: Vec<String>,
}

impl fmt::Debug for CassetteBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CassetteBuilder")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("model", &self.model)
            .field("scrub", &self.scrub.len())
            .field("patterns", &self.patterns.len())
            .finish()
    }
}

impl CassetteBuilder {
    /// What the cassette does with requests (default [`CassetteMode::Replay`]).
    pub fn mode(mut self, mode: CassetteMode) -> Self {
        self.mode = mode;
        self
    }

    /// The model to record (needed for [`CassetteMode::Record`] and
    /// [`CassetteMode::RecordIfMissing`]; never called in [`CassetteMode::Replay`]).
    pub fn model(mut self, model: Arc<dyn LanguageModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// Replaces `text` with `[REDACTED]` wherever it appears in what is recorded (and in
    /// requests before they are matched). Empty text is ignored.
    pub fn scrub(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        if !text.is_empty() {
            self.scrub.push(text);
        }
        self
    }

    /// Replaces every match of the regular expression `pattern` with `[REDACTED]`, like
    /// [`scrub`](Self::scrub). The pattern is checked by [`build`](Self::build).
    pub fn scrub_pattern(mut self, pattern: impl Into<String>) -> Self {
        self.patterns.push(pattern.into());
        self
    }

    /// The cassette. In [`CassetteMode::Replay`] and [`CassetteMode::RecordIfMissing`] the
    /// file is read now (a missing file is an empty cassette for the latter).
    ///
    /// # Errors
    ///
    /// [`Error::Cassette`] when the file cannot be read or is not a cassette, when replay has
    /// no file, when recording has no model, or when a scrub pattern is not a valid regular
    /// expression.
    pub fn build(self) -> Result<Cassette, Error> {
        let path = self.path;
        let fail = |message: String| Error::Cassette {
            path: path.clone(),
            message,
            source: None,
        };
        let patterns = self
            .patterns
            .iter()
            .map(|pattern| {
                Regex::new(pattern).map_err(|error| Error::Cassette {
                    path: path.clone(),
                    message: format!("invalid scrub pattern `{pattern}`"),
                    source: Some(Box::new(error)),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if self.mode != CassetteMode::Replay && self.model.is_none() {
            return Err(fail(format!(
                "{:?} needs the model to record (`CassetteBuilder::model`)",
                self.mode
            )));
        }
        let file = match self.mode {
            CassetteMode::Record => None,
            CassetteMode::Replay => Some(read_file(&path)?.ok_or_else(|| {
                fail("no such cassette to replay; record it first (`CassetteMode::Record`)".into())
            })?),
            CassetteMode::RecordIfMissing => read_file(&path)?,
        };
        let (model_id, provider) = match (&self.model, &file) {
            (Some(model), _) if self.mode != CassetteMode::Replay => (
                model.model_id().to_owned(),
                model.provider_name().to_owned(),
            ),
            (_, Some(file)) => (file.model.clone(), file.provider.clone()),
            (Some(model), None) => (
                model.model_id().to_owned(),
                model.provider_name().to_owned(),
            ),
            (None, None) => return Err(fail("the cassette has no model".into())),
        };
        let interactions = file.map(|file| file.interactions).unwrap_or_default();
        Ok(Cassette {
            inner: Arc::new(CassetteInner {
                path,
                mode: self.mode,
                model: self.model,
                model_id,
                provider,
                scrubber: Scrubber {
                    literals: self.scrub,
                    patterns,
                },
                tape: tokio::sync::Mutex::new(Tape {
                    interactions,
                    served: HashMap::new(),
                }),
            }),
        })
    }
}

impl Cassette {
    /// A cassette at `path` (one JSON file), in [`CassetteMode::Replay`] until
    /// [`mode`](CassetteBuilder::mode) says otherwise.
    pub fn builder(path: impl Into<PathBuf>) -> CassetteBuilder {
        CassetteBuilder {
            path: path.into(),
            mode: CassetteMode::Replay,
            model: None,
            scrub: Vec::new(),
            patterns: Vec::new(),
        }
    }

    /// The cassette's file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// What it does with requests.
    pub fn mode(&self) -> CassetteMode {
        self.inner.mode
    }

    /// The recorded answer for `key`, if there is one left to serve (or, in replay, one to
    /// serve again).
    async fn lookup(&self, key: &str) -> Option<Recorded> {
        let mut tape = self.inner.tape.lock().await;
        let Tape {
            interactions,
            served,
        } = &mut *tape;
        let matching: Vec<&Interaction> = interactions
            .iter()
            .filter(|interaction| interaction.request_hash == key)
            .collect();
        let count = served.entry(key.to_owned()).or_insert(0);
        let found = match matching.get(*count) {
            Some(interaction) => Some(interaction.answer.clone()),
            None if self.inner.mode == CassetteMode::Replay => matching
                .last()
                .map(|interaction| interaction.answer.clone()),
            None => None,
        };
        if found.is_some() {
            *count += 1;
        }
        found
    }

    /// Appends an answer and rewrites the file.
    async fn append(&self, key: String, request: Value, answer: Recorded) -> Result<(), Error> {
        let mut answer = serde_json::to_value(&answer).map_err(|error| self.error(error))?;
        self.inner.scrubber.scrub(&mut answer);
        let answer: Recorded = serde_json::from_value(answer).map_err(|error| self.error(error))?;
        let mut tape = self.inner.tape.lock().await;
        *tape.served.entry(key.clone()).or_insert(0) += 1;
        tape.interactions.push(Interaction {
            request_hash: key,
            request,
            answer,
        });
        let file = CassetteFile {
            format: FORMAT,
            model: self.inner.model_id.clone(),
            provider: self.inner.provider.clone(),
            interactions: tape.interactions.clone(),
        };
        let mut text = serde_json::to_value(&file)
            .map(|value| sorted(&value))
            .and_then(|value| serde_json::to_string_pretty(&value))
            .map_err(|error| self.error(error))?;
        text.push('\n');
        self.write(text).await
    }

    async fn write(&self, text: String) -> Result<(), Error> {
        let path = &self.inner.path;
        if let Some(parent) = path
            .parent()
            .filter(|parent| !parent.as_os_str().is_empty())
        {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|error| self.error(error))?;
        }
        let mut temporary = path.clone().into_os_string();
        temporary.push(".tmp");
        tokio::fs::write(&temporary, text)
            .await
            .map_err(|error| self.error(error))?;
        tokio::fs::rename(&temporary, path)
            .await
            .map_err(|error| self.error(error))
    }

    fn error(&self, error: impl std::error::Error + Send + Sync + 'static) -> Error {
        Error::Cassette {
            path: self.inner.path.clone(),
            message: error.to_string(),
            source: Some(Box::new(error)),
        }
    }

    /// The request normalised and scrubbed, and its hash.
    fn key(&self, request: &ModelRequest) -> (String, Value) {
        let mut normal = normalise(request);
        self.inner.scrubber.scrub(&mut normal);
        let normal = sorted(&normal);
        let digest = Sha256::digest(normal.to_string().as_bytes());
        let hash = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        (hash, normal)
    }

    /// The model to record with, or the error of a cassette without one.
    fn recorder(&self, key: &str, request: &ModelRequest) -> Result<&dyn LanguageModel, Error> {
        match (&self.inner.model, self.inner.mode) {
            (Some(model), CassetteMode::Record | CassetteMode::RecordIfMissing) => Ok(&**model),
            _ => {
                let last = request
                    .messages
                    .last()
                    .map(|message| crate::http::truncate(&message.text(), 80))
                    .unwrap_or_default();
                Err(Error::Cassette {
                    path: self.inner.path.clone(),
                    message: format!(
                        "no recorded answer for this request (hash {key}, model `{}`, {} \
                         messages, the last: {last:?}); record it with CassetteMode::Record \
                         or RecordIfMissing",
                        request.model,
                        request.messages.len()
                    ),
                    source: None,
                })
            }
        }
    }
}

#[async_trait]
impl LanguageModel for Cassette {
    fn model_id(&self) -> &str {
        &self.inner.model_id
    }

    fn provider_name(&self) -> &str {
        &self.inner.provider
    }

    fn kind(&self) -> Option<ProviderKind> {
        self.inner.model.as_ref().and_then(|model| model.kind())
    }

    fn server_address(&self) -> Option<(&str, Option<u16>)> {
        match self.inner.mode {
            CassetteMode::Replay => None,
            _ => self.inner.model.as_ref()?.server_address(),
        }
    }

    fn context_window(&self) -> Option<u64> {
        self.inner.model.as_ref()?.context_window()
    }

    fn price(&self) -> Option<crate::pricing::ModelPrice> {
        self.inner.model.as_ref()?.price()
    }

    async fn generate(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelResponse, Error> {
        let (key, normal) = self.key(request);
        if self.inner.mode != CassetteMode::Record
            && let Some(recorded) = self.lookup(&key).await
        {
            return recorded.into_response(&self.inner.path);
        }
        let model = self.recorder(&key, request)?;
        let response = model.generate(request, state).await?;
        self.append(key, normal, Recorded::response(&response))
            .await?;
        Ok(response)
    }

    async fn stream(
        &self,
        request: &ModelRequest,
        state: &mut ModelState,
    ) -> Result<ModelStream, Error> {
        let (key, normal) = self.key(request);
        if self.inner.mode != CassetteMode::Record
            && let Some(recorded) = self.lookup(&key).await
        {
            let events = recorded.into_events(&self.inner.path)?;
            return Ok(Box::pin(futures::stream::iter(events.into_iter().map(Ok))));
        }
        let model = self.recorder(&key, request)?;
        let stream = model.stream(request, state).await?;
        let recording = Recording {
            cassette: self.clone(),
            key,
            request: normal,
            events: Vec::new(),
            stream,
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(
            recording,
            Recording::next,
        )))
    }
}

/// A stream being recorded: its events pass through and are kept; when the final answer
/// arrives they are written before it is handed on.
struct Recording {
    cassette: Cassette,
    key: String,
    request: Value,
    events: Vec<RecordedEvent>,
    stream: ModelStream,
    done: bool,
}

impl Recording {
    async fn next(mut self) -> Option<(Result<StreamEvent, Error>, Self)> {
        if self.done {
            return None;
        }
        let event = match self.stream.next().await? {
            Ok(event) => event,
            Err(error) => {
                self.done = true;
                return Some((Err(error), self));
            }
        };
        self.events.push(RecordedEvent::from(&event));
        if matches!(event, StreamEvent::Finish(_)) {
            self.done = true;
            let events = std::mem::take(&mut self.events);
            let key = std::mem::take(&mut self.key);
            let request = std::mem::take(&mut self.request);
            if let Err(error) = self
                .cassette
                .append(key, request, Recorded::Events(events))
                .await
            {
                return Some((Err(error), self));
            }
        }
        Some((Ok(event), self))
    }
}

/// The recorded calls, and how many times each request was answered from them.
struct Tape {
    interactions: Vec<Interaction>,
    served: HashMap<String, usize>,
}

/// A cassette file.
#[derive(Debug, Serialize, Deserialize)]
struct CassetteFile {
    format: u32,
    model: String,
    provider: String,
    interactions: Vec<Interaction>,
}

/// One recorded call.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Interaction {
    request_hash: String,
    /// The request as it was matched (normalised and scrubbed), for people reading the file.
    request: Value,
    #[serde(flatten)]
    answer: Recorded,
}

/// A recorded answer: whole, or as stream events.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Recorded {
    Response(RecordedResponse),
    Events(Vec<RecordedEvent>),
}

impl Recorded {
    fn response(response: &ModelResponse) -> Self {
        Self::Response(RecordedResponse::from(response))
    }

    fn into_response(self, path: &Path) -> Result<ModelResponse, Error> {
        match self {
            Self::Response(response) => Ok(response.into()),
            Self::Events(events) => events
                .into_iter()
                .find_map(|event| match event {
                    RecordedEvent::Finish { response } => Some(response.into()),
                    _ => None,
                })
                .ok_or_else(|| no_finish(path)),
        }
    }

    fn into_events(self, path: &Path) -> Result<Vec<StreamEvent>, Error> {
        match self {
            Self::Response(response) => Ok(response_events(response.into())),
            Self::Events(events) => {
                let events: Vec<StreamEvent> = events.into_iter().map(StreamEvent::from).collect();
                if !matches!(events.last(), Some(StreamEvent::Finish(_))) {
                    return Err(no_finish(path));
                }
                Ok(events)
            }
        }
    }
}

fn no_finish(path: &Path) -> Error {
    Error::Cassette {
        path: path.to_owned(),
        message: "a recorded stream has no final `finish` event".into(),
        source: None,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RecordedResponse {
    message: Message,
    finish_reason: FinishReason,
    usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
}

impl From<&ModelResponse> for RecordedResponse {
    fn from(response: &ModelResponse) -> Self {
        Self {
            message: response.message.clone(),
            finish_reason: response.finish_reason.clone(),
            usage: response.usage,
            id: response.id.clone(),
            model: response.model.clone(),
        }
    }
}

impl From<RecordedResponse> for ModelResponse {
    fn from(recorded: RecordedResponse) -> Self {
        let mut response =
            ModelResponse::new(recorded.message, recorded.finish_reason).with_usage(recorded.usage);
        response.id = recorded.id;
        response.model = recorded.model;
        response
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RecordedEvent {
    TextDelta { text: String },
    ReasoningDelta { text: String },
    ToolCallStart { id: String, name: String },
    ToolCallDelta { id: String, arguments: String },
    Finish { response: RecordedResponse },
}

impl From<&StreamEvent> for RecordedEvent {
    fn from(event: &StreamEvent) -> Self {
        match event {
            StreamEvent::TextDelta(text) => Self::TextDelta { text: text.clone() },
            StreamEvent::ReasoningDelta(text) => Self::ReasoningDelta { text: text.clone() },
            StreamEvent::ToolCallStart { id, name } => Self::ToolCallStart {
                id: id.clone(),
                name: name.clone(),
            },
            StreamEvent::ToolCallDelta { id, arguments } => Self::ToolCallDelta {
                id: id.clone(),
                arguments: arguments.clone(),
            },
            StreamEvent::Finish(response) => Self::Finish {
                response: response.into(),
            },
        }
    }
}

impl From<RecordedEvent> for StreamEvent {
    fn from(event: RecordedEvent) -> Self {
        match event {
            RecordedEvent::TextDelta { text } => Self::TextDelta(text),
            RecordedEvent::ReasoningDelta { text } => Self::ReasoningDelta(text),
            RecordedEvent::ToolCallStart { id, name } => Self::ToolCallStart { id, name },
            RecordedEvent::ToolCallDelta { id, arguments } => Self::ToolCallDelta { id, arguments },
            RecordedEvent::Finish { response } => Self::Finish(response.into()),
        }
    }
}

/// What of a request decides its answer, as JSON.
fn normalise(request: &ModelRequest) -> Value {
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": tool.input_schema,
            })
        })
        .collect();
    let caching = &request.prompt_caching;
    json!({
        "model": request.model,
        "instructions": request.instructions,
        "messages": request.messages,
        "tools": tools,
        "tool_choice": request.tool_choice,
        "temperature": request.temperature,
        "max_output_tokens": request.max_output_tokens,
        "extra_body": request.extra_body,
        "prompt_caching": {
            "system": caching.system,
            "tools": caching.tools,
            "latest_turn": caching.latest_turn,
        },
        "output_schema": request.output_schema.as_ref().map(|schema| json!({
            "name": schema.name(),
            "description": schema.description_text(),
            "schema": schema.schema(),
        })),
    })
}

/// `value` with every object's keys in order, whatever the map type keeps.
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(object) => {
            let mut keys: Vec<&String> = object.keys().collect();
            keys.sort();
            let mut out = Map::with_capacity(object.len());
            for key in keys {
                if let Some(inner) = object.get(key) {
                    out.insert(key.clone(), sorted(inner));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Reads a cassette file; `None` when there is none.
fn read_file(path: &Path) -> Result<Option<CassetteFile>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(Error::Cassette {
                path: path.to_owned(),
                message: format!("cannot read it: {error}"),
                source: Some(Box::new(error)),
            });
        }
    };
    let file: CassetteFile = serde_json::from_str(&text).map_err(|error| Error::Cassette {
        path: path.to_owned(),
        message: format!("not a cassette: {error}"),
        source: Some(Box::new(error)),
    })?;
    if file.format != FORMAT {
        return Err(Error::Cassette {
            path: path.to_owned(),
            message: format!(
                "cassette format {} (this version reads {FORMAT}); record it again",
                file.format
            ),
            source: None,
        });
    }
    Ok(Some(file))
}

/// Secrets taken out of recorded JSON.
struct Scrubber {
    literals: Vec<String>,
    patterns: Vec<Regex>,
}

impl Scrubber {
    /// Every string in `value` (object keys kept) with its secrets replaced.
    fn scrub(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                let mut out = redact(text).into_owned();
                for literal in &self.literals {
                    if out.contains(literal.as_str()) {
                        out = out.replace(literal.as_str(), REDACTED);
                    }
                }
                for pattern in &self.patterns {
                    if pattern.is_match(&out) {
                        out = pattern.replace_all(&out, REDACTED).into_owned();
                    }
                }
                *text = out;
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub(item)),
            Value::Object(object) => object.values_mut().for_each(|item| self.scrub(item)),
            _ => {}
        }
    }
}
