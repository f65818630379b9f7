//! The subset of kustomize that `deploy/` uses, resolved in Rust so that the manifests are
//! checked without a kustomize binary (none is installable from the registries CI reaches).
//!
//! Supported, and nothing else (anything else is an error naming the file and field):
//! - `kustomization.yaml` fields `apiVersion`, `kind`, `resources` (files of one or more
//!   YAML documents, or directories with a kustomization), `namespace` (set on every
//!   object, and on RoleBinding subjects of kind ServiceAccount, as kustomize does),
//!   `images` (`name` → `newName`/`newTag` on containers' images), and `patches` whose
//!   entries have only `path:`: a strategic-merge patch applied to the one object with the
//!   patch's apiVersion, kind and metadata.name.
//! - In a strategic-merge patch: maps merge key by key, `null` deletes, the lists
//!   `containers`, `initContainers`, `env`, `volumes` and `volumeMounts` merge by `name`
//!   (the items the patch names, new or merged, are put first in the patch's order, and
//!   the others follow in their order, as kustomize 5 does),
//!   and the lists `args`, `command` and `rules` are replaced. Any other list in a patch,
//!   and any `$patch`-style directive, is an error.
//!
//! Where `kubectl kustomize` exists, a test renders with it too and requires the same
//! objects (`deploy_manifests.rs`).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

const KUSTOMIZATION_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "resources",
    "namespace",
    "images",
    "patches",
];
const MERGE_BY_NAME: &[&str] = &[
    "containers",
    "initContainers",
    "env",
    "volumes",
    "volumeMounts",
];
const REPLACED_LISTS: &[&str] = &["args", "command", "rules"];

/// Parses every YAML document of a file (empty documents skipped).
pub fn parse_yaml_file(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let options = serde_saphyr::options! { strict_booleans: true };
    let docs: Vec<Value> = serde_saphyr::from_multiple_with_options(&text, options)
        .map_err(|e| format!("{}: invalid YAML: {e}", path.display()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// `kind/name` of an object, for messages and lookups.
pub fn id(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["kind"].as_str().unwrap_or("?"),
        obj["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The objects the kustomization in `dir` produces.
pub fn render(dir: &Path) -> Result<Vec<Value>, String> {
    let file = dir.join("kustomization.yaml");
    let docs = parse_yaml_file(&file)?;
    let [k] = docs.as_slice() else {
        return Err(format!("{}: expected one YAML document", file.display()));
    };
    let k = k
        .as_object()
        .ok_or_else(|| format!("{}: not a mapping", file.display()))?;
    if let Some(field) = k
        .keys()
        .find(|f| !KUSTOMIZATION_FIELDS.contains(&f.as_str()))
    {
        return Err(format!(
            "{}: field {field:?} is not supported by this checker (supported: {KUSTOMIZATION_FIELDS:?})",
            file.display()
        ));
    }
    let strings = |field: &str| -> Result<Vec<&Value>, String> {
        match k.get(field) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => Ok(a.iter().collect()),
            Some(_) => Err(format!("{}: {field} must be a list", file.display())),
        }
    };
    let mut objects = Vec::new();
    for r in strings("resources")? {
        let r = r
            .as_str()
            .ok_or_else(|| format!("{}: resources: {r} is not a path", file.display()))?;
        let path: PathBuf = dir.join(r);
        if path.is_dir() {
            objects.extend(render(&path)?);
        } else {
            objects.extend(parse_yaml_file(&path)?);
        }
    }
    for p in strings("patches")? {
        let path = match p.as_object() {
            Some(m) if m.len() == 1 && m.get("path").is_some_and(Value::is_string) => {
                dir.join(m["path"].as_str().unwrap_or_default())
            }
            _ => {
                return Err(format!(
                    "{}: patches: only `- path: FILE` strategic-merge patches are supported, got {p}",
                    file.display()
                ));
            }
        };
        let docs = parse_yaml_file(&path)?;
        let [patch] = docs.as_slice() else {
            return Err(format!("{}: expected one patch document", path.display()));
        };
        let targets: Vec<&mut Value> = objects
            .iter_mut()
            .filter(|o| {
                o["apiVersion"] == patch["apiVersion"]
                    && o["kind"] == patch["kind"]
                    && o["metadata"]["name"] == patch["metadata"]["name"]
            })
            .collect();
        let [target] = targets.try_into().map_err(|t: Vec<&mut Value>| {
            format!(
                "{}: patch matches {} objects, expected 1",
                path.display(),
                t.len()
            )
        })?;
        merge(
            target,
            patch,
            &format!("{} ({})", path.display(), id(patch)),
        )?;
    }
    if let Some(ns) = k.get("namespace") {
        let ns = ns
            .as_str()
            .ok_or_else(|| format!("{}: namespace must be a string", file.display()))?;
        for o in &mut objects {
            o["metadata"]["namespace"] = Value::from(ns);
            if o["kind"] == "RoleBinding"
                && let Some(subjects) = o["subjects"].as_array_mut()
            {
                for s in subjects
                    .iter_mut()
                    .filter(|s| s["kind"] == "ServiceAccount")
                {
                    s["namespace"] = Value::from(ns);
                }
            }
        }
    }
    for image in strings("images")? {
        let name = image["name"]
            .as_str()
            .ok_or_else(|| format!("{}: images: entry without name", file.display()))?;
        let new_name = image["newName"].as_str().unwrap_or(name);
        let new_image = match image["newTag"].as_str() {
            Some(tag) => format!("{new_name}:{tag}"),
            None => new_name.to_owned(),
        };
        for o in &mut objects {
            for c in containers_mut(o) {
                let current = c["image"].as_str().unwrap_or_default();
                let bare = current.split(['@', ':']).next().unwrap_or_default();
                if bare == name {
                    c["image"] = Value::from(new_image.clone());
                }
            }
        }
    }
    Ok(objects)
}

/// The containers of a workload's pod template.
pub fn containers_mut(o: &mut Value) -> Vec<&mut Value> {
    // `pointer_mut`, not indexing: `IndexMut` would insert the path into other kinds.
    match o
        .pointer_mut("/spec/template/spec/containers")
        .and_then(Value::as_array_mut)
    {
        Some(cs) => cs.iter_mut().collect(),
        None => Vec::new(),
    }
}

/// Applies the strategic-merge patch `patch` to `base` (module docs for the subset).
pub fn merge(base: &mut Value, patch: &Value, at: &str) -> Result<(), String> {
    let (Some(b), Some(p)) = (base.as_object_mut(), patch.as_object()) else {
        *base = patch.clone();
        return Ok(());
    };
    for (key, pv) in p {
        let here = format!("{at}.{key}");
        if key.starts_with('$') {
            return Err(format!("{here}: patch directives are not supported"));
        }
        match pv {
            Value::Null => {
                b.remove(key);
            }
            Value::Array(items) if MERGE_BY_NAME.contains(&key.as_str()) => {
                let list = b
                    .entry(key.clone())
                    .or_insert_with(|| Value::Array(Vec::new()))
                    .as_array_mut()
                    .ok_or_else(|| format!("{here}: the base value is not a list"))?;
                let mut named = Vec::new();
                for item in items {
                    let name = item["name"]
                        .as_str()
                        .ok_or_else(|| format!("{here}: an item without name"))?;
                    match list.iter().position(|i| i["name"] == name) {
                        Some(at) => {
                            let mut existing = list.remove(at);
                            merge(&mut existing, item, &format!("{here}[{name}]"))?;
                            named.push(existing);
                        }
                        None => named.push(item.clone()),
                    }
                }
                list.splice(0..0, named);
            }
            Value::Array(_) if REPLACED_LISTS.contains(&key.as_str()) => {
                b.insert(key.clone(), pv.clone());
            }
            Value::Array(_) => {
                return Err(format!(
                    "{here}: this checker does not know how kustomize merges the list {key:?}"
                ));
            }
            Value::Object(_) => {
                let slot = b
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                merge(slot, pv, &here)?;
            }
            _ => {
                b.insert(key.clone(), pv.clone());
            }
        }
    }
    Ok(())
}
