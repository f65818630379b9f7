//! The cache's index by app and what a new list tells.

use super::*;
use serde_json::json;

fn obj(name: &str, rv: &str, app: Option<&str>) -> Compact {
    Compact::new(
        &obj_value(name, rv, app),
        crate::compare::DEFAULT_APP_LABEL_KEY,
    )
}

fn obj_value(name: &str, rv: &str, app: Option<&str>) -> Value {
    let mut v = json!({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}});
    if let Some(app) = app {
        v["metadata"]["annotations"] = json!({
            crate::compare::TRACKING_ANNOTATION: format!("{app}:/ConfigMap:ns/{name}")
        });
    }
    v
}

fn label() -> Arc<str> {
    Arc::from(crate::compare::DEFAULT_APP_LABEL_KEY)
}

fn apps(o: &Objects) -> Vec<(String, usize)> {
    let mut v: Vec<_> = o.by_app.iter().map(|(a, k)| (a.clone(), k.len())).collect();
    v.sort();
    v
}

#[test]
fn the_index_by_app_follows_every_change() {
    let key = |n: &str| ("ns".to_owned(), n.to_owned());
    let mut o = Objects::from_map(
        HashMap::from([
            (key("a"), obj("a", "1", Some("one"))),
            (key("b"), obj("b", "1", None)),
        ]),
        label(),
    );
    assert_eq!(apps(&o), [("one".to_owned(), 1)]);
    // Re-annotated for another app: the index moves.
    o.insert_if_newer(key("a"), obj("a", "2", Some("two")));
    assert_eq!(apps(&o), [("two".to_owned(), 1)]);
    // An older version is ignored, index included.
    o.insert_if_newer(key("a"), obj("a", "1", Some("one")));
    assert_eq!(apps(&o), [("two".to_owned(), 1)]);
    o.insert_if_newer(key("b"), obj("b", "3", Some("two")));
    assert_eq!(apps(&o), [("two".to_owned(), 2)]);
    // An instance label indexes the object under its value too.
    let mut labelled = obj_value("b", "4", Some("two"));
    labelled["metadata"]["labels"] = json!({crate::compare::DEFAULT_APP_LABEL_KEY: "legacy"});
    o.insert_if_newer(key("b"), Compact::new(&labelled, &label()));
    assert_eq!(apps(&o), [("legacy".to_owned(), 1), ("two".to_owned(), 2)]);
    o.remove(&key("a"));
    o.remove(&key("b"));
    assert!(o.by_app.is_empty() && o.by_key.is_empty());
}

#[test]
fn a_list_tells_the_apps_whose_objects_changed_came_or_went() {
    let key = |n: &str| ("ns".to_owned(), n.to_owned());
    let before = Objects::from_map(
        HashMap::from([
            (key("same"), obj("same", "1", Some("quiet"))),
            (key("moved"), obj("moved", "1", Some("one"))),
            (key("gone"), obj("gone", "1", Some("two"))),
        ]),
        label(),
    );
    let after = HashMap::from([
        (key("same"), obj("same", "1", Some("quiet"))),
        (key("moved"), obj("moved", "2", Some("three"))),
        (key("new"), obj("new", "5", Some("four"))),
    ]);
    let mut told: Vec<String> = before
        .changed_apps(
            &after,
            &Filter {
                group: "",
                filter: None,
            },
        )
        .into_iter()
        .collect();
    told.sort();
    assert_eq!(told, ["four", "one", "three", "two"]);
}
