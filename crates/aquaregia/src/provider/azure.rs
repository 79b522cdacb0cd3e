//! Azure OpenAI and Azure AI Foundry: `azure:<deployment>` (Chat Completions) and
//! `azure-responses:<deployment>` (the Responses API on the v1 endpoint).
//!
//! The resource comes from `AZURE_OPENAI_BASE_URL` or `AZURE_OPENAI_ENDPOINT`
//! (`https://<resource>.openai.azure.com`, or `https://<resource>.services.ai.azure.com` for
//! Foundry). For `azure:`, an endpoint (or a URL ending in `/openai`) means the classic
//! deployment URLs, `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=`
//! (`AZURE_OPENAI_API_VERSION`, else `OPENAI_API_VERSION`, else [`DEFAULT_API_VERSION`]); a URL
//! ending in `/openai/v1` means the v1 endpoint, which takes the deployment as `model` and no
//! `api-version`. `azure-responses:` always uses the v1 endpoint.
//!
//! The key goes in `api-key` (`AZURE_OPENAI_API_KEY`); a Microsoft Entra ID token goes as a
//! bearer token instead (`AZURE_OPENAI_AD_TOKEN`, or
//! [`ClientBuilder::bearer_token`](crate::ClientBuilder::bearer_token)).

use std::borrow::Cow;

use reqwest::header::HeaderName;

use super::openai_chat::{ChatDialect, OpenAiChat};
use super::openai_responses::OpenAiResponses;
use super::{Api, KeyPolicy, ProviderInfo};
use crate::http::{Route, encode_component};
use crate::model::ProviderKind;

/// The `api-version` of classic deployment URLs when none is configured: the latest
/// generally available version of the dated inference API.
pub(crate) const DEFAULT_API_VERSION: &str = "2024-10-21";

const KEY_VARS: &[&str] = &["AZURE_OPENAI_API_KEY"];
const TOKEN_VARS: &[&str] = &["AZURE_OPENAI_AD_TOKEN"];
const BASE_URL_VARS: &[&str] = &["AZURE_OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT"];
const API_VERSION_VARS: &[&str] = &["AZURE_OPENAI_API_VERSION", "OPENAI_API_VERSION"];

/// Chat Completions on an Azure OpenAI deployment.
pub(crate) static AZURE: ProviderInfo = ProviderInfo {
    id: "azure",
    kind: ProviderKind::OpenAiChat,
    api_key_vars: KEY_VARS,
    token_vars: TOKEN_VARS,
    base_url_vars: BASE_URL_VARS,
    default_base_url: "",
    key: KeyPolicy::Required,
    normalize_base_url: chat_base_url,
    signer: None,
    route: chat_route,
    auth_header: api_key_header,
    static_headers: &[],
    default_model: None,
    known_models: None,
    api: &Api::<OpenAiChat<AzureChat>>::new(),
};

/// The Responses API on an Azure OpenAI resource's v1 endpoint.
pub(crate) static AZURE_RESPONSES: ProviderInfo = ProviderInfo {
    id: "azure-responses",
    kind: ProviderKind::OpenAiResponses,
    api_key_vars: KEY_VARS,
    token_vars: TOKEN_VARS,
    base_url_vars: BASE_URL_VARS,
    default_base_url: "",
    key: KeyPolicy::Required,
    normalize_base_url: v1_base_url,
    signer: None,
    route: |_| Route::Plain,
    auth_header: api_key_header,
    static_headers: &[],
    default_model: None,
    known_models: None,
    api: &Api::<OpenAiResponses>::new(),
};

/// Azure's Chat Completions: OpenAI's, named `azure` in errors.
pub(crate) struct AzureChat;

impl ChatDialect for AzureChat {
    const NAME: &'static str = "azure";
}

fn api_key_header(key: &str) -> (HeaderName, String) {
    (HeaderName::from_static("api-key"), key.to_owned())
}

/// `url` without a trailing `/`.
fn trimmed(url: &str) -> &str {
    url.trim().trim_end_matches('/')
}

/// The v1 endpoint (`…/openai/v1`) as given; anything else is the root of the classic
/// deployment URLs, `{endpoint}/openai`.
fn chat_base_url(url: &str) -> String {
    let url = trimmed(url);
    if url.ends_with("/openai/v1") || url.ends_with("/openai") {
        url.to_owned()
    } else {
        format!("{url}/openai")
    }
}

/// The v1 endpoint of a resource: `{endpoint}/openai/v1`.
fn v1_base_url(url: &str) -> String {
    let url = trimmed(url);
    if url.ends_with("/openai/v1") {
        url.to_owned()
    } else if url.ends_with("/openai") {
        format!("{url}/v1")
    } else {
        format!("{url}/openai/v1")
    }
}

/// Deployment URLs with an `api-version`, unless the base URL is the v1 endpoint.
fn chat_route(base_url: &str) -> Route {
    if base_url.ends_with("/openai/v1") {
        return Route::Plain;
    }
    let version = API_VERSION_VARS
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
        .map_or(Cow::Borrowed(DEFAULT_API_VERSION), Cow::Owned);
    Route::Deployment {
        query: format!("api-version={}", encode_component(version.trim())),
    }
}
