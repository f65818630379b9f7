//! EKS tokens: their form, their signature recomputed here independently, the credential
//! sources against a fake STS and Pod Identity agent on loopback, and the cache under an
//! injected clock.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicI64;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use base64::Engine as _;
use ring::{digest, hmac};

use super::*;

/// 2026-11-26T17:00:00Z.
const T0: i64 = 1_795_712_400;
const KEY_ID: &str = "AKIDEXAMPLE";
const SECRET: &str = "s3cret-access-key/EXAMPLE";

/// A clock the test moves.
fn clock(at: &Arc<AtomicI64>) -> UnixClock {
    let at = at.clone();
    Arc::new(move || Duration::from_secs(u64::try_from(at.load(Ordering::SeqCst)).unwrap()))
}

/// Tokens from the environment `vars`, at the time the returned clock says (`T0` first).
fn tokens_at(vars: &[(&str, &str)]) -> (EksTokens, Arc<AtomicI64>) {
    let at = Arc::new(AtomicI64::new(T0));
    let tokens =
        EksTokens::new(AwsEnv::from_pairs(vars), clock(&at), Duration::from_secs(5)).unwrap();
    (tokens, at)
}

fn auth(cluster: &str, role: Option<&str>) -> AwsAuth {
    AwsAuth {
        cluster_name: cluster.to_owned(),
        role_arn: role.map(str::to_owned),
    }
}

/// `%XX` decoding of a query or form value.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 3 <= bytes.len() {
            out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

fn pairs(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The URL inside a token, checked for its prefix and base64url form.
fn token_url(token: &EksToken) -> String {
    let encoded = token
        .secret()
        .strip_prefix("k8s-aws-v1.")
        .expect("the k8s-aws-v1. prefix");
    assert!(
        !encoded.contains(['=', '+', '/']),
        "unpadded base64url: {encoded}"
    );
    String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(encoded)
            .expect("base64url"),
    )
    .unwrap()
}

/// SigV4, written out again from AWS's description for the check: HMAC chain over the
/// date, region, service and `aws4_request`, then over the string to sign.
fn reference_signature(secret: &str, date: &str, region: &str, canonical: &str) -> String {
    let mac = |key: &[u8], data: &str| {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
            .as_ref()
            .to_vec()
    };
    let hash = |data: &str| {
        digest::digest(&digest::SHA256, data.as_bytes())
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let day = &date[..8];
    let key = mac(
        &mac(
            &mac(&mac(format!("AWS4{secret}").as_bytes(), day), region),
            "sts",
        ),
        "aws4_request",
    );
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{date}\n{day}/{region}/sts/aws4_request\n{}",
        hash(canonical)
    );
    mac(&key, &to_sign)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test]
async fn the_token_is_a_presigned_get_caller_identity_url() {
    let (tokens, _) = tokens_at(&[
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ACCESS_KEY_ID", KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
    ]);
    let token = tokens.token(&auth("prod-eu", None)).await.unwrap();
    let url = token_url(&token);
    let (base, query) = url.split_once("/?").expect("a query");
    assert_eq!(base, "https://sts.eu-west-1.amazonaws.com");
    let params = pairs(query);
    let expect = [
        ("Action", "GetCallerIdentity"),
        ("Version", "2011-06-15"),
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
        (
            "X-Amz-Credential",
            "AKIDEXAMPLE/20261126/eu-west-1/sts/aws4_request",
        ),
        ("X-Amz-Date", "20261126T170000Z"),
        ("X-Amz-Expires", "60"),
        ("X-Amz-SignedHeaders", "host;x-k8s-aws-id"),
    ];
    for (name, value) in expect {
        assert_eq!(params.get(name).map(String::as_str), Some(value), "{name}");
    }
    assert!(!params.contains_key("X-Amz-Security-Token"));
    let signature = &params["X-Amz-Signature"];
    assert_eq!(signature.len(), 64);
    assert!(
        signature
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    // The signature, recomputed from the canonical request spelled out by hand.
    let canonical = "GET\n/\n\
        Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256\
        &X-Amz-Credential=AKIDEXAMPLE%2F20261126%2Feu-west-1%2Fsts%2Faws4_request\
        &X-Amz-Date=20261126T170000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id\n\
        host:sts.eu-west-1.amazonaws.com\nx-k8s-aws-id:prod-eu\n\n\
        host;x-k8s-aws-id\n\
        e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_eq!(
        signature,
        &reference_signature(SECRET, "20261126T170000Z", "eu-west-1", canonical)
    );
    // Another cluster's token is signed for that cluster.
    let other = tokens.token(&auth("prod-us", None)).await.unwrap();
    assert_ne!(other, token);
    assert_eq!(tokens.credential_calls(), 0, "access keys need no STS call");
    let shown = format!("{token:?} {tokens:?}");
    assert!(
        !shown.contains("k8s-aws-v1") && !shown.contains("s3cret"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_session_token_is_signed_into_the_url() {
    let (tokens, _) = tokens_at(&[
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_SESSION_TOKEN", "session/tok+en="),
    ]);
    let url = token_url(&tokens.token(&auth("c", None)).await.unwrap());
    let params = pairs(url.split_once("/?").unwrap().1);
    assert_eq!(params["X-Amz-Security-Token"], "session/tok+en=");
    let canonical = "GET\n/\n\
        Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256\
        &X-Amz-Credential=AKIDEXAMPLE%2F20261126%2Fus-east-1%2Fsts%2Faws4_request\
        &X-Amz-Date=20261126T170000Z&X-Amz-Expires=60\
        &X-Amz-Security-Token=session%2Ftok%2Ben%3D&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id\n\
        host:sts.us-east-1.amazonaws.com\nx-k8s-aws-id:c\n\n\
        host;x-k8s-aws-id\n\
        e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    assert_eq!(
        params["X-Amz-Signature"],
        reference_signature(SECRET, "20261126T170000Z", "us-east-1", canonical)
    );
}

/// What the fake STS saw and answers.
#[derive(Default)]
struct Sts {
    web_identity_token: String,
    /// The `Expiration` of the credentials given (the fake does not know the test's clock).
    expires: Mutex<String>,
    calls: Mutex<Vec<String>>,
    problems: Mutex<Vec<String>>,
    deny: bool,
}

const WEB_SECRET: &str = "s3cret-web-secret";
const WEB_SESSION: &str = "s3cret-web-session";

fn credentials_xml(action: &str, key: &str, secret: &str, session: &str, expires: &str) -> String {
    format!(
        "<{action}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><{action}Result>\
         <Credentials><AccessKeyId>{key}</AccessKeyId><SecretAccessKey>{secret}</SecretAccessKey>\
         <SessionToken>{session}</SessionToken><Expiration>{expires}</Expiration></Credentials>\
         </{action}Result></{action}Response>"
    )
}

async fn sts_answer(
    State(sts): State<Arc<Sts>>,
    headers: HeaderMap,
    body: String,
) -> (StatusCode, String) {
    let form = pairs(&body);
    let action = form.get("Action").cloned().unwrap_or_default();
    sts.calls.lock().unwrap().push(action.clone());
    let mut problems = Vec::new();
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    if sts.deny {
        return (
            StatusCode::FORBIDDEN,
            "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>\
             <Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message>\
             </Error></ErrorResponse>"
                .to_owned(),
        );
    }
    let answer = match action.as_str() {
        "AssumeRoleWithWebIdentity" => {
            if form.get("WebIdentityToken") != Some(&sts.web_identity_token) {
                problems.push("the web identity token is not the file's".to_owned());
            }
            if !header("authorization").is_empty() {
                problems.push("AssumeRoleWithWebIdentity is not signed".to_owned());
            }
            let expires = sts.expires.lock().unwrap().clone();
            credentials_xml(&action, "ASIAWEB", WEB_SECRET, WEB_SESSION, &expires)
        }
        "AssumeRole" => {
            let date = header("x-amz-date");
            if header("x-amz-security-token") != WEB_SESSION {
                problems.push("AssumeRole without the web identity's session token".to_owned());
            }
            let host = header("host");
            let canonical = format!(
                "POST\n/\n\ncontent-type:{}\nhost:{host}\nx-amz-date:{date}\n\
                 x-amz-security-token:{WEB_SESSION}\n\n\
                 content-type;host;x-amz-date;x-amz-security-token\n{}",
                header("content-type"),
                digest::digest(&digest::SHA256, body.as_bytes())
                    .as_ref()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            );
            let want = format!(
                "AWS4-HMAC-SHA256 Credential=ASIAWEB/{}/eu-west-1/sts/aws4_request, \
                 SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature={}",
                date.get(..8).unwrap_or(""),
                reference_signature(WEB_SECRET, &date, "eu-west-1", &canonical)
            );
            if header("authorization") != want {
                problems.push(format!(
                    "AssumeRole signature: got {:?}, want {want:?}",
                    header("authorization")
                ));
            }
            if form.get("RoleArn").map(String::as_str) != Some("arn:aws:iam::1:role/deployer") {
                problems.push(format!("RoleArn {:?}", form.get("RoleArn")));
            }
            let expires = sts.expires.lock().unwrap().clone();
            credentials_xml(
                &action,
                "ASIAROLE",
                "s3cret-role",
                "s3cret-role-session",
                &expires,
            )
        }
        other => {
            problems.push(format!("unexpected action {other}"));
            String::new()
        }
    };
    sts.problems.lock().unwrap().extend(problems);
    (StatusCode::OK, answer)
}

/// The Pod Identity agent: the token file's content as `Authorization`, JSON back.
async fn agent_answer(State(sts): State<Arc<Sts>>, headers: HeaderMap) -> (StatusCode, String) {
    sts.calls.lock().unwrap().push("PodIdentity".to_owned());
    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
    if given != Some(sts.web_identity_token.as_str()) {
        return (StatusCode::UNAUTHORIZED, "wrong token".to_owned());
    }
    let body = serde_json::json!({"AccessKeyId": "ASIAPOD", "SecretAccessKey": "s3cret-pod",
        "Token": "s3cret-pod-session", "Expiration": *sts.expires.lock().unwrap()});
    (StatusCode::OK, body.to_string())
}

/// A fake STS and Pod Identity agent on loopback; its URL.
async fn fake_sts(sts: Arc<Sts>) -> String {
    let app = axum::Router::new()
        .route("/", post(sts_answer))
        .route("/v1/credentials", get(agent_answer))
        .with_state(sts);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// IRSA then `roleARN`, with a token file and an STS answer expiring in an hour.
struct Irsa {
    sts: Arc<Sts>,
    tokens: EksTokens,
    at: Arc<AtomicI64>,
    _dir: tempfile::TempDir,
}

async fn irsa(deny: bool) -> Irsa {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "s3cret-web-identity-jwt\n").unwrap();
    let sts = Arc::new(Sts {
        web_identity_token: "s3cret-web-identity-jwt".to_owned(),
        expires: Mutex::new("2026-11-26T18:00:00Z".to_owned()),
        deny,
        ..Sts::default()
    });
    let url = fake_sts(sts.clone()).await;
    let (tokens, at) = tokens_at(&[
        ("AWS_REGION", "eu-west-1"),
        ("AWS_ENDPOINT_URL_STS", &url),
        ("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa"),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", file.to_str().unwrap()),
    ]);
    Irsa {
        sts,
        tokens,
        at,
        _dir: dir,
    }
}

#[tokio::test]
async fn irsa_then_role_arn_through_sts_and_one_call_per_credentials_lifetime() {
    let t = irsa(false).await;
    let role = auth("prod", Some("arn:aws:iam::1:role/deployer"));
    let first = t.tokens.token(&role).await.unwrap();
    assert!(
        t.sts.problems.lock().unwrap().is_empty(),
        "{:?}",
        t.sts.problems
    );
    let url = token_url(&first);
    let params = pairs(url.split_once("/?").unwrap().1);
    assert!(
        params["X-Amz-Credential"].starts_with("ASIAROLE/20261126/eu-west-1/sts/"),
        "signed with the assumed role: {params:?}"
    );
    assert_eq!(params["X-Amz-Security-Token"], "s3cret-role-session");
    // 1,000 connects or requests: the cached token, no new STS call.
    for _ in 0..1_000 {
        assert_eq!(t.tokens.token(&role).await.unwrap(), first);
    }
    assert_eq!(
        *t.sts.calls.lock().unwrap(),
        ["AssumeRoleWithWebIdentity", "AssumeRole"]
    );
    // After TOKEN_USE: a new token, signed with the cached credentials.
    t.at.fetch_add(
        i64::try_from(TOKEN_USE.as_secs()).unwrap(),
        Ordering::SeqCst,
    );
    let second = t.tokens.token(&role).await.unwrap();
    assert_ne!(second, first);
    assert_eq!(t.sts.calls.lock().unwrap().len(), 2);
    // Past the credentials' expiry (less the margin): both are fetched again (valid for
    // another hour).
    *t.sts.expires.lock().unwrap() = "2026-11-26T19:00:00Z".to_owned();
    t.at.store(T0 + 3_600 - 300, Ordering::SeqCst);
    t.tokens.token(&role).await.unwrap();
    assert_eq!(t.sts.calls.lock().unwrap().len(), 4);
    assert_eq!(t.tokens.credential_calls(), 4);
    // Without a role, the IRSA credentials (cached) sign.
    let plain = token_url(&t.tokens.token(&auth("prod", None)).await.unwrap());
    assert!(plain.contains("X-Amz-Credential=ASIAWEB%2F"), "{plain}");
    assert_eq!(t.sts.calls.lock().unwrap().len(), 4);
    assert!(
        t.sts.problems.lock().unwrap().is_empty(),
        "{:?}",
        t.sts.problems
    );
}

#[tokio::test]
async fn a_refused_role_is_an_error_naming_stss_answer_and_no_secret() {
    let t = irsa(true).await;
    let err = t.tokens.token(&auth("prod", None)).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("AssumeRoleWithWebIdentity"), "{text}");
    assert!(text.contains("AccessDenied"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
}

#[tokio::test]
async fn eks_pod_identity_gives_the_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("eks-pod-identity-token");
    std::fs::write(&file, "s3cret-web-identity-jwt").unwrap();
    let sts = Arc::new(Sts {
        web_identity_token: "s3cret-web-identity-jwt".to_owned(),
        expires: Mutex::new("2026-11-26T18:00:00Z".to_owned()),
        ..Sts::default()
    });
    let url = fake_sts(sts.clone()).await;
    let (tokens, _) = tokens_at(&[
        ("AWS_REGION", "eu-west-1"),
        (
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            &format!("{url}/v1/credentials"),
        ),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            file.to_str().unwrap(),
        ),
    ]);
    let url = token_url(&tokens.token(&auth("prod", None)).await.unwrap());
    assert!(
        url.starts_with("https://sts.eu-west-1.amazonaws.com/?"),
        "{url}"
    );
    assert!(url.contains("X-Amz-Credential=ASIAPOD%2F"), "{url}");
    assert!(
        url.contains("X-Amz-Security-Token=s3cret-pod-session"),
        "{url}"
    );
    assert_eq!(*sts.calls.lock().unwrap(), ["PodIdentity"]);
}

#[tokio::test]
async fn without_credentials_the_error_says_what_to_set() {
    let (tokens, _) = tokens_at(&[("AWS_REGION", "eu-west-1")]);
    let text = tokens
        .token(&auth("c", None))
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("AWS_WEB_IDENTITY_TOKEN_FILE"), "{text}");
    assert!(
        text.contains("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
        "{text}"
    );
}
