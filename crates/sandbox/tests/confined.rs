//! Programs run under the sandbox: what they can and cannot reach. This test binary is
//! its own launcher (`main` calls `run_if_invoked` first, as fleetshard's does), and a
//! program too (`allocate`, `spin`).
//!
//! Where the kernel refuses unprivileged namespaces, the namespace tests check the
//! fallback instead: `Required` refuses to run, `IfAvailable` runs bounded only.

use std::net::TcpListener;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Output};

use fleetshard_sandbox::{Confinement, Launcher, Namespaces, Probe, run_if_invoked};
use fleetshard_testsupport::harness::run_cases;
use nix::sys::signal::Signal;

fn main() -> ExitCode {
    if let Some(code) = run_if_invoked() {
        return code;
    }
    match std::env::args().nth(1).as_deref() {
        Some("allocate") => {
            // Two GiB, touched, in 1 MiB pieces.
            let mut kept = Vec::new();
            for _ in 0..2048 {
                kept.push(vec![1u8; 1 << 20]);
            }
            println!("{}", kept.len());
            return ExitCode::SUCCESS;
        }
        Some("spin") => loop {
            std::hint::spin_loop();
        },
        _ => {}
    }
    let launcher = Launcher::current(Namespaces::Required).unwrap();
    let probe = launcher.probe().unwrap();
    println!("sandbox probe: {probe:?}");
    let (l, p) = (&launcher, &probe);
    run_cases(&[
        ("a_program_in_its_own_network_reaches_no_host", &|| {
            own_network(l, p)
        }),
        ("hidden_paths_are_empty_to_the_program", &|| {
            hidden_paths(l, p)
        }),
        ("memory_is_bounded", &|| memory_bound(l, p)),
        ("cpu_time_is_bounded", &|| cpu_bound(l, p)),
        ("the_program_dies_with_the_replica", &|| {
            dies_with_parent(l, p)
        }),
        ("a_launcher_whose_replica_is_gone_runs_nothing", &|| {
            parent_gone(l, p)
        }),
    ])
}

fn run(launcher: &Launcher, c: &Confinement, program: &str, args: &[&str]) -> Output {
    launcher
        .command(c, Path::new(program))
        .args(args)
        .output()
        .unwrap()
}

fn own_network(launcher: &Launcher, probe: &Probe) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let script = format!(
        "echo hi > /dev/tcp/127.0.0.1/{}",
        listener.local_addr().unwrap().port()
    );
    let open = Confinement::default();
    let out = run(launcher, &open, "/bin/bash", &["-c", &script]);
    assert!(out.status.success(), "unconfined: {out:?}");
    let isolated = Confinement {
        isolate_network: true,
        ..Confinement::default()
    };
    let out = run(launcher, &isolated, "/bin/bash", &["-c", &script]);
    assert!(
        !out.status.success(),
        "the program reached the replica's loopback"
    );
    if let Probe::BoundsOnly(_) = probe {
        // Required, and not available: the launcher refused to run the program at all.
        assert_eq!(out.status.code(), Some(126), "{out:?}");
    }
}

fn hidden_paths(launcher: &Launcher, probe: &Probe) {
    let dir = tempfile::tempdir().unwrap();
    let secrets = dir.path().join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::write(secrets.join("token"), "the-service-account-token").unwrap();
    let key = dir.path().join("key.pem");
    std::fs::write(&key, "PRIVATE KEY").unwrap();
    let script = format!(
        "cat {}/token {}; ls {}",
        secrets.display(),
        key.display(),
        secrets.display()
    );
    let out = run(
        launcher,
        &Confinement::default(),
        "/bin/sh",
        &["-c", &script],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("the-service-account-token"));
    let hidden = Confinement {
        hide: vec![secrets.clone(), key.clone(), PathBuf::from("/no/such/path")],
        ..Confinement::default()
    };
    let out = run(launcher, &hidden, "/bin/sh", &["-c", &script]);
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(!seen.contains("token"), "{seen}");
    assert!(!seen.contains("PRIVATE KEY"), "{seen}");
    match probe {
        Probe::Namespaces => {
            // The cover cannot be lifted by the program: it has no capability.
            let lift = format!(
                "umount {}; cat {}/token",
                secrets.display(),
                secrets.display()
            );
            let out = run(launcher, &hidden, "/bin/sh", &["-c", &lift]);
            assert!(!String::from_utf8_lossy(&out.stdout).contains("token"));
        }
        Probe::BoundsOnly(_) => assert_eq!(out.status.code(), Some(126), "{out:?}"),
    }
}

fn memory_bound(launcher: &Launcher, _: &Probe) {
    let exe = std::env::current_exe().unwrap();
    let exe = exe.to_str().unwrap();
    let bounded = Confinement {
        max_memory: Some(256 << 20),
        ..Confinement::default()
    };
    let out = run(launcher, &bounded, exe, &["allocate"]);
    assert!(
        !out.status.success(),
        "allocated 2 GiB under a 256 MiB bound"
    );
    let out = run(launcher, &Confinement::default(), exe, &["allocate"]);
    assert!(out.status.success(), "{out:?}");
}

fn cpu_bound(launcher: &Launcher, _: &Probe) {
    let exe = std::env::current_exe().unwrap();
    let bounded = Confinement {
        max_cpu_seconds: Some(1),
        ..Confinement::default()
    };
    let out = run(launcher, &bounded, exe.to_str().unwrap(), &["spin"]);
    let signal = out.status.signal();
    assert!(
        signal == Some(Signal::SIGXCPU as i32) || signal == Some(Signal::SIGKILL as i32),
        "a spinning program ended with {:?}",
        out.status
    );
}

fn dies_with_parent(launcher: &Launcher, _: &Probe) {
    // A shell starts a confined program in the background, waits until it runs, prints
    // its pid and exits: the program must not outlive it.
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let mut command = launcher.command(&Confinement::default(), Path::new("/bin/sh"));
    command.args([
        "-c",
        &format!("echo $$ > {}; exec sleep 600", started.display()),
    ]);
    let line: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy()))
        .collect();
    // The launcher's parent is the shell: `--parent` is rewritten to `$$`.
    let line = line.join(" ").replace(
        &format!("'--parent' '{}'", std::process::id()),
        "'--parent' \"$$\"",
    );
    let script = format!(
        "{line} >/dev/null 2>&1 & while [ ! -s {f} ]; do sleep 0.01; done; cat {f}",
        f = started.display()
    );
    let out = Command::new("/bin/sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!pid.is_empty(), "the confined program never ran: {out:?}");
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    // Not a bound on time: the loop only ends a test that would otherwise hang.
    for _ in 0..3000 {
        let state = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        // Gone, or a zombie waiting for init to reap it.
        if state.is_empty() || state.split_whitespace().nth(2) == Some("Z") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the confined program outlived the process that started it");
}

fn parent_gone(launcher: &Launcher, _: &Probe) {
    let mut command = launcher.command(&Confinement::default(), Path::new("/bin/echo"));
    command.arg("ran");
    let args: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut args = args;
    let at = args.iter().position(|a| a == "--parent").unwrap();
    args[at + 1] = "1".to_owned();
    let out = Command::new(command.get_program())
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("has exited"));
}
