//! `fleetshard status` over a real etcd serving TLS only, with `--client-cert-auth` and
//! authentication enabled: the `--etcd-*` flags and the password from a file or
//! `FLEETSHARD_ETCD_PASSWORD` reach it; a wrong password fails clearly; the password shows
//! in no output; mixed or incomplete settings are refused before anything is opened.
//! Needs `--features etcd`.

#![cfg(feature = "etcd")]

use std::process::Output;

use fleetshard_testsupport::etcd::EtcdServer;
use serde_json::Value;

use crate::support::replicas::fleetshard;

const PASSWORD: &str = "right-pw-5b1e";
const WRONG: &str = "wrong-pw-c09d";

/// `status --output json` with the TLS flags, the user `root`, `extra` and `env`.
fn status(etcd: &EtcdServer, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let files = etcd.tls_files().unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    fleetshard()
        .args([
            "status",
            "--store",
            &etcd.url(),
            "--output",
            "json",
            "--shards",
            "2",
        ])
        .args(["--etcd-ca-file", &path(&files.ca)])
        .args(["--etcd-cert-file", &path(&files.client_cert)])
        .args(["--etcd-key-file", &path(&files.client_key)])
        .args(["--etcd-username", "root"])
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_secured_etcd_is_read_with_the_flags_and_the_password_never_shows() {
    let etcd = EtcdServer::start_secured(Some(PASSWORD)).unwrap();

    let out = status(&etcd, &[], &[("FLEETSHARD_ETCD_PASSWORD", PASSWORD)]);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    assert!(!text(&out).contains(PASSWORD));

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, format!("{PASSWORD}\n")).unwrap();
    let file = file.display().to_string();
    let out = status(&etcd, &["--etcd-password-file", &file], &[]);
    assert!(out.status.success(), "{}", text(&out));

    let out = status(&etcd, &[], &[("FLEETSHARD_ETCD_PASSWORD", WRONG)]);
    assert!(!out.status.success());
    let all = text(&out);
    assert!(all.contains("authentication failed"), "{all}");
    assert!(!all.contains(WRONG) && !all.contains(PASSWORD), "{all}");

    let out = status(
        &etcd,
        &["--etcd-password-file", &file],
        &[("FLEETSHARD_ETCD_PASSWORD", WRONG)],
    );
    let all = text(&out);
    assert!(!out.status.success() && all.contains("both set"), "{all}");
    assert!(!all.contains(WRONG) && !all.contains(PASSWORD), "{all}");

    // No password at all: refused before connecting, naming where it comes from.
    let out = status(&etcd, &[], &[]);
    let all = text(&out);
    assert!(
        !out.status.success() && all.contains("FLEETSHARD_ETCD_PASSWORD"),
        "{all}"
    );
}

#[test]
fn incomplete_or_mixed_settings_are_refused() {
    let ca = "/nonexistent/ca.pem";
    for (args, reason) in [
        (
            vec!["--store", "etcds://127.0.0.1:1"],
            "needs --etcd-ca-file",
        ),
        (
            vec!["--store", "etcd://127.0.0.1:1", "--etcd-ca-file", ca],
            "write etcds://",
        ),
        (
            vec![
                "--store",
                "etcds://127.0.0.1:1",
                "--etcd-ca-file",
                ca,
                "--etcd-cert-file",
                ca,
            ],
            "needs --etcd-key-file",
        ),
        (
            vec!["--store", "sqlite://x.db", "--etcd-username", "root"],
            "only for etcd",
        ),
        (
            vec!["--store", "etcds://root:pw@127.0.0.1:1"],
            "credentials in the URL",
        ),
        (
            vec!["--store", "etcds://127.0.0.1:1", "--etcd-ca-file", ca],
            "/nonexistent/ca.pem",
        ),
    ] {
        let out = fleetshard().arg("status").args(&args).output().unwrap();
        let all = text(&out);
        assert!(
            !out.status.success() && all.contains(reason),
            "{args:?}: {all}"
        );
    }
}

/// `plan --from-store` reaches a secured etcd with the same flags: with them it reads the
/// store (which holds no assignment yet); without the password it is refused, naming where
/// the password comes from.
#[test]
fn plan_from_a_secured_store_takes_the_etcd_flags() {
    let etcd = EtcdServer::start_secured(Some(PASSWORD)).unwrap();
    let files = etcd.tls_files().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(
        &fleet,
        "clusters:\n- {id: c-a, name: a, server: https://a.example}\n- {id: c-b, name: b, server: https://b.example}\n",
    )
    .unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    let plan = |env: &[(&str, &str)]| {
        fleetshard()
            .args(["plan", "--fleet", &path(&fleet), "-r", "2"])
            .args(["--from-store", &etcd.url()])
            .args(["--etcd-ca-file", &path(&files.ca)])
            .args(["--etcd-cert-file", &path(&files.client_cert)])
            .args(["--etcd-key-file", &path(&files.client_key)])
            .args(["--etcd-username", "root"])
            .envs(env.iter().copied())
            .output()
            .unwrap()
    };
    let out = plan(&[("FLEETSHARD_ETCD_PASSWORD", PASSWORD)]);
    let all = text(&out);
    assert!(
        !out.status.success() && all.contains("none is committed"),
        "read the store: {all}"
    );
    assert!(!all.contains(PASSWORD), "{all}");
    let out = plan(&[]);
    let all = text(&out);
    assert!(
        !out.status.success() && all.contains("FLEETSHARD_ETCD_PASSWORD"),
        "{all}"
    );
}
