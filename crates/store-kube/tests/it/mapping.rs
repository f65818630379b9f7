//! Where keys land in the API server: the objects, their names, labels, annotations and
//! Lease holders, as `kubectl` would see them; and Argo CD's shard ConfigMap shared with
//! Argo CD itself.

use crate::support;

use fleetshard_coord::argocd::{self, ShardEntry, WallTime};
use fleetshard_coord::fenced::{ShardRecord, encode, shard_key};
use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_kube::object_name;
use serde_json::{Value, json};

/// The key of Argo CD's shard map (`configmap/NAME/DATAKEY`), spelled out.
const MAPPING_KEY: &str = "configmap/argocd-app-controller-shard-cm/shardControllerMapping";

fn lease(server: &fleetshard_testsupport::kube_api::FakeApiServer, name: &str) -> Value {
    server
        .get("coordination.k8s.io/v1", "Lease", "default", name)
        .unwrap_or_else(|| panic!("no Lease {name}"))
}

fn configmap(server: &fleetshard_testsupport::kube_api::FakeApiServer, name: &str) -> Value {
    server
        .get("v1", "ConfigMap", "default", name)
        .unwrap_or_else(|| panic!("no ConfigMap {name}"))
}

#[tokio::test]
async fn lease_records_are_leases_showing_their_holder() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let key = shard_key("fleetshard/", 2);
    let record = ShardRecord {
        holder: "argocd-application-controller-1".into(),
        incarnation: 9,
        beat: 1,
        acked: 0,
        released: false,
        zone: None,
        capacity: None,
    };
    let v = store
        .put(&key, encode(&record), Precondition::Absent)
        .await
        .unwrap();
    let obj = lease(&server, "fleetshard.shards.2");
    assert_eq!(obj["metadata"]["resourceVersion"], json!(v.to_string()));
    assert_eq!(
        obj["spec"]["holderIdentity"],
        json!("argocd-application-controller-1")
    );
    // No times another tool could act on.
    assert_eq!(obj["spec"].get("renewTime"), None);
    assert_eq!(obj["spec"].get("leaseDurationSeconds"), None);
    let annotations = &obj["metadata"]["annotations"];
    assert_eq!(annotations["fleetshard.io/key"], json!(key));
    assert_eq!(
        annotations["fleetshard.io/record"],
        json!(String::from_utf8(encode(&record)).unwrap())
    );
    assert_eq!(
        obj["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "fleetshard", "fleetshard.io/root": "fleetshard"})
    );
    // A new holder shows at once; a record without one clears it.
    let taken = ShardRecord {
        holder: "pod-b".into(),
        ..record
    };
    let v2 = store
        .put(&key, encode(&taken), Precondition::Version(v))
        .await
        .unwrap();
    assert_eq!(
        lease(&server, "fleetshard.shards.2")["spec"]["holderIdentity"],
        json!("pod-b")
    );
    store
        .put(&key, vec![0xff, 0, 1], Precondition::Version(v2))
        .await
        .unwrap();
    let obj = lease(&server, "fleetshard.shards.2");
    assert_eq!(obj["spec"].get("holderIdentity"), None);
    assert_eq!(
        obj["metadata"]["annotations"].get("fleetshard.io/record"),
        None
    );
    assert_eq!(
        obj["metadata"]["annotations"]["fleetshard.io/record-base64"],
        json!("/wAB")
    );
    assert_eq!(store.get(&key).await.unwrap().unwrap().value, [0xff, 0, 1]);
}

#[tokio::test]
async fn other_records_are_configmaps_with_the_value_in_data_or_binary_data() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    store
        .put(
            "fleetshard/assignment",
            b"{\"generation\":1}".to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    let obj = configmap(&server, "fleetshard.assignment");
    assert_eq!(obj["data"], json!({"value": "{\"generation\":1}"}));
    assert_eq!(
        obj["metadata"]["annotations"]["fleetshard.io/key"],
        json!("fleetshard/assignment")
    );
    assert_eq!(
        obj["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        json!("fleetshard")
    );
    store
        .put(
            "fleetshard/blob",
            vec![0, 159, 146, 150],
            Precondition::Absent,
        )
        .await
        .unwrap();
    let obj = configmap(&server, "fleetshard.blob");
    assert_eq!(obj["binaryData"], json!({"value": "AJ+Slg=="}));
    assert_eq!(obj.get("data"), None);
    // A large assignment (close to Kubernetes' 1 MiB) round-trips.
    let big: Vec<u8> = (0..1_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let v = store
        .put("fleetshard/assignment", big.clone(), Precondition::Any)
        .await
        .unwrap();
    let got = store.get("fleetshard/assignment").await.unwrap().unwrap();
    assert_eq!((got.value.len(), got.version), (big.len(), v));
    assert_eq!(got.value, big);
    // Past 1 MiB the store says so instead of sending what a real server refuses.
    let e = store
        .put(
            "fleetshard/assignment",
            vec![b'x'; (1 << 20) + 1],
            Precondition::Any,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Backend(m) if m.contains("fleetshard/assignment") && m.contains("1 MiB")),
        "{e}"
    );
}

#[tokio::test]
async fn awkward_keys_get_valid_distinct_names_and_read_back() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let long = format!("fleetshard/{}", "very-long-segment/".repeat(20));
    let keys = [
        "fleetshard/Replicas/Pod_A",
        "fleetshard/replicas/Pod_A",
        "fleetshard/a.b",
        "fleetshard/a/b",
        "fleetshard/a--b",
        "Fleet Shard/x",
        long.as_str(),
    ];
    for k in keys {
        store
            .put(k, k.as_bytes().to_vec(), Precondition::Absent)
            .await
            .unwrap_or_else(|e| panic!("{k}: {e}"));
    }
    let mut names: Vec<String> = keys.iter().map(|k| object_name(k)).collect();
    for (k, name) in keys.iter().zip(&names) {
        assert_eq!(store.get(k).await.unwrap().unwrap().value, k.as_bytes());
        let lease = server.get("coordination.k8s.io/v1", "Lease", "default", name);
        let cm = server.get("v1", "ConfigMap", "default", name);
        let obj = lease
            .or(cm)
            .unwrap_or_else(|| panic!("{k}: no object {name}"));
        assert_eq!(
            obj["metadata"]["annotations"]["fleetshard.io/key"],
            json!(k)
        );
        assert!(
            name.len() <= 253 && !name.contains(['/', '_', ' ']),
            "{name}"
        );
    }
    assert_eq!(names[3], "fleetshard.a.b", "plain keys keep their name");
    assert!(
        names[0].starts_with("fleetshard-replicas-pod-a--"),
        "{}",
        names[0]
    );
    assert!(
        server
            .get("coordination.k8s.io/v1", "Lease", "default", &names[1])
            .is_some(),
        "replicas/ID is a lease record whatever the ID"
    );
    names.sort();
    names.dedup();
    assert_eq!(names.len(), keys.len(), "distinct names");
    let listed = store.list("fleetshard/").await.unwrap().entries;
    assert_eq!(listed.len(), 6);
    // The root label of a root that is not a label value is a hash, and still selects.
    assert_eq!(store.list("Fleet Shard/").await.unwrap().entries.len(), 1);
}

#[tokio::test]
async fn objects_not_made_by_fleetshard_are_not_records() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    // Someone else's Lease and ConfigMap with our label but no key, and a leader-election
    // Lease: never listed, never a crash.
    server
        .insert(
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "kube-controller-manager",
                         "labels": {"app.kubernetes.io/managed-by": "fleetshard"}},
            "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15}}),
        )
        .unwrap();
    server
        .insert(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "unrelated"}, "data": {"a": "b"}}))
        .unwrap();
    store
        .put(
            "fleetshard/distributor",
            b"{}".to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    let keys: Vec<_> = store
        .list("fleetshard/")
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(keys, ["fleetshard/distributor"]);
    // Through the whole-namespace listing a foreign ConfigMap shows as configmap/ keys.
    let all: Vec<_> = store
        .list("")
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(all, ["configmap/unrelated/a", "fleetshard/distributor"]);
    // A record's ConfigMap cannot be written around its key.
    store
        .put("fleetshard/assignment", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let e = store
        .put(
            "configmap/fleetshard.assignment/value",
            b"2".to_vec(),
            Precondition::Any,
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Backend(_)), "{e}");
}

#[tokio::test]
async fn a_damaged_record_reads_as_empty_and_can_be_replaced() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let key = "fleetshard/shards/0";
    store
        .put(key, b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    store
        .put(
            "fleetshard/assignment",
            b"{}".to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    // Someone edits the objects by hand and removes the values.
    let lease = server
        .modify(
            "coordination.k8s.io/v1",
            "Lease",
            "default",
            "fleetshard.shards.0",
            |l| {
                l["metadata"]["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove("fleetshard.io/record");
            },
        )
        .unwrap();
    server
        .modify(
            "v1",
            "ConfigMap",
            "default",
            "fleetshard.assignment",
            |cm| {
                cm["data"] = json!({"other": "x"});
            },
        )
        .unwrap();
    // The listing still works; the damaged records read as empty at their versions…
    let listing = store.list("fleetshard/").await.unwrap();
    assert_eq!(listing.entries.len(), 2);
    assert!(listing.entries.iter().all(|e| e.value.is_empty()));
    let damaged = store.get(key).await.unwrap().unwrap();
    assert_eq!(
        damaged.version.to_string(),
        lease["metadata"]["resourceVersion"].as_str().unwrap()
    );
    // …and a compare-and-swap on that version repairs them.
    store
        .put(
            key,
            b"{\"holder\":\"r0\"}".to_vec(),
            Precondition::Version(damaged.version),
        )
        .await
        .unwrap();
    assert_eq!(
        store.get(key).await.unwrap().unwrap().value,
        b"{\"holder\":\"r0\"}"
    );
}

/// Argo CD's ConfigMap exactly as Argo CD writes it, plus what an operator may have added.
fn argocd_configmap(mapping: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "argocd-app-controller-shard-cm",
            "namespace": "default",
            "labels": {"app.kubernetes.io/part-of": "argocd"},
            "annotations": {"note": "kept"},
        },
        "data": {"shardControllerMapping": mapping, "other": "kept too"},
    })
}

#[tokio::test]
async fn argocd_shard_configmap_is_shared_with_argocd() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let written_by_argocd = r#"[{"ShardNumber":0,"ControllerName":"argocd-application-controller-0","HeartbeatTime":"2024-03-01T10:00:00Z"},{"ShardNumber":1,"ControllerName":"","HeartbeatTime":null}]"#;
    let inserted = server.insert(argocd_configmap(written_by_argocd)).unwrap();
    let rv: u64 = inserted["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // Read through the store: Argo CD's bytes, the ConfigMap's resourceVersion.
    let entry = store.get(MAPPING_KEY).await.unwrap().unwrap();
    assert_eq!(
        (entry.value.as_slice(), entry.version),
        (written_by_argocd.as_bytes(), rv)
    );
    let mut entries = argocd::decode(std::str::from_utf8(&entry.value).unwrap()).unwrap();
    assert_eq!(
        entries[0].controller_name,
        "argocd-application-controller-0"
    );

    // Write back with compare-and-swap: fleetshard's pod takes shard 1.
    entries[1] = ShardEntry::held(
        1,
        "fleetshard-1",
        WallTime::parse_rfc3339("2024-03-01T10:00:05Z").unwrap(),
    );
    let bytes = argocd::encode(&entries);
    let v = store
        .put(
            MAPPING_KEY,
            bytes.clone().into_bytes(),
            Precondition::Version(rv),
        )
        .await
        .unwrap();
    let cm = configmap(&server, "argocd-app-controller-shard-cm");
    assert_eq!(cm["metadata"]["resourceVersion"], json!(v.to_string()));
    assert_eq!(
        cm["data"],
        json!({"shardControllerMapping": bytes, "other": "kept too"}),
        "other keys kept, the mapping as Argo CD writes it"
    );
    assert_eq!(
        cm["metadata"]["labels"],
        json!({"app.kubernetes.io/part-of": "argocd"})
    );
    assert_eq!(cm["metadata"]["annotations"], json!({"note": "kept"}));
    assert_eq!(cm.get("binaryData"), None);
    assert_eq!(
        bytes,
        r#"[{"ShardNumber":0,"ControllerName":"argocd-application-controller-0","HeartbeatTime":"2024-03-01T10:00:00Z"},{"ShardNumber":1,"ControllerName":"fleetshard-1","HeartbeatTime":"2024-03-01T10:00:05Z"}]"#
    );
    // What Argo CD reads back is what was written.
    assert_eq!(
        argocd::decode(cm["data"]["shardControllerMapping"].as_str().unwrap()).unwrap(),
        entries
    );

    // Argo CD writes meanwhile (its own PUT): our stale compare-and-swap is a conflict and
    // changes nothing.
    server
        .modify(
            "v1",
            "ConfigMap",
            "default",
            "argocd-app-controller-shard-cm",
            |cm| {
                cm["data"]["shardControllerMapping"] = json!(written_by_argocd);
            },
        )
        .unwrap();
    assert!(matches!(
        store
            .put(MAPPING_KEY, b"[]".to_vec(), Precondition::Version(v))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    let cm = configmap(&server, "argocd-app-controller-shard-cm");
    assert_eq!(
        cm["data"]["shardControllerMapping"],
        json!(written_by_argocd)
    );

    // A change to another data key changes the mapping's version too (one object).
    let before = store.get(MAPPING_KEY).await.unwrap().unwrap().version;
    store
        .put(
            "configmap/argocd-app-controller-shard-cm/other",
            b"x".to_vec(),
            Precondition::Any,
        )
        .await
        .unwrap();
    let after = store.get(MAPPING_KEY).await.unwrap().unwrap();
    assert!(after.version > before);
    assert_eq!(after.value, written_by_argocd.as_bytes());
}

#[tokio::test]
async fn argocd_shard_configmap_is_created_when_absent_and_keys_are_deleted_alone() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let mapping = argocd::encode(&[ShardEntry::free(0)]);
    let v = store
        .put(
            MAPPING_KEY,
            mapping.clone().into_bytes(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    let cm = configmap(&server, "argocd-app-controller-shard-cm");
    // Created as Argo CD creates it: the data key, no labels of ours.
    assert_eq!(cm["data"], json!({"shardControllerMapping": mapping}));
    assert_eq!(cm["metadata"].get("labels"), None);
    // Absent on an existing key is a conflict, as for any key.
    assert!(matches!(
        store
            .put(MAPPING_KEY, b"[]".to_vec(), Precondition::Absent)
            .await,
        Err(StoreError::Conflict { .. })
    ));
    let v2 = store
        .put(
            "configmap/argocd-app-controller-shard-cm/extra",
            b"1".to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    assert!(v2 > v);
    // The listing of the ConfigMap shows both keys at the ConfigMap's version.
    let listing = store
        .list("configmap/argocd-app-controller-shard-cm/")
        .await
        .unwrap();
    let got: Vec<_> = listing
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.version))
        .collect();
    assert_eq!(
        got,
        [
            ("configmap/argocd-app-controller-shard-cm/extra", v2),
            (MAPPING_KEY, v2)
        ]
    );
    assert!(matches!(
        store.delete(MAPPING_KEY, Precondition::Version(v)).await,
        Err(StoreError::Conflict { .. })
    ));
    store
        .delete(MAPPING_KEY, Precondition::Version(v2))
        .await
        .unwrap();
    assert_eq!(store.get(MAPPING_KEY).await.unwrap(), None);
    let cm = configmap(&server, "argocd-app-controller-shard-cm");
    assert_eq!(cm["data"], json!({"extra": "1"}), "only that key went");
    store.delete(MAPPING_KEY, Precondition::Any).await.unwrap();
}
