//! Keeping credentials out of messages: the user information of a URL
//! (`https://user:token@host` → `https://<redacted>@host`) is never repeated in an error,
//! a log line or a status.

/// What stands in for a removed credential.
pub const REDACTED: &str = "<redacted>";

/// `message` with the user information after every `://` (everything up to the last `@`
/// of the authority) replaced by [`REDACTED`].
pub fn redact_userinfo(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"')
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(at) => {
                out.push_str(REDACTED);
                rest = &tail[at..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_information_is_removed_from_every_url() {
        let got = redact_userinfo(
            "fetch https://bob:hunter22@git.example/x failed; ssh://git@host:22/repo; \
             \"etcd://u:p@a:2379,b:2379\"; plain https://host/y; a@b",
        );
        assert!(!got.contains("hunter22") && !got.contains("bob"), "{got}");
        assert!(got.contains("https://<redacted>@git.example/x"), "{got}");
        assert!(got.contains("ssh://<redacted>@host:22/repo"), "{got}");
        assert!(got.contains("etcd://<redacted>@a:2379,b:2379"), "{got}");
        assert!(got.contains("plain https://host/y; a@b"), "{got}");
    }
}
