//! Ollama: a local server, spoken to through its Chat Completions endpoint.

use super::openai_chat::OpenAiChat;
use super::{Api, KeyPolicy, ProviderInfo, bearer_auth, plain_route};
use crate::model::ProviderKind;

/// A local Ollama server at `OLLAMA_HOST` (default `127.0.0.1:11434`); no key.
pub(crate) static OLLAMA: ProviderInfo = ProviderInfo {
    id: "ollama",
    kind: ProviderKind::OpenAiChat,
    api_key_vars: &[],
    token_vars: &[],
    base_url_vars: &["OLLAMA_HOST"],
    default_base_url: "http://127.0.0.1:11434",
    key: KeyPolicy::Never,
    normalize_base_url: ollama_base_url,
    signer: None,
    route: plain_route,
    auth_header: bearer_auth,
    static_headers: &[],
    default_model: None,
    known_models: None,
    api: &Api::<OpenAiChat>::new(),
};

/// `OLLAMA_HOST` may be `host:port`, `0.0.0.0` or a full URL; the API lives under `/v1`.
fn ollama_base_url(host: &str) -> String {
    let host = host.trim().trim_end_matches('/');
    let with_scheme = if host.contains("://") {
        host.to_owned()
    } else {
        format!("http://{host}")
    };
    let with_port = match reqwest::Url::parse(&with_scheme) {
        Ok(url) if url.port().is_none() && !host.contains("://") => {
            format!("{with_scheme}:11434")
        }
        _ => with_scheme,
    };
    let local = with_port.replace("://0.0.0.0", "://127.0.0.1");
    if local.ends_with("/v1") {
        local
    } else {
        format!("{local}/v1")
    }
}

#[cfg(test)]
mod tests {
    use super::ollama_base_url;

    #[test]
    fn ollama_host_forms() {
        assert_eq!(
            ollama_base_url("127.0.0.1:11434"),
            "http://127.0.0.1:11434/v1"
        );
        assert_eq!(ollama_base_url("0.0.0.0"), "http://127.0.0.1:11434/v1");
        assert_eq!(
            ollama_base_url("http://gpu-box:8080/"),
            "http://gpu-box:8080/v1"
        );
        assert_eq!(
            ollama_base_url("https://o.example/v1"),
            "https://o.example/v1"
        );
    }
}
