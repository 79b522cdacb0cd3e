//! Tools without a model: building, validating, executing, registering.

use std::sync::Arc;

use aquaregia::{
    Error, Tool, ToolDescriptor, ToolExecError, ToolExecutor, ToolOutput, ToolRegistry, tool,
};
use serde_json::{Value, json};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Forecast {
    /// City name
    city: String,
    /// Days ahead
    days: Option<u8>,
}

#[tokio::test]
async fn typed_tools_derive_their_schema_and_decode_arguments() {
    let forecast = tool("forecast")
        .description("Weather forecast")
        .input::<Forecast>()
        .execute(
            |f: Forecast| async move { Ok(format!("{} in {} days", f.city, f.days.unwrap_or(1))) },
        );
    let schema = &forecast.descriptor().input_schema;
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["required"], json!(["city"]));
    assert_eq!(
        forecast.execute(json!({"city": "Oslo", "days": 3})).await,
        Ok(ToolOutput::text("Oslo in 3 days"))
    );
    assert!(matches!(
        forecast.execute(json!({"days": 3})).await,
        Err(ToolExecError::InvalidArguments(_))
    ));
}

#[tokio::test]
async fn schemas_are_kept_verbatim_and_refs_validate() {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}},
        "properties": {"at": {"$ref": "#/$defs/point"}, "n": {"type": "integer", "format": "int64"}},
        "required": ["at"],
        "additionalProperties": false
    });
    let t = tool("place")
        .raw_schema(schema.clone())
        .execute_raw(|args: Value| async move { Ok(args) });
    assert_eq!(t.descriptor().input_schema, schema);
    assert_eq!(
        t.execute(json!({"at": {"x": 1.5}})).await,
        Ok(ToolOutput::Json(json!({"at": {"x": 1.5}})))
    );
    let error = t.execute(json!({"at": {"y": 1}})).await.unwrap_err();
    assert!(
        matches!(&error, ToolExecError::InvalidArguments(m) if m.contains("/at")),
        "{error}"
    );
    assert!(
        t.execute(json!({"at": {"x": 1}, "extra": true}))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn hand_written_executors_plug_in() {
    struct Upper;
    #[aquaregia::async_trait]
    impl ToolExecutor for Upper {
        async fn execute(&self, args: Value) -> Result<ToolOutput, ToolExecError> {
            let text = args["text"].as_str().ok_or("text must be a string")?;
            Ok(ToolOutput::text(text.to_uppercase()))
        }
    }
    let upper = Tool::new(
        ToolDescriptor {
            name: "upper".into(),
            description: "Upper-cases text".into(),
            input_schema: json!({"type": "object", "properties": {"text": {}}}),
        },
        Arc::new(Upper),
    );
    assert_eq!(
        upper.execute(json!({"text": "hi"})).await,
        Ok(ToolOutput::text("HI"))
    );
    assert_eq!(
        upper.execute(json!({"text": 1})).await,
        Err(ToolExecError::Execution("text must be a string".into()))
    );
}

#[test]
fn registry_checks_names() {
    let make = |name: &str| tool(name).execute_raw(|_| async { Ok(json!(null)) });
    let ok = ToolRegistry::from_tools(vec![make("a-b_C9"), make(&"x".repeat(64))]).unwrap();
    assert_eq!(ok.len(), 2);
    assert!(ok.get("a-b_C9").is_some());
    for bad in ["", "has space", "dot.name", &"y".repeat(65), "émoji"] {
        let err = ToolRegistry::from_tools(vec![make(bad)]).unwrap_err();
        assert!(matches!(err, Error::ToolRegistry(_)), "{bad}");
    }
    let err = ToolRegistry::from_tools(vec![make("dup"), make("dup"), make("dup")]).unwrap_err();
    assert_eq!(err.to_string().matches("`dup`").count(), 1, "{err}");
}

#[test]
fn uncompilable_schemas_do_not_block_the_tool() {
    let t = tool("odd")
        .raw_schema(json!({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}))
        .execute_raw(|_| async { Ok(json!("ran")) });
    // A schema the validator cannot compile is logged and skipped, not fatal.
    assert!(t.validate(&json!({"a": 1})).is_ok());
}

/// Models send `null` for optional parameters they skip; that means "absent", not a type error.
#[tokio::test]
async fn null_for_an_optional_argument_is_treated_as_absent() {
    let t = tool("list")
        .raw_schema(json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "verbose": {"type": "boolean"}},
            "required": ["path"]
        }))
        .execute_raw(|args: Value| async move { Ok(args) });
    assert_eq!(
        t.execute(json!({"path": "/tmp", "verbose": null})).await,
        Ok(ToolOutput::Json(json!({"path": "/tmp"})))
    );
    // A required argument is still checked, and a schema that allows null keeps it.
    assert!(matches!(
        t.execute(json!({"path": null})).await,
        Err(ToolExecError::InvalidArguments(_))
    ));
    let nullable = tool("n")
        .raw_schema(json!({"type": "object", "properties": {"x": {"type": ["string", "null"]}}}))
        .execute_raw(|args: Value| async move { Ok(args) });
    assert_eq!(
        nullable.execute(json!({"x": null})).await,
        Ok(ToolOutput::Json(json!({"x": null})))
    );
}

/// An error a tool returns with `?` stays the error it was, for callers to downcast.
#[tokio::test]
async fn a_tool_error_keeps_its_cause() {
    let t = tool("read")
        .raw_schema(json!({"type": "object"}))
        .execute_raw(|_args: Value| async move {
            let text = std::fs::read_to_string("/nonexistent/aquaregia/file")?;
            Ok(text)
        });
    let error = t.execute(json!({})).await.unwrap_err();
    let ToolExecError::Failed(cause) = &error else {
        panic!("expected a failure with its cause, got {error:?}");
    };
    let io = cause.downcast_ref::<std::io::Error>().unwrap();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(error.to_string(), io.to_string());
}
