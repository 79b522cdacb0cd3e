//! A small MCP client for the official conformance suite
//! (`conformance client --command "<this binary>" --scenario <name>`).
//!
//! The runner appends the server URL as the last argument and names the scenario in
//! `MCP_CONFORMANCE_SCENARIO` (and, for some, gives client credentials or the tool calls to
//! make in `MCP_CONFORMANCE_CONTEXT`). Exit status 0 means the client did its part.
//!
//! Servers behind OAuth are authorized as a headless client would: the authorization URL is
//! requested directly (the suite's authorization server approves without a user) and the
//! redirect it answers with is handed back to the SDK.

use std::process::ExitCode;

use aquaregia_mcp::{
    Connector, ElicitationRequest, ElicitationResponse, HttpOptions, IdentityProvider, OAuth,
};
use serde_json::{Value, json};

/// This client's metadata document URL (a client ID metadata document), as the suite's
/// reference client uses.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .next_back()
        .ok_or("usage: mcp_conformance_client <server-url>")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let options = HttpOptions::new();
    // A client without a user: every form is accepted with its fields' defaults.
    let connection = Connector::new()
        .oauth(oauth(&scenario, &context)?)
        .on_elicitation(|request| async move {
            match request {
                ElicitationRequest::Form { schema, .. } => {
                    let defaults: serde_json::Map<String, Value> = schema["properties"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter_map(|(name, field)| {
                            Some((name.clone(), field.get("default")?.clone()))
                        })
                        .collect();
                    ElicitationResponse::Accept(Some(Value::Object(defaults)))
                }
                _ => ElicitationResponse::Decline,
            }
        })
        .http(&url, options)
        .await?;
    let tools = connection.tools().await?;
    eprintln!(
        "connected ({}), {} tools",
        connection.server_info().protocol_version,
        tools.len()
    );
    let call = |name: &str, args: serde_json::Value| {
        let tool = tools.iter().find(|t| t.name() == name).cloned();
        let name = name.to_owned();
        async move {
            let tool = tool.ok_or_else(|| format!("the server has no `{name}` tool"))?;
            let result = tool.execute(args).await.map_err(|e| e.to_string())?;
            eprintln!("{name} -> {result}");
            Ok::<_, String>(result)
        }
    };
    // Tool calls the suite asks every client to make, with their arguments.
    if let Some(calls) = context["toolCalls"].as_array() {
        for planned in calls {
            let name = planned["name"].as_str().unwrap_or_default();
            call(name, planned["arguments"].clone()).await?;
        }
    }
    match scenario.as_str() {
        "tools_call" => {
            call("add_numbers", json!({"a": 5, "b": 3})).await?;
        }
        "sse-retry" => {
            call("test_reconnection", json!({})).await?;
        }
        "elicitation-sep1034-client-defaults" => {
            call("test_client_elicitation_defaults", json!({})).await?;
        }
        // A schema goes back to the server exactly as it was listed.
        "json-schema-2020-12-preservation" => {
            let listed = tools
                .iter()
                .find(|t| t.name() == "json_schema_2020_12_tool")
                .ok_or("the server has no `json_schema_2020_12_tool` tool")?;
            let schema = listed.descriptor().input_schema.clone();
            call("json_schema_echo", json!({"schema": schema})).await?;
        }
        // Authorization scenarios protect tool calls too (step-up, for one).
        auth if auth.starts_with("auth/") && tools.iter().any(|t| t.name() == "test-tool") => {
            call("test-tool", json!({})).await?;
        }
        // What a client with nothing particular to do does: use every tool it was offered,
        // once, with the least arguments its schema asks for. A failing call is reported, not
        // fatal: some servers only list tools.
        other if !other.starts_with("auth/") && context["toolCalls"].is_null() => {
            for tool in &tools {
                let args = least_arguments(&tool.descriptor().input_schema);
                if let Err(error) = call(tool.name(), args).await {
                    eprintln!("{}: {error}", tool.name());
                }
            }
        }
        _ => {}
    }
    connection.close().await;
    Ok(())
}

/// An arguments object with each required property set to a value of its type.
fn least_arguments(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else {
            continue;
        };
        let value = match schema["properties"][name]["type"].as_str() {
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("example"),
        };
        args.insert(name.to_owned(), value);
    }
    Value::Object(args)
}

/// Client credentials (with the secret or the private key the context gives) when the scenario
/// is about them, the enterprise-managed or workload identity grant when the context gives
/// their tokens, else the authorization-code flow (with the pre-registered client the context
/// may give).
fn oauth(scenario: &str, context: &Value) -> Result<OAuth, String> {
    let client_id = context["client_id"].as_str();
    let secret = context["client_secret"].as_str();
    if scenario.starts_with("auth/client-credentials")
        && let Some(id) = client_id
    {
        if let Some(secret) = secret {
            return Ok(OAuth::client_credentials(id, secret));
        }
        // A private key instead of a secret: the client signs its assertions (RFC 7523).
        if let Some(pem) = context["private_key_pem"].as_str() {
            let algorithm = context["signing_algorithm"]
                .as_str()
                .unwrap_or("ES256")
                .parse()?;
            return Ok(OAuth::client_credentials_jwt(id, pem, algorithm));
        }
    }
    // Enterprise-managed authorization (SEP-990): the context is the user's ID token from the
    // identity provider, that provider, and the client registered with the MCP server's
    // authorization server.
    if let (Some(id_token), Some(issuer), Some(token_endpoint), Some(idp_client)) = (
        context["idp_id_token"].as_str(),
        context["idp_issuer"].as_str(),
        context["idp_token_endpoint"].as_str(),
        context["idp_client_id"].as_str(),
    ) {
        let idp = IdentityProvider::new(issuer, token_endpoint, idp_client);
        let mut oauth = OAuth::enterprise(idp, id_token);
        if let Some(id) = client_id {
            oauth = oauth.client_id(id);
        }
        if let Some(secret) = secret {
            oauth = oauth.client_secret(secret);
        }
        return Ok(oauth);
    }
    // Workload identity (SEP-1933): a JWT the platform issued to the workload.
    if let (Some(id), Some(jwt)) = (client_id, context["valid_jwt"].as_str()) {
        return Ok(OAuth::workload_identity(id, jwt));
    }
    let mut oauth = OAuth::new("http://127.0.0.1:3000/callback")
        .client_metadata_url(CLIENT_METADATA_URL)
        .on_authorize(|prompt| async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()?;
            let response = client.get(&prompt.url).send().await?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .ok_or_else(|| format!("the authorization URL answered {}", response.status()))?;
            Ok(location.to_owned())
        });
    if let Some(id) = client_id {
        oauth = oauth.client_id(id);
        if let Some(secret) = secret {
            oauth = oauth.client_secret(secret);
        }
    }
    Ok(oauth)
}
