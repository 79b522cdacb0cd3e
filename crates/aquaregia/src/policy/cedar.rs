//! User policies in Cedar.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use cedar_policy::{
    Authorizer, Context, Effect, Entities, Entity, EntityId, EntityTypeName, EntityUid, PolicySet,
    Request, RestrictedExpression,
};
use serde_json::Value;

use super::{Decision, POLICY_TARGET, PolicyRequest};

/// The annotation that turns a `permit` into an "ask": `@decision("ask")`.
const DECISION: &str = "decision";

/// A Cedar policy set deciding tool calls.
///
/// The request each call makes (see [`PolicyRequest`]):
/// - principal `Session::"<session id>"`, attribute `front_end` (`"cli"`, `"acp"`, `"sdk"`);
/// - action `Action::"call"`;
/// - resource `Tool::"<tool name>"`, attributes `name` (string), `server` (string, only when
///   known: test it with `resource has server`), `hints_trusted` (bool), `exists` (bool) and
///   `annotations`, a record with `read_only`, `destructive`, `idempotent`, `open_world`
///   (bools, each only when the tool sets it) and `title`;
/// - context `args`, the call's arguments (JSON objects become records, arrays sets, whole
///   numbers longs; other numbers become their decimal text and `null` fields are left out),
///   `inside_workspace` (bool, only when the caller checked a file path) and `mode` (the
///   session's [`PermissionMode`](super::PermissionMode) id, only when it has one).
///
/// The outcome:
/// - a matching `forbid` → [`Decision::Deny`], with the policy's `@reason("...")` annotation
///   as the reason when it has one (Cedar's forbid wins over every permit);
/// - a matching `permit` annotated `@decision("ask")` → [`Decision::Ask`] (when both an ask
///   permit and a plain permit match, it asks);
/// - a matching plain `permit` → [`Decision::Allow`];
/// - no matching policy → no decision: the next rule of the [`PermissionPolicy`] decides.
///
/// A policy whose condition errors (an attribute the call does not have, say) is skipped, as
/// Cedar does, and the error logged at `warn` (target [`POLICY_TARGET`]).
///
/// ```
/// # #[cfg(feature = "cedar")] {
/// use aquaregia::policy::{CedarPolicy, Decision, PermissionPolicy, PolicyRequest};
/// use aquaregia::ToolCall;
/// use serde_json::json;
///
/// let cedar = CedarPolicy::parse(r#"
///     @reason("deleting files is not allowed")
///     forbid(principal, action == Action::"call", resource)
///     when { resource.name == "run_command" && context.args.command like "rm *" };
///
///     permit(principal, action == Action::"call", resource)
///     when { resource.name == "run_command" && context.args.command like "ls*" };
///
///     @decision("ask")
///     permit(principal, action == Action::"call", resource)
///     when { resource.name == "run_command" && context.args.command like "cargo *" };
/// "#).unwrap();
/// let policy = PermissionPolicy::new().cedar(cedar);
/// let decide = |command: &str| {
///     let call = ToolCall {
///         id: "1".into(),
///         name: "run_command".into(),
///         arguments: json!({ "command": command }),
///     };
///     policy.decide(&PolicyRequest::new("s", &call, None))
/// };
/// assert_eq!(decide("rm -rf /"), Decision::Deny("deleting files is not allowed".into()));
/// assert_eq!(decide("ls -la"), Decision::Allow);
/// assert_eq!(decide("cargo test"), Decision::Ask);
/// // Nothing matches: the next rule of the PermissionPolicy (here none: the fallback) decides.
/// assert_eq!(decide("make"), Decision::Ask);
/// # }
/// ```
///
/// [`PermissionPolicy`]: super::PermissionPolicy
#[derive(Clone)]
pub struct CedarPolicy {
    policies: PolicySet,
    source: String,
}

impl fmt::Debug for CedarPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CedarPolicy")
            .field("source", &self.source)
            .field("policies", &self.policies.policies().count())
            .finish()
    }
}

/// A Cedar policy that cannot be used.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file cannot be read.
    #[error("cannot read the policy file {path}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid Cedar, or uses an annotation wrongly.
    #[error("the Cedar policy {source_name} is not valid: {message}")]
    Invalid {
        /// The file, or `<text>`.
        source_name: String,
        /// What is wrong, with where.
        message: String,
    },
}

impl CedarPolicy {
    /// Parses Cedar policy text.
    ///
    /// # Errors
    /// [`PolicyError::Invalid`] when the text is not Cedar, or a `@decision` annotation is on a
    /// `forbid` or has a value other than `"ask"`.
    pub fn parse(text: &str) -> Result<Self, PolicyError> {
        Self::parse_named(text, "<text>")
    }

    /// Reads and parses a Cedar policy file.
    ///
    /// # Errors
    /// [`PolicyError::Read`] when the file cannot be read, else as [`CedarPolicy::parse`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse_named(&text, &path.display().to_string())
    }

    fn parse_named(text: &str, name: &str) -> Result<Self, PolicyError> {
        let invalid = |message: String| PolicyError::Invalid {
            source_name: name.to_owned(),
            message,
        };
        let policies = PolicySet::from_str(text).map_err(|e| invalid(format!("{e:?}")))?;
        for policy in policies.policies() {
            if let Some(value) = policy.annotation(DECISION) {
                if value != "ask" {
                    return Err(invalid(format!(
                        "policy {} has @decision(\"{value}\"); the only value is \"ask\"",
                        policy.id()
                    )));
                }
                if policy.effect() == Effect::Forbid {
                    return Err(invalid(format!(
                        "policy {} is a forbid with @decision(\"ask\"); put it on a permit",
                        policy.id()
                    )));
                }
            }
        }
        Ok(Self {
            policies,
            source: name.to_owned(),
        })
    }

    /// What these policies decide for `request`, or `None` when none of them matches.
    pub fn decide(&self, request: &PolicyRequest) -> Option<Decision> {
        let (cedar_request, entities) = match cedar_request(request) {
            Ok(built) => built,
            Err(message) => {
                tracing::warn!(
                    target: POLICY_TARGET,
                    tool = %request.tool,
                    "the call cannot be put to the Cedar policy {}: {message}",
                    self.source
                );
                return None;
            }
        };
        let response = Authorizer::new().is_authorized(&cedar_request, &self.policies, &entities);
        for error in response.diagnostics().errors() {
            tracing::warn!(
                target: POLICY_TARGET,
                tool = %request.tool,
                "a policy of {} was skipped: {error}",
                self.source
            );
        }
        let mut determining = response
            .diagnostics()
            .reason()
            .filter_map(|id| self.policies.policy(id))
            .peekable();
        determining.peek()?;
        match response.decision() {
            cedar_policy::Decision::Deny => {
                let reason = determining
                    .find_map(|p| p.annotation("reason").map(str::to_owned))
                    .unwrap_or_else(|| format!("refused by the policy {}", self.source));
                Some(Decision::Deny(reason))
            }
            cedar_policy::Decision::Allow => {
                if determining.any(|p| p.annotation(DECISION) == Some("ask")) {
                    Some(Decision::Ask)
                } else {
                    Some(Decision::Allow)
                }
            }
        }
    }
}

fn uid(kind: &str, id: &str) -> Result<EntityUid, String> {
    let kind = EntityTypeName::from_str(kind).map_err(|e| e.to_string())?;
    let Ok(id) = EntityId::from_str(id);
    Ok(EntityUid::from_type_name_and_id(kind, id))
}

fn cedar_request(request: &PolicyRequest) -> Result<(Request, Entities), String> {
    let principal = uid("Session", &request.principal)?;
    let action = uid("Action", "call")?;
    let resource = uid("Tool", &request.tool)?;

    let string = |s: &str| RestrictedExpression::new_string(s.to_owned());
    let principal_entity = Entity::new(
        principal.clone(),
        HashMap::from([("front_end".to_owned(), string(&request.front_end))]),
        HashSet::new(),
    )
    .map_err(|e| e.to_string())?;

    let a = &request.annotations;
    let mut annotations = Vec::new();
    for (key, value) in [
        ("read_only", a.read_only),
        ("destructive", a.destructive),
        ("idempotent", a.idempotent),
        ("open_world", a.open_world),
    ] {
        if let Some(value) = value {
            annotations.push((key.to_owned(), RestrictedExpression::new_bool(value)));
        }
    }
    if let Some(title) = &a.title {
        annotations.push(("title".to_owned(), string(title)));
    }
    let mut attrs = HashMap::from([
        ("name".to_owned(), string(&request.tool)),
        (
            "hints_trusted".to_owned(),
            RestrictedExpression::new_bool(request.hints_trusted),
        ),
        (
            "exists".to_owned(),
            RestrictedExpression::new_bool(request.exists),
        ),
        (
            "annotations".to_owned(),
            RestrictedExpression::new_record(annotations).map_err(|e| e.to_string())?,
        ),
    ]);
    if let Some(server) = &request.server {
        attrs.insert("server".to_owned(), string(server));
    }
    let resource_entity =
        Entity::new(resource.clone(), attrs, HashSet::new()).map_err(|e| e.to_string())?;

    let mut context = vec![("args".to_owned(), json_value(&request.arguments)?)];
    if let Some(inside) = request.inside_workspace {
        context.push((
            "inside_workspace".to_owned(),
            RestrictedExpression::new_bool(inside),
        ));
    }
    if let Some(mode) = request.mode {
        context.push(("mode".to_owned(), string(mode.id())));
    }
    let context = Context::from_pairs(context).map_err(|e| e.to_string())?;
    let entities = Entities::from_entities([principal_entity, resource_entity], None)
        .map_err(|e| e.to_string())?;
    let request =
        Request::new(principal, action, resource, context, None).map_err(|e| e.to_string())?;
    Ok((request, entities))
}

/// JSON as a Cedar value, built directly (never through Cedar's JSON format, whose `__entity`
/// and `__extn` escapes a model could otherwise write into its arguments).
fn json_value(value: &Value) -> Result<RestrictedExpression, String> {
    Ok(match value {
        // Only reached at the top level (fields and elements that are null are left out).
        Value::Null => RestrictedExpression::new_record([]).map_err(|e| e.to_string())?,
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => RestrictedExpression::new_long(i),
            None => RestrictedExpression::new_string(n.to_string()),
        },
        Value::String(s) => RestrictedExpression::new_string(s.clone()),
        Value::Array(items) => RestrictedExpression::new_set(
            items
                .iter()
                .filter(|v| !v.is_null())
                .map(json_value)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Value::Object(fields) => RestrictedExpression::new_record(
            fields
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| Ok((k.clone(), json_value(v)?)))
                .collect::<Result<Vec<_>, String>>()?,
        )
        .map_err(|e| e.to_string())?,
    })
}
