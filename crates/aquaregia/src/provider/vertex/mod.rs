//! Google Vertex AI, behind the `vertex` feature: Gemini (`vertex:gemini-2.5-flash`, the
//! Gemini API's `generateContent` and `streamGenerateContent?alt=sse`) and Anthropic's Claude
//! (`vertex-anthropic:claude-sonnet-4-5@20250929`, `rawPredict` and `streamRawPredict` with
//! a Messages body that names no model and says `"anthropic_version": "vertex-2023-10-16"`).
//! The wire formats are the Gemini and Anthropic providers' own.
//!
//! Requests go to `https://{location}-aiplatform.googleapis.com/v1/projects/{project}/
//! locations/{location}/publishers/{google|anthropic}/models/{model}:{method}` (the host is
//! `aiplatform.googleapis.com` for the `global` location). The project comes from the builder,
//! `GOOGLE_CLOUD_PROJECT`, or the credentials (a key's `project_id`, a user's quota project);
//! the location from the builder, `GOOGLE_CLOUD_LOCATION`, else `global`, as Google's Gen AI
//! SDK does. `vertex-anthropic` also reads the Anthropic SDK's `ANTHROPIC_VERTEX_PROJECT_ID`
//! and `CLOUD_ML_REGION`. A base URL (`GOOGLE_VERTEX_BASE_URL`, `ANTHROPIC_VERTEX_BASE_URL`)
//! replaces the host.
//!
//! Auth is an OAuth 2.0 access token sent as `Authorization: Bearer`: one given
//! ([`ClientBuilder::bearer_token`](crate::ClientBuilder::bearer_token) or
//! `GOOGLE_CLOUD_ACCESS_TOKEN`), else one minted from Google credentials ([`auth`]).

mod auth;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::anthropic::{self, Anthropic};
use super::encode::{BodyWriter, OpenItem};
use super::gemini::{self, Gemini};
use super::{Api, KeyPolicy, ProviderInfo, Setup, SetupInput, WireApi, bearer_auth, plain_route};
use crate::error::{ConfigError, Error};
use crate::http::encode_component;
use crate::message::Message;
use crate::model::{ModelRequest, ModelResponse, ProviderKind};
use crate::structured::OutputSchema;
use crate::tool::ToolDescriptor;

use auth::{Credentials, TokenSigner};

/// An access token given as it is.
const TOKEN_VARS: &[&str] = &["GOOGLE_CLOUD_ACCESS_TOKEN"];
/// The location when none is configured: what Google's Gen AI SDK picks too.
pub(crate) const DEFAULT_LOCATION: &str = "global";
/// The host of the `global` location.
const GLOBAL_ENDPOINT: &str = "https://aiplatform.googleapis.com";
/// The `anthropic_version` Claude on Vertex AI takes.
pub(crate) const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Gemini on Vertex AI.
pub(crate) static VERTEX: ProviderInfo = ProviderInfo {
    id: "vertex",
    kind: ProviderKind::Gemini,
    api_key_vars: TOKEN_VARS,
    token_vars: &[],
    base_url_vars: &["GOOGLE_VERTEX_BASE_URL"],
    default_base_url: GLOBAL_ENDPOINT,
    key: KeyPolicy::Never,
    normalize_base_url: endpoint_root,
    signer: Some(|input| {
        setup(
            input,
            "vertex",
            &["GOOGLE_CLOUD_PROJECT"],
            &["GOOGLE_CLOUD_LOCATION"],
        )
    }),
    route: plain_route,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: None,
    known_models: Some(&[
        "gemini-2.5-pro",
        "gemini-2.5-flash",
        "gemini-2.5-flash-lite",
    ]),
    api: &Api::<VertexGemini>::new(),
};

/// Anthropic's Claude on Vertex AI.
pub(crate) static VERTEX_ANTHROPIC: ProviderInfo = ProviderInfo {
    id: "vertex-anthropic",
    kind: ProviderKind::Anthropic,
    api_key_vars: TOKEN_VARS,
    token_vars: &[],
    base_url_vars: &["ANTHROPIC_VERTEX_BASE_URL"],
    default_base_url: GLOBAL_ENDPOINT,
    key: KeyPolicy::Never,
    normalize_base_url: endpoint_root,
    signer: Some(|input| {
        setup(
            input,
            "vertex-anthropic",
            &["GOOGLE_CLOUD_PROJECT", "ANTHROPIC_VERTEX_PROJECT_ID"],
            &["GOOGLE_CLOUD_LOCATION", "CLOUD_ML_REGION"],
        )
    }),
    route: plain_route,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: None,
    known_models: Some(&[
        "claude-sonnet-4-5@20250929",
        "claude-haiku-4-5@20251001",
        "claude-opus-4-1@20250805",
    ]),
    api: &Api::<VertexAnthropic>::new(),
};

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// A configured endpoint without a trailing `/` or `/v1`: the API version and the project
/// path are added to it.
fn endpoint_root(url: &str) -> String {
    let url = url.trim().trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url).to_owned()
}

/// The project, location and auth of a Vertex client: the base URL of its project and
/// location, and the token signer unless a token is given.
fn setup(
    input: &SetupInput<'_>,
    provider: &'static str,
    project_vars: &'static [&'static str],
    location_vars: &[&str],
) -> Result<Setup, Error> {
    let settings = input.settings;
    let credentials = match input.authorized {
        true => None,
        false => Some(Credentials::find(
            settings.google_credentials_file.as_deref(),
        )?),
    };
    let project = settings
        .google_project
        .clone()
        .or_else(|| project_vars.iter().find_map(|var| env(var)))
        .or_else(|| {
            credentials
                .as_ref()
                .and_then(Credentials::project)
                .map(str::to_owned)
        })
        .ok_or(ConfigError::MissingProject {
            provider,
            env_var: "GOOGLE_CLOUD_PROJECT",
        })?;
    let location = settings
        .google_location
        .clone()
        .or_else(|| location_vars.iter().find_map(|var| env(var)))
        .unwrap_or_else(|| DEFAULT_LOCATION.to_owned());
    // The location names a host: nothing but a region's letters, digits and dashes.
    let valid_location = !location.is_empty()
        && location
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid_location {
        return Err(Error::Config(ConfigError::InvalidSetting {
            provider,
            setting: "location",
            reason: format!(
                "`{location}` is not a Google Cloud location (such as `us-central1` or `global`)"
            ),
        }));
    }
    let root = match (input.configured, location.as_str()) {
        (true, _) => input.base_url.to_owned(),
        (false, "global") => GLOBAL_ENDPOINT.to_owned(),
        (false, region) => format!("https://{region}-aiplatform.googleapis.com"),
    };
    Ok(Setup {
        signer: credentials.map(|credentials| Arc::new(TokenSigner::new(credentials)) as Arc<_>),
        base_url: Some(format!(
            "{root}/v1/projects/{}/locations/{location}",
            encode_component(&project)
        )),
    })
}

/// A model id as a path segment: percent-encoded, but for the `@` of Claude's versions
/// (`claude-sonnet-4-5@20250929`), which paths allow as it is.
fn model_segment(model: &str) -> String {
    encode_component(model).replace("%40", "@")
}

/// The Gemini API on Vertex AI: Gemini's wire format under the project's publisher path,
/// without function call ids (see [`gemini::encode_messages_without_ids`]).
pub(crate) struct VertexGemini;

impl WireApi for VertexGemini {
    const NAME: &'static str = "vertex";
    const PATH: &'static str = "/publishers/google/models";
    const TOOLS_OPEN: &'static str = Gemini::TOOLS_OPEN;
    const TOOLS_CLOSE: &'static str = Gemini::TOOLS_CLOSE;
    const HISTORY_FIELD: &'static str = Gemini::HISTORY_FIELD;
    type Decoder = <Gemini as WireApi>::Decoder;

    fn path(model: &str, stream: bool) -> Cow<'static, str> {
        let model = model
            .strip_prefix("publishers/google/models/")
            .or_else(|| model.strip_prefix("models/"))
            .unwrap_or(model);
        let model = model_segment(model);
        Cow::Owned(if stream {
            format!("/publishers/google/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("/publishers/google/models/{model}:generateContent")
        })
    }

    fn retry_delay(body: &[u8]) -> Option<Duration> {
        Gemini::retry_delay(body)
    }

    fn encode_messages(
        _request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        open: &mut OpenItem,
    ) -> Result<usize, Error> {
        gemini::encode_messages_without_ids(messages, sealed, open)
    }

    fn tool_definition(tool: &ToolDescriptor) -> Value {
        Gemini::tool_definition(tool)
    }

    fn body_fields(
        request: &ModelRequest,
        stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error> {
        Gemini::body_fields(request, stream, body)
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        Gemini::parse_response(body)
    }
}

/// Anthropic's Messages API on Vertex AI: the model in the URL, the API version in the body.
pub(crate) struct VertexAnthropic;

impl WireApi for VertexAnthropic {
    const NAME: &'static str = "vertex-anthropic";
    const PATH: &'static str = "/publishers/anthropic/models";
    const HISTORY_FIELD: &'static str = Anthropic::HISTORY_FIELD;
    const OUTPUT_AS_TOOL: bool = Anthropic::OUTPUT_AS_TOOL;
    type Decoder = <Anthropic as WireApi>::Decoder;

    fn path(model: &str, stream: bool) -> Cow<'static, str> {
        let model = model
            .strip_prefix("publishers/anthropic/models/")
            .unwrap_or(model);
        let method = if stream {
            "streamRawPredict"
        } else {
            "rawPredict"
        };
        Cow::Owned(format!(
            "/publishers/anthropic/models/{}:{method}",
            model_segment(model)
        ))
    }

    fn encode_messages(
        request: &ModelRequest,
        messages: &[Message],
        sealed: &mut Vec<u8>,
        open: &mut OpenItem,
    ) -> Result<usize, Error> {
        Anthropic::encode_messages(request, messages, sealed, open)
    }

    fn tool_definition(tool: &ToolDescriptor) -> Value {
        Anthropic::tool_definition(tool)
    }

    fn output_tool(schema: &OutputSchema) -> Value {
        Anthropic::output_tool(schema)
    }

    fn mark_tools_breakpoint(definition: &mut Value) {
        Anthropic::mark_tools_breakpoint(definition);
    }

    fn body_fields(
        request: &ModelRequest,
        stream: bool,
        body: &mut BodyWriter<'_>,
    ) -> Result<(), Error> {
        anthropic::write_body_fields(request, stream, body, Some(ANTHROPIC_VERSION))
    }

    fn parse_response(body: &[u8]) -> Result<ModelResponse, Error> {
        Anthropic::parse_response(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_roots() {
        assert_eq!(
            VertexGemini::path("models/gemini-2.5-flash", true),
            "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            VertexAnthropic::path("claude-sonnet-4-5@20250929", false),
            "/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
        );
        assert_eq!(
            VertexAnthropic::path("a/b", true),
            "/publishers/anthropic/models/a%2Fb:streamRawPredict"
        );
        assert_eq!(
            endpoint_root("https://europe-west4-aiplatform.googleapis.com/v1/"),
            "https://europe-west4-aiplatform.googleapis.com"
        );
    }
}
