//! Renders in the render sandbox, as the `fleetshard` binary runs them: Jsonnet bombs and
//! loops end at their memory and CPU bound (the replica does not grow or spin), and a
//! tool sees neither the hidden paths nor the network. This test binary is its own
//! launcher and Jsonnet child (`main` calls both entries first, as fleetshard's does).
//!
//! Each case prints what it measured (the children's CPU time and peak memory).

use std::net::TcpListener;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use fleetshard_gitops::source::{
    RenderConfig, RenderSandbox, RepoCache, RepoCacheConfig, StandaloneRenderer,
    run_jsonnet_child_if_invoked,
};
use fleetshard_sandbox::{Launcher, Namespaces, Probe, run_if_invoked};
use fleetshard_testsupport::git::Git;
use serde_json::json;

#[path = "shared/render.rs"]
mod shared_render;
use shared_render::{render_with, source};

fn main() -> ExitCode {
    if let Some(code) = run_if_invoked() {
        return code;
    }
    if let Some(code) = run_jsonnet_child_if_invoked() {
        return code;
    }
    let launcher = Launcher::current(Namespaces::IfAvailable).unwrap();
    let probe = launcher.probe().unwrap();
    println!("sandbox probe: {probe:?}");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    fleetshard_testsupport::harness::run_cases(&[
        ("jsonnet_bombs_and_loops_end_at_their_bounds", &|| {
            jsonnet_bounds(&runtime, &probe)
        }),
        ("a_tool_sees_no_hidden_path_and_no_network", &|| {
            tool_confined(&runtime, &probe)
        }),
    ])
}

fn renderer(tmp: &Path, config: RenderConfig) -> StandaloneRenderer {
    StandaloneRenderer::new(
        RepoCache::new(RepoCacheConfig::new(tmp.join("cache"))),
        config,
    )
}

fn sandbox(hide: Vec<std::path::PathBuf>, jsonnet_max_memory: u64) -> RenderSandbox {
    RenderSandbox {
        launcher: Launcher::current(Namespaces::IfAvailable).unwrap(),
        hide,
        jsonnet_max_memory,
    }
}

/// The children's CPU seconds and largest resident set so far (kB).
fn children_usage() -> (f64, i64) {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap();
    let cpu = usage.user_time();
    let sys = usage.system_time();
    let seconds =
        (cpu.tv_sec() + sys.tv_sec()) as f64 + (cpu.tv_usec() + sys.tv_usec()) as f64 / 1e6;
    (seconds, usage.max_rss())
}

fn jsonnet_bounds(runtime: &tokio::runtime::Runtime, _: &Probe) {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    // Three lines that asked a replica for every byte of the machine.
    git.write(
        "bomb/main.jsonnet",
        "local s = std.repeat('x', 1000000);\n{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'b' },\n  data: { ['k' + i]: s + i for i in std.range(1, 100000) } }\n",
    );
    // A loop that held a core forever.
    git.write(
        "loop/main.jsonnet",
        "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'l' },\n  data: { n: '' + std.foldl(function(a, b) std.foldl(function(c, d) c + d, std.range(0, 100000), a), std.range(0, 100000), 0) } }\n",
    );
    git.write(
        "ok/main.jsonnet",
        "{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'ok' }, data: { v: std.extVar('v') } }\n",
    );
    git.commit("jsonnet");
    let memory = 256u64 << 20;
    let r = renderer(
        tmp.path(),
        RenderConfig {
            timeout: Duration::from_secs(2),
            sandbox: Some(sandbox(Vec::new(), memory)),
            ..RenderConfig::default()
        },
    );
    let ok = source(
        &git.path(),
        "ok",
        json!({"directory": {"jsonnet": {"extVars": [{"name": "v", "value": "fine"}]}}}),
    );
    let rendered = runtime.block_on(render_with(&r, &ok, &[])).unwrap();
    assert_eq!(rendered.manifests.objects[0].object["data"]["v"], "fine");

    // The bomb under a CPU bound it cannot reach first, however loaded the machine.
    let roomy = renderer(
        tmp.path(),
        RenderConfig {
            timeout: Duration::from_secs(120),
            sandbox: Some(sandbox(Vec::new(), memory)),
            ..RenderConfig::default()
        },
    );
    let before = children_usage().0;
    let err = runtime
        .block_on(render_with(
            &roomy,
            &source(&git.path(), "bomb", json!({})),
            &[],
        ))
        .unwrap_err()
        .to_string();
    let (cpu, rss) = children_usage();
    println!(
        "  bomb: {:.1} s of CPU; the largest child so far: {} MiB resident",
        cpu - before,
        rss / 1024
    );
    assert!(err.contains("more than 256 MiB of memory"), "{err}");
    assert!(rss < 300 * 1024, "a child held {rss} kB");

    for (name, raw) in [
        ("loop", json!({})),
        (
            "ok",
            json!({"directory": {"jsonnet": {"extVars": [{"name": "v", "code": true,
                "value": "'' + std.foldl(function(a, b) std.foldl(function(c, d) c + d, std.range(0, 100000), a), std.range(0, 100000), 0)"}]}}}),
        ),
    ] {
        let before = children_usage().0;
        let err = runtime
            .block_on(render_with(&r, &source(&git.path(), name, raw), &[]))
            .unwrap_err()
            .to_string();
        println!(
            "  {name}: ended after {:.1} s of CPU",
            children_usage().0 - before
        );
        assert!(err.contains("more than 2 s of CPU time"), "{name}: {err}");
    }
}

fn tool_confined(runtime: &tokio::runtime::Runtime, probe: &Probe) {
    let tmp = tempfile::tempdir().unwrap();
    let secrets = tmp.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::write(secrets.join("token"), "the-service-account-token").unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // A "helm" that reads the token and calls the replica's loopback.
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let helm = bin.join("helm");
    std::fs::write(
        &helm,
        format!(
            "#!/bin/bash\nt=$(cat {}/token 2>/dev/null)\nif echo hi 2>/dev/null > /dev/tcp/127.0.0.1/{port}; then n=reached; else n=refused; fi\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: probe\\ndata:\\n  token: \"%s\"\\n  network: %s\\n' \"$t\" \"$n\"\n",
            secrets.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&helm, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path =
        std::env::join_paths([bin.as_path(), Path::new("/usr/bin"), Path::new("/bin")]).unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write(
        "chart/Chart.yaml",
        "apiVersion: v2\nname: c\nversion: 0.1.0\n",
    );
    git.commit("chart");
    let src = source(&git.path(), "chart", json!({}));
    let data = |config: RenderConfig| {
        let r = renderer(tmp.path(), config);
        let rendered = runtime.block_on(render_with(&r, &src, &[])).unwrap();
        rendered.manifests.objects[0].object["data"].clone()
    };
    let open = data(RenderConfig {
        path: Some(path.clone()),
        ..RenderConfig::default()
    });
    assert_eq!(
        open,
        json!({"token": "the-service-account-token", "network": "reached"})
    );
    let confined = data(RenderConfig {
        path: Some(path),
        sandbox: Some(sandbox(vec![secrets.clone()], 1 << 30)),
        ..RenderConfig::default()
    });
    match probe {
        Probe::Namespaces => {
            assert_eq!(confined, json!({"token": "", "network": "refused"}));
        }
        // Without namespaces the tool runs bounded only (and the replica says so at start).
        Probe::BoundsOnly(_) => assert_eq!(confined, open),
    }
}
