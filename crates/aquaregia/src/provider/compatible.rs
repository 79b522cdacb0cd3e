//! OpenAI-compatible presets: hosted clouds and local servers that speak Chat Completions,
//! each with its real default base URL, key variable and quirks, in one table.
//!
//! Every preset reads its base URL from `<NAME>_BASE_URL` too. Quirks:
//! - `max_tokens`: servers that do not know `max_completion_tokens` (or treat it as an
//!   alias only on some models) get the older field;
//! - Mistral rejects any field it does not know (`stream_options` is a 422) and sends usage
//!   in the last chunk anyway;
//! - DeepSeek answers reasoning as `reasoning_content` and, in thinking mode, rejects a
//!   request whose tool-calling assistant turns lost it, so it goes back with every
//!   assistant message (the API ignores it where it is not needed).

use super::openai_chat::{ChatDialect, OpenAiChat};
use super::{Api, KeyPolicy, ProviderInfo, base_url_as_is, bearer_auth, plain_route};
use crate::model::ProviderKind;

/// Declares each preset's [`ChatDialect`] and its [`ProviderInfo`] static, one row each:
/// `STATIC, Dialect = "id", [key variables], key policy, "BASE_URL_VARIABLE", "default base
/// URL", "max tokens field", stream options, reasoning back;`
macro_rules! presets {
    ($(
        $(#[$doc:meta])*
        $info:ident, $dialect:ident = $id:literal, [$($key:literal),*], $policy:ident,
        $base_var:literal, $url:literal, $max_tokens:literal, $stream_options:literal,
        $reasoning_back:literal;
    )*) => {$(
        #[doc = concat!("The `", $id, "` preset's Chat Completions dialect.")]
        pub(crate) struct $dialect;

        impl ChatDialect for $dialect {
            const NAME: &'static str = $id;
            const MAX_TOKENS_FIELD: &'static str = $max_tokens;
            const STREAM_OPTIONS: bool = $stream_options;
            const REASONING_BACK: bool = $reasoning_back;
        }

        $(#[$doc])*
        pub(crate) static $info: ProviderInfo = ProviderInfo {
            id: $id,
            kind: ProviderKind::OpenAiChat,
            api_key_vars: &[$($key),*],
            token_vars: &[],
            base_url_vars: &[$base_var],
            default_base_url: $url,
            key: KeyPolicy::$policy,
            normalize_base_url: base_url_as_is,
            signer: None,
            route: plain_route,
            auth_header: bearer_auth,
            static_headers: &[],
            default_model: None,
            known_models: None,
            api: &Api::<OpenAiChat<$dialect>>::new(),
        };
    )*};
}

presets! {
    /// OpenRouter: one key for many vendors' models (`openrouter:anthropic/claude-sonnet-4.5`).
    OPENROUTER, OpenRouter = "openrouter", ["OPENROUTER_API_KEY"], Required,
        "OPENROUTER_BASE_URL", "https://openrouter.ai/api/v1", "max_tokens", true, false;
    /// Groq.
    GROQ, Groq = "groq", ["GROQ_API_KEY"], Required,
        "GROQ_BASE_URL", "https://api.groq.com/openai/v1", "max_completion_tokens", true, false;
    /// DeepSeek: reasoning decoded from `reasoning_content` and sent back.
    DEEPSEEK, DeepSeek = "deepseek", ["DEEPSEEK_API_KEY"], Required,
        "DEEPSEEK_BASE_URL", "https://api.deepseek.com", "max_tokens", true, true;
    /// Mistral (La Plateforme).
    MISTRAL, Mistral = "mistral", ["MISTRAL_API_KEY"], Required,
        "MISTRAL_BASE_URL", "https://api.mistral.ai/v1", "max_tokens", false, false;
    /// xAI (Grok).
    XAI, Xai = "xai", ["XAI_API_KEY"], Required,
        "XAI_BASE_URL", "https://api.x.ai/v1", "max_tokens", true, false;
    /// Together AI.
    TOGETHER, Together = "together", ["TOGETHER_API_KEY"], Required,
        "TOGETHER_BASE_URL", "https://api.together.xyz/v1", "max_tokens", true, false;
    /// Fireworks AI (`fireworks:accounts/fireworks/models/...`).
    FIREWORKS, Fireworks = "fireworks", ["FIREWORKS_API_KEY"], Required,
        "FIREWORKS_BASE_URL", "https://api.fireworks.ai/inference/v1", "max_tokens", true, false;
    /// Cerebras.
    CEREBRAS, Cerebras = "cerebras", ["CEREBRAS_API_KEY"], Required,
        "CEREBRAS_BASE_URL", "https://api.cerebras.ai/v1", "max_completion_tokens", true, false;
    /// A local LM Studio server; no key.
    LMSTUDIO, LmStudio = "lmstudio", [], Never,
        "LMSTUDIO_BASE_URL", "http://127.0.0.1:1234/v1", "max_tokens", true, false;
    /// A local vLLM server; the key its `--api-key` (or `VLLM_API_KEY`) asks for, if any.
    VLLM, Vllm = "vllm", ["VLLM_API_KEY"], Never,
        "VLLM_BASE_URL", "http://127.0.0.1:8000/v1", "max_tokens", true, false;
    /// A local llama.cpp server (`llama-server`); the key its `--api-key` (or
    /// `LLAMA_API_KEY`) asks for, if any.
    LLAMACPP, LlamaCpp = "llamacpp", ["LLAMA_API_KEY"], Never,
        "LLAMACPP_BASE_URL", "http://127.0.0.1:8080/v1", "max_tokens", true, false;
}
