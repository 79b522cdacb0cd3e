//! JSON Schema validation of tool arguments and structured answers, through `boon` (feature
//! `jsonschema`, on by default; drafts 4, 6, 7, 2019-09 and 2020-12, the draft a schema's
//! `$schema` names, else 2020-12). Schemas are checked on their own: a `$ref` to another
//! document is never fetched (from files or the network), so such a schema does not compile
//! and the tool's arguments go unchecked, as they do without the feature. Without it every
//! value passes, and tools and typed answers rely on their own decoding alone.

use serde_json::Value;

/// A compiled schema.
pub(crate) struct SchemaCheck {
    #[cfg(feature = "jsonschema")]
    schemas: boon::Schemas,
    #[cfg(feature = "jsonschema")]
    index: boon::SchemaIndex,
}

/// Where the schema being compiled is said to live: its `$id`s and `$ref`s resolve against it.
#[cfg(feature = "jsonschema")]
const LOCATION: &str = "urn:aquaregia:schema";

impl SchemaCheck {
    /// Compiles `schema`; the error says why it is not a usable schema.
    #[cfg_attr(not(feature = "jsonschema"), allow(clippy::unnecessary_wraps))]
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        #[cfg(feature = "jsonschema")]
        {
            let mut compiler = boon::Compiler::new();
            // No loader: nothing outside the schema itself is read.
            compiler.use_loader(Box::new(boon::SchemeUrlLoader::new()));
            compiler
                .add_resource(LOCATION, schema.clone())
                .map_err(|error| error.to_string())?;
            let mut schemas = boon::Schemas::new();
            let index = compiler
                .compile(LOCATION, &mut schemas)
                .map_err(|error| error.to_string())?;
            Ok(Self { schemas, index })
        }
        #[cfg(not(feature = "jsonschema"))]
        {
            let _ = schema;
            Ok(Self {})
        }
    }

    /// Up to `limit` problems of `value`, each as `<instance path>: <what is wrong>`; empty when
    /// it matches.
    pub(crate) fn problems(&self, value: &Value, limit: usize) -> Vec<String> {
        #[cfg(feature = "jsonschema")]
        {
            let Err(error) = self.schemas.validate(value, self.index) else {
                return Vec::new();
            };
            let mut problems = Vec::new();
            leaves(&error, limit, &mut problems);
            problems
        }
        #[cfg(not(feature = "jsonschema"))]
        {
            let _ = (value, limit);
            Vec::new()
        }
    }
}

/// The most specific problems of a validation error tree, in order: what a model can act on.
#[cfg(feature = "jsonschema")]
fn leaves(error: &boon::ValidationError<'_, '_>, limit: usize, out: &mut Vec<String>) {
    if out.len() >= limit {
        return;
    }
    if error.causes.is_empty() {
        let path = error.instance_location.to_string();
        out.push(if path.is_empty() {
            error.kind.to_string()
        } else {
            format!("{path}: {}", error.kind)
        });
        return;
    }
    for cause in &error.causes {
        leaves(cause, limit, out);
    }
}

#[cfg(all(test, feature = "jsonschema"))]
mod tests {
    use serde_json::json;

    use super::SchemaCheck;

    #[test]
    fn problems_name_the_place_and_the_fault() {
        let check = SchemaCheck::compile(&json!({
            "type": "object",
            "properties": {"days": {"type": "integer"}, "city": {"type": "string"}},
            "required": ["city"]
        }))
        .unwrap();
        assert!(
            check
                .problems(&json!({"city": "Oslo", "days": 2}), 5)
                .is_empty()
        );
        let problems = check.problems(&json!({"days": "two"}), 5);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("city")), "{problems:?}");
        assert!(
            problems.iter().any(|p| p.starts_with("/days: ")),
            "{problems:?}"
        );
        assert_eq!(check.problems(&json!({"days": "two"}), 1).len(), 1);
    }

    #[test]
    fn nothing_outside_the_schema_is_read() {
        for reference in ["file:///etc/hostname", "http://127.0.0.1:9/schema.json"] {
            assert!(
                SchemaCheck::compile(&json!({"$ref": reference})).is_err(),
                "{reference}"
            );
        }
        // Local references and an older draft named by `$schema` work.
        let check = SchemaCheck::compile(&json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"n": {"type": "number"}},
            "properties": {"x": {"$ref": "#/definitions/n"}}
        }))
        .unwrap();
        assert_eq!(check.problems(&json!({"x": "no"}), 5).len(), 1);
    }
}
