//! An EKS cluster (`awsAuthConfig`) reached end to end: the reconciler's connection to a
//! fake API server that accepts only the EKS token made from the pod's AWS credentials, the
//! token put on each request by the client (and renewed there, with no reconnect).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fleetshard_gitops::live::eks::{AwsEnv, EksTokens, TOKEN_USE};
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, LiveError, LiveOptions};
use fleetshard_manifest::ClusterCredentials;
use fleetshard_testsupport::kube_api::{FakeApiServer, FakeConfig};

/// 2026-11-26T17:00:00Z.
const T0: u64 = 1_795_712_400;

fn tokens(at: &Arc<AtomicU64>, secret: &str) -> Arc<EksTokens> {
    let at = at.clone();
    let env = AwsEnv::from_vars(|name| match name {
        "AWS_REGION" => Some("eu-west-1".to_owned()),
        "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".to_owned()),
        "AWS_SECRET_ACCESS_KEY" => Some(secret.to_owned()),
        _ => None,
    });
    Arc::new(
        EksTokens::new(
            env,
            Arc::new(move || Duration::from_secs(at.load(Ordering::SeqCst))),
            Duration::from_secs(5),
        )
        .unwrap(),
    )
}

fn access(server: &FakeApiServer, config: &str) -> ClusterAccess {
    let (credentials, unusable) = ClusterCredentials::from_argo_config(config, "config").unwrap();
    assert!(unusable.is_empty(), "{unusable:?}");
    ClusterAccess {
        id: "eks-1".into(),
        server: server.url(),
        credentials,
    }
}

const CONFIG: &str = r#"{"awsAuthConfig":{"clusterName":"prod-eu"},"bearerToken":"not-used"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eks_cluster_accepts_the_token_made_from_the_pods_credentials() {
    let at = Arc::new(AtomicU64::new(T0));
    let tokens = tokens(&at, "s3cret-access-key");
    let (credentials, _) = ClusterCredentials::from_argo_config(CONFIG, "config").unwrap();
    let expected = tokens
        .token(credentials.aws.as_ref().unwrap())
        .await
        .unwrap();
    assert!(expected.secret().starts_with("k8s-aws-v1."));
    let server = FakeApiServer::start_with(FakeConfig {
        bearer_token: Some(expected.secret().to_owned()),
        ..FakeConfig::default()
    })
    .await
    .expect("fake API server");

    let connections = ClusterConnections::new(LiveOptions::default()).with_eks(tokens.clone());
    let conn = connections
        .start(&access(&server, CONFIG))
        .await
        .expect("connect");
    conn.client()
        .apiserver_version()
        .await
        .expect("the EKS token is accepted (and the Secret's bearerToken not sent)");
    conn.kind_info("v1", "ConfigMap")
        .await
        .expect("discovery with the token");

    // The token lives in the client: once it is renewed (after TOKEN_USE), the next
    // request carries the new one, which this server, pinned to the first, refuses.
    at.fetch_add(TOKEN_USE.as_secs(), Ordering::SeqCst);
    let err = conn.client().apiserver_version().await.unwrap_err();
    assert!(
        err.to_string().contains("401") || err.to_string().contains("Unauthorized"),
        "{err}"
    );

    // Credentials other than the pod's make a token the cluster refuses.
    let wrong = ClusterConnections::new(LiveOptions::default())
        .with_eks(self::tokens(&Arc::new(AtomicU64::new(T0)), "another-key"))
        .start(&access(&server, CONFIG))
        .await
        .expect("connect");
    let err = wrong.client().apiserver_version().await.unwrap_err();
    assert!(
        err.to_string().contains("401") || err.to_string().contains("Unauthorized"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eks_cluster_without_the_pods_aws_credentials_is_refused_at_connect() {
    let server = FakeApiServer::start_with(FakeConfig::default())
        .await
        .expect("fake API server");
    let at = Arc::new(AtomicU64::new(T0));
    let env = AwsEnv::from_vars(|name| (name == "AWS_REGION").then(|| "eu-west-1".to_owned()));
    let tokens = Arc::new(
        EksTokens::new(
            env,
            Arc::new(move || Duration::from_secs(at.load(Ordering::SeqCst))),
            Duration::from_secs(5),
        )
        .unwrap(),
    );
    let Err(err) = ClusterConnections::new(LiveOptions::default())
        .with_eks(tokens)
        .start(&access(&server, CONFIG))
        .await
    else {
        panic!("reached an EKS cluster without a token");
    };
    let text = err.to_string();
    assert!(matches!(err, LiveError::Config { .. }), "{text}");
    assert!(text.contains("config.awsAuthConfig"), "{text}");
    assert!(text.contains("AWS_WEB_IDENTITY_TOKEN_FILE"), "{text}");
}
