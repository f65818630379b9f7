//! An Application's source, as JSON (exactly what `spec.source` or one of `spec.sources`
//! holds), converted field by field into the repo-server's [`ApplicationSource`].
//!
//! Every field of Argo CD's `ApplicationSource` and its nested types is read; a field that
//! is not one of them is an error naming it ([`RequestError::UnknownField`]), never dropped.
//! Where Argo CD's Go types embed a struct by value (the directory's `jsonnet`, a patch
//! target's resource id and group/version/kind, a replica's `count`), the controller always
//! sends the nested message, and so does this conversion.

use serde_json::Value;

use crate::error::RequestError;
use crate::json::{Obj, wrong};
use crate::proto::{
    ApplicationSource, ApplicationSourceDirectory, ApplicationSourceHelm, ApplicationSourceJsonnet,
    ApplicationSourceKustomize, ApplicationSourcePlugin, ApplicationSourcePluginParameter,
    EnvEntry, HelmFileParameter, HelmParameter, IntOrString, JsonnetVar, KustomizeGvk,
    KustomizePatch, KustomizeReplica, KustomizeResId, KustomizeSelector, OptionalArray,
    OptionalMap, RawExtension,
};

/// Converts the source at `path` (`spec.source`, `spec.sources[1]`: messages start there).
pub fn application_source(path: &str, source: &Value) -> Result<ApplicationSource, RequestError> {
    let mut o = Obj::new(path.to_owned(), source)?;
    let converted = ApplicationSource {
        repo_url: o.string("repoURL")?,
        path: o.string("path")?,
        target_revision: o.string("targetRevision")?,
        helm: o.object("helm", helm)?,
        kustomize: o.object("kustomize", kustomize)?,
        directory: o.object("directory", directory)?,
        plugin: o.object("plugin", plugin)?,
        chart: o.string("chart")?,
        r#ref: o.string("ref")?,
        name: o.string("name")?,
        tag_prefix: o.string("tagPrefix")?,
    };
    o.finish()?;
    Ok(converted)
}

fn helm(mut o: Obj<'_>) -> Result<ApplicationSourceHelm, RequestError> {
    let values_object = match o.get("valuesObject") {
        None => None,
        Some(v @ Value::Object(_)) => Some(RawExtension {
            // Compact JSON: what Kubernetes' RawExtension holds for an embedded object.
            raw: serde_json::to_vec(v).map_err(|e| RequestError::Invalid {
                path: o.at("valuesObject"),
                message: e.to_string(),
            })?,
        }),
        Some(other) => return Err(wrong(&o.at("valuesObject"), "an object", other)),
    };
    let helm = ApplicationSourceHelm {
        value_files: o.strings("valueFiles")?,
        parameters: o.objects("parameters", |mut p| {
            let param = HelmParameter {
                name: p.string("name")?,
                value: p.string("value")?,
                force_string: p.bool("forceString")?,
            };
            p.finish().map(|()| param)
        })?,
        release_name: o.string("releaseName")?,
        values: o.string("values")?,
        file_parameters: o.objects("fileParameters", |mut p| {
            let param = HelmFileParameter {
                name: p.string("name")?,
                path: p.string("path")?,
            };
            p.finish().map(|()| param)
        })?,
        version: o.string("version")?,
        pass_credentials: o.bool("passCredentials")?,
        ignore_missing_value_files: o.bool("ignoreMissingValueFiles")?,
        skip_crds: o.bool("skipCrds")?,
        values_object,
        namespace: o.string("namespace")?,
        kube_version: o.string("kubeVersion")?,
        api_versions: o.strings("apiVersions")?,
        skip_tests: o.bool("skipTests")?,
        skip_schema_validation: o.bool("skipSchemaValidation")?,
    };
    o.finish().map(|()| helm)
}

fn kustomize(mut o: Obj<'_>) -> Result<ApplicationSourceKustomize, RequestError> {
    let kustomize = ApplicationSourceKustomize {
        name_prefix: o.string("namePrefix")?,
        name_suffix: o.string("nameSuffix")?,
        images: o.strings("images")?,
        common_labels: o.string_map("commonLabels")?,
        version: o.string("version")?,
        common_annotations: o.string_map("commonAnnotations")?,
        force_common_labels: o.bool("forceCommonLabels")?,
        force_common_annotations: o.bool("forceCommonAnnotations")?,
        namespace: o.string("namespace")?,
        common_annotations_envsubst: o.bool("commonAnnotationsEnvsubst")?,
        replicas: o.objects("replicas", replica)?,
        patches: o.objects("patches", patch)?,
        components: o.strings("components")?,
        label_without_selector: o.bool("labelWithoutSelector")?,
        kube_version: o.string("kubeVersion")?,
        api_versions: o.strings("apiVersions")?,
        ignore_missing_components: o.bool("ignoreMissingComponents")?,
        label_include_templates: o.bool("labelIncludeTemplates")?,
    };
    o.finish().map(|()| kustomize)
}

/// `{name, count}`, the count an integer (int32) or a string, as Kubernetes' IntOrString.
fn replica(mut o: Obj<'_>) -> Result<KustomizeReplica, RequestError> {
    let name = o.string("name")?;
    let path = o.at("count");
    let count = match o.get("count") {
        None => IntOrString::default(),
        Some(Value::String(s)) => IntOrString {
            r#type: 1,
            int_val: 0,
            str_val: s.clone(),
        },
        Some(Value::Number(n)) => {
            let int_val = n
                .as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| RequestError::Invalid {
                    path: path.clone(),
                    message: format!("{n} is not a 32-bit integer"),
                })?;
            IntOrString {
                r#type: 0,
                int_val,
                str_val: String::new(),
            }
        }
        Some(other) => return Err(wrong(&path, "an integer or a string", other)),
    };
    o.finish()?;
    Ok(KustomizeReplica {
        name,
        count: Some(count),
    })
}

/// A patch; its `target` has the resource id and group/version/kind inlined in JSON.
fn patch(mut o: Obj<'_>) -> Result<KustomizePatch, RequestError> {
    let patch = KustomizePatch {
        path: o.string("path")?,
        patch: o.string("patch")?,
        target: o.object("target", |mut t| {
            let target = KustomizeSelector {
                res_id: Some(KustomizeResId {
                    gvk: Some(KustomizeGvk {
                        group: t.string("group")?,
                        version: t.string("version")?,
                        kind: t.string("kind")?,
                    }),
                    name: t.string("name")?,
                    namespace: t.string("namespace")?,
                }),
                annotation_selector: t.string("annotationSelector")?,
                label_selector: t.string("labelSelector")?,
            };
            t.finish().map(|()| target)
        })?,
        options: o.bool_map("options")?,
    };
    o.finish().map(|()| patch)
}

fn directory(mut o: Obj<'_>) -> Result<ApplicationSourceDirectory, RequestError> {
    let directory = ApplicationSourceDirectory {
        recurse: o.bool("recurse")?,
        jsonnet: Some(o.object("jsonnet", jsonnet)?.unwrap_or_default()),
        exclude: o.string("exclude")?,
        include: o.string("include")?,
        disable_extension_filter: o.bool("disableExtensionFilter")?,
    };
    o.finish().map(|()| directory)
}

fn jsonnet(mut o: Obj<'_>) -> Result<ApplicationSourceJsonnet, RequestError> {
    let jsonnet = ApplicationSourceJsonnet {
        ext_vars: o.objects("extVars", jsonnet_var)?,
        tlas: o.objects("tlas", jsonnet_var)?,
        libs: o.strings("libs")?,
    };
    o.finish().map(|()| jsonnet)
}

fn jsonnet_var(mut o: Obj<'_>) -> Result<JsonnetVar, RequestError> {
    let var = JsonnetVar {
        name: o.string("name")?,
        value: o.string("value")?,
        code: o.bool("code")?,
    };
    o.finish().map(|()| var)
}

fn plugin(mut o: Obj<'_>) -> Result<ApplicationSourcePlugin, RequestError> {
    let plugin = ApplicationSourcePlugin {
        name: o.string("name")?,
        env: o.objects("env", |mut e| {
            let entry = EnvEntry {
                name: e.string("name")?,
                value: e.string("value")?,
            };
            e.finish().map(|()| entry)
        })?,
        parameters: o.objects("parameters", plugin_parameter)?,
    };
    o.finish().map(|()| plugin)
}

/// `{name, string | map | array}`: each of the three is sent only when present (an empty
/// map or array differs from none, as in Argo CD).
fn plugin_parameter(mut o: Obj<'_>) -> Result<ApplicationSourcePluginParameter, RequestError> {
    let map = match o.get("map") {
        None => None,
        Some(_) => Some(OptionalMap {
            map: o.string_map("map")?,
        }),
    };
    let array = match o.get("array") {
        None => None,
        Some(_) => Some(OptionalArray {
            array: o.strings("array")?,
        }),
    };
    let parameter = ApplicationSourcePluginParameter {
        name: o.string("name")?,
        map,
        array,
        string: o.opt_string("string")?,
    };
    o.finish().map(|()| parameter)
}

#[cfg(test)]
mod tests;
