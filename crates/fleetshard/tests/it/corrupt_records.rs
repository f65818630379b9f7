//! Unreadable records in the store of three `fleetshard run` processes (SQLite, 3 shards,
//! no spare): they are loud (`fleetshard status`, `/readyz`, `/metrics`, `store check`)
//! and do not switch failover off — a corrupt assignment is rewritten by the distributor
//! and a holder killed meanwhile is taken over (once its lease could have run out); a
//! corrupt distributor record is vacant after the lease period; `store repair` rewrites
//! the rest.

use std::process::Output;
use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store};
use fleetshard_store_sqlite::{SqliteOptions, SqliteStore};

use crate::support::replicas::{Harness, SETTLE, Setup, fleetshard};
use crate::support::store::StoreUnderTest;
use crate::support::{http, timing, unix_ms, wait_for};

/// Overwrites `key` (under the root) with `value`, the way a broken tool would: the store
/// bumps the version.
#[allow(irrefutable_let_patterns)] // Other variants exist with the `etcd` feature.
fn overwrite(h: &Harness, key: &str, value: &[u8]) {
    let StoreUnderTest::Sqlite { path } = &h.store else {
        unreachable!("a SQLite scenario")
    };
    let key = format!("{}{key}", h.store.root());
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = SqliteStore::open_async(path, SqliteOptions::default())
                .await
                .unwrap();
            store
                .put(&key, value.to_vec(), Precondition::Any)
                .await
                .unwrap();
        });
}

fn store_cmd(h: &Harness, args: &[&str]) -> Output {
    fleetshard()
        .arg("store")
        .args(args)
        .args(["--store", &h.store.url(), "--root", &h.store.root()])
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn corrupt_records_are_loud_repaired_and_do_not_stop_failover() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreUnderTest::sqlite(dir.path());
    let setup = Setup {
        shards: 3,
        clusters: 12,
        ..Setup::default()
    };
    let mut h = Harness::new(dir, store, setup);
    for name in ["r0", "r1", "r2"] {
        h.start(name);
    }
    h.wait_settled("three replicas");
    let generation = h.status().unwrap()["generation"].as_u64().unwrap();

    // A presence record of a replica that does not exist: nobody rewrites it.
    overwrite(&h, "replicas/ghost", b"\x00garbage");
    let check = store_cmd(&h, &["check"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    assert!(
        text(&check).contains("corrupt: fleetshard/replicas/ghost (version "),
        "{}",
        text(&check)
    );
    let json = store_cmd(&h, &["check", "--output", "json"]);
    assert_eq!(json.status.code(), Some(1), "{}", text(&json));
    let found: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(found["ok"], false, "{found}");
    assert_eq!(found["problems"][0]["kind"], "corrupt", "{found}");
    assert_eq!(
        found["problems"][0]["key"], "fleetshard/replicas/ghost",
        "{found}"
    );
    assert!(found["problems"][0]["version"].is_u64(), "{found}");
    let status = h.status().unwrap();
    assert_eq!(
        status["corrupt_records"][0]["key"], "fleetshard/replicas/ghost",
        "{status}"
    );
    // Every replica published the same inventory.
    assert_eq!(status["inventory_disagreement"], false, "{status}");
    assert_eq!(
        status["replicas"].as_array().map(Vec::len),
        Some(3),
        "{status}"
    );
    wait_for(
        "readiness to name the record",
        Duration::from_secs(5),
        || {
            let (code, body) =
                http::get(h.replicas[0].port, "/readyz").ok_or_else(|| "no answer".to_owned())?;
            (code == 200 && body.contains("degraded store: fleetshard/replicas/ghost"))
                .then_some(())
                .ok_or(body)
        },
    );
    wait_for("the metric to count it", Duration::from_secs(5), || {
        let m = h.metric(1, "fleetshard_corrupt_records");
        (m == Some(1.0)).then_some(()).ok_or(format!("{m:?}"))
    });
    let dry = store_cmd(&h, &["repair", "--dry-run"]);
    assert!(dry.status.success());
    assert!(text(&dry).contains("+ (deleted)"), "{}", text(&dry));
    assert_eq!(store_cmd(&h, &["check"]).status.code(), Some(1), "dry run");
    let repair = store_cmd(&h, &["repair"]);
    assert!(repair.status.success(), "{}", text(&repair));
    assert!(text(&repair).contains("repaired 1 record(s)"));
    let check = store_cmd(&h, &["check"]);
    assert!(check.status.success(), "{}", text(&check));

    // Garbage over the assignment, then kill -9 a holder that is not the distributor: the
    // distributor rewrites the assignment (a higher generation) and the dead holder's
    // clusters are taken over, not before its lease could have run out.
    overwrite(&h, "assignment", b"garbage");
    let victim = (0..3).find(|&i| !h.is_distributor(i)).unwrap();
    let f = h.kill9(victim);
    let took = h.wait_takeover(&f);
    assert!(
        took >= timing::earliest_takeover_ms(),
        "taken over {took} ms after kill -9, before the dead holder's lease could have run out"
    );
    h.wait_settled("after a corrupt assignment and kill -9");
    let status = h.status().unwrap();
    assert!(
        status["generation"].as_u64().unwrap() > generation,
        "{status}"
    );
    assert_eq!(status["corrupt_records"], serde_json::json!([]));

    // Garbage over the distributor record, then kill -9 the distributor: a survivor
    // becomes distributor once the record has been unchanged for the lease duration.
    overwrite(&h, "distributor", b"{\"holder\":1}");
    let distributor = h.live().into_iter().find(|&i| h.is_distributor(i));
    if let Some(d) = distributor {
        h.kill9(d);
    }
    let at = unix_ms();
    wait_for("a new distributor", SETTLE, || {
        h.live()
            .into_iter()
            .find(|&i| h.is_distributor(i))
            .ok_or_else(|| "none yet".to_owned())
    });
    let elected = unix_ms() - at;
    h.wait_settled("after a corrupt distributor record and kill -9");
    h.history().check_no_overlap().unwrap();
    eprintln!(
        "corrupt assignment + kill -9: taken over in {took} ms; corrupt distributor record + kill -9: elected in {elected} ms"
    );
}
