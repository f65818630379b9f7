//! Keeps credentials out of messages: every secret value the request carried, and the
//! user information of any URL (`https://user:token@host` → `https://<redacted>@host`),
//! are replaced by `<redacted>` before a repo-server message is kept.

use fleetshard_util::redact::{REDACTED, redact_userinfo};

/// `message` without any of `secrets` (longest first, so that a secret containing another
/// is replaced whole) and without URL user information.
pub(crate) fn redact(message: &str, secrets: &[String]) -> String {
    let mut secrets: Vec<&str> = secrets
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = message.to_owned();
    for s in secrets {
        out = out.replace(s, REDACTED);
    }
    redact_userinfo(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_userinfo_are_removed() {
        let got = redact(
            "fetch https://bob:hunter22@git.example/x failed: token s3cret-token rejected; \
             ssh://git@host:22/repo; plain https://host/y",
            &["s3cret-token".into(), "hunter22".into(), String::new()],
        );
        assert!(
            !got.contains("hunter22") && !got.contains("s3cret-token"),
            "{got}"
        );
        assert!(!got.contains("bob"), "{got}");
        assert!(got.contains("https://<redacted>@git.example/x"), "{got}");
        assert!(got.contains("ssh://<redacted>@host:22/repo"), "{got}");
        assert!(got.contains("plain https://host/y"), "{got}");
    }
}
