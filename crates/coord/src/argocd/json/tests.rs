use proptest::prelude::*;

use super::*;

#[test]
fn validate_accepts_json() {
    for ok in [
        "null",
        " [ ] ",
        "[]",
        "{}",
        "\t\r\n[1,-0,0.5,1e9,1E+2,-1.5e-3,true,false,null,\"a\",{\"k\":[{}]}]\n",
        "\"\\u00e9\\ud800\\/\\b\\f\\n\\r\\t\\\\\\\"\"",
        "{\"a\":1,\"a\":2}",
        "\"\u{7f}é\u{2028}\"",
    ] {
        assert_eq!(validate(ok), Ok(()), "{ok:?}");
    }
}

#[test]
fn validate_refuses_what_go_refuses() {
    for bad in [
        "",
        "   ",
        "[",
        "]",
        "[1,]",
        "[1 2]",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "{1:2}",
        "01",
        "1.",
        ".5",
        "+1",
        "1e",
        "-",
        "tru",
        "nul",
        "True",
        "\"unterminated",
        "\"tab\there\"",
        "\"\\x\"",
        "\"\\u12\"",
        "[]]",
        "[] []",
        "\u{c}[]",
        "\u{a0}[]",
        "NaN",
    ] {
        assert!(validate(bad).is_err(), "{bad:?} must be refused");
    }
}

#[test]
fn nesting_limit_is_gos() {
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert_eq!(validate(&ok), Ok(()));
    let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert_eq!(validate(&deep).unwrap_err().reason, "exceeded max depth");
    // Far deeper input is refused without recursion.
    assert!(validate(&"[{\"a\":".repeat(200_000)).is_err());
}

#[test]
fn unquote_like_go() {
    assert_eq!(unquote(r#""plain""#), "plain");
    assert_eq!(unquote(r#""a\"b\\c\/d""#), "a\"b\\c/d");
    assert_eq!(unquote(r#""\b\f\n\r\t""#), "\u{8}\u{c}\n\r\t");
    assert_eq!(unquote(r#""\u003c\u00E9\u2028""#), "<é\u{2028}");
    // A surrogate pair is one character.
    assert_eq!(unquote(r#""\ud83d\ude00""#), "😀");
    // Lone or misordered surrogates: U+FFFD for the bad escape, the next read on its own.
    assert_eq!(unquote(r#""\ud800""#), "\u{FFFD}");
    assert_eq!(unquote(r#""\udc00\ud83d\ude00""#), "\u{FFFD}😀");
    assert_eq!(unquote(r#""\ud800\u0041""#), "\u{FFFD}A");
    assert_eq!(unquote(r#""\ud800x""#), "\u{FFFD}x");
    assert_eq!(unquote(r#""é\u0000é""#), "é\0é");
}

#[test]
fn go_string_escaping() {
    let mut out = String::new();
    push_go_string(
        &mut out,
        "a<b>&\"\\\u{8}\u{c}\n\r\t\u{1}\u{1f}\u{7f}é\u{2028}\u{2029}😀/'",
    );
    assert_eq!(
        out,
        r#""a\u003cb\u003e\u0026\"\\\b\f\n\r\t\u0001\u001f"#.to_owned()
            + "\u{7f}é\\u2028\\u2029😀/'\""
    );
}

#[test]
fn raw_values() {
    let text = r#"[ 1 , "a,]" , {"k":[1,{"x":"}"}]} , null ]"#;
    let mut r = Reader::new(text);
    assert!(r.eat(b'['));
    assert_eq!(r.raw_value(), "1");
    assert!(r.eat(b','));
    assert_eq!(r.peek_kind(), Some(Kind::String));
    assert_eq!(r.string(), "a,]");
    assert!(r.eat(b','));
    assert_eq!(r.peek_kind(), Some(Kind::Object));
    assert_eq!(r.raw_value(), r#"{"k":[1,{"x":"}"}]}"#);
    assert!(r.eat(b','));
    assert_eq!(r.peek_kind(), Some(Kind::Null));
    assert_eq!(r.raw_value(), "null");
    assert!(!r.eat(b','));
    assert!(r.eat(b']'));
    assert_eq!(r.peek_kind(), None);
}

proptest! {
    #[test]
    fn escaping_round_trips(s in "\\PC*|[\\x00-\\x7f\u{2028}\u{2029}\u{d7ff}\u{e000}\u{10ffff}]{0,30}") {
        let mut out = String::new();
        push_go_string(&mut out, &s);
        prop_assert_eq!(validate(&out), Ok(()));
        prop_assert!(!out.contains('<') && !out.contains('>') && !out.contains('&'));
        prop_assert_eq!(unquote(&out), s);
    }

    #[test]
    fn validate_never_panics(s in "[\\[\\]{}\",:0-9eE.+\\-a-z\\\\ \t\n]{0,60}") {
        if validate(&s).is_ok() {
            // A valid text is consumed entirely by one raw value.
            let mut r = Reader::new(&s);
            let _ = r.raw_value();
            prop_assert_eq!(r.peek_kind(), None);
        }
    }
}
