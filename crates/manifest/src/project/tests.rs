//! The project rules, one test each, on projects read from YAML as users write them.

use jiff::Timestamp;

use super::*;
use crate::{LoadError, parse_input};

fn project(yaml: &str) -> AppProject {
    let text = format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {{name: team, namespace: argocd}}\nspec:\n{yaml}"
    );
    let file = parse_input(&text, "projects.yaml").expect("parses").value;
    file.projects["team"].clone()
}

/// fleetshard's own namespace in these tests.
const OWN: &[String] = &[];

fn check<'a>(p: &'a AppProject, server: &'a str, name: &'a str) -> ProjectCheck<'a> {
    let local = ControlPlane::named_in_cluster("id", server);
    ProjectCheck {
        name: &p.name,
        project: Some(p),
        control_plane: ControlPlane::new("argocd", OWN, local),
        cluster_server: server,
        cluster_name: name,
    }
}

fn app_ok(p: &AppProject, repo: &str, server: &str, ns: &str) -> bool {
    check(p, server, "prod")
        .check_app("argocd", "web", repo, ns)
        .is_ok()
}

fn res<'a>(group: &'a str, kind: &'a str, namespace: &'a str) -> ResourceRef<'a> {
    ResourceRef {
        group,
        kind,
        namespace,
        name: "x",
    }
}

const ANY_DEST: &str = "  destinations: [{server: '*', namespace: '*'}]\n";

#[test]
fn source_repos_are_globs_per_path_segment_with_negation() {
    let p = project(&format!(
        "  sourceRepos: ['https://git.example/team/*']\n{ANY_DEST}"
    ));
    assert!(app_ok(&p, "https://git.example/team/web", "https://c", "a"));
    assert!(
        app_ok(&p, "https://git.example/Team/web.git", "https://c", "a"),
        "normalised"
    );
    assert!(
        !app_ok(&p, "https://git.example/team/a/b", "https://c", "a"),
        "* stays in a segment"
    );
    assert!(!app_ok(
        &p,
        "https://git.example/other/web",
        "https://c",
        "a"
    ));
    let err = check(&p, "https://c", "prod")
        .check_app("argocd", "web", "https://evil.example/x", "a")
        .unwrap_err();
    assert_eq!(
        err.0,
        "application repo https://evil.example/x is not permitted in project team"
    );
    // A deny entry refuses what it names, even beside `*`; it matches everything else.
    let deny = project(&format!(
        "  sourceRepos: ['*', '!https://git.example/team/secret']\n{ANY_DEST}"
    ));
    assert!(app_ok(
        &deny,
        "https://git.example/team/web",
        "https://c",
        "a"
    ));
    assert!(
        !app_ok(
            &deny,
            "https://git.example/team/secret.git",
            "https://c",
            "a"
        ),
        "denied"
    );
    let none = project(&format!("  sourceRepos: []\n{ANY_DEST}"));
    assert!(
        !app_ok(&none, "https://git.example/team/web", "https://c", "a"),
        "no repos, none permitted"
    );
}

#[test]
fn destinations_match_server_or_name_and_namespace_with_negation() {
    let p = project(
        "  sourceRepos: ['*']\n  destinations:\n  - {server: 'https://prod-*', namespace: 'team-*'}\n  - {name: staging, namespace: '*'}\n  - {server: '*', namespace: '!kube-system'}\n",
    );
    let ok = |server, name, ns| {
        check(&p, server, name)
            .check_app("argocd", "web", "https://g/r", ns)
            .is_ok()
    };
    assert!(ok("https://prod-1", "p1", "team-a"));
    assert!(ok("https://other", "staging", "anything"), "by name");
    assert!(
        ok("https://other", "x", "default"),
        "the third entry allows what is not kube-system"
    );
    assert!(
        !ok("https://other", "x", "kube-system"),
        "a denied namespace is refused"
    );
    assert!(
        !ok("https://prod-1", "p1", "kube-system"),
        "even where another entry allows it"
    );
    let narrow = project(
        "  sourceRepos: ['*']\n  destinations: [{server: 'https://prod', namespace: 'web'}]\n",
    );
    let err = check(&narrow, "https://prod", "p")
        .check_app("argocd", "web", "https://g/r", "db")
        .unwrap_err();
    assert!(
        err.0
            .contains("do not match any of the allowed destinations in project team"),
        "{err}"
    );
    let none = project("  sourceRepos: ['*']\n");
    assert!(
        !app_ok(&none, "https://g/r", "https://prod", "web"),
        "no destinations, none permitted"
    );
}

#[test]
fn denied_cluster_in_a_destination_refuses_it() {
    let p = project(
        "  sourceRepos: ['*']\n  destinations:\n  - {server: '*', namespace: '*'}\n  - {server: '!https://prod', namespace: '*'}\n",
    );
    assert!(app_ok(&p, "https://g/r", "https://dev", "a"));
    assert!(!app_ok(&p, "https://g/r", "https://prod", "a"));
}

#[test]
fn source_namespaces_admit_apps_outside_argo_cds_namespace() {
    let p = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  sourceNamespaces: ['team-*']\n"
    ));
    let c = check(&p, "https://c", "c");
    assert!(
        c.check_app("argocd", "a", "https://g/r", "x").is_ok(),
        "Argo CD's own namespace"
    );
    assert!(c.check_app("team-a", "a", "https://g/r", "x").is_ok());
    let err = c.check_app("other", "a", "https://g/r", "x").unwrap_err();
    assert!(err.0.contains("not permitted to use project team"), "{err}");
    let closed = project(&format!("  sourceRepos: ['*']\n{ANY_DEST}"));
    assert!(
        check(&closed, "https://c", "c")
            .check_app("team-a", "a", "https://g/r", "x")
            .is_err()
    );
}

#[test]
fn cluster_scoped_kinds_need_the_allow_list_and_the_deny_list_wins() {
    let none = project(&format!("  sourceRepos: ['*']\n{ANY_DEST}"));
    let c = check(&none, "https://c", "c");
    let err = c
        .check_resource(&res("rbac.authorization.k8s.io", "ClusterRoleBinding", ""))
        .unwrap_err();
    assert_eq!(
        err.0,
        "resource rbac.authorization.k8s.io:ClusterRoleBinding x is not permitted in project team"
    );
    assert!(
        c.check_resource(&res("apps", "Deployment", "web")).is_ok(),
        "namespaced: allowed by default"
    );
    let p = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  clusterResourceWhitelist: [{{group: '*', kind: '*'}}]\n  clusterResourceBlacklist: [{{group: rbac.authorization.k8s.io, kind: 'Cluster*'}}]\n"
    ));
    let c = check(&p, "https://c", "c");
    assert!(c.check_resource(&res("", "Namespace", "")).is_ok());
    assert!(
        c.check_resource(&res("rbac.authorization.k8s.io", "ClusterRole", ""))
            .is_err()
    );
    let named = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  clusterResourceWhitelist: [{{group: '', kind: Namespace, name: 'team-*'}}]\n"
    ));
    let c = check(&named, "https://c", "c");
    let ns = |name| ResourceRef {
        group: "",
        kind: "Namespace",
        namespace: "",
        name,
    };
    assert!(c.check_resource(&ns("team-a")).is_ok());
    assert!(c.check_resource(&ns("kube-public")).is_err());
}

#[test]
fn namespaced_allow_and_deny_lists() {
    let p = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  namespaceResourceWhitelist: [{{group: apps, kind: '*'}}, {{group: '', kind: ConfigMap}}]\n  namespaceResourceBlacklist: [{{group: apps, kind: DaemonSet}}]\n"
    ));
    let c = check(&p, "https://c", "c");
    assert!(c.check_resource(&res("apps", "Deployment", "web")).is_ok());
    assert!(c.check_resource(&res("", "ConfigMap", "web")).is_ok());
    assert!(
        c.check_resource(&res("apps", "DaemonSet", "web")).is_err(),
        "denied"
    );
    assert!(
        c.check_resource(&res("", "Secret", "web")).is_err(),
        "not in the allow list"
    );
    let empty = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  namespaceResourceWhitelist: []\n"
    ));
    assert!(
        check(&empty, "https://c", "c")
            .check_resource(&res("apps", "Deployment", "web"))
            .is_err(),
        "an empty allow list allows nothing"
    );
}

#[test]
fn a_resources_own_namespace_cannot_escape_the_projects_destinations() {
    let p = project("  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: 'team-a'}]\n");
    let c = check(&p, "https://c", "c");
    assert!(
        c.check_resource(&res("apps", "Deployment", "team-a"))
            .is_ok()
    );
    let err = c
        .check_resource(&res("apps", "Deployment", "kube-system"))
        .unwrap_err();
    assert!(
        err.0.contains(
            "namespace kube-system on server \"https://c\" is not permitted in project team"
        ),
        "{err}"
    );
}

#[test]
fn argo_cds_control_plane_needs_an_explicit_grant() {
    let open = AppProject::builtin_default("argocd");
    let c = check(&open, "https://kubernetes.default.svc", "in-cluster");
    for (group, kind) in [
        ("", "Secret"),
        ("", "ConfigMap"),
        ("coordination.k8s.io", "Lease"),
    ] {
        let err = c.check_resource(&res(group, kind, "argocd")).unwrap_err();
        assert!(err.0.contains("part of the control plane"), "{err}");
    }
    assert!(
        c.check_resource(&res("", "Secret", "web")).is_ok(),
        "another namespace"
    );
    let other = check(&open, "https://remote", "remote");
    assert!(
        other.check_resource(&res("", "Secret", "argocd")).is_ok(),
        "another cluster"
    );
    let granted = project(
        "  sourceRepos: ['*']\n  destinations: [{server: 'https://kubernetes.default.svc', namespace: argocd}]\n  namespaceResourceWhitelist: [{group: '', kind: ConfigMap}]\n",
    );
    let c = check(&granted, "https://kubernetes.default.svc", "in-cluster");
    assert!(c.check_resource(&res("", "ConfigMap", "argocd")).is_ok());
    assert!(c.check_resource(&res("", "Secret", "argocd")).is_err());
}

/// The attacks of issue 24 under the default project: an AppProject, an Application, a
/// RoleBinding to fleetshard's Role, a Pod running as its service account, each in Argo
/// CD's namespace (or fleetshard's own) on the cluster fleetshard runs in; and the
/// cluster-scoped kinds that grant power over them.
#[test]
fn every_kind_of_the_control_plane_needs_an_explicit_grant() {
    let open = AppProject::builtin_default("argocd");
    let own = ["fleetshard".to_owned()];
    let c = ProjectCheck {
        control_plane: ControlPlane::new("argocd", &own, true),
        ..check(&open, "https://10.96.0.1:443", "by-ip")
    };
    for ns in ["argocd", "fleetshard"] {
        for (group, kind) in [
            ("argoproj.io", "AppProject"),
            ("argoproj.io", "Application"),
            ("rbac.authorization.k8s.io", "RoleBinding"),
            ("rbac.authorization.k8s.io", "Role"),
            ("", "Pod"),
            ("apps", "Deployment"),
            ("batch", "CronJob"),
            ("", "ServiceAccount"),
            ("example.com", "Anything"),
        ] {
            let err = c.check_resource(&res(group, kind, ns)).unwrap_err();
            assert!(
                err.0.contains("part of the control plane")
                    && err.0.contains(&format!("namespace {ns} in a destination")),
                "{err}"
            );
        }
    }
    let cluster = |group, kind, name| ResourceRef {
        group,
        kind,
        namespace: "",
        name,
    };
    for r in [
        cluster(
            "apiregistration.k8s.io",
            "APIService",
            "v1alpha1.argoproj.io",
        ),
        cluster(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "applications.argoproj.io",
        ),
        cluster("", "Namespace", "argocd"),
        cluster("", "Namespace", "fleetshard"),
    ] {
        let err = c.check_resource(&r).unwrap_err();
        assert!(err.0.contains("in clusterResourceWhitelist"), "{err}");
    }
    for r in [
        cluster(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "widgets.example.com",
        ),
        cluster("", "Namespace", "web"),
        cluster("storage.k8s.io", "StorageClass", "fast"),
        // Left to clusterResourceWhitelist, as in Argo CD.
        cluster("rbac.authorization.k8s.io", "ClusterRoleBinding", "x"),
        cluster("rbac.authorization.k8s.io", "ClusterRole", "x"),
        cluster(
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
            "x",
        ),
        cluster(
            "apiregistration.k8s.io",
            "APIService",
            "v1beta1.metrics.k8s.io",
        ),
    ] {
        assert!(c.check_resource(&r).is_ok(), "{r:?}");
    }
    assert!(c.check_resource(&res("", "Pod", "web")).is_ok());
    let remote = ProjectCheck {
        control_plane: ControlPlane::new("argocd", &own, false),
        ..c
    };
    assert!(remote.check_resource(&res("", "Pod", "argocd")).is_ok());
    assert!(
        remote
            .check_resource(&cluster("", "Namespace", "argocd"))
            .is_ok()
    );
}

/// "Explicitly": a wildcard grants nothing of the control plane; the literal group and
/// kind (and, for a namespaced kind, the literal namespace) do.
#[test]
fn a_wildcard_grants_nothing_of_the_control_plane() {
    let wild = project(
        "  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: '*'}]\n  namespaceResourceWhitelist: [{group: '*', kind: '*'}]\n  clusterResourceWhitelist: [{group: '*', kind: '*'}]\n",
    );
    let literal = project(
        "  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: argocd}]\n  namespaceResourceWhitelist: [{group: argoproj.io, kind: Application}]\n  clusterResourceWhitelist: [{group: apiextensions.k8s.io, kind: CustomResourceDefinition}]\n",
    );
    let on_control_plane = |p| ProjectCheck {
        control_plane: ControlPlane::new("argocd", OWN, true),
        ..check(p, "https://192.168.1.10:6443", "by-ip")
    };
    let app = res("argoproj.io", "Application", "argocd");
    let role = ResourceRef {
        group: "apiextensions.k8s.io",
        kind: "CustomResourceDefinition",
        namespace: "",
        name: "applications.argoproj.io",
    };
    assert!(on_control_plane(&wild).check_resource(&app).is_err());
    assert!(on_control_plane(&wild).check_resource(&role).is_err());
    assert!(on_control_plane(&literal).check_resource(&app).is_ok());
    assert!(on_control_plane(&literal).check_resource(&role).is_ok());
    assert!(
        on_control_plane(&literal)
            .check_resource(&res("argoproj.io", "AppProject", "argocd"))
            .is_err()
    );
}

#[test]
fn the_in_cluster_service_is_recognised_by_its_names() {
    for server in [
        "https://kubernetes.default.svc",
        "https://kubernetes.default.svc/",
        "https://kubernetes.default.svc:443",
        "https://kubernetes.default.svc.cluster.local",
        "https://KUBERNETES.default.svc.cluster.local.:443/",
        "https://kubernetes.default",
        "https://kubernetes",
    ] {
        assert!(ControlPlane::named_in_cluster("uid", server), "{server}");
    }
    assert!(ControlPlane::named_in_cluster("", "https://anything"));
    for server in [
        "https://kubernetes.example.com",
        "https://10.96.0.1:443",
        "http://kubernetes.default.svc",
    ] {
        assert!(!ControlPlane::named_in_cluster("uid", server), "{server}");
    }
}

#[test]
fn a_missing_project_and_unimplemented_fields_refuse_the_app() {
    let c = ProjectCheck {
        name: "ghost",
        project: None,
        control_plane: ControlPlane::new("argocd", OWN, false),
        cluster_server: "https://c",
        cluster_name: "c",
    };
    let err = c.check_app("argocd", "a", "https://g/r", "x").unwrap_err();
    assert_eq!(
        err.0,
        "application references project ghost which does not exist"
    );
    let p = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  signatureKeys: [{{keyID: ABC}}]\n  roles: [{{name: ci}}]\n"
    ));
    let err = check(&p, "https://c", "c")
        .check_app("argocd", "a", "https://g/r", "x")
        .unwrap_err();
    assert!(
        err.0
            .starts_with("project team: spec.signatureKeys: is not implemented"),
        "{err}"
    );
    assert_eq!(
        p.refusals.len(),
        1,
        "roles are the API server's: {:?}",
        p.refusals
    );
}

#[test]
fn parse_errors_name_file_object_and_field() {
    let text = "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: team}\nspec: {sourceRepos: 5}\n";
    let err = parse_input(text, "p.yaml").unwrap_err();
    let LoadError::Field {
        file,
        object,
        field,
        ..
    } = &err
    else {
        panic!("{err}")
    };
    assert_eq!(
        (file.as_str(), object.as_str(), field.as_str()),
        ("p.yaml", "AppProject team", "spec.sourceRepos")
    );
    let p = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  syncWindows: [{{kind: maybe, schedule: '* * * * *', duration: 1h, applications: ['*']}}]\n"
    ));
    assert_eq!(p.refusals[0].field, "spec.syncWindows[0].kind");
}

#[test]
fn finalizer_and_deletion_are_read() {
    let text = "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: team, deletionTimestamp: '2026-01-01T00:00:00Z', finalizers: [resources-finalizer.argocd.argoproj.io]}\n";
    let p = &parse_input(text, "p.yaml").unwrap().value.projects["team"];
    assert!(p.deleting && p.has_finalizer);
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn windows(yaml: &str) -> Vec<SyncWindow> {
    let p = project(&format!(
        "  sourceRepos: ['*']\n{ANY_DEST}  syncWindows:\n{yaml}"
    ));
    assert!(p.refusals.is_empty(), "{:?}", p.refusals);
    p.sync_windows
}

const TARGET: (&str, &str, &str, &str) = ("web", "team-a", "https://prod", "prod");

#[test]
fn deny_windows_block_automated_syncs_while_active_and_manual_sync_overrides() {
    let w = windows(
        "  - {kind: deny, schedule: '0 22 * * *', duration: 1h, applications: ['*'], manualSync: true}\n",
    );
    let verdict = |t, manual| sync_windows_verdict(&w, TARGET, manual, at(t));
    assert_eq!(
        verdict("2026-03-02T21:59:00Z", false),
        WindowVerdict::Allowed
    );
    assert!(
        matches!(verdict("2026-03-02T22:30:00Z", false), WindowVerdict::Blocked(m) if m.contains("deny window \"0 22 * * *\" for 1h0m (UTC)"))
    );
    assert_eq!(
        verdict("2026-03-02T22:30:00Z", true),
        WindowVerdict::Allowed,
        "manualSync"
    );
    assert_eq!(
        verdict("2026-03-02T23:00:01Z", false),
        WindowVerdict::Allowed,
        "closed after 1h"
    );
}

#[test]
fn allow_windows_block_outside_them_and_deny_wins_over_allow() {
    let w = windows(
        "  - {kind: allow, schedule: '0 9 * * 1-5', duration: 8h, namespaces: ['team-*']}\n  - {kind: deny, schedule: '0 12 * * *', duration: 1h, clusters: [prod]}\n",
    );
    let verdict = |t| sync_windows_verdict(&w, TARGET, false, at(t));
    // 2026-03-02 is a Monday.
    assert_eq!(verdict("2026-03-02T10:00:00Z"), WindowVerdict::Allowed);
    assert!(
        matches!(verdict("2026-03-02T12:30:00Z"), WindowVerdict::Blocked(_)),
        "deny wins"
    );
    assert!(
        matches!(verdict("2026-03-02T18:00:00Z"), WindowVerdict::Blocked(m) if m.contains("no allow window is active"))
    );
    assert!(
        matches!(verdict("2026-03-07T10:00:00Z"), WindowVerdict::Blocked(_)),
        "Saturday"
    );
    let other = sync_windows_verdict(
        &w,
        ("db", "infra", "https://dev", "dev"),
        false,
        at("2026-03-02T18:00:00Z"),
    );
    assert_eq!(other, WindowVerdict::Allowed, "no window matches this app");
}

#[test]
fn windows_follow_their_time_zone_across_daylight_saving() {
    let w = windows(
        "  - {kind: deny, schedule: '0 9 * * *', duration: 1h, applications: [web], timeZone: Europe/Berlin}\n",
    );
    let blocked = |t| {
        matches!(
            sync_windows_verdict(&w, TARGET, false, at(t)),
            WindowVerdict::Blocked(_)
        )
    };
    // Winter: 09:00 in Berlin is 08:00 UTC; summer: 07:00 UTC.
    assert!(blocked("2026-01-15T08:30:00Z"));
    assert!(!blocked("2026-01-15T07:30:00Z"));
    assert!(blocked("2026-07-15T07:30:00Z"));
    assert!(!blocked("2026-07-15T08:30:00Z"));
}

#[test]
fn and_operator_needs_every_selector() {
    let w = windows(
        "  - {kind: deny, schedule: '* * * * *', duration: 1h, applications: [web], namespaces: [other], andOperator: true}\n",
    );
    assert_eq!(
        sync_windows_verdict(&w, TARGET, false, at("2026-03-02T10:00:00Z")),
        WindowVerdict::Allowed
    );
}

#[test]
fn cron_schedules_parse_as_argo_cd_reads_them() {
    for bad in [
        "* * * *",
        "61 * * * *",
        "@every 1h",
        "*/0 * * * *",
        "5-1 * * * *",
    ] {
        let p = project(&format!(
            "  sourceRepos: ['*']\n{ANY_DEST}  syncWindows: [{{kind: deny, schedule: '{bad}', duration: 1h, applications: ['*']}}]\n"
        ));
        assert_eq!(p.refusals.len(), 1, "{bad}");
        assert_eq!(p.refusals[0].field, "spec.syncWindows[0].schedule");
    }
    // Day of month OR day of week when both are restricted: the 1st, or any Sunday.
    let w =
        windows("  - {kind: deny, schedule: '0 0 1 * sun', duration: 1h, applications: ['*']}\n");
    let blocked = |t| {
        matches!(
            sync_windows_verdict(&w, TARGET, false, at(t)),
            WindowVerdict::Blocked(_)
        )
    };
    assert!(blocked("2026-04-01T00:30:00Z"), "the 1st (a Wednesday)");
    assert!(blocked("2026-04-05T00:30:00Z"), "a Sunday");
    assert!(!blocked("2026-04-06T00:30:00Z"));
    let w = windows(
        "  - {kind: deny, schedule: '@monthly', duration: 2h, applications: ['*']}\n  - {kind: deny, schedule: '*/15 9-17 * JAN,feb MON-FRI', duration: 1m, applications: ['*']}\n",
    );
    let blocked = |t| {
        matches!(
            sync_windows_verdict(&w, TARGET, false, at(t)),
            WindowVerdict::Blocked(_)
        )
    };
    assert!(blocked("2026-05-01T01:00:00Z"));
    assert!(blocked("2026-01-05T09:15:30Z"));
    assert!(!blocked("2026-01-05T09:16:30Z"));
    assert!(!blocked("2026-03-02T09:15:30Z"), "not in March");
}
