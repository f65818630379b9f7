//! The corpus of real Applications (`tests/corpus/`, sources in its README): what share
//! fleetshard refuses, with a repo-server rendering the sources (their fields are then the
//! repo-server's to judge) and without, and for which reasons. `cargo test -p
//! fleetshard-manifest corpus -- --nocapture` prints the table.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::RefusalKind;

/// The reasons a real Application may still be refused, each named in
/// `docs/argocd-compatibility.md`: the source hydrator, a request's local manifests, a field Argo CD's Application does not have (its CRD drops such a
/// field in a cluster; in a file fleetshard refuses it rather than guess), and an
/// ApplicationSet template's value its generator has not rendered yet (`{{…}}`).
const NAMED: &[&str] = &[
    "spec.sourceHydrator",
    "operation.sync.manifests",
    NOT_AN_APPLICATION_FIELD,
    UNRENDERED_TEMPLATE,
];

/// Of [`NAMED`], the reasons that are no sync or lifecycle behaviour.
const NOT_SYNC: &[&str] = &[
    "spec.sourceHydrator",
    NOT_AN_APPLICATION_FIELD,
    UNRENDERED_TEMPLATE,
];

/// A refused field Argo CD's Application does not have.
const NOT_AN_APPLICATION_FIELD: &str = "a field Argo CD's Application does not have";
/// An ApplicationSet template's value not rendered by its generator.
const UNRENDERED_TEMPLATE: &str = "an ApplicationSet template value not rendered";

/// Argo CD's Application `spec` fields (v3.5), and those of its `syncPolicy`.
const ARGO_SPEC_FIELDS: &[&str] = &[
    "spec.source",
    "spec.sources",
    "spec.destination",
    "spec.project",
    "spec.syncPolicy.automated",
    "spec.syncPolicy.syncOptions",
    "spec.syncPolicy.retry",
    "spec.syncPolicy.managedNamespaceMetadata",
    "spec.ignoreDifferences",
    "spec.info",
    "spec.revisionHistoryLimit",
    "spec.sourceHydrator",
];

/// Every object of the corpus: its repository (directory), file, and the Application
/// it is or, for an ApplicationSet, its template as an Application.
fn corpus() -> Vec<(String, PathBuf, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut out = Vec::new();
    let mut repos: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    repos.sort();
    for repo in repos {
        let name = repo.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&repo)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let value: Value = serde_saphyr::from_str(&text).unwrap();
            let app = match value["kind"].as_str() {
                Some("ApplicationSet") => json!({
                    "apiVersion": "argoproj.io/v1alpha1",
                    "kind": "Application",
                    "metadata": value.pointer("/spec/template/metadata").cloned().unwrap_or(json!({"name": "template"})),
                    "spec": value.pointer("/spec/template/spec").cloned().unwrap_or_default(),
                }),
                _ => value,
            };
            out.push((name.clone(), file, app));
        }
    }
    out
}

/// Why `app` is refused (the reasons, normalised), with or without a repo-server.
fn reasons(app: &Value, source: &str, repo_server: bool) -> Vec<String> {
    let mut app = app.clone();
    // Templates name things with `{{…}}`; an unnamed template gets a name.
    if app
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        app["metadata"]["name"] = json!("unnamed");
    }
    let (_, spec) = match crate::app_from_value(&app, source) {
        Ok(loaded) => loaded.value,
        Err(_) if app.to_string().contains("{{") => return vec![UNRENDERED_TEMPLATE.to_owned()],
        Err(e) => return vec![format!("unreadable: {}", e.field().unwrap_or("document"))],
    };
    let mut out: Vec<String> = spec
        .refusals
        .iter()
        .filter(|r| matches!(r.kind, RefusalKind::InvalidSpec | RefusalKind::Sync))
        .filter(|r| {
            !(repo_server
                && (r.field.starts_with("spec.source.") || r.field.starts_with("spec.sources")))
        })
        .map(|r| match r.message.split('"').nth(1) {
            _ if r.message.contains("{{") => UNRENDERED_TEMPLATE.to_owned(),
            Some(option) if r.message.starts_with("sync option") => format!("sync option {option}"),
            _ if r.field.starts_with("spec.")
                && !ARGO_SPEC_FIELDS.iter().any(|f| r.field.starts_with(f)) =>
            {
                NOT_AN_APPLICATION_FIELD.to_owned()
            }
            _ => r.field.clone(),
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[test]
fn real_applications_are_refused_only_for_named_reasons() {
    let corpus = corpus();
    let repos: BTreeMap<&str, usize> = corpus.iter().fold(BTreeMap::new(), |mut m, (r, _, _)| {
        *m.entry(r.as_str()).or_default() += 1;
        m
    });
    let apps = corpus
        .iter()
        .filter(|(_, f, _)| {
            std::fs::read_to_string(f)
                .unwrap()
                .contains("\nkind: Application\n")
        })
        .count();
    assert!(
        apps >= 200 && repos.len() >= 15,
        "{apps} Applications from {} repositories",
        repos.len()
    );
    let mut table = String::new();
    let mut totals = [0usize; 3];
    let mut per_repo_share = [0f64; 2];
    let mut why: BTreeMap<String, usize> = BTreeMap::new();
    for (repo, n) in &repos {
        let objs: Vec<&(String, PathBuf, Value)> =
            corpus.iter().filter(|(r, _, _)| r == repo).collect();
        let mut refused = [0usize; 2];
        for (_, file, app) in &objs {
            let source = file.display().to_string();
            for (i, repo_server) in [false, true].into_iter().enumerate() {
                let r = reasons(app, &source, repo_server);
                if !r.is_empty() {
                    refused[i] += 1;
                }
                if repo_server {
                    for reason in r {
                        *why.entry(reason).or_default() += 1;
                    }
                }
            }
        }
        totals[0] += n;
        totals[1] += refused[0];
        totals[2] += refused[1];
        per_repo_share[0] += refused[0] as f64 / *n as f64;
        per_repo_share[1] += refused[1] as f64 / *n as f64;
        table.push_str(&format!(
            "{repo:55} {n:4} {:4} {:4}\n",
            refused[0], refused[1]
        ));
    }
    let pct = |a: usize| 100.0 * a as f64 / totals[0] as f64;
    println!(
        "repository                                               objs  refused: without / with a repo-server\n{table}"
    );
    println!(
        "total {} objects ({apps} Applications) from {} repositories: refused {:.1} % without a \
         repo-server, {:.1} % with one (averaged per repository: {:.1} %, {:.1} %)",
        totals[0],
        repos.len(),
        pct(totals[1]),
        pct(totals[2]),
        100.0 * per_repo_share[0] / repos.len() as f64,
        100.0 * per_repo_share[1] / repos.len() as f64,
    );
    println!("reasons with a repo-server: {why:#?}");
    let unnamed: Vec<&String> = why
        .keys()
        .filter(|r| !NAMED.contains(&r.as_str()))
        .collect();
    assert!(
        unnamed.is_empty(),
        "refused for reasons not named in the docs: {unnamed:?}"
    );
    // Every object still refused with a repo-server, and why: none for a sync or
    // lifecycle behaviour.
    let mut refused = 0;
    for (_, f, app) in &corpus {
        let left = reasons(app, &f.display().to_string(), true);
        if !left.is_empty() {
            refused += 1;
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
            println!(
                "  {}: {left:?}",
                f.strip_prefix(&root).unwrap_or(f).display()
            );
            assert!(
                left.iter().all(|r| NOT_SYNC.contains(&r.as_str())),
                "{} refused for a reason of sync or lifecycle: {left:?}",
                f.display()
            );
        }
    }
    println!(
        "refused with a repo-server, none for a sync or lifecycle reason: {refused} ({:.1} %)",
        pct(refused)
    );
}
