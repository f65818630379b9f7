//! Transport: TLS as Argo CD runs it, plain text, the timeout, the bound on calls in
//! flight, and errors that never carry a credential.

use std::time::Duration;

use fleetshard_manifest::RepoCredentials;
use fleetshard_reposerver::{
    ClientConfig, ClientError, ClientIdentity, ManifestInputs, RepoServerClient, RepositoryInput,
    TlsMode, build_request,
};
use fleetshard_testsupport::logs::LogCapture;
use fleetshard_testsupport::repo_server::{Answer, FakeRepoServer, Scripted, Transport};
use serde_json::json;
use tonic::Code;

use super::plaintext;

const PASSWORD: &str = "hunter2-password";
const TOKEN: &str = "tok-0123456789";
const SSH_KEY: &str =
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----";

fn inputs(app: &str) -> ManifestInputs {
    let repository = RepositoryInput {
        credentials: RepoCredentials {
            username: Some("bot".into()),
            password: Some(PASSWORD.into()),
            bearer_token: Some(TOKEN.into()),
            ssh_private_key: Some(SSH_KEY.into()),
            ..RepoCredentials::default()
        },
        proxy: Some("http://proxyuser:proxypass@proxy:3128".into()),
        ..RepositoryInput::anonymous("https://git.example/apps.git")
    };
    let source = json!({"repoURL": "https://git.example/apps.git", "path": "."});
    ManifestInputs::new(source, repository, "main", app)
}

async fn call(client: &RepoServerClient, app: &str) -> Result<String, ClientError> {
    let request = build_request(&inputs(app)).unwrap();
    client.generate_manifest(request).await.map(|r| r.revision)
}

/// A client of `fake`, its retries at once. Tests over TLS run in real time: under paused
/// time, a first call over TLS (the handshake included) sees its timeout fire — the clock
/// jumps to the next timer while the connection is being set up — although a call on a
/// connection set up in real time answers at once. The paused-time tests below run over
/// plain text.
fn client(fake: &FakeRepoServer, tls: TlsMode) -> RepoServerClient {
    let mut config = ClientConfig::new(&fake.addr());
    config.tls = tls;
    config.retry_wait = Duration::ZERO;
    RepoServerClient::new(&config).unwrap()
}

/// TLS verified against the fake's own CA.
fn trusting(fake: &FakeRepoServer) -> TlsMode {
    TlsMode::Verified {
        ca_pem: fake.ca_pem().unwrap().to_owned(),
    }
}

// The attack: a server at the repo-server's address with a certificate of its own making
// (here, a CA generated for it that no one trusts). By default the client refuses it
// before any request, so it never sees the repository's password, token or SSH key.
#[tokio::test]
async fn by_default_an_impostor_is_refused_and_receives_no_credential() {
    let impostor = FakeRepoServer::start(Transport::Tls).await.unwrap();
    let logs = LogCapture::start();
    let err = call(&client(&impostor, TlsMode::default()), "a")
        .await
        .unwrap_err();
    match &err {
        ClientError::Unreachable { message, .. } => {
            assert!(message.contains("certificate"), "{message}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert!(impostor.requests().is_empty(), "no request reached it");
    let raw = impostor.raw_requests().concat();
    for secret in [PASSWORD, TOKEN, "b3BlbnNzaC1rZXk"] {
        assert!(!contains(&raw, secret), "{secret} reached the impostor");
    }
    assert!(!logs.text().contains("not verified"), "{}", logs.text());
}

#[tokio::test]
async fn the_operators_ca_is_trusted_and_only_for_its_servers() {
    let fake = FakeRepoServer::start(Transport::Tls).await.unwrap();
    let other = FakeRepoServer::start(Transport::Tls).await.unwrap();
    assert_eq!(
        call(&client(&fake, trusting(&fake)), "a").await.unwrap(),
        "0000000"
    );
    let err = call(&client(&fake, trusting(&other)), "a")
        .await
        .unwrap_err();
    match &err {
        ClientError::Unreachable { message, .. } => {
            assert!(message.contains("certificate"), "{message}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    assert_eq!(
        fake.requests().len(),
        1,
        "the refused call never reached the server"
    );
    let not_pem = ClientConfig {
        tls: TlsMode::Verified {
            ca_pem: "not pem".into(),
        },
        ..ClientConfig::new(&fake.addr())
    };
    assert!(matches!(
        RepoServerClient::new(&not_pem),
        Err(ClientError::Config(_))
    ));
    // A plain-text client gets nowhere with a TLS server.
    let err = call(&client(&fake, TlsMode::Plaintext), "a")
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Unreachable { .. }), "{err:?}");
}

/// Argo CD's documented setup with a self-signed certificate: the certificate itself is
/// the Secret's `ca.crt`. Verified as given; the impostor's own self-signed certificate
/// is still refused.
#[tokio::test]
async fn a_self_signed_certificate_given_as_the_ca_is_trusted() {
    let fake = FakeRepoServer::start(Transport::SelfSignedTls)
        .await
        .unwrap();
    let impostor = FakeRepoServer::start(Transport::SelfSignedTls)
        .await
        .unwrap();
    assert_eq!(
        call(&client(&fake, trusting(&fake)), "a").await.unwrap(),
        "0000000"
    );
    let err = call(&client(&impostor, trusting(&fake)), "a")
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Unreachable { .. }), "{err:?}");
    assert!(impostor.requests().is_empty());
}

#[tokio::test]
async fn skipping_verification_is_an_explicit_choice_and_warned_about() {
    let fake = FakeRepoServer::start(Transport::Tls).await.unwrap();
    fake.answer_all(Answer::rendered(&[], "abc", "Directory"), Duration::ZERO);
    let logs = LogCapture::start();
    let client = client(&fake, TlsMode::InsecureSkipVerify);
    let warned = logs.text();
    assert!(
        warned.contains("WARN") && warned.contains("not verified"),
        "{warned}"
    );
    assert_eq!(call(&client, "a").await.unwrap(), "abc");
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

// Paused time: an unreachable server is tried three times, 1 s apart.
#[tokio::test(start_paused = true)]
async fn plaintext_talks_to_a_plaintext_server_and_not_tls() {
    let (fake, client) = plaintext().await;
    assert_eq!(call(&client, "a").await.unwrap(), "0000000");
    let tls_client = self::client(&fake, TlsMode::default());
    let err = call(&tls_client, "a").await.unwrap_err();
    assert!(matches!(err, ClientError::Unreachable { .. }), "{err:?}");
}

// Paused time: an unreachable server is tried three times, 1 s apart.
#[tokio::test(start_paused = true)]
async fn a_closed_port_is_unreachable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let mut config = ClientConfig::new(&addr);
    config.tls = TlsMode::Plaintext;
    let client = RepoServerClient::new(&config).unwrap();
    let started = tokio::time::Instant::now();
    let err = call(&client, "a").await.unwrap_err();
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "retried as Argo CD retries"
    );
    match err {
        ClientError::Unreachable { addr: a, message } => {
            assert_eq!(a, addr);
            assert!(message.contains("connecting to"), "{message}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_call_times_out_at_the_timeout() {
    let fake = FakeRepoServer::start(Transport::Plaintext).await.unwrap();
    fake.answer_app(
        "slow",
        Answer::rendered(&[], "late", "Helm"),
        Duration::from_secs(3600),
    );
    fake.answer_app(
        "quick",
        Answer::rendered(&[], "soon", "Helm"),
        Duration::from_secs(30),
    );
    let mut config = ClientConfig::new(&fake.addr());
    config.tls = TlsMode::Plaintext;
    assert_eq!(config.timeout, Duration::from_secs(60), "Argo CD's default");
    let client = RepoServerClient::new(&config).unwrap();

    let started = tokio::time::Instant::now();
    let err = call(&client, "slow").await.unwrap_err();
    assert_eq!(
        err,
        ClientError::Timeout {
            addr: fake.addr(),
            after: Duration::from_secs(60)
        }
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(60) && waited < Duration::from_secs(3600),
        "{waited:?}"
    );
    assert_eq!(call(&client, "quick").await.unwrap(), "soon");
}

#[tokio::test(start_paused = true)]
async fn calls_in_flight_are_bounded() {
    let fake = FakeRepoServer::start(Transport::Plaintext).await.unwrap();
    fake.answer_all(Answer::rendered(&[], "r", "Helm"), Duration::from_secs(10));
    let mut config = ClientConfig::new(&fake.addr());
    config.tls = TlsMode::Plaintext;
    config.max_concurrent = 2;
    let client = RepoServerClient::new(&config).unwrap();
    let started = tokio::time::Instant::now();
    let calls = (0..5).map(|i| {
        let client = client.clone();
        async move { call(&client, &format!("app-{i}")).await }
    });
    for result in futures::future::join_all(calls).await {
        assert_eq!(result.unwrap(), "r");
    }
    assert_eq!(fake.requests().len(), 5);
    assert_eq!(fake.max_in_flight(), 2);
    // Five 10 s renders two at a time take three rounds.
    assert!(
        started.elapsed() >= Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn errors_and_debug_never_show_credentials() {
    let (fake, client) = plaintext().await;
    let echo = format!(
        "rpc error: authentication failed for https://bot:{PASSWORD}@git.example/apps.git \
         with token {TOKEN}; key {SSH_KEY}; proxy http://proxyuser:proxypass@proxy:3128"
    );
    fake.answer_all(
        Answer::Error {
            code: Code::Unknown,
            message: echo,
        },
        Duration::ZERO,
    );
    let err = call(&client, "a").await.unwrap_err();
    let ClientError::Status { code, message, .. } = &err else {
        panic!("expected Status, got {err:?}");
    };
    assert_eq!(*code, Code::Unknown);
    assert!(
        message.contains("authentication failed"),
        "the message is kept: {message}"
    );
    let inputs = inputs("a");
    let request = build_request(&inputs).unwrap();
    for shown in [
        err.to_string(),
        format!("{err:?}"),
        format!("{inputs:?}"),
        format!("{request:?}"),
        format!("{client:?}"),
    ] {
        for secret in [PASSWORD, TOKEN, "b3BlbnNzaC1rZXk", "proxypass"] {
            assert!(!shown.contains(secret), "{secret} shown in {shown}");
        }
    }
}

#[tokio::test]
async fn a_manifest_that_is_not_an_object_is_a_bad_response() {
    let (fake, client) = plaintext().await;
    fake.answer_all(
        Answer::rendered(&[r#"{"kind":"A"}"#, "[]"], "r", "Helm"),
        Duration::ZERO,
    );
    let err = call(&client, "a").await.unwrap_err();
    match err {
        ClientError::BadResponse { message, .. } => {
            assert_eq!(message, "manifest 1 is an array, not a JSON object");
        }
        other => panic!("expected BadResponse, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn unavailable_is_retried_as_argo_cd_retries() {
    let (fake, client) = plaintext().await;
    let unavailable = Scripted {
        answer: Answer::Error {
            code: Code::Unavailable,
            message: "repo-server is restarting".into(),
        },
        delay: Duration::ZERO,
    };
    let rendered = Scripted {
        answer: Answer::rendered(&[], "third", "Helm"),
        delay: Duration::ZERO,
    };
    fake.answer_app_in_turn(
        "flaky",
        vec![unavailable.clone(), unavailable.clone(), rendered],
    );
    let started = tokio::time::Instant::now();
    assert_eq!(call(&client, "flaky").await.unwrap(), "third");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "1 s between attempts"
    );
    assert_eq!(fake.requests().len(), 3);

    fake.answer_app_in_turn("down", vec![unavailable]);
    let err = call(&client, "down").await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Status {
                code: Code::Unavailable,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(fake.requests().len(), 6, "three attempts, no more");

    fake.answer_app(
        "broken",
        Answer::Error {
            code: Code::InvalidArgument,
            message: "bad source".into(),
        },
        Duration::ZERO,
    );
    let err = call(&client, "broken").await.unwrap_err();
    assert!(
        matches!(
            err,
            ClientError::Status {
                code: Code::InvalidArgument,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(fake.requests().len(), 7, "other statuses are not retried");

    fake.answer_app(
        "slow",
        Answer::rendered(&[], "late", "Helm"),
        Duration::from_secs(3600),
    );
    let err = call(&client, "slow").await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
    assert_eq!(fake.requests().len(), 8, "a timeout is not retried");
}

#[tokio::test]
async fn mutual_tls_presents_the_client_certificate() {
    let fake = FakeRepoServer::start(Transport::MutualTls).await.unwrap();
    let err = call(&client(&fake, trusting(&fake)), "a")
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::Unreachable { .. }), "{err:?}");
    assert!(fake.requests().is_empty(), "no certificate, no request");

    let (cert_pem, key_pem) = fake.client_identity().unwrap();
    let mut config = ClientConfig::new(&fake.addr());
    config.tls = trusting(&fake);
    config.client_identity = Some(ClientIdentity {
        cert_pem: cert_pem.to_owned(),
        key_pem: key_pem.to_owned(),
    });
    let with_cert = RepoServerClient::new(&config).unwrap();
    assert_eq!(call(&with_cert, "a").await.unwrap(), "0000000");
    assert!(!format!("{config:?}").contains(key_pem.lines().nth(1).unwrap()));

    config.client_identity = Some(ClientIdentity {
        cert_pem: cert_pem.to_owned(),
        key_pem: "not a key".into(),
    });
    assert!(matches!(
        RepoServerClient::new(&config),
        Err(ClientError::Config(_))
    ));
}
