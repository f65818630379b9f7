//! Real Git repositories in temporary directories, made with the `git` CLI (Debian's
//! `git`, which `scripts/test` installs), isolated from the user's and the system's Git
//! configuration.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A non-bare repository with branch `main`, isolated from the user's and the system's
/// Git configuration.
pub struct Git {
    /// The working tree.
    pub dir: PathBuf,
}

impl Git {
    /// `git init` in `dir` (created if needed).
    pub fn init(dir: &Path) -> Git {
        std::fs::create_dir_all(dir).unwrap();
        let git = Git {
            dir: dir.to_owned(),
        };
        git.run(&["init", "-q", "-b", "main"]);
        git
    }

    /// Runs git with `args` in the repository and returns its trimmed stdout; panics with
    /// stderr on failure (a fixture failure, not a result under test).
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=fleetshard test",
                "-c",
                "user.email=test@fleetshard.invalid",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "tag.gpgsign=false",
            ])
            .args(args)
            .current_dir(&self.dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .expect("git is installed");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    /// Writes `contents` to `path` (relative), creating directories.
    pub fn write(&self, path: &str, contents: &str) -> &Self {
        let file = self.dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, contents).unwrap();
        self
    }

    /// Removes `path` (a file).
    pub fn remove(&self, path: &str) -> &Self {
        std::fs::remove_file(self.dir.join(path)).unwrap();
        self
    }

    /// Commits everything and returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        self.run(&["add", "-A"]);
        self.run(&["commit", "-q", "--allow-empty", "-m", message]);
        self.run(&["rev-parse", "HEAD"])
    }

    /// The `file://` URL of the repository.
    pub fn file_url(&self) -> String {
        format!("file://{}", self.dir.display())
    }

    /// The plain path of the repository, as a string.
    pub fn path(&self) -> String {
        self.dir.display().to_string()
    }
}

/// A ConfigMap manifest named `name` with `value` in its data.
pub fn config_map(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  value: {value:?}\n"
    )
}
