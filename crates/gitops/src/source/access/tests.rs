use fleetshard_manifest::{RepoCredentials, RepoSecret, RepoSecretKind, RepoSettings};

use super::{RepoAccess, Scheme, TemplateMatch, host, scheme};

fn secret(kind: RepoSecretKind, name: &str, url: &str, project: &str, user: &str) -> RepoSecret {
    RepoSecret {
        kind,
        secret: format!("Secret argocd/{name}"),
        url: url.to_owned(),
        repo_type: "git".to_owned(),
        project: project.to_owned(),
        name: String::new(),
        credentials: RepoCredentials {
            username: Some(user.to_owned()).filter(|u| !u.is_empty()),
            password: Some(format!("{user}-password")).filter(|_| !user.is_empty()),
            ..RepoCredentials::default()
        },
        insecure: false,
        force_http_basic_auth: false,
        proxy: None,
        no_proxy: None,
        unsupported: Vec::new(),
    }
}

fn settings(secrets: Vec<RepoSecret>) -> RepoSettings {
    let mut s = RepoSettings {
        secrets,
        known_hosts: Some("git.example.com ssh-ed25519 AAAA".into()),
        ..RepoSettings::default()
    };
    s.tls_certs.insert(
        "git.example.com".into(),
        "-----BEGIN CERTIFICATE-----".into(),
    );
    s.secrets.sort_by(|a, b| a.secret.cmp(&b.secret));
    s
}

fn user(access: &RepoAccess) -> Option<&str> {
    access.credentials.username.as_deref()
}

use RepoSecretKind::{Repository, Template};

#[test]
fn the_longest_template_prefix_wins_and_a_repository_secret_wins_over_templates() {
    let s = settings(vec![
        secret(Template, "org", "https://git.example.com/org", "", "org"),
        secret(
            Template,
            "team",
            "https://git.example.com/org/team",
            "",
            "team",
        ),
        secret(
            Repository,
            "app",
            "https://git.example.com/org/team/app.git",
            "",
            "app",
        ),
    ]);
    let r = |url| RepoAccess::resolve(&s, url, "default", TemplateMatch::Prefix);
    assert_eq!(user(&r("https://git.example.com/org/other")), Some("org"));
    assert_eq!(user(&r("https://git.example.com/org/team/x")), Some("team"));
    // Argo CD's normalisation: case, `.git` and a trailing slash do not matter.
    assert_eq!(
        user(&r("https://Git.Example.com/org/team/APP/")),
        Some("app")
    );
    assert_eq!(user(&r("https://elsewhere.example.com/org/x")), None);
    assert_eq!(
        r("https://elsewhere.example.com/org/x"),
        RepoAccess::anonymous()
    );
    // The CA of the URL's host comes along for HTTPS.
    assert!(r("https://git.example.com/org/x").ca_certs.is_some());
    assert!(r("https://git.example.com/org/x").known_hosts.is_none());
}

#[test]
fn a_repository_secret_without_credentials_takes_the_templates() {
    let mut repo = secret(Repository, "app", "https://git.example.com/org/app", "", "");
    repo.insecure = true;
    repo.proxy = Some("http://proxy:3128".into());
    let s = settings(vec![
        repo,
        secret(Template, "org", "https://git.example.com/org", "", "org"),
    ]);
    let a = RepoAccess::resolve(
        &s,
        "https://git.example.com/org/app",
        "p",
        TemplateMatch::Prefix,
    );
    assert_eq!(user(&a), Some("org"));
    assert!(a.insecure, "the repository's own settings stay");
    assert_eq!(a.proxy.as_deref(), Some("http://proxy:3128"));
    assert_eq!(a.from, ["Secret argocd/app", "Secret argocd/org"]);
}

#[test]
fn project_scoped_secrets_apply_only_to_their_project() {
    let s = settings(vec![
        secret(
            Repository,
            "a-private",
            "https://git.example.com/org/app",
            "team-a",
            "a",
        ),
        secret(
            Repository,
            "shared",
            "https://git.example.com/org/app",
            "",
            "shared",
        ),
        secret(
            Template,
            "b-creds",
            "https://git.example.com/",
            "team-b",
            "b",
        ),
    ]);
    let r = |project| {
        RepoAccess::resolve(
            &s,
            "https://git.example.com/org/app",
            project,
            TemplateMatch::Prefix,
        )
    };
    assert_eq!(user(&r("team-a")), Some("a"));
    assert_eq!(user(&r("team-c")), Some("shared"));
    assert_eq!(
        user(&r("team-b")),
        Some("shared"),
        "a repository wins over a template"
    );
    let other = |project| {
        RepoAccess::resolve(
            &s,
            "https://git.example.com/x/y",
            project,
            TemplateMatch::Prefix,
        )
    };
    assert_eq!(user(&other("team-b")), Some("b"));
    assert_eq!(
        user(&other("team-a")),
        None,
        "team-b's template is not team-a's"
    );
}

#[test]
fn ssh_urls_carry_the_known_hosts_and_unsupported_keys_are_refused() {
    let mut t = secret(Template, "gh", "git@git.example.com:org", "", "");
    t.credentials.ssh_private_key = Some("KEY".into());
    t.unsupported = vec!["data.githubAppPrivateKey".into()];
    let s = settings(vec![t]);
    let a = RepoAccess::resolve(
        &s,
        "git@git.example.com:org/app.git",
        "p",
        TemplateMatch::Prefix,
    );
    assert!(a.known_hosts.is_some() && a.ca_certs.is_none());
    let e = a
        .check("git@git.example.com:org/app.git")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("Secret argocd/gh: data.githubAppPrivateKey"),
        "{e}"
    );
    assert!(!format!("{a:?}").contains("KEY"), "{a:?}");
    let mut password = secret(Repository, "pw", "ssh://git@h/r", "", "u");
    password.credentials.ssh_private_key = None;
    let a = RepoAccess::resolve(
        &settings(vec![password]),
        "ssh://git@h/r",
        "p",
        TemplateMatch::Prefix,
    );
    let e = a.check("ssh://git@h/r").unwrap_err().to_string();
    assert!(
        e.contains("password over SSH") && !e.contains("u-password"),
        "{e}"
    );
}

#[test]
fn schemes_and_hosts() {
    assert_eq!(scheme("git@github.com:org/repo"), Scheme::Ssh);
    assert_eq!(scheme("SSH://h/r"), Scheme::Ssh);
    assert_eq!(scheme("https://h/r"), Scheme::Https);
    assert_eq!(scheme("git://h/r"), Scheme::Other);
    assert_eq!(scheme("/srv/repo"), Scheme::Other);
    assert_eq!(
        host("https://user@Git.Example.com:8443/r").as_deref(),
        Some("git.example.com")
    );
    assert_eq!(host("git@GitHub.com:org/r").as_deref(), Some("github.com"));
    assert_eq!(host("ssh://git@[::1]:22/r").as_deref(), Some("::1"));
}

/// Argo CD matches a credential template by string prefix: a template for
/// `http://git.example.com` also gives its credentials to `git.example.com.evil.net`. Kept
/// (and marked) by default; with `PathBoundary` only a match at a path boundary counts.
#[test]
fn a_template_matching_beyond_a_path_boundary_is_marked_or_refused() {
    let s = settings(vec![
        secret(Template, "host", "http://git.example.com", "", "host"),
        secret(Template, "org", "https://github.com/org", "", "org"),
        secret(Template, "scp", "git@gitlab.example.com", "", "scp"),
    ]);
    let argo = |url| RepoAccess::resolve(&s, url, "default", TemplateMatch::Prefix);
    let strict = |url| RepoAccess::resolve(&s, url, "default", TemplateMatch::PathBoundary);
    for (url, who) in [
        ("http://git.example.com/r.git", "host"),
        ("http://git.example.com", "host"),
        ("http://git.example.com:8080/r.git", "host"),
        ("https://github.com/org/app", "org"),
        ("git@gitlab.example.com:team/app.git", "scp"),
    ] {
        for access in [argo(url), strict(url)] {
            assert_eq!(user(&access), Some(who), "{url}");
            assert_eq!(access.loose_template, None, "{url}");
            assert_eq!(access.loose_template_warning(url), None);
        }
    }
    for (url, who) in [
        ("http://git.example.com.evil.net/r.git", "host"),
        ("http://git.example.computer/r.git", "host"),
        ("https://github.com/org-evil/app", "org"),
        ("git@gitlab.example.com.evil.net:team/app.git", "scp"),
    ] {
        let access = argo(url);
        assert_eq!(user(&access), Some(who), "{url}: Argo CD's rule is kept");
        let template = format!("Secret argocd/{who}");
        assert_eq!(access.loose_template.as_deref(), Some(template.as_str()));
        let warning = access.loose_template_warning(url).unwrap();
        assert!(
            warning.contains(&template) && warning.contains("--refuse-loose-credential-templates"),
            "{warning}"
        );
        let refused = strict(url);
        assert!(
            refused.from.is_empty() && refused.credentials.is_empty(),
            "{url}: refused: {refused:?}"
        );
        assert_eq!(refused.loose_template, None);
    }
}
