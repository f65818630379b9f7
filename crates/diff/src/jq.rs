//! jq path expressions of `ignoreDifferences`, through jaq: `del(EXPR)` run on the whole
//! object, as Argo CD runs it with gojq.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::Val;
use serde_json::Value;

/// A compiled `del(EXPR)`.
pub struct JqExpression {
    expression: String,
    filter: jaq_core::Filter<data::JustLut<Val>>,
}

impl std::fmt::Debug for JqExpression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JqExpression")
            .field(&self.expression)
            .finish()
    }
}

impl JqExpression {
    /// Compiles `del(expression)`; the error says why it does not.
    pub fn compile(expression: &str) -> Result<JqExpression, String> {
        let code = format!("del({expression})");
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs())
            .chain(jaq_json::funs());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let program = File {
            code: code.as_str(),
            path: (),
        };
        let modules = loader
            .load(&arena, program)
            .map_err(|errs| format!("does not parse ({} errors)", errs.len()))?;
        let filter = Compiler::default()
            .with_funs(funs)
            .compile(modules)
            .map_err(|errs| format!("does not compile ({} errors)", errs.len()))?;
        Ok(JqExpression {
            expression: expression.to_owned(),
            filter,
        })
    }

    /// The expression as written.
    pub fn as_str(&self) -> &str {
        &self.expression
    }

    /// `value` with what the expression names deleted; `None` when the deletion fails or
    /// gives other than exactly one value (Argo CD skips the expression then).
    pub fn delete(&self, value: &Value) -> Option<Value> {
        let input: Val = serde_json::from_value(value.clone()).ok()?;
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new([]));
        let mut out = self.filter.id.run((ctx, input)).map(unwrap_valr);
        let first = out.next()?.ok()?;
        if out.next().is_some() {
            return None;
        }
        let mut text = Vec::new();
        jaq_json::write::write(&mut text, &jaq_json::write::Pp::default(), 0, &first).ok()?;
        serde_json::from_slice(&text).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::JqExpression;

    #[test]
    fn deletes_what_the_path_expression_names() {
        let obj = json!({"webhooks": [{"name": "a", "clientConfig": {"caBundle": "x", "url": "u"}},
                                      {"name": "b", "clientConfig": {"caBundle": "y"}}],
                         "spec": {"containers": [{"name": "web", "image": "i"}, {"name": "side", "image": "j"}]}});
        let ca = JqExpression::compile(".webhooks[]?.clientConfig.caBundle").unwrap();
        let out = ca.delete(&obj).unwrap();
        assert_eq!(out["webhooks"][0]["clientConfig"], json!({"url": "u"}));
        assert_eq!(out["webhooks"][1]["clientConfig"], json!({}));
        let side =
            JqExpression::compile(r#".spec.containers[] | select(.name == "side") | .image"#)
                .unwrap();
        let out = side.delete(&obj).unwrap();
        assert_eq!(out["spec"]["containers"][1], json!({"name": "side"}));
        assert_eq!(out["spec"]["containers"][0]["image"], "i");
        // A path into what is not there deletes nothing (jaq fails where gojq may give the
        // object back; either way the normalizer leaves the object as it is).
        let none = JqExpression::compile(".status.nothing").unwrap();
        assert!(none.delete(&obj).is_none_or(|out| out == obj));
        assert!(JqExpression::compile(".spec[").is_err());
    }
}
