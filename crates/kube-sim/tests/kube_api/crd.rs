//! CustomResourceDefinitions: a CRD makes its custom resource servable (CRUD, server-side
//! apply, watch, status subresource) and discoverable; it is validated; its status says
//! Established; deleting it deletes its custom resources. And the built-in groups the
//! simulated clusters serve (RBAC, policy, autoscaling, networking) are discovered.

use fleetshard_kube_sim::FakeApiServer;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use serde_json::{Value, json};

use super::kube_client::client;
use super::raw::{Watch, get, request, send_json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                      "shortNames": ["wd"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object",
                            "x-kubernetes-preserve-unknown-fields": true}},
                 "subresources": {"status": {}}},
                {"name": "v1alpha1", "served": false, "storage": false},
            ],
        },
    })
}

fn gadget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.org"},
        "spec": {
            "group": "example.org",
            "scope": "Cluster",
            "names": {"plural": "gadgets", "kind": "Gadget"},
            "versions": [{"name": "v2", "served": true, "storage": true}],
        },
    })
}

fn widget(name: &str, size: u64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": {"size": size}})
}

fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_crd_makes_its_custom_resource_servable_until_deleted() {
    let f = FakeApiServer::start().await.unwrap();
    assert_eq!(get(f.addr(), WIDGETS).await.status, 404);
    assert_eq!(get(f.addr(), "/apis/example.com").await.status, 404);

    let created = send_json(f.addr(), "POST", CRDS, &widget_crd()).await;
    assert_eq!(created.status, 201, "{}", created.json());
    // Established by a write of its own, as the real CRD controller does.
    let crd = get(f.addr(), &format!("{CRDS}/widgets.example.com"))
        .await
        .json();
    assert!(rv(&crd) > rv(&created.json()));
    let conditions = crd["status"]["conditions"].as_array().unwrap();
    for ty in ["NamesAccepted", "Established"] {
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == ty && c["status"] == "True"),
            "{ty} in {conditions:?}"
        );
    }
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));

    // Discovery lists the served version only.
    let groups = get(f.addr(), "/apis").await.json();
    let group = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "example.com")
        .expect("example.com discovered");
    assert_eq!(
        group["versions"],
        json!([{"groupVersion": "example.com/v1", "version": "v1"}])
    );
    let resources = get(f.addr(), "/apis/example.com/v1").await.json();
    let names: Vec<&str> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["widgets", "widgets/status"]);
    assert_eq!(
        get(f.addr(), "/apis/example.com/v1alpha1").await.status,
        404
    );

    // CRUD, strict resourceVersion, status subresource, watch.
    let mut watch = Watch::open(f.addr(), &format!("{WIDGETS}?watch=true")).await;
    let w = send_json(f.addr(), "POST", WIDGETS, &widget("w1", 1)).await;
    assert_eq!(w.status, 201, "{}", w.json());
    let w = w.json();
    assert_eq!(w["metadata"]["namespace"], "default");
    let added = watch.expect().await;
    assert_eq!(
        (
            added["type"].as_str(),
            added["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("w1"))
    );
    let mut stale = w.clone();
    stale["spec"]["size"] = json!(2);
    let updated = send_json(f.addr(), "PUT", &format!("{WIDGETS}/w1"), &stale).await;
    assert_eq!(updated.status, 200);
    let conflict = send_json(f.addr(), "PUT", &format!("{WIDGETS}/w1"), &stale).await;
    assert_eq!(conflict.status, 409);
    let mut with_status = updated.json();
    with_status["status"] = json!({"ready": true});
    let main = send_json(f.addr(), "PUT", &format!("{WIDGETS}/w1"), &with_status).await;
    assert!(
        main.json().get("status").is_none(),
        "status ignored on the main resource"
    );
    let mut with_status = main.json();
    with_status["status"] = json!({"ready": true});
    let st = send_json(
        f.addr(),
        "PUT",
        &format!("{WIDGETS}/w1/status"),
        &with_status,
    )
    .await;
    assert_eq!(st.json()["status"]["ready"], true);
    assert_eq!(
        f.get("example.com/v1", "Widget", "default", "w1").unwrap()["spec"]["size"],
        2
    );
    assert_eq!(f.list("example.com/v1", "Widget", None).len(), 1);

    // Deleting the CRD deletes its custom resources and stops serving them.
    let deleted = request(
        f.addr(),
        "DELETE",
        &format!("{CRDS}/widgets.example.com"),
        None,
        b"",
    )
    .await;
    assert_eq!(deleted.status, 200);
    loop {
        let e = watch.expect().await;
        if e["type"] == "DELETED" {
            assert_eq!(e["object"]["metadata"]["name"], "w1");
            break;
        }
    }
    assert!(f.list("example.com/v1", "Widget", None).is_empty());
    assert_eq!(get(f.addr(), WIDGETS).await.status, 404);
    assert_eq!(get(f.addr(), "/apis/example.com/v1").await.status, 404);
    // A new CRD serves an empty resource.
    send_json(f.addr(), "POST", CRDS, &widget_crd()).await;
    assert_eq!(get(f.addr(), WIDGETS).await.json()["items"], json!([]));
}

#[tokio::test]
async fn invalid_crds_are_refused() {
    let f = FakeApiServer::start().await.unwrap();
    // (field reported, JSON pointer changed, new value)
    let cases = [
        (
            "metadata.name",
            "/metadata/name",
            json!("widgets.example.org"),
        ),
        ("spec.group", "/spec/group", json!("example")),
        ("spec.names.plural", "/spec/names/plural", json!("Widgets")),
        ("spec.scope", "/spec/scope", json!("Everywhere")),
        ("spec.versions", "/spec/versions/1/storage", json!(true)),
    ];
    for (field, pointer, value) in cases {
        let mut crd = widget_crd();
        *crd.pointer_mut(pointer).unwrap() = value;
        let r = send_json(f.addr(), "POST", CRDS, &crd).await;
        assert_eq!(r.status, 422, "{field}: {}", r.json());
        assert_eq!(r.json()["details"]["causes"][0]["field"], field);
    }
    assert!(
        f.list("apiextensions.k8s.io/v1", "CustomResourceDefinition", None)
            .is_empty()
    );
    // An update is validated too. Read the CRD again first: the status write after the
    // create moved its resourceVersion.
    send_json(f.addr(), "POST", CRDS, &widget_crd()).await;
    let path = format!("{CRDS}/widgets.example.com");
    let mut crd = get(f.addr(), &path).await.json();
    crd["spec"]["scope"] = json!("Everywhere");
    let r = send_json(f.addr(), "PUT", &path, &crd).await;
    assert_eq!(r.status, 422);
}

#[tokio::test]
async fn kube_rs_discovers_and_applies_custom_resources() {
    let f = FakeApiServer::start().await.unwrap();
    let client = client(&f).await;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::discovery::ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let pp = PatchParams::apply("fleetshard").force();
    for crd in [widget_crd(), gadget_crd()] {
        let name = crd["metadata"]["name"].as_str().unwrap().to_owned();
        let obj: DynamicObject = serde_json::from_value(crd).unwrap();
        crds.patch(&name, &pp, &Patch::Apply(&obj)).await.unwrap();
    }
    for discovery in [
        Discovery::new(client.clone()).run().await.unwrap(),
        Discovery::new(client.clone())
            .run_aggregated()
            .await
            .unwrap(),
    ] {
        let (widgets, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
            .expect("widgets discovered");
        assert_eq!(
            (widgets.plural.as_str(), caps.scope),
            ("widgets", Scope::Namespaced)
        );
        let (gadgets, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk("example.org", "v2", "Gadget"))
            .expect("gadgets discovered");
        assert_eq!(
            (gadgets.plural.as_str(), caps.scope),
            ("gadgets", Scope::Cluster)
        );
        for (group, version, kind) in [
            ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
            ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
            ("networking.k8s.io", "v1", "NetworkPolicy"),
            ("policy", "v1", "PodDisruptionBudget"),
            ("autoscaling", "v2", "HorizontalPodAutoscaler"),
            ("batch", "v1", "CronJob"),
            ("", "v1", "ServiceAccount"),
        ] {
            assert!(
                discovery
                    .resolve_gvk(&GroupVersionKind::gvk(group, version, kind))
                    .is_some(),
                "{group}/{version} {kind} discovered"
            );
        }
    }
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let (gadgets, _) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.org", "v2", "Gadget"))
        .unwrap();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &gadgets);
    let g: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.org/v2", "kind": "Gadget",
        "metadata": {"name": "g1"}, "spec": {"color": "blue"},
    }))
    .unwrap();
    let applied = api.patch("g1", &pp, &Patch::Apply(&g)).await.unwrap();
    assert_eq!(applied.data["spec"]["color"], "blue");
    assert_eq!(api.get("g1").await.unwrap().data["spec"]["color"], "blue");
    assert!(f.get("example.org/v2", "Gadget", "", "g1").is_some());
}
