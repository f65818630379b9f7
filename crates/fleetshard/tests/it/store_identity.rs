//! The store is the store. Replicas on a SQLite file that is deleted and re-created under
//! them (what `fleetshard status` used to do to a missing file) fence themselves — not
//! ready, saying why in `/readyz`, `/metrics` and their log, stopping at their lease
//! deadline and never coming back — while a replica started on the new file takes the
//! fleet over with no cluster ever owned twice (audit-log replay). And the one-shot
//! commands never create a store: `status` and `apps` read an existing one read-only,
//! `scale` writes only to an existing one.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use crate::support::replicas::{Harness, SETTLE, Setup, fleetshard};
use crate::support::store::StoreUnderTest;
use crate::support::{http, unix_ms, wait_for};
use fleetshard_coord::store::Store;
use fleetshard_store_sqlite::{OpenMode, SqliteOptions, SqliteStore};
use serde_json::Value;

fn side(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `/readyz` of replica `i`: status code and body.
fn readyz(h: &Harness, i: usize) -> Option<(u16, String)> {
    http::get(h.replicas[i].port, "/readyz")
}

#[test]
fn replicas_on_a_replaced_sqlite_file_fence_themselves_and_a_new_one_takes_over_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreUnderTest::sqlite(dir.path());
    let path = dir.path().join("fleetshard.db");
    assert_eq!(store.url(), format!("sqlite://{}", path.display()));
    let setup = Setup {
        shards: 2,
        clusters: 11,
        ..Setup::default()
    };
    let mut h = Harness::new(dir, store, setup);
    let (r0, r1) = (h.start("r0"), h.start("r1"));
    h.wait_settled("two replicas");

    // `rm fleetshard.db fleetshard.db-wal fleetshard.db-shm`, then an empty store at the
    // same path (`fleetshard status` used to create one), then a replica started on it.
    let replaced_at = unix_ms();
    for suffix in ["", "-wal", "-shm"] {
        std::fs::remove_file(side(&path, suffix)).unwrap();
    }
    drop(SqliteStore::open(&path).unwrap());
    let r2 = h.start("r2");

    // The two fence themselves and say why, everywhere.
    for i in [r0, r1] {
        let body = wait_for("a fenced replica", SETTLE, || match readyz(&h, i) {
            Some((503, body)) if body.contains("fenced: store replaced") => Ok(body),
            other => Err(format!("{other:?}")),
        });
        assert!(body.contains(&path.display().to_string()), "{body}");
        assert_eq!(h.metric(i, "fleetshard_store_replaced"), Some(1.0));
        let log = std::fs::read_to_string(&h.replicas[i].log).unwrap();
        assert!(
            log.lines()
                .any(|l| l.contains("ERROR") && l.contains("store replaced")),
            "{log}"
        );
    }
    // The newcomer takes every cluster, alone.
    wait_for("r2 to own every cluster", SETTLE, || {
        let owners = h.history().current_owners();
        let mine = h
            .clusters
            .iter()
            .filter(|c| owners.get(*c).is_some_and(|o| o == &["r2"]))
            .count();
        if mine == h.clusters.len() && h.ready(r2) {
            Ok(())
        } else {
            Err(format!("{mine} of {}: {owners:?}", h.clusters.len()))
        }
    });
    let hist = h.history();
    hist.check_no_overlap().unwrap();
    // The fenced ones stopped by their renew deadline (their last confirmed renew was sent
    // before the file went), and the newcomer started nothing before its lease duration.
    let ends: Vec<u64> = hist
        .intervals
        .iter()
        .filter(|iv| iv.source == r0 || iv.source == r1)
        .map(|iv| iv.end.expect("every cluster of r0 and r1 stopped"))
        .collect();
    assert!(!ends.is_empty());
    let last_end = ends.into_iter().max().unwrap();
    assert!(
        last_end
            <= replaced_at
                + crate::support::timing::deadline_ms()
                + crate::support::timing::tick_ms(),
        "stopped {} ms after the file went",
        last_end - replaced_at
    );
    let first_start = hist
        .intervals
        .iter()
        .filter(|iv| iv.source == r2)
        .map(|iv| iv.start)
        .min()
        .unwrap();
    assert!(
        first_start >= replaced_at + crate::support::timing::lease_ms(),
        "{first_start}"
    );
    assert!(first_start > last_end);
    eprintln!(
        "after the file went: the fenced replicas stopped within {} ms, the new one started \
         after {} ms",
        last_end - replaced_at,
        first_start - replaced_at
    );

    // And they never come back on the new store, though it is right there: they fail
    // their liveness probe instead, so Kubernetes restarts them.
    std::thread::sleep(Duration::from_secs(3));
    for i in [r0, r1] {
        let (code, body) = readyz(&h, i).unwrap();
        assert_eq!(code, 503, "{body}");
        assert_eq!(h.metric(i, "fleetshard_clusters_acting"), Some(0.0));
        assert_eq!(h.metric(i, "fleetshard_shard"), Some(-1.0));
        let (code, body) = http::get(h.replicas[i].port, "/healthz").unwrap();
        assert_eq!(code, 503, "a fenced replica is not live: {body}");
        assert!(body.contains("store replaced"), "{body}");
    }
    assert_eq!(
        http::get(h.replicas[r2].port, "/healthz").map(|(c, _)| c),
        Some(200)
    );
    assert!(h.history().check_no_overlap().is_ok());
    let status = h.status().unwrap();
    let holders: Vec<&Value> = status["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["holder"])
        .filter(|h| !h.is_null())
        .collect();
    assert_eq!(holders, [&Value::from("r2")], "{status}");
    // Fenced replicas still stop cleanly; restarted (as the kubelet does after the failed
    // liveness probe), one joins the new store and takes its share.
    for i in [r0, r1] {
        h.term(i);
        assert!(h.wait_exit(i).success());
    }
    let again = h.start("r0");
    wait_for("the restarted r0 to act on the new store", SETTLE, || {
        let owners = h.history().current_owners();
        let mine = owners.values().filter(|o| *o == &["r0"]).count();
        if mine > 0 && h.ready(again) {
            Ok(())
        } else {
            Err(format!("{owners:?}"))
        }
    });
    h.history().check_no_overlap().unwrap();
}

#[test]
fn one_shot_commands_never_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    let url = format!("sqlite://{}", path.display());
    for args in [
        vec!["status", "--store", &url],
        vec!["status", "--store", &url, "--protocol", "argocd"],
        vec!["apps", "--store", &url],
        vec!["scale", "3", "--store", &url],
    ] {
        let out = fleetshard().args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains(&path.display().to_string()) && err.contains("no store at"),
            "{args:?}: {err}"
        );
    }
    // Nor the default one, in the working directory.
    let out = fleetshard()
        .arg("status")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("fleetshard.db"), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// Size and modification time of the store file, and whether `-wal`/`-shm` exist.
fn footprint(path: &Path) -> (u64, i64, i64, bool, bool) {
    let m = std::fs::metadata(path).unwrap();
    (
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        side(path, "-wal").exists(),
        side(path, "-shm").exists(),
    )
}

fn revision(path: &Path) -> u64 {
    let store = SqliteStore::open_in(path, SqliteOptions::default(), OpenMode::ReadOnly).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { store.list("").await.unwrap().revision })
}

#[test]
fn status_and_apps_read_a_read_only_store_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.db");
    let url = format!("sqlite://{}", path.display());
    drop(SqliteStore::open(&path).unwrap());
    // `scale` writes to an existing store.
    let out = fleetshard()
        .args(["scale", "4", "--store", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let written = revision(&path);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = footprint(&path);
    assert!(!before.3 && !before.4, "no process has it open: {before:?}");

    // (Permission bits do not stop root: what is checked is that nothing was written.)
    let out = fleetshard()
        .args(["status", "--store", &url, "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["desired_shards"], 4);
    assert_eq!(v["revision"], written);
    let out = fleetshard()
        .args(["apps", "--store", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(footprint(&path), before);
    assert_eq!(revision(&path), written);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}
