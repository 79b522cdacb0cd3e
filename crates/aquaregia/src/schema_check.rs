//! JSON Schema validation of tool arguments and structured answers, through `jsonschema`
//! (feature `jsonschema`, on by default). Without the feature every value passes, and tools
//! and typed answers rely on their own decoding alone.

use serde_json::Value;

/// A compiled schema.
pub(crate) struct SchemaCheck {
    #[cfg(feature = "jsonschema")]
    validator: jsonschema::Validator,
}

impl SchemaCheck {
    /// Compiles `schema`; the error says why it is not a usable schema.
    #[cfg_attr(not(feature = "jsonschema"), allow(clippy::unnecessary_wraps))]
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        #[cfg(feature = "jsonschema")]
        {
            jsonschema::validator_for(schema)
                .map(|validator| Self { validator })
                .map_err(|error| error.to_string())
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
            if self.validator.is_valid(value) {
                return Vec::new();
            }
            self.validator
                .iter_errors(value)
                .take(limit)
                .map(|error| {
                    let path = error.instance_path().to_string();
                    if path.is_empty() {
                        error.to_string()
                    } else {
                        format!("{path}: {error}")
                    }
                })
                .collect()
        }
        #[cfg(not(feature = "jsonschema"))]
        {
            let _ = (value, limit);
            Vec::new()
        }
    }
}
