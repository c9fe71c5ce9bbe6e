//! Tool input checks against the tool's JSON Schema, before anything is invoked, compiled
//! once per executor: compiling a schema (and the regexes of its `pattern`s) costs far more
//! than checking an input against it, and the tool-host lists the same schemas on every run.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, PoisonError, RwLock};

use serde_json::Value as Json;

/// How many distinct schemas a [`SchemaCache`] keeps. Far above any real catalogue (the
/// stock plugins list nine tools); it only stops a tool-host whose schemas keep changing
/// from growing the cache without end.
pub const MAX_CACHED_SCHEMAS: usize = 1024;

/// A compiled input schema; `None` inside when the tool has none (or it does not compile,
/// in which case the tool-host, which validates again, has the last word).
pub struct InputCheck {
    validator: Option<jsonschema::Validator>,
}

impl InputCheck {
    /// Each violation on its own line with the path it is at; `None` when the input is valid.
    /// An input nested deeper than anything stored may be is refused whatever the schema.
    pub fn violations(&self, input: &Json) -> Option<String> {
        if crate::bounds::deeper_than(input, crate::bounds::MAX_STORED_DEPTH) {
            return Some(format!(
                "\n- at (root): the input is nested deeper than {} levels",
                crate::bounds::MAX_STORED_DEPTH
            ));
        }
        let validator = self.validator.as_ref()?;
        let mut text = String::new();
        for error in validator.iter_errors(input) {
            let path = error.instance_path().as_str();
            let path = if path.is_empty() { "(root)" } else { path };
            let _ = write!(text, "\n- at {path}: {error}");
        }
        (!text.is_empty()).then_some(text)
    }

    fn compile(tool_id: &str, schema: &Json) -> InputCheck {
        match jsonschema::validator_for(schema) {
            Ok(validator) => InputCheck {
                validator: Some(validator),
            },
            Err(error) => {
                tracing::warn!(tool_id, %error, "tool schema does not compile, input is not checked here");
                InputCheck { validator: None }
            }
        }
    }

    fn unchecked() -> InputCheck {
        InputCheck { validator: None }
    }
}

/// The input checks of one executor, shared by all its runs, keyed by the schema's exact
/// JSON text: a plugin may change a tool's schema under the same id, and two tools with the
/// same schema share one check. A schema that does not compile is kept as "no check" too
/// (compiling the same text again fails the same way), so its warning is logged once, when
/// it is first compiled. When [`MAX_CACHED_SCHEMAS`] schemas are kept, the next new one
/// empties the cache first: simple, and a catalogue that fits is compiled again only once.
pub struct SchemaCache {
    max_entries: usize,
    checks: RwLock<HashMap<String, Arc<InputCheck>>>,
}

impl Default for SchemaCache {
    fn default() -> SchemaCache {
        SchemaCache::with_max_entries(MAX_CACHED_SCHEMAS)
    }
}

impl SchemaCache {
    /// The check for `schema`, compiled on first sight (outside the lock, so runs that hit the
    /// cache never wait on a compile). `tool_id` only names the tool in the warning when the
    /// schema does not compile. A null schema means no check and is not kept.
    pub fn input_check(&self, tool_id: &str, schema: &Json) -> Arc<InputCheck> {
        if schema.is_null() {
            return Arc::new(InputCheck::unchecked());
        }
        let key = schema.to_string();
        let cached = self
            .checks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(check) = cached {
            return check;
        }
        let check = Arc::new(InputCheck::compile(tool_id, schema));
        let mut checks = self.checks.write().unwrap_or_else(PoisonError::into_inner);
        if checks.len() >= self.max_entries && !checks.contains_key(&key) {
            tracing::info!(
                max_entries = self.max_entries,
                "schema cache full, emptied it"
            );
            checks.clear();
        }
        // Another run may have compiled the same schema meanwhile: everyone gets the kept one.
        Arc::clone(checks.entry(key).or_insert(check))
    }

    /// `max_entries` is at least one, so the check just compiled is always kept.
    fn with_max_entries(max_entries: usize) -> SchemaCache {
        SchemaCache {
            max_entries: max_entries.max(1),
            checks: RwLock::default(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.checks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn string_schema(pattern: &str) -> Json {
        json!({
            "type": "object",
            "properties": {"name": {"type": "string", "pattern": pattern}},
            "required": ["name"],
        })
    }

    #[test]
    fn the_same_schema_text_gets_the_same_compiled_check() {
        let cache = SchemaCache::default();
        let first = cache.input_check("demo.echo", &string_schema("^a"));
        let again = cache.input_check("demo.echo", &string_schema("^a"));
        assert!(Arc::ptr_eq(&first, &again));
        // The key is the schema, not the tool: another tool with it shares the check.
        let other_tool = cache.input_check("demo.other", &string_schema("^a"));
        assert!(Arc::ptr_eq(&first, &other_tool));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_changed_schema_under_the_same_tool_id_is_compiled_anew_and_checked_by_its_new_rules() {
        let cache = SchemaCache::default();
        let before = cache.input_check("demo.echo", &string_schema("^a"));
        let after = cache.input_check("demo.echo", &string_schema("^b"));
        assert!(!Arc::ptr_eq(&before, &after));
        let input = json!({"name": "apple"});
        assert_eq!(before.violations(&input), None);
        let violations = after
            .violations(&input)
            .expect("apple does not start with b");
        assert!(violations.starts_with("\n- at /name: "), "{violations}");
    }

    #[test]
    fn the_cache_never_keeps_more_than_its_bound() {
        let cache = SchemaCache::with_max_entries(3);
        let checks: Vec<_> = (0..10)
            .map(|index| {
                let check = cache.input_check("demo.echo", &string_schema(&format!("^{index}")));
                assert!(cache.len() <= 3, "{} entries after {index}", cache.len());
                check
            })
            .collect();
        // What was handed out before the cache was emptied still works.
        assert_eq!(checks[0].violations(&json!({"name": "0"})), None);
        assert!(checks[0].violations(&json!({"name": "1"})).is_some());
        // A schema still kept is not compiled again.
        let last = cache.input_check("demo.echo", &string_schema("^9"));
        assert!(Arc::ptr_eq(&checks[9], &last));
    }

    #[test]
    fn null_and_uncompilable_schemas_check_nothing() {
        let cache = SchemaCache::default();
        let none = cache.input_check("demo.none", &Json::Null);
        assert_eq!(none.violations(&json!("anything")), None);
        assert_eq!(cache.len(), 0);
        let broken = json!({"type": "object", "properties": {"a": {"pattern": "("}}});
        let first = cache.input_check("demo.broken", &broken);
        assert!(first.validator.is_none(), "a lone ( is not a regex");
        assert_eq!(first.violations(&json!({"a": "x"})), None);
        assert!(Arc::ptr_eq(
            &first,
            &cache.input_check("demo.broken", &broken)
        ));
    }
}
