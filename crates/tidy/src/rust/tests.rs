use super::*;

#[test]
fn code_drops_comments_but_not_strings() {
    assert_eq!(code("let x = 1; // Instant::now"), "let x = 1; ");
    assert_eq!(code("/// SystemTime"), "");
    assert_eq!(
        code(r#"let u = "http://x"; // c"#),
        r#"let u = "http://x"; "#
    );
    assert_eq!(code(r#"let q = '"'; f(); // c"#), r#"let q = '"'; f(); "#);
    assert_eq!(code("fn f<'a>(x: &'a str) // c"), "fn f<'a>(x: &'a str) ");
}

#[test]
fn module_declarations_carry_their_attributes() {
    let text = r#"
//! Doc.
pub mod a;
#[cfg(test)]
mod tests;
#[cfg(any(test, feature = "test-util"))]
pub mod harness;
#[cfg(not(test))]
mod prod;
#[cfg(test)]
#[path = "x_tests.rs"]
mod x {
}
#[cfg(
    test
)]
pub(crate) mod multi;
"#;
    let decls = module_declarations(text);
    let summary: Vec<_> = decls
        .iter()
        .map(|d| (d.name.as_str(), d.is_test_only(), d.external))
        .collect();
    assert_eq!(
        summary,
        [
            ("a", false, true),
            ("tests", true, true),
            ("harness", true, true),
            ("prod", false, true),
            ("x", true, false),
            ("multi", true, true),
        ]
    );
    assert_eq!(decls[4].path_attr().as_deref(), Some("x_tests.rs"));
}
