//! What a person at a terminal uses: `status --watch`, completions, the man page,
//! `--version`, exit codes, and that progress output never reaches a pipe.

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::replicas::fleetshard;
use crate::support::store::{ROOT, block_on};
use fleetshard_coord::fenced::{AssignmentDoc, ShardRecord, assignment_key, shard_key};
use fleetshard_coord::store::{Precondition, Store as _};
use fleetshard_store_sqlite::SqliteStore;

/// Reads `count` snapshots of `status --watch` from a pipe: each snapshot is a block of
/// non-empty lines, snapshots separated by one blank line.
fn frames(child: &mut std::process::Child, count: usize) -> Vec<Vec<String>> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut frames = vec![Vec::new()];
    while frames.len() <= count {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("a line of status --watch: {e}; so far {frames:?}"));
        if line.is_empty() {
            frames.push(Vec::new());
        } else {
            frames.last_mut().unwrap().push(line);
        }
    }
    frames.truncate(count);
    frames
}

#[test]
fn status_watch_prints_snapshots_to_a_pipe_with_unowned_clusters_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fleetshard.db");
    let store = SqliteStore::open(&db).unwrap();
    let fleet = dir.path().join("fleet.yaml");
    std::fs::write(
        &fleet,
        "clusters:\n\
         - {id: c-a, name: alpha, server: https://a.example, apps: 3}\n\
         - {id: c-b, name: bravo, server: https://b.example, apps: 5}\n\
         - {id: c-c, name: charlie, server: https://c.example, apps: 7, weight: 20}\n",
    )
    .unwrap();
    // Generation 1: alpha and charlie on shard 0, bravo on shard 1; shard 0 held by r0,
    // which renews (a thread rewrites its record, as a live holder does), shard 1 vacant.
    let doc = AssignmentDoc {
        generation: 1,
        shards: 2,
        clusters: [("c-a", 0), ("c-b", 1), ("c-c", 0)]
            .into_iter()
            .map(|(id, s)| (id.to_owned(), s))
            .collect(),
        ..AssignmentDoc::default()
    };
    block_on(store.put(
        &assignment_key(ROOT),
        serde_json::to_vec(&doc).unwrap(),
        Precondition::Any,
    ))
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // The watch starts after the first renew landed: a first frame read before it saw
    // shard 0 vacant (a loaded machine).
    let (first_renew, renewed) = std::sync::mpsc::channel();
    let renewer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            for beat in 0u64.. {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let rec = ShardRecord {
                    holder: "r0".into(),
                    incarnation: 7,
                    beat,
                    acked: 1,
                    released: false,
                    zone: None,
                    capacity: None,
                };
                let key = shard_key(ROOT, 0);
                let put = store.put(&key, serde_json::to_vec(&rec).unwrap(), Precondition::Any);
                block_on(put).unwrap();
                let _ = first_renew.send(());
                std::thread::sleep(Duration::from_millis(150));
            }
        })
    };
    renewed.recv().expect("the first renew");

    let mut child = fleetshard()
        .args(["status", "--watch", "--interval", "100ms", "--store"])
        .arg(format!("sqlite://{}", db.display()))
        .arg("--fleet")
        .arg(&fleet)
        .args(["--cluster-base-load", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let got = frames(&mut child, 2);
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    stop.store(true, Ordering::Relaxed);
    renewer.join().unwrap();

    for frame in &got {
        let text = frame.join("\n");
        assert!(!text.contains('\x1b'), "no escape codes on a pipe:\n{text}");
        assert!(frame[0].contains("generation 1"), "{text}");
        let at = |needle: &str| {
            frame
                .iter()
                .position(|l| l.starts_with(needle))
                .unwrap_or_else(|| panic!("no line starting {needle:?} in\n{text}"))
        };
        // The unowned cluster (bravo, vacant shard 1) comes first, before the shards;
        // the owned ones are not listed as unowned.
        assert!(
            at("UNOWNED") < at("c-b") && at("c-b") < at("SHARD"),
            "{text}"
        );
        assert!(frame[at("c-b")].contains("bravo") && frame[at("c-b")].ends_with("vacant"));
        assert!(!text.contains("c-a") && !text.contains("c-c"), "{text}");
        // Per shard: holder, lease, age, clusters, apps, load (charlie weighs 20, alpha
        // 1 + 3 apps, bravo 1 + 5).
        let shard0: Vec<&str> = frame[at("0 ")].split_whitespace().collect();
        assert_eq!(shard0[..3], ["0", "r0", "live"], "{text}");
        assert!(shard0[3].starts_with(">="), "held before the watch: {text}");
        assert_eq!(shard0[4..], ["2", "10", "24"], "{text}");
        let shard1: Vec<&str> = frame[at("1 ")].split_whitespace().collect();
        assert_eq!(shard1, ["1", "-", "vacant", "-", "1", "5", "6"], "{text}");
        assert!(
            frame.last().unwrap().starts_with("3 clusters, 1 unowned"),
            "{text}"
        );
    }
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn example(rel: &str) -> String {
    format!("{}/../../examples/{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn version_names_the_version_the_commit_and_the_features() {
    let out = fleetshard().arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    // Every feature the binary was built with, in name order (build.rs).
    let enabled = [
        ("etcd", cfg!(feature = "etcd")),
        ("system-allocator", cfg!(feature = "system-allocator")),
    ];
    let names: Vec<&str> = enabled
        .iter()
        .filter(|(_, on)| *on)
        .map(|(n, _)| *n)
        .collect();
    let want_features = if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(",")
    };
    let line = text.trim_end();
    let rest = line
        .strip_prefix(&format!(
            "fleetshard {} (commit ",
            env!("CARGO_PKG_VERSION")
        ))
        .unwrap_or_else(|| panic!("{line}"));
    let (commit, features) = rest
        .split_once(", features: ")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        commit == "unknown" || (commit.len() >= 7 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{line}"
    );
    assert_eq!(features, format!("{want_features})"), "{line}");
    // A subcommand says the same.
    let sub = fleetshard().args(["status", "--version"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&sub.stdout).contains(rest),
        "{sub:?}"
    );
}

#[test]
fn exit_statuses_are_as_documented() {
    let code = |args: &[&str]| fleetshard().args(args).output().unwrap().status.code();
    assert_eq!(code(&["--help"]), Some(0));
    assert_eq!(code(&["--version"]), Some(0));
    assert_eq!(code(&["plan", "--no-such-flag"]), Some(2));
    assert_eq!(code(&["no-such-command"]), Some(2));
    assert_eq!(
        code(&[
            "plan",
            "--fleet",
            "/nonexistent/fleet.yaml",
            "--replicas",
            "2"
        ]),
        Some(1)
    );
    let help = fleetshard().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for line in [
        "  0  success",
        "  1  the command failed",
        "  2  the command line was not understood",
    ] {
        assert!(help.contains(line), "{line:?} in\n{help}");
    }
    let docs = std::fs::read_to_string(format!("{}/../../docs/cli.md", env!("CARGO_MANIFEST_DIR")))
        .unwrap();
    for row in ["| 0 |", "| 1 |", "| 2 |"] {
        assert!(docs.contains(row), "{row} in docs/cli.md");
    }
}

#[test]
fn completions_and_man_pages_come_from_the_command_line_definition() {
    let out = |args: &[&str]| {
        let o = fleetshard().args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let bash = out(&["completions", "bash"]);
    assert!(
        bash.contains("complete -F _fleetshard") && bash.contains("--interval"),
        "{bash}"
    );
    let zsh = out(&["completions", "zsh"]);
    assert!(zsh.starts_with("#compdef fleetshard"), "{zsh}");
    let fish = out(&["completions", "fish"]);
    assert!(
        fish.contains("complete -c fleetshard") && fish.contains("watch"),
        "{fish}"
    );

    let man = out(&["man"]);
    assert!(
        man.contains(".TH fleetshard 1") && man.contains("status"),
        "{man}"
    );
    let status = out(&["man", "status"]);
    assert!(
        status.contains(".TH fleetshard-status") && status.contains("\\-\\-watch"),
        "{status}"
    );
    let generate = out(&["man", "fleet", "generate"]);
    assert!(
        generate.contains(".TH fleetshard-fleet-generate"),
        "{generate}"
    );
    let bad = fleetshard().args(["man", "nope"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("\"nope\"") && err.contains("status"), "{err}");
}

/// A plan document without what the clock decides (`timings`, `*_ms`).
fn without_timings(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| k != "timings" && !k.ends_with("_ms"))
                .map(|(k, v)| (k, without_timings(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_timings).collect()),
        other => other,
    }
}

/// Runs `args` with stdout and stderr piped: (stdout, stderr).
fn piped(args: &[&str]) -> (Vec<u8>, Vec<u8>) {
    let o = fleetshard()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (o.stdout, o.stderr)
}

#[test]
fn progress_shows_on_a_terminal_and_never_in_a_pipe() {
    let fleet = example("fleet.yaml");
    let plan = [
        "plan",
        "--fleet",
        &fleet,
        "--replicas",
        "3..5",
        "--output",
        "json",
    ];
    let generate = ["fleet", "generate", "--clusters", "300", "--seed", "3"];
    for args in [&plan[..], &generate[..]] {
        let (first, err) = piped(args);
        assert!(
            err.is_empty(),
            "{args:?} wrote to a piped stderr: {}",
            String::from_utf8_lossy(&err)
        );
        assert!(
            !first.contains(&b'\x1b'),
            "{args:?}: an escape code on stdout"
        );
        // Nothing on stdout depends on progress: the same document every time (the
        // plan's measured times aside).
        let (again, _) = piped(args);
        if args[0] == "plan" {
            let doc = |b: &[u8]| without_timings(serde_json::from_slice(b).unwrap());
            assert_eq!(doc(&first), doc(&again));
        } else {
            assert_eq!(first, again, "{args:?}");
        }
    }
    // On a terminal (a pseudo-terminal from `script`), stderr shows the operation, and
    // stdout is still the document (the JSON plan follows the cleared progress line).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fleet.yaml");
    let cmd = format!(
        "{} fleet generate --clusters 20000 --seed 3 -o {}",
        env!("CARGO_BIN_EXE_fleetshard"),
        out.display()
    );
    let tty = std::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env_remove("FLEETSHARD_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("script(1) from util-linux");
    assert!(tty.status.success(), "{tty:?}");
    let shown = String::from_utf8_lossy(&tty.stdout);
    assert!(shown.contains("generating 20000 clusters"), "{shown:?}");
    assert!(std::fs::metadata(&out).unwrap().len() > 0);
}
