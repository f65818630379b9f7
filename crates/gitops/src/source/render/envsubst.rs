//! Argo CD's build environment of an app and its `$VAR` substitution (Go's `os.Expand`
//! with `$$` for a dollar), applied to Kustomize images and labels and to Jsonnet
//! variables as Argo CD applies them.

use fleetshard_manifest::AppSource;

use super::Job;

/// `ARGOCD_APP_*` and `KUBE_*` variables of one render.
#[derive(Debug, Clone, Default)]
pub(crate) struct Env(Vec<(&'static str, String)>);

impl Env {
    /// Argo CD's variables for `job` (its `newEnv`, plus `KUBE_VERSION` and
    /// `KUBE_API_VERSIONS`).
    pub(crate) fn of_app(job: &Job, source: &AppSource) -> Env {
        let short = |n: usize| job.commit.chars().take(n).collect::<String>();
        Env(vec![
            ("ARGOCD_APP_NAME", job.app_name.clone()),
            ("ARGOCD_APP_NAMESPACE", job.namespace.clone()),
            ("ARGOCD_APP_PROJECT_NAME", job.project.clone()),
            ("ARGOCD_APP_REVISION", job.commit.clone()),
            ("ARGOCD_APP_REVISION_SHORT", short(7)),
            ("ARGOCD_APP_REVISION_SHORT_8", short(8)),
            ("ARGOCD_APP_SOURCE_REPO_URL", source.repo_url.clone()),
            ("ARGOCD_APP_SOURCE_PATH", source.path.clone()),
            (
                "ARGOCD_APP_SOURCE_TARGET_REVISION",
                source.target_revision.clone(),
            ),
            ("KUBE_VERSION", job.kube_version.clone().unwrap_or_default()),
            ("KUBE_API_VERSIONS", job.api_versions.join(",")),
        ])
    }

    fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v.as_str())
    }

    /// `text` with `$NAME` and `${NAME}` replaced by the variable (empty when unknown),
    /// `$$` by `$`, as Go's `os.Expand`: a `$` followed by no name stays; `${}` and an
    /// unclosed `${` are dropped.
    pub(crate) fn subst(&self, text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        let mut copied = 0;
        while i < bytes.len() {
            if bytes[i] != b'$' || i + 1 >= bytes.len() {
                i += 1;
                continue;
            }
            out.push_str(&text[copied..i]);
            let (name, width) = shell_name(&text[i + 1..]);
            if name.is_empty() && width == 0 {
                // `$` followed by no name: kept.
                out.push('$');
            } else if name == "$" {
                out.push('$');
            } else if !name.is_empty() {
                out.push_str(self.get(name));
            }
            i += 1 + width;
            copied = i;
        }
        out.push_str(&text[copied..]);
        out
    }
}

/// Go's `getShellName`: the variable name after a `$` and the bytes it takes.
fn shell_name(s: &str) -> (&str, usize) {
    let b = s.as_bytes();
    let special = |c: u8| b"*#$@!?-".contains(&c) || c.is_ascii_digit();
    if b[0] == b'{' {
        if b.len() > 2 && special(b[1]) && b[2] == b'}' {
            return (&s[1..2], 3);
        }
        return match s[1..].find('}') {
            // `${}`: bad syntax, eaten.
            Some(0) => ("", 2),
            Some(end) => (&s[1..=end], end + 2),
            // No closing brace: `${` eaten.
            None => ("", 1),
        };
    }
    if special(b[0]) {
        return (&s[..1], 1);
    }
    let len = b
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count();
    (&s[..len], len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_as_go_os_expand_with_argo_cd_mapping() {
        let env = Env(vec![
            ("ARGOCD_APP_NAME", "guestbook".into()),
            ("ARGOCD_APP_REVISION", "abc".into()),
        ]);
        assert_eq!(env.subst("img:$ARGOCD_APP_REVISION"), "img:abc");
        assert_eq!(env.subst("${ARGOCD_APP_NAME}-x"), "guestbook-x");
        assert_eq!(env.subst("$$ARGOCD_APP_NAME"), "$ARGOCD_APP_NAME");
        assert_eq!(env.subst("a$UNKNOWN.b"), "a.b");
        assert_eq!(env.subst("cost: 5$"), "cost: 5$");
        assert_eq!(env.subst("a$ b"), "a$ b");
        assert_eq!(env.subst("a${}b${x"), "abx");
        assert_eq!(env.subst("no vars"), "no vars");
    }
}
