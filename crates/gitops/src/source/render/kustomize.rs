//! Kustomize: the source's overrides written into the app's kustomization (in the
//! temporary copy of the tree), then `kustomize build` or `kubectl kustomize`.
//!
//! Argo CD runs `kustomize edit set image`, `set nameprefix`, `add label`, … before the
//! build; `kubectl` has no `edit`, so the same edits are made here on the kustomization's
//! data, with `kustomize edit`'s rules (an image or replica entry replaced by name; a
//! label or annotation already set refused unless `force…`; components and patches
//! appended), and the file written back as JSON (which YAML reads).
//!
//! Before the build, what the kustomization may reach is checked (`kustomize_reach`): files
//! of the repository only, the network only with [`RenderConfig::allow_remote_bases`], no
//! program unless [`RenderConfig::allow_exec_plugins`].

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::super::error::SourceError;
use super::super::parse::Manifest;
use super::envsubst::Env;
use super::kustomize_reach;
use super::process::{Tools, arg};
use super::{Job, RenderConfig, SourceType};

/// The names a kustomization file may have, in kustomize's order of preference.
const KUSTOMIZATION_NAMES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// `spec.source.kustomize`, the fields rendered here (the others are refused by
/// `fleetshard_manifest::implemented`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Options {
    name_prefix: String,
    name_suffix: String,
    images: Vec<String>,
    replicas: Vec<Replica>,
    common_labels: BTreeMap<String, String>,
    force_common_labels: bool,
    label_without_selector: bool,
    label_include_templates: bool,
    common_annotations: BTreeMap<String, String>,
    force_common_annotations: bool,
    namespace: String,
    patches: Vec<Value>,
    components: Vec<String>,
    ignore_missing_components: bool,
}

#[derive(Debug, Deserialize)]
struct Replica {
    name: String,
    count: Value,
}

/// Builds the Kustomize app at `job.path` of the tree copied at `root`.
pub(crate) async fn build(
    job: &Job,
    env: &Env,
    root: &Path,
    tools: &Tools,
    config: &RenderConfig,
) -> Result<Vec<Manifest>, SourceError> {
    let fail = |message: String| job.error(SourceType::Kustomize, message);
    let options: Options = match job.raw.get("kustomize") {
        Some(v) if !v.is_null() => serde_json::from_value(v.clone())
            .map_err(|e| fail(format!("spec.source.kustomize: {e}")))?,
        _ => Options::default(),
    };
    let (program, mut args) = if let Some(kustomize) = tools.find("kustomize") {
        (kustomize, vec![arg("build")])
    } else if let Some(kubectl) = tools.find("kubectl") {
        (kubectl, vec![arg("kustomize")])
    } else {
        return Err(fail(
            "Kustomize needs a `kustomize` or `kubectl` executable on PATH, or Argo CD's \
             repo-server (--repo-server); nothing is applied or pruned"
                .to_owned(),
        ));
    };
    let app_dir = job.path.iter().fold(root.to_path_buf(), |p, c| p.join(c));
    kustomize_reach::check_build_options(&job.kustomize_build_options, config.allow_exec_plugins)
        .map_err(fail)?;
    let (task_root, task_dir, allow_remote) =
        (root.to_owned(), app_dir.clone(), config.allow_remote_bases);
    let env = env.clone();
    tokio::task::spawn_blocking(move || {
        apply_overrides(&task_dir, &task_root, &options, &env)?;
        kustomize_reach::check(&task_root, &task_dir, allow_remote)
    })
    .await
    .map_err(|e| fail(format!("the edit task failed: {e}")))?
    .map_err(fail)?;
    args.push(app_dir.into_os_string());
    args.extend(
        job.kustomize_build_options
            .split_whitespace()
            .map(OsString::from),
    );
    let out = tools
        .run(&program, &args, root, job.limits.max_manifest_bytes)
        .await
        .map_err(fail)?;
    job.parse_output(&format!("{} (kustomize build)", job.path.join("/")), &out)
}

/// The app's kustomization file in `dir`, by kustomize's names.
pub(super) fn kustomization_file(dir: &Path) -> Option<PathBuf> {
    KUSTOMIZATION_NAMES
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
}

pub(super) fn read_kustomization(file: &Path) -> Result<Map<String, Value>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", name(file)))?;
    let options = fleetshard_manifest::yaml_options(text.len());
    match serde_saphyr::from_str_with_options::<Value>(&text, options) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(_) => Err(format!("{}: not a mapping", name(file))),
        Err(e) => Err(format!("{}: invalid YAML: {e}", name(file))),
    }
}

fn name(file: &Path) -> String {
    file.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// Writes `options` into the kustomization in `dir`, as Argo CD's `kustomize edit` calls
/// would (in their order: prefix, suffix, images, replicas, labels, annotations,
/// namespace, patches, components).
fn apply_overrides(dir: &Path, root: &Path, o: &Options, env: &Env) -> Result<(), String> {
    let nothing = o.name_prefix.is_empty()
        && o.name_suffix.is_empty()
        && o.images.is_empty()
        && o.replicas.is_empty()
        && o.common_labels.is_empty()
        && o.common_annotations.is_empty()
        && o.namespace.is_empty()
        && o.patches.is_empty()
        && o.components.is_empty();
    if nothing {
        return Ok(());
    }
    let file = kustomization_file(dir).ok_or_else(|| {
        "no kustomization file (kustomization.yaml) to apply the overrides to".to_owned()
    })?;
    let mut k = read_kustomization(&file)?;
    let set = |k: &mut Map<String, Value>, field: &str, value: &str| {
        if !value.is_empty() {
            k.insert(field.into(), value.into());
        }
    };
    set(&mut k, "namePrefix", &o.name_prefix);
    set(&mut k, "nameSuffix", &o.name_suffix);
    for image in &o.images {
        set_image(&mut k, &env.subst(image))?;
    }
    for r in &o.replicas {
        let count = match &r.count {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("replicas {:?}: count {} is not an integer", r.name, r.count))?;
        upsert_by_name(list(&mut k, "replicas")?, &r.name, |e| {
            e.insert("count".into(), count.into());
        });
    }
    if !o.common_labels.is_empty() {
        let labels: BTreeMap<String, String> = o
            .common_labels
            .iter()
            .map(|(k, v)| (k.clone(), env.subst(v)))
            .collect();
        add_labels(&mut k, &labels, o)?;
    }
    let annotations = obj(&mut k, "commonAnnotations")?;
    add_pairs(
        annotations,
        &o.common_annotations,
        o.force_common_annotations,
        "annotation",
    )?;
    if annotations.is_empty() {
        k.remove("commonAnnotations");
    }
    set(&mut k, "namespace", &o.namespace);
    if !o.patches.is_empty() {
        list(&mut k, "patches")?.extend(o.patches.iter().cloned());
    }
    let components: Vec<&String> = o
        .components
        .iter()
        .filter(|c| {
            !o.ignore_missing_components || inside(root, dir, c).is_some_and(|p| p.exists())
        })
        .collect();
    if !components.is_empty() {
        let list = list(&mut k, "components")?;
        for c in components {
            if !list.iter().any(|v| v.as_str() == Some(c)) {
                list.push(c.as_str().into());
            }
        }
    }
    let text = serde_json::to_vec_pretty(&Value::Object(k)).map_err(|e| e.to_string())?;
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", name(&file)))
}

/// `kustomize edit set image` of one argument: `name=newName[:tag|@digest]`,
/// `name[:tag|@digest]`.
fn set_image(k: &mut Map<String, Value>, spec: &str) -> Result<(), String> {
    let (name, new) = match spec.split_once('=') {
        Some((name, new)) => (name, Some(new)),
        None => (spec, None),
    };
    let (name, own_ref) = split_reference(name);
    let (new_name, reference) = match new {
        Some(new) => {
            let (new_name, r) = split_reference(new);
            (Some(new_name), r)
        }
        None => (None, own_ref),
    };
    if name.is_empty() {
        return Err(format!("kustomize.images {spec:?}: no image name"));
    }
    if new_name.is_none() && reference.is_none() {
        return Err(format!(
            "kustomize.images {spec:?}: neither a new name, tag nor digest"
        ));
    }
    upsert_by_name(list(k, "images")?, name, |e| {
        if let Some(n) = new_name.filter(|n| !n.is_empty()) {
            e.insert("newName".into(), n.into());
        }
        match reference {
            Some(Reference::Tag(t)) => {
                e.insert("newTag".into(), t.into());
                e.remove("digest");
            }
            Some(Reference::Digest(d)) => {
                e.insert("digest".into(), d.into());
                e.remove("newTag");
            }
            None => {}
        }
    });
    Ok(())
}

enum Reference<'a> {
    Tag(&'a str),
    Digest(&'a str),
}

/// An image reference's name and its tag (after the last `:` past the last `/`) or
/// digest (after `@`).
fn split_reference(image: &str) -> (&str, Option<Reference<'_>>) {
    if let Some((name, digest)) = image.split_once('@') {
        return (name, Some(Reference::Digest(digest)));
    }
    let slash = image.rfind('/').map_or(0, |i| i + 1);
    match image[slash..].rfind(':') {
        Some(i) => (
            &image[..slash + i],
            Some(Reference::Tag(&image[slash + i + 1..])),
        ),
        None => (image, None),
    }
}

/// `kustomize edit add label`: into `commonLabels`, or with `labelWithoutSelector` into
/// a `labels` entry without selectors (`includeTemplates` as asked).
fn add_labels(
    k: &mut Map<String, Value>,
    labels: &BTreeMap<String, String>,
    o: &Options,
) -> Result<(), String> {
    if !o.label_without_selector {
        return add_pairs(
            obj(k, "commonLabels")?,
            labels,
            o.force_common_labels,
            "label",
        );
    }
    let entries = list(k, "labels")?;
    let same = |e: &Value| {
        e.get("includeSelectors").and_then(Value::as_bool) != Some(true)
            && e.get("includeTemplates")
                .and_then(Value::as_bool)
                .unwrap_or(false)
                == o.label_include_templates
    };
    let at = match entries.iter().position(same) {
        Some(i) => i,
        None => {
            let mut entry = Map::new();
            entry.insert("pairs".into(), Value::Object(Map::new()));
            if o.label_include_templates {
                entry.insert("includeTemplates".into(), true.into());
            }
            entries.push(Value::Object(entry));
            entries.len() - 1
        }
    };
    let Some(Value::Object(entry)) = entries.get_mut(at) else {
        return Err("labels: an entry is not a mapping".to_owned());
    };
    add_pairs(obj(entry, "pairs")?, labels, o.force_common_labels, "label")
}

/// Adds `pairs`; a key already set is refused unless `force` (kustomize's rule).
fn add_pairs(
    map: &mut Map<String, Value>,
    pairs: &BTreeMap<String, String>,
    force: bool,
    what: &str,
) -> Result<(), String> {
    for (key, value) in pairs {
        if map.contains_key(key) && !force {
            return Err(format!(
                "{what} {key} already in kustomization file (set force to override it)"
            ));
        }
        map.insert(key.clone(), value.as_str().into());
    }
    Ok(())
}

fn list<'a>(k: &'a mut Map<String, Value>, field: &str) -> Result<&'a mut Vec<Value>, String> {
    match k.entry(field).or_insert_with(|| Value::Array(Vec::new())) {
        Value::Array(list) => Ok(list),
        Value::Null => Err(format!("{field}: null in the kustomization")),
        _ => Err(format!("{field}: not a list in the kustomization")),
    }
}

fn obj<'a>(
    k: &'a mut Map<String, Value>,
    field: &str,
) -> Result<&'a mut Map<String, Value>, String> {
    let slot = k.entry(field).or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
        .ok_or_else(|| format!("{field}: not a mapping in the kustomization"))
}

/// The entry of `list` named `name` (created at the end when absent), changed by `edit`.
fn upsert_by_name(list: &mut Vec<Value>, name: &str, edit: impl FnOnce(&mut Map<String, Value>)) {
    let found = list
        .iter()
        .position(|e| e.get("name").and_then(Value::as_str) == Some(name));
    let at = found.unwrap_or_else(|| {
        let mut entry = Map::new();
        entry.insert("name".into(), name.into());
        list.push(Value::Object(entry));
        list.len() - 1
    });
    if let Some(Value::Object(entry)) = list.get_mut(at) {
        edit(entry);
    }
}

/// `rel` from `dir`, made lexically absolute; `None` when absolute or outside `root`.
pub(super) fn inside(root: &Path, dir: &Path, rel: &str) -> Option<PathBuf> {
    let rel = Path::new(rel);
    if rel.is_absolute() {
        return None;
    }
    let mut out = dir.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    out.starts_with(root).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_set_as_kustomize_edit_sets_them() {
        let mut k = Map::new();
        set_image(&mut k, "nginx=registry.example/nginx:1.27").unwrap();
        set_image(&mut k, "redis@sha256:abc").unwrap();
        set_image(&mut k, "nginx:1.28").unwrap();
        set_image(&mut k, "localhost:5000/app=app2").unwrap();
        assert_eq!(
            Value::Object(k),
            serde_json::json!({"images": [
                {"name": "nginx", "newName": "registry.example/nginx", "newTag": "1.28"},
                {"name": "redis", "digest": "sha256:abc"},
                {"name": "localhost:5000/app", "newName": "app2"},
            ]})
        );
        assert!(set_image(&mut Map::new(), "nginx").is_err());
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let root = Path::new("/r");
        assert_eq!(
            inside(root, Path::new("/r/a/b"), "../../c"),
            Some(PathBuf::from("/r/c"))
        );
        assert_eq!(inside(root, Path::new("/r/a"), "../../etc"), None);
        assert_eq!(inside(root, Path::new("/r/a"), "/etc"), None);
    }
}
