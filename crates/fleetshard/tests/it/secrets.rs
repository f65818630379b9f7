//! Secrets stay secret: a replica run with cluster tokens and repository passwords — one
//! right, one wrong, so errors are written too —, an EKS cluster (`awsAuthConfig`, the
//! pod's AWS keys in its environment, the cluster unreachable), a cluster and a repository
//! with TLS client keys, and a repository behind a proxy with a password (both
//! unreachable) — and everything it wrote or shows (its log at trace level, every crate's, `status`, `apps` in both formats, `/metrics`, `/readyz`, the
//! store's file) is searched for every token, password and AWS secret, for the basic-auth
//! header made of them, and for any EKS token (`k8s-aws-v1.`).

use std::process::Stdio;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::simulate::{SETTLE, read_sims, simulate};
use crate::support::replicas::fleetshard;
use crate::support::{KillOnDrop, http, wait_for};
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::git_http::GitHttpServer;

const GOOD_PASSWORD: &str = "s3cret-good-passw0rd";
const BAD_PASSWORD: &str = "s3cret-wrong-passw0rd";
const AWS_SECRET_KEY: &str = "s3cret-aws-secret-access-key";
const AWS_SESSION_TOKEN: &str = "s3cret-aws-session-token";
const PROXY_PASSWORD: &str = "s3cret-proxy-passw0rd";
/// A real client certificate and key (so clients are built with them and the proxy is
/// tried): the key's material must not be repeated anywhere.
fn tls_material() -> fleetshard_testsupport::kube_api::TlsMaterial {
    fleetshard_testsupport::kube_api::generate_pki("secrets-test")
        .unwrap()
        .material
}

/// What of a PEM key must never be seen: a stretch of its body, and the base64 of the
/// whole PEM (as a cluster Secret's `keyData` holds it).
fn key_fingerprints(pem: &str) -> Vec<String> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    vec![
        body[body.len() / 3..body.len() / 3 + 32].to_owned(),
        base64::engine::general_purpose::STANDARD.encode(pem),
    ]
}

/// A repository Secret for `url` with a TLS client key and a proxy with a password.
fn repo_secret_with_tls_and_proxy(
    name: &str,
    url: &str,
    tls: &fleetshard_testsupport::kube_api::TlsMaterial,
) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "stringData": {
            "url": url,
            "tlsClientCertData": tls.client_cert_pem,
            "tlsClientCertKey": tls.client_key_pem,
            "proxy": format!("http://proxyuser:{PROXY_PASSWORD}@127.0.0.1:{}", http::free_port()),
        },
    })
}

/// A cluster Secret with a TLS client key, for an unreachable server.
fn tls_cluster_secret(server: &str, tls: &fleetshard_testsupport::kube_api::TlsMaterial) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "tls-cluster", "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "stringData": {"name": "tls-cluster", "server": server,
                       "config": json!({"tlsClientConfig": {
                           "certData": b64(&tls.client_cert_pem),
                           "keyData": b64(&tls.client_key_pem),
                       }}).to_string()},
    })
}

fn repo_secret(name: &str, url: &str, password: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "stringData": {"url": url, "username": "deploy", "password": password},
    })
}

fn application(name: &str, repo: &str, cluster: &str) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {
            "project": "default",
            "source": {"repoURL": repo, "path": "app", "targetRevision": "HEAD"},
            "destination": {"name": cluster, "namespace": "default"},
            "syncPolicy": {"automated": {"prune": true}},
        },
    })
}

/// An EKS cluster Secret for `server`, named `eks-prod`.
fn eks_secret(server: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "eks-prod", "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "stringData": {"name": "eks-prod", "server": server,
                       "config": json!({"awsAuthConfig": {"clusterName": "prod"}}).to_string()},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_password_reaches_logs_statuses_metrics_or_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet");
    let _sim = simulate(
        &["--clusters", "2"],
        &fleet.join("sim"),
        &dir.path().join("simulate.log"),
    );
    let sims = read_sims(&fleet.join("sim"));

    // Two private repositories: one with the right password, one with a wrong one.
    let root = dir.path().join("repos");
    for name in ["good", "bad"] {
        let git = Git::init(&root.join(name));
        git.write("app/cm.yaml", &config_map(&format!("from-{name}"), "1"));
        git.commit("1");
    }
    let server = GitHttpServer::start(&root).await.unwrap();
    server.require_basic_auth("good", "deploy", GOOD_PASSWORD);
    server.require_basic_auth("bad", "deploy", "another-password");
    let eks_server = format!("https://127.0.0.1:{}", http::free_port());
    let tls_server = format!("https://127.0.0.1:{}", http::free_port());
    let (repo_tls, cluster_tls) = (tls_material(), tls_material());
    // A repository reached through a proxy that is not there.
    let proxied = format!("https://git.example.com:{}/private", http::free_port());
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        repo_secret("good-repo", &server.url("good"), GOOD_PASSWORD),
        repo_secret("bad-repo", &server.url("bad"), BAD_PASSWORD),
        application("good", &server.url("good"), &sims[0].name),
        application("bad", &server.url("bad"), &sims[1].name),
        eks_secret(&eks_server),
        application("eks", &server.url("good"), "eks-prod"),
        repo_secret_with_tls_and_proxy("proxied-repo", &proxied, &repo_tls),
        application("proxied", &proxied, &sims[0].name),
        tls_cluster_secret(&tls_server, &cluster_tls),
        application("tls", &server.url("good"), "tls-cluster"),
    ]});
    std::fs::write(fleet.join("objects.json"), objects.to_string()).unwrap();

    let store_path = dir.path().join("fs.db");
    let store = format!("sqlite://{}", store_path.display());
    let log = dir.path().join("replica.log");
    let port = http::free_port();
    let _replica = KillOnDrop(
        fleetshard()
            .args([
                "run",
                "--identity",
                "r0",
                "--store",
                &store,
                "--shards",
                "1",
            ])
            .args(["--resync", "2s", "--log-format", "json"])
            .arg("--fleet-dir")
            .arg(&fleet)
            .arg("--repo-cache")
            .arg(dir.path().join("cache"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            // The built-in in-cluster entry is not reachable here; not what this checks.
            .arg("--in-cluster-enabled=false")
            // Everything every crate logs, the HTTP and TLS stacks' included.
            .env("FLEETSHARD_LOG", "trace")
            // The EKS cluster's token is signed with these (no STS call: no roleARN, and
            // the STS endpoint is a closed port should one be made).
            .env("AWS_REGION", "eu-west-1")
            .env("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
            .env("AWS_SECRET_ACCESS_KEY", AWS_SECRET_KEY)
            .env("AWS_SESSION_TOKEN", AWS_SESSION_TOKEN)
            .env(
                "AWS_ENDPOINT_URL_STS",
                format!("http://127.0.0.1:{}", http::free_port()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );

    // The good app syncs over its password; the bad one shows the refused repository.
    let apps_json = || -> Result<String, String> {
        let out = fleetshard()
            .args(["apps", "--output", "json", "--store", &store])
            .output()
            .map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    wait_for("one app synced and one refused", SETTLE, || {
        let text = apps_json()?;
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        let apps = v["apps"].as_array().ok_or("no apps yet")?;
        let by_name = |n: &str| {
            apps.iter()
                .find(|a| a["app"] == format!("argocd/{n}"))
                .cloned()
        };
        let good = by_name("good").ok_or("no good app")?;
        let bad = by_name("bad").ok_or("no bad app")?;
        // The EKS cluster was tried (token made, connection refused) and the app says so.
        let eks = by_name("eks").ok_or("no eks app")?;
        // So were the TLS cluster and the proxied repository.
        for app in [
            eks,
            by_name("tls").ok_or("no tls app")?,
            by_name("proxied").ok_or("no proxied app")?,
        ] {
            if app["conditions"].as_array().is_none_or(Vec::is_empty) {
                return Err(text);
            }
        }
        let synced = good["sync"] == "Synced";
        let refused = bad["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "ComparisonError"));
        if synced && refused { Ok(()) } else { Err(text) }
    });

    let mut seen = Vec::new();
    seen.push(("the replica's log", std::fs::read_to_string(&log).unwrap()));
    seen.push(("apps --output json", apps_json().unwrap()));
    for args in [
        &["apps", "--store", &store][..],
        &["status", "--store", &store],
        &["status", "--output", "json", "--store", &store],
        &["store", "check", "--store", &store],
    ] {
        let out = fleetshard().args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        seen.push(("a command's output", text));
    }
    for path in ["/metrics", "/readyz", "/healthz"] {
        let (_, body) = http::get(port, path).expect("the replica answers");
        seen.push(("an HTTP endpoint", body));
    }
    let db = std::fs::read(&store_path).unwrap();
    seen.push((
        "the store's file",
        String::from_utf8_lossy(&db).into_owned(),
    ));

    let basic = |password: &str| {
        base64::engine::general_purpose::STANDARD.encode(format!("deploy:{password}"))
    };
    let mut secrets: Vec<String> = sims.iter().map(|s| s.token.clone()).collect();
    secrets.extend([GOOD_PASSWORD, BAD_PASSWORD].map(str::to_owned));
    secrets.extend([basic(GOOD_PASSWORD), basic(BAD_PASSWORD)]);
    secrets.extend([AWS_SECRET_KEY, AWS_SESSION_TOKEN, "k8s-aws-v1."].map(str::to_owned));
    secrets.push(PROXY_PASSWORD.to_owned());
    secrets.extend(key_fingerprints(&repo_tls.client_key_pem));
    secrets.extend(key_fingerprints(&cluster_tls.client_key_pem));
    for (where_, text) in &seen {
        assert!(
            !text.is_empty() || *where_ == "an HTTP endpoint",
            "{where_} is empty"
        );
        for secret in &secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret reached {where_}: {}",
                &text[text.find(secret.as_str()).unwrap().saturating_sub(200)..]
                    .chars()
                    .take(400)
                    .collect::<String>()
            );
        }
    }
    assert!(seen[0].1.contains("TRACE"), "the log is at trace level");
    // The log did say what went wrong, without the password.
    assert!(
        seen[0].1.contains(&server.url("bad")),
        "the refused repository is named in the log"
    );
    // The EKS cluster was reached for with a token: its failure is in the log, not the token.
    assert!(
        seen[0].1.contains(&eks_server),
        "the unreachable EKS cluster is named in the log"
    );
}

/// A store URL with a password in it is refused, and no error repeats the password —
/// whether the scheme is right (`etcd://user:password@…`) or mistyped, given as a flag or
/// through the environment, to any command that takes a store (clap's own message quotes
/// a rejected value; the store's parser named the URL it did not understand).
#[test]
fn a_store_url_with_a_password_is_refused_without_repeating_it() {
    let password = "s3cret-store-passw0rd";
    for url in [
        format!("etcd://deploy:{password}@127.0.0.1:2379"),
        format!("etcdx://deploy:{password}@127.0.0.1:2379"),
    ] {
        // (arguments, an environment variable)
        type Run<'a> = (Vec<String>, Option<(&'a str, &'a str)>);
        let runs: Vec<Run<'_>> = vec![
            (vec!["run".into(), "--store".into(), url.clone()], None),
            (
                vec!["status".into()],
                Some(("FLEETSHARD_STORE", url.as_str())),
            ),
            (
                vec![
                    "plan".into(),
                    "--fleet".into(),
                    "x.yaml".into(),
                    "--from-store".into(),
                    url.clone(),
                ],
                None,
            ),
            (vec!["up".into(), "--store".into(), url.clone()], None),
        ];
        for (args, env) in runs {
            let mut cmd = fleetshard();
            cmd.args(&args).stdin(Stdio::null());
            if let Some((k, v)) = env {
                cmd.env(k, v);
            }
            let out = cmd.output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!out.status.success(), "{args:?}: {text}");
            assert!(!text.contains(password), "{args:?} {env:?}: {text}");
            assert!(text.contains("store"), "{args:?}: no reason given: {text}");
        }
    }
}
