//! The etcd store against a real etcd that serves TLS only, requires a client certificate
//! (`--client-cert-auth`) and has authentication enabled: with the right CA, certificate
//! and password it works; with another CA, without a client certificate, or with a wrong
//! password every call fails (none hangs) with a message saying why, and the password
//! shows nowhere.

use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_etcd::{
    ClientCert, EtcdOptions, EtcdSecurity, EtcdStore, EtcdTls, EtcdUser, Password,
};
use fleetshard_testsupport::etcd::EtcdServer;
use tokio::time::Instant;

const PASSWORD: &str = "s3cret-for-root";
const WRONG: &str = "not-the-password-7f3a";
/// The store's per-call timeout in these tests.
const TIMEOUT: Duration = Duration::from_secs(2);
/// A call bounded by [`TIMEOUT`] that has not ended after ten times as long hangs: the
/// test gives up on it.
const HANG: Duration = Duration::from_secs(20);

fn security(
    etcd: &EtcdServer,
    ca_other: bool,
    client: bool,
    password: Option<&str>,
) -> EtcdSecurity {
    let files = etcd.tls_files().unwrap();
    EtcdSecurity {
        tls: Some(EtcdTls {
            ca_file: if ca_other {
                files.other_ca.clone()
            } else {
                files.ca.clone()
            },
            client: client.then(|| ClientCert {
                cert_file: files.client_cert.clone(),
                key_file: files.client_key.clone(),
            }),
        }),
        user: password.map(|p| EtcdUser {
            name: "root".into(),
            password: Password::new(p),
        }),
    }
}

fn store(etcd: &EtcdServer, security: EtcdSecurity) -> EtcdStore {
    let options = EtcdOptions {
        timeout: TIMEOUT,
        watch_check: TIMEOUT,
        security,
        ..EtcdOptions::default()
    };
    EtcdStore::from_url_with(&etcd.url(), options).unwrap()
}

/// Runs a put and returns its error (giving up on it after [`HANG`]).
async fn refused(s: &EtcdStore) -> String {
    let start = Instant::now();
    let result = tokio::time::timeout(HANG, s.put("k", b"v".to_vec(), Precondition::Any))
        .await
        .expect("the put hung");
    let took = start.elapsed();
    let e = result.expect_err("a put with bad credentials succeeded");
    let text = e.to_string();
    eprintln!("refused after {took:?}: {text}");
    assert!(!text.contains(PASSWORD) && !text.contains(WRONG), "{text}");
    assert!(
        !format!("{s:?}").contains(PASSWORD) && !format!("{s:?}").contains(WRONG),
        "{s:?}"
    );
    text
}

#[tokio::test]
async fn tls_client_certificate_and_password_are_all_checked() {
    let etcd = EtcdServer::start_secured(Some(PASSWORD)).unwrap();
    assert!(etcd.url().starts_with("etcds://"), "{}", etcd.url());

    let good = store(&etcd, security(&etcd, false, true, Some(PASSWORD)));
    let v = good
        .put("k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let listing = good.list("").await.unwrap();
    assert_eq!(listing.entries.len(), 1);
    assert_eq!(listing.entries[0].version, v);
    assert!(!format!("{good:?}").contains(PASSWORD), "{good:?}");

    let e = refused(&store(&etcd, security(&etcd, true, true, Some(PASSWORD)))).await;
    assert!(e.contains("UnknownIssuer"), "another CA: {e}");

    let e = refused(&store(&etcd, security(&etcd, false, false, Some(PASSWORD)))).await;
    assert!(
        e.contains("etcds://127.0.0.1") && e.contains("needs a client certificate"),
        "no client certificate: {e}"
    );

    let e = refused(&store(&etcd, security(&etcd, false, true, Some(WRONG)))).await;
    assert!(e.contains("authentication failed"), "a wrong password: {e}");

    // The client certificate's name is no etcd user: without a password nothing is allowed.
    let e = refused(&store(&etcd, security(&etcd, false, true, None))).await;
    assert!(e.contains("permission denied"), "no user: {e}");
}

#[tokio::test]
async fn tls_without_authentication_works_and_plain_http_is_refused() {
    let etcd = EtcdServer::start_secured(None).unwrap();
    let s = store(&etcd, security(&etcd, false, true, None));
    s.put("k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    // The same server over plain etcd:// does not speak TLS: a clear failure, no hang.
    let plain = EtcdStore::from_url_with(
        &format!("etcd://{}", etcd.endpoint()),
        EtcdOptions {
            timeout: TIMEOUT,
            ..EtcdOptions::default()
        },
    )
    .unwrap();
    let e = refused(&plain).await;
    // The TLS server drops the plaintext connection: the client's write fails ("broken
    // pipe") or its read sees the reset, whichever comes first (2 of 25 runs: the reset).
    assert!(
        e.contains("etcd://127.0.0.1")
            && (e.contains("broken pipe") || e.contains("connection reset")),
        "{e}"
    );
}

#[test]
fn url_and_options_must_agree() {
    let tls = EtcdSecurity {
        tls: Some(EtcdTls {
            ca_file: "/nonexistent/ca.pem".into(),
            client: None,
        }),
        user: None,
    };
    let with = |security: EtcdSecurity| EtcdOptions {
        security,
        ..EtcdOptions::default()
    };
    for (url, options, reason) in [
        ("etcds://a:1", with(EtcdSecurity::default()), "needs the CA"),
        ("etcd://a:1", with(tls.clone()), "write etcds://"),
        ("etcds://a:1", with(tls), "/nonexistent/ca.pem"),
        (
            "etcd://a:1",
            with(EtcdSecurity {
                tls: None,
                user: Some(EtcdUser {
                    name: "root".into(),
                    password: Password::new(PASSWORD),
                }),
            }),
            "in the clear",
        ),
    ] {
        match EtcdStore::from_url_with(url, options) {
            Err(StoreError::InvalidUrl { reason: r, .. }) => {
                assert!(r.contains(reason), "{url}: {r}");
                assert!(!r.contains(PASSWORD), "{r}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
}
