//! `fleetshard up`, black-box: the real binary starts replicas as child processes,
//! simulated clusters and a Git repository of demo apps; every good app becomes Synced and
//! Healthy, the broken one shows a ComparisonError; the replicas' own dashboards are
//! read-only and show no credential; controls need the page's token; SIGINT or SIGTERM
//! leaves no child process behind, replicas and `fleetshard simulate` processes alike. And the dashboard in headless Chromium: a replica killed from the
//! page shows as a failover on the timeline, and every cluster is owned again.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

use crate::support::cdp::Browser;
use crate::support::http::{get, get_as, post};
use crate::support::replicas::{apps_json, fleetshard};
use crate::support::{KillOnDrop, signal, wait_for};

/// Deadline for `up` to be ready (the issue promises a minute at the default size; these
/// runs are smaller, on a loaded 2-core CI machine).
const READY: Duration = Duration::from_secs(90);

/// A running `fleetshard up` and what it printed.
struct Up {
    child: KillOnDrop,
    lines: Receiver<String>,
    port: u16,
    pids: Vec<u32>,
    /// The `fleetshard simulate` processes serving the clusters.
    sim_pids: Vec<u32>,
    dir: PathBuf,
}

fn start_up(dir: &Path, args: &[&str]) -> Up {
    let mut child = fleetshard()
        .args(["up", "--port", "0", "--dir"])
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.with_extension("log")).unwrap())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut up = Up {
        child: KillOnDrop(child),
        lines,
        port: 0,
        pids: Vec::new(),
        sim_pids: Vec::new(),
        dir: dir.to_owned(),
    };
    let first = up.line("fleetshard up:", Duration::from_secs(60));
    let pids = first
        .split_once("(pids ")
        .and_then(|(_, r)| r.split_once(')'))
        .expect("the pids of the replicas")
        .0;
    up.pids = pids.split(", ").map(|p| p.parse().unwrap()).collect();
    let sims = up.line("simulated clusters served by ", Duration::from_secs(5));
    up.sim_pids = sims
        .split_once("processes: ")
        .expect("the pids of the simulate processes")
        .1
        .split(", ")
        .map(|p| p.parse().unwrap())
        .collect();
    let open = up.line("  Open  http://127.0.0.1:", Duration::from_secs(5));
    up.port = open
        .trim_start()
        .trim_start_matches("Open  http://127.0.0.1:")
        .trim_end_matches("/dashboard")
        .parse()
        .unwrap();
    up
}

impl Up {
    /// Waits for a line starting with `prefix`.
    fn line(&self, prefix: &str, deadline: Duration) -> String {
        let end = tokio::time::Instant::now() + deadline;
        loop {
            let left = end.saturating_duration_since(tokio::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!(
                    "no line {prefix:?} from fleetshard up ({e}); its stderr: {}",
                    std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default()
                ),
            }
        }
    }

    fn store(&self) -> String {
        format!("sqlite://{}", self.dir.join("fleetshard.db").display())
    }

    fn snapshot(&self) -> Value {
        let (code, body) = get(self.port, "/api/dashboard").expect("up's dashboard answers");
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// SIGINT; `up` exits 0 and none of its children is left.
    fn interrupt(self) {
        self.stop("-INT");
    }

    /// `signal`; `up` exits 0 and none of its children (replicas, simulate processes) is
    /// left.
    fn stop(mut self, signal_name: &str) {
        let children = [self.pids.clone(), self.sim_pids.clone()].concat();
        assert!(!self.sim_pids.is_empty());
        signal(self.child.0.id(), signal_name);
        let status = wait_for("fleetshard up to exit", Duration::from_secs(60), || {
            self.child
                .0
                .try_wait()
                .map_err(|e| e.to_string())?
                .ok_or("running".into())
        });
        assert!(status.success(), "{status}");
        for pid in children {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "child pid {pid} outlived fleetshard up"
            );
        }
    }
}

/// The bearer tokens in the fleet's cluster Secrets.
fn tokens(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("fleet/clusters.yaml")).unwrap();
    text.split("\"bearerToken\":\"")
        .skip(1)
        .map(|t| t.split('"').next().unwrap().to_owned())
        .collect()
}

#[test]
fn up_runs_the_fleet_and_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let up = start_up(
        &dir.path().join("up"),
        &["--replicas", "3", "--clusters", "6", "--apps", "30"],
    );
    let ready = up.line("ready:", READY);
    assert!(
        ready.contains("all 29 good apps Synced and Healthy"),
        "{ready}"
    );
    // What `fleetshard apps` reads: every app but the broken one Synced and Healthy, the
    // broken one a ComparisonError; the drifted ConfigMaps were healed to be Synced.
    let apps = apps_json(&up.store()).unwrap();
    let apps = apps["apps"].as_array().unwrap();
    assert_eq!(apps.len(), 30);
    for a in apps {
        if a["app"] == "argocd/broken-manifest" {
            assert_eq!(a["conditions"][0]["type"], "ComparisonError", "{a}");
        } else {
            assert_eq!(
                (&a["sync"], &a["health"]),
                (&"Synced".into(), &"Healthy".into()),
                "{a}"
            );
        }
    }
    let snap = up.snapshot();
    assert_eq!(snap["controls"], true);
    assert_eq!(snap["fleet"]["unowned"], 0);
    // The six simulated clusters and Argo CD's built-in in-cluster entry.
    let names: Vec<&str> = snap["fleet"]["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "in-cluster",
            "sim-0",
            "sim-1",
            "sim-2",
            "sim-3",
            "sim-4",
            "sim-5"
        ]
    );

    // A replica's own dashboard: read-only, no credentials.
    let secrets = tokens(&up.dir);
    assert_eq!(secrets.len(), 6);
    let url = snap["processes"][0]["url"].as_str().unwrap().to_owned();
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/dashboard")
        .parse()
        .unwrap();
    let json = wait_for(
        "a replica's dashboard JSON",
        Duration::from_secs(10),
        || {
            get(port, "/api/dashboard")
                .filter(|(c, _)| *c == 200)
                .map(|(_, b)| b)
                .ok_or("not yet".to_owned())
        },
    );
    let replica: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(replica["controls"], false);
    assert_eq!(replica["fleet"]["clusters"].as_array().unwrap().len(), 7);
    let (code, page) = get(port, "/dashboard").unwrap();
    assert_eq!(code, 200);
    assert!(
        page.contains(r#"<meta name="fs-controls" content="0">"#),
        "{page}"
    );
    assert!(
        page.contains(r#"<meta name="fs-token" content="">"#),
        "{page}"
    );
    for t in &secrets {
        assert!(
            !json.contains(t.as_str()) && !page.contains(t.as_str()),
            "a token is shown"
        );
    }
    let action = r#"{"action":"kill","replica":"r1"}"#;
    let (code, _) = post(port, "/api/dashboard/control", &[], action).unwrap();
    assert!(
        code == 404 || code == 405,
        "a replica has no controls: {code}"
    );
    // up's controls need the page's token.
    let (code, _) = post(up.port, "/api/dashboard/control", &[], action).unwrap();
    assert_eq!(code, 403);
    let wrong = [("x-fleetshard-token", "0123")];
    let (code, _) = post(up.port, "/api/dashboard/control", &wrong, action).unwrap();
    assert_eq!(code, 403);
    // DNS rebinding: a page of evil.example, its name resolved to 127.0.0.1, reads up's
    // page with its own Host; up answers 421 and no token.
    let (code, page) = get(up.port, "/dashboard").unwrap();
    assert_eq!(code, 200);
    let token = page
        .split(r#"<meta name="fs-token" content=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    assert!(token.len() >= 16, "{page}");
    let forged = format!("evil.example:{}", up.port);
    for path in ["/dashboard", "/api/dashboard", "/"] {
        let (code, body) = get_as(up.port, path, &forged).unwrap();
        assert_eq!(code, 421, "{path}: {body}");
        assert!(!body.contains(&token), "{path}: the token was served");
    }
    // With the token, a control request from another origin is still refused; the
    // action would have killed r1 (`scale` to the count in force changes nothing).
    let origin = format!("http://{forged}");
    let cross = [
        ("x-fleetshard-token", token.as_str()),
        ("origin", origin.as_str()),
    ];
    let (code, _) = post(up.port, "/api/dashboard/control", &cross, action).unwrap();
    assert_eq!(code, 403);
    let same = format!("http://127.0.0.1:{}", up.port);
    let own = [
        ("x-fleetshard-token", token.as_str()),
        ("origin", same.as_str()),
    ];
    let scale = r#"{"action":"scale","shards":3}"#;
    let (code, body) = post(up.port, "/api/dashboard/control", &own, scale).unwrap();
    assert_eq!(code, 200, "its own origin is accepted: {body}");
    up.interrupt();
}

/// The clusters spread over several `fleetshard simulate` processes: the drift seeded in
/// one is healed, the Deployments made ready by theirs; SIGTERM stops them all.
#[test]
fn up_spreads_the_clusters_over_simulate_processes_and_stops_them() {
    let dir = tempfile::tempdir().unwrap();
    let up = start_up(
        &dir.path().join("up"),
        &[
            "--replicas",
            "2",
            "--clusters",
            "5",
            "--apps",
            "40",
            "--cluster-processes",
            "3",
        ],
    );
    assert_eq!(up.sim_pids.len(), 3, "{:?}", up.sim_pids);
    for pid in &up.sim_pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(
            args.get(1).map(String::as_str),
            Some("simulate"),
            "{args:?}"
        );
    }
    let ready = up.line("ready:", READY);
    assert!(
        ready.contains("all 39 good apps Synced and Healthy"),
        "{ready}"
    );
    let secrets = tokens(&up.dir);
    assert_eq!(
        secrets.len(),
        5,
        "one Secret per cluster, whichever process serves it"
    );
    up.stop("-TERM");
}

#[test]
fn up_exits_when_ready_and_says_how_long_it_took() {
    let dir = tempfile::tempdir().unwrap();
    let mut up = start_up(
        &dir.path().join("up"),
        &[
            "--replicas",
            "2",
            "--clusters",
            "3",
            "--apps",
            "6",
            "--exit-when-ready",
        ],
    );
    let ready = up.line("ready:", READY);
    assert!(ready.contains("s after start"), "{ready}");
    let status = wait_for("fleetshard up to exit", Duration::from_secs(60), || {
        up.child
            .0
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or("running".into())
    });
    assert!(status.success(), "{status}");
    for pid in up.pids.iter().chain(&up.sim_pids) {
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} left"
        );
    }
}

/// `up` killed with SIGKILL cannot stop its children itself: each sees its standard input
/// (a pipe only `up` held) end and stops as on SIGTERM, replicas and simulate processes
/// alike, instead of running on as orphans.
#[test]
fn up_killed_with_sigkill_leaves_no_process_behind() {
    let dir = tempfile::tempdir().unwrap();
    let mut up = start_up(
        &dir.path().join("up"),
        &["--replicas", "2", "--clusters", "3", "--apps", "6"],
    );
    up.line("ready:", READY);
    signal(up.child.0.id(), "-KILL");
    let _ = up.child.0.wait();
    // Gone, or a zombie its new parent has not reaped yet: either way it has exited.
    let running = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let state = stat.rsplit_once(") ")?.1.chars().next()?;
                Some(state != 'Z' && state != 'X')
            })
            .unwrap_or(false)
    };
    let children: Vec<u32> = up.pids.iter().chain(&up.sim_pids).copied().collect();
    wait_for(
        "every child of the killed up to exit",
        Duration::from_secs(60),
        || {
            let left: Vec<&u32> = children.iter().filter(|p| running(p)).collect();
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("still running: {left:?}"))
            }
        },
    );
    let log = std::fs::read_to_string(up.dir.join("logs/r1.log")).unwrap_or_default();
    assert!(log.contains("standard input closed"), "{log}");
}

/// The page in a real browser: kill the replica holding shard 0 from its button; the
/// timeline shows the failover and every cluster is owned again. On failure, a screenshot
/// under target/ (its path printed); with `FLEETSHARD_DASHBOARD_SCREENSHOT`, one on
/// success too (the README's).
#[test]
fn the_dashboard_shows_a_failover_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let up = start_up(
        &dir.path().join("up"),
        &["--replicas", "3", "--clusters", "6", "--apps", "30"],
    );
    up.line("ready:", READY);
    let url = format!("http://127.0.0.1:{}/dashboard", up.port);
    let mut browser = Browser::open(&dir.path().join("chromium"), &url);
    let result = failover_from_the_page(&mut browser);
    if let Err(why) = result {
        let shot =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-failure.png");
        let shot = browser.screenshot(shot);
        panic!("{why}\nscreenshot: {}", shot.display());
    }
    // The README's picture of a failover: `FLEETSHARD_DASHBOARD_SCREENSHOT=docs/dashboard.png`
    // (relative to the workspace) writes the page as the test leaves it.
    if let Some(path) = std::env::var_os("FLEETSHARD_DASHBOARD_SCREENSHOT") {
        let shot = browser.screenshot(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(path),
        );
        eprintln!("screenshot: {}", shot.display());
    }
    drop(browser);
    up.interrupt();
}

fn poll(browser: &mut Browser, what: &str, expr: &str) -> Result<Value, String> {
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = browser.eval(expr)?;
        if !v.is_null() && v != Value::Bool(false) {
            return Ok(v);
        }
        if tokio::time::Instant::now() > end {
            return Err(format!("timed out waiting for {what} ({expr})"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn failover_from_the_page(browser: &mut Browser) -> Result<(), String> {
    // The page is live: three replicas with buttons, every cluster owned.
    poll(
        browser,
        "three replicas listed",
        "document.querySelectorAll('#processes .proc').length === 3",
    )?;
    poll(
        browser,
        "every cluster owned",
        "document.querySelector('#unowned')?.dataset.count === '0'",
    )?;
    // The holder of shard 0, once the page has judged its lease live (it shows a lease as
    // unknown until it has seen it renewed: killed before that, there is no live stretch
    // to see end).
    let victim = poll(
        browser,
        "the holder of shard 0, its lease judged live",
        "(() => { const r = [...document.querySelectorAll('#shards-table tbody tr')]\
           .find(tr => tr.cells[0].textContent === '0'); \
           return r && r.cells[1].textContent !== '-' && r.cells[3].textContent.startsWith('live') \
             ? r.cells[1].textContent : null })()",
    )?;
    let victim = victim.as_str().ok_or("a holder name")?.to_owned();
    let clicked = browser.eval(&format!(
        "(() => {{ const b = document.querySelector('button[data-action=kill][data-replica={victim}]'); \
           if (!b) return false; b.click(); return true }})()"
    ))?;
    if clicked != Value::Bool(true) {
        return Err(format!("no kill button for {victim}"));
    }
    poll(
        browser,
        "the kill acknowledged",
        &format!("document.querySelector('#result').textContent.includes('{victim} killed')"),
    )?;
    let failover = poll(
        browser,
        "a failover on the timeline",
        "document.querySelector('#timeline li[data-kind=failover]')?.textContent",
    )?;
    eprintln!("timeline: {failover}");
    // The picture: on shard 0's lane the victim's live stretch is followed by a shaded one
    // (a missed renewal, then its lease expired), and the unowned lane has a bar.
    poll(
        browser,
        "the victim's lane shaded after its live stretch, and clusters without an owner",
        &format!(
            "(() => {{ const r = [...document.querySelectorAll('#ownership rect[data-lane=\"0\"]')]; \
               const i = r.findIndex(x => x.dataset.holder === '{victim}' && x.dataset.state === 'live'); \
               return i >= 0 && r.slice(i + 1).some(x => x.dataset.state === 'not_renewed') \
                 && document.querySelectorAll('#ownership rect[data-lane=unowned]').length > 0 }})()"
        ),
    )?;
    // Owned again: no cluster without an owner, none by the killed replica. (An `owned`
    // event follows only if the page saw clusters without an owner: the distributor may
    // move them before the page judges the lease expired.)
    poll(
        browser,
        "every cluster owned again by a live replica",
        &format!(
            "document.querySelector('#unowned')?.dataset.count === '0' && \
             [...document.querySelectorAll('#clusters-table tbody tr')]\
               .every(tr => ['acting', 'handover'].includes(tr.dataset.state) && tr.cells[4].textContent !== '{victim}')"
        ),
    )?;
    let owners = browser.eval(
        "[...document.querySelectorAll('#clusters-table tbody tr')].map(tr => tr.cells[4].textContent)",
    )?;
    if owners
        .as_array()
        .is_none_or(|o| o.iter().any(|x| x == victim.as_str()))
    {
        return Err(format!("{victim} still owns a cluster: {owners}"));
    }
    Ok(())
}
