//! Booleans as Argo CD reads its annotations, settings and environment variables.

/// Go's `strconv.ParseBool`: `1 t T TRUE true True` and `0 f F FALSE false False`; `None`
/// for anything else.
pub fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// [`parse_go_bool`] as a command-line value parser: anything else is an error saying so.
pub fn go_bool(s: &str) -> Result<bool, String> {
    parse_go_bool(s).ok_or_else(|| format!("{s:?} is not a boolean (true, false, 1, 0, t, f, …)"))
}

#[cfg(test)]
mod tests {
    use super::{go_bool, parse_go_bool};

    #[test]
    fn reads_what_go_reads() {
        assert_eq!(parse_go_bool("True"), Some(true));
        assert_eq!(parse_go_bool("0"), Some(false));
        assert_eq!(parse_go_bool("yes"), None);
        assert!(go_bool("on").unwrap_err().contains("\"on\""));
    }
}
