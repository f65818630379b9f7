//! How the reconciler authenticates to a destination cluster, from an Argo CD cluster
//! Secret's `config`, against the fake API server over real HTTP: an exec credential
//! plugin (run as kubectl runs it, its token cached until expiry), a proxy, and the
//! refusal of authentication fleetshard cannot do.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, LiveError, LiveOptions};
use fleetshard_manifest::ClusterCredentials;
use fleetshard_testsupport::kube_api::{FakeApiServer, FakeConfig};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

/// A fake API server that answers only `token`.
async fn server_requiring(token: &str) -> FakeApiServer {
    FakeApiServer::start_with(FakeConfig {
        bearer_token: Some(token.to_owned()),
        ..FakeConfig::default()
    })
    .await
    .expect("fake API server")
}

fn access(server: &FakeApiServer, config: &str) -> ClusterAccess {
    let (credentials, _) = ClusterCredentials::from_argo_config(config, "config").unwrap();
    ClusterAccess {
        id: "c1".into(),
        server: server.url(),
        credentials,
    }
}

/// A credential plugin that prints an ExecCredential with `token`, expiring in an hour,
/// and appends a line to `calls` each time it runs; it checks its argument and the
/// variable the Secret gives it.
fn plugin(dir: &Path, token: &str) -> (String, std::path::PathBuf) {
    let calls = dir.join("calls");
    let script = dir.join("plugin.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             [ \"$1\" = --cluster=c1 ] || {{ echo \"bad argument $1\" >&2; exit 3; }}\n\
             [ \"$PLUGIN_REGION\" = eu ] || {{ echo 'no PLUGIN_REGION' >&2; exit 4; }}\n\
             echo run >> {calls}\n\
             expiry=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)\n\
             printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\",\"expirationTimestamp\":\"%s\"}}}}' \"$expiry\"\n",
            calls = calls.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (script.display().to_string(), calls)
}

fn exec_config(command: &str) -> String {
    serde_json::json!({"execProviderConfig": {
        "command": command,
        "args": ["--cluster=c1"],
        "env": {"PLUGIN_REGION": "eu"},
        "apiVersion": "client.authentication.k8s.io/v1beta1",
    }})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_plugin_gives_the_token_and_it_is_cached_until_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let server = server_requiring("tok-from-plugin").await;
    let (command, calls) = plugin(dir.path(), "tok-from-plugin");
    let conn = ClusterConnections::new(LiveOptions::default())
        .start(&access(&server, &exec_config(&command)))
        .await
        .expect("connect");
    let runs = || {
        std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .count()
    };
    conn.client()
        .apiserver_version()
        .await
        .expect("the plugin's token is accepted");
    // kube's client runs the plugin while it builds its TLS and auth layers (up to three
    // times); from then on the token is cached until it expires.
    let first = runs();
    assert!((1..=3).contains(&first), "{first} runs");
    for _ in 0..5 {
        conn.client()
            .apiserver_version()
            .await
            .expect("cached token");
    }
    assert_eq!(runs(), first, "the token is cached until it expires");

    // A plugin that gives another token: refused by the server, an error, no hang.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let (wrong, _) = plugin(&other, "not-the-token");
    let conn = ClusterConnections::new(LiveOptions::default())
        .start(&access(&server, &exec_config(&wrong)))
        .await
        .expect("connect");
    let err = conn.client().apiserver_version().await.unwrap_err();
    assert!(
        err.to_string().contains("401") || err.to_string().contains("Unauthorized"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_plugin_is_an_error_that_names_it() {
    let server = server_requiring("tok").await;
    let Err(err) = ClusterConnections::new(LiveOptions::default())
        .start(&access(
            &server,
            &exec_config("/nonexistent/credential-plugin"),
        ))
        .await
    else {
        panic!("connected without the plugin");
    };
    assert!(matches!(err, LiveError::Config { .. }), "{err}");
    assert!(
        err.to_string().contains("/nonexistent/credential-plugin"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_authentication_is_refused_not_skipped() {
    let server = server_requiring("tok").await;
    let config = r#"{"awsAuthConfig":{"clusterName":"prod"},"bearerToken":"tok"}"#;
    let Err(err) = ClusterConnections::new(LiveOptions::default())
        .start(&access(&server, config))
        .await
    else {
        panic!("reached a cluster without the authentication its Secret asks for");
    };
    assert!(matches!(err, LiveError::Config { .. }), "{err}");
    assert!(err.to_string().contains("config.awsAuthConfig"), "{err}");
}

/// An HTTP CONNECT proxy on loopback: the tunnels it opened, and the last
/// `Proxy-Authorization` it was sent.
pub(crate) struct ConnectProxy {
    pub(crate) url: String,
    pub(crate) tunnels: Arc<AtomicUsize>,
    pub(crate) authorization: Arc<Mutex<Option<String>>>,
}

/// Starts a [`ConnectProxy`] whose URL carries `userinfo` (`user:password@`) when given.
pub(crate) async fn connect_proxy(userinfo: Option<&str>) -> ConnectProxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
    let url = format!("http://{at}{}", listener.local_addr().unwrap());
    let tunnels = Arc::new(AtomicUsize::new(0));
    let authorization = Arc::new(Mutex::new(None));
    let (counted, seen) = (tunnels.clone(), authorization.clone());
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let (counted, seen) = (counted.clone(), seen.clone());
            tokio::spawn(async move {
                let mut client = BufReader::new(client);
                let mut line = String::new();
                client.read_line(&mut line).await.ok()?;
                let target = line.strip_prefix("CONNECT ")?.split(' ').next()?.to_owned();
                loop {
                    let mut header = String::new();
                    client.read_line(&mut header).await.ok()?;
                    if header == "\r\n" || header.is_empty() {
                        break;
                    }
                    if let Some((name, value)) = header.split_once(':')
                        && name.eq_ignore_ascii_case("proxy-authorization")
                    {
                        *seen.lock().unwrap() = Some(value.trim().to_owned());
                    }
                }
                let mut upstream = tokio::net::TcpStream::connect(target).await.ok()?;
                counted.fetch_add(1, Ordering::SeqCst);
                let mut client = client.into_inner();
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .ok()?;
                tokio::io::copy_bidirectional(&mut client, &mut upstream)
                    .await
                    .ok()
            });
        }
    });
    ConnectProxy {
        url,
        tunnels,
        authorization,
    }
}

/// Asks a fake API server for its version through a [`ConnectProxy`] whose URL carries
/// `userinfo`, and gives the proxy back.
async fn version_through_proxy(userinfo: Option<&str>) -> ConnectProxy {
    let server = server_requiring("tok").await;
    let proxy = connect_proxy(userinfo).await;
    let config = serde_json::json!({"bearerToken": "tok", "proxyUrl": proxy.url}).to_string();
    let conn = ClusterConnections::new(LiveOptions::default())
        .start(&access(&server, &config))
        .await
        .expect("connect");
    conn.client()
        .apiserver_version()
        .await
        .expect("through the proxy");
    proxy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_url_routes_the_requests_through_the_proxy() {
    let proxy = version_through_proxy(None).await;
    assert!(
        proxy.tunnels.load(Ordering::SeqCst) >= 1,
        "no tunnel was opened"
    );
    assert_eq!(*proxy.authorization.lock().unwrap(), None);
}

/// The proxy URL's user info is sent as basic auth to the proxy, percent-decoded (a
/// password with `@` is written `%40` in a URL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_urls_user_info_is_its_basic_auth() {
    use base64::Engine as _;
    let proxy = version_through_proxy(Some("fleet:p%40ss")).await;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("fleet:p@ss")
    );
    assert_eq!(*proxy.authorization.lock().unwrap(), Some(expected));
}

/// A token pasted with its newline cannot go into an HTTP header: the cluster is refused
/// with an error naming the field (the client used to panic the worker), never the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_a_newline_is_refused_not_a_panic() {
    let server = server_requiring("s3cret-tok").await;
    let config = serde_json::json!({"bearerToken": "s3cret-tok\n"}).to_string();
    let Err(err) = ClusterConnections::new(LiveOptions::default())
        .start(&access(&server, &config))
        .await
    else {
        panic!("connected with a token no header can carry");
    };
    let message = err.to_string();
    assert!(matches!(err, LiveError::Config { .. }), "{message}");
    assert!(message.contains("config.bearerToken"), "{message}");
    assert!(!message.contains("s3cret"), "the token leaked: {message}");
}

/// A plaintext `http://` cluster is refused with --refuse-plaintext-http: its token would
/// cross the network in clear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_clusters_are_refused_when_asked() {
    let server = server_requiring("tok").await;
    let options = LiveOptions {
        refuse_plaintext: true,
        ..LiveOptions::default()
    };
    let Err(err) = ClusterConnections::new(options)
        .start(&access(&server, r#"{"bearerToken":"tok"}"#))
        .await
    else {
        panic!("connected over plaintext http while refused");
    };
    assert!(matches!(err, LiveError::Config { .. }), "{err}");
    assert!(err.to_string().contains("--refuse-plaintext-http"), "{err}");
}
