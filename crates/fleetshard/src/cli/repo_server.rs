//! `fleetshard run`'s repo-server options, named as Argo CD's application controller
//! names them: where desired state is rendered.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use fleetshard_gitops::source::{RenderConfig, RenderSandbox};
use fleetshard_replica::RepoServerSetting;
use fleetshard_reposerver::{ClientConfig, TlsMode};
use fleetshard_sandbox::{Launcher, Namespaces, Probe};
use fleetshard_util::duration::parse_go_duration;

/// Where sources are rendered.
#[derive(Debug, Clone, clap::Args)]
pub struct RepoServerArgs {
    /// Argo CD's repo-server (`HOST:PORT`) that renders every app's source, as Argo CD's
    /// controller asks it (`GenerateManifest`). Default: `argocd-repo-server:8081` when
    /// the apps are Argo CD's objects (`--argocd-namespace`), none otherwise. `none`:
    /// render on this replica (plain manifests, Jsonnet, Kustomize with `kustomize` or
    /// `kubectl` on PATH, Helm with `helm` on PATH).
    #[arg(long, value_name = "ADDR", env = "FLEETSHARD_REPO_SERVER")]
    pub repo_server: Option<String>,
    /// How long one `GenerateManifest` call may take.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 60,
        env = "FLEETSHARD_REPO_SERVER_TIMEOUT_SECONDS"
    )]
    pub repo_server_timeout_seconds: u64,
    /// Speak plain-text gRPC (the repo-server runs with `--disable-tls`): repository
    /// credentials cross the network in clear (warned about at start).
    #[arg(long, env = "FLEETSHARD_REPO_SERVER_PLAINTEXT")]
    pub repo_server_plaintext: bool,
    /// Argo CD's flag, accepted for its users: fleetshard always verifies the
    /// repo-server's certificate unless `--repo-server-insecure-skip-tls-verify`.
    #[arg(
        long,
        env = "FLEETSHARD_REPO_SERVER_STRICT_TLS",
        conflicts_with = "repo_server_plaintext"
    )]
    pub repo_server_strict_tls: bool,
    /// PEM CA certificates trusted, beside the system's, to verify the repo-server's
    /// certificate: in a deployment the `ca.crt` of Argo CD's Secret
    /// `argocd-repo-server-tls`. The certificate must name the address's host.
    #[arg(
        long,
        value_name = "FILE",
        env = "FLEETSHARD_REPO_SERVER_CA_CERT_PATH",
        conflicts_with = "repo_server_plaintext"
    )]
    pub repo_server_ca_cert_path: Option<PathBuf>,
    /// DANGEROUS: do not verify the repo-server's TLS certificate (Argo CD's default).
    /// Whoever answers at the repo-server's address then receives every repository
    /// password, token and SSH key fleetshard sends. Warned about at start.
    #[arg(
        long,
        env = "FLEETSHARD_REPO_SERVER_INSECURE_SKIP_TLS_VERIFY",
        conflicts_with_all = ["repo_server_plaintext", "repo_server_strict_tls", "repo_server_ca_cert_path"]
    )]
    pub repo_server_insecure_skip_tls_verify: bool,
    /// Rendering on this replica (no repo-server): how long one `kustomize`, `kubectl
    /// kustomize` or `helm` run may take (Argo CD's repo-server variable, Go duration).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "90s",
        value_parser = parse_go_duration,
        env = "ARGOCD_EXEC_TIMEOUT"
    )]
    pub exec_timeout: Duration,
    /// Rendering on this replica: renders of executables kept (shared by the apps of one
    /// source at one commit).
    #[arg(
        long,
        value_name = "N",
        default_value_t = fleetshard_gitops::source::DEFAULT_MAX_CACHED_RENDERS as u32,
        value_parser = clap::value_parser!(u32).range(1..),
        env = "FLEETSHARD_RENDER_CACHE_SIZE"
    )]
    pub render_cache_size: u32,
    /// Rendering on this replica: let a kustomization name remote bases (URLs), which
    /// `kustomize` fetches with the replica's network and none of the app's credentials.
    /// Off by default: one tenant's app could reach what the replica reaches.
    #[arg(long, env = "FLEETSHARD_KUSTOMIZE_ALLOW_REMOTE_BASES")]
    pub kustomize_allow_remote_bases: bool,
    /// Rendering on this replica: let argocd-cm's `kustomize.buildOptions` enable exec and
    /// container plugins (`--enable-exec`, `--enable-alpha-plugins`, e.g. for KSOPS),
    /// which run programs a tenant's kustomization names, as the replica. Off by default:
    /// such a build is refused with a condition.
    #[arg(long, env = "FLEETSHARD_KUSTOMIZE_ALLOW_EXEC_PLUGINS")]
    pub kustomize_allow_exec_plugins: bool,
    /// Rendering on this replica: confine `kustomize`, `kubectl kustomize`, `helm` and
    /// Jsonnet (a network of their own, the replica's credentials hidden, Jsonnet bounded
    /// in memory and CPU, all killed with the replica). `auto`: with Linux namespaces when
    /// the kernel allows them, bounded only otherwise (said at start); `required`: refuse
    /// to start without namespaces; `off`: tools run as plain children and Jsonnet in
    /// process, unbounded.
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        default_value = "auto",
        env = "FLEETSHARD_RENDER_SANDBOX"
    )]
    pub render_sandbox: SandboxMode,
    /// Rendering on this replica: the most memory one Jsonnet evaluation may use, in MiB.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = fleetshard_gitops::source::DEFAULT_JSONNET_MAX_MEMORY >> 20,
        value_parser = clap::value_parser!(u64).range(64..),
        env = "FLEETSHARD_JSONNET_MAX_MEMORY_MIB"
    )]
    pub jsonnet_max_memory_mib: u64,
    /// Rendering on this replica: a path no tool or Jsonnet evaluation may see, besides
    /// the defaults (service account tokens, `~/.kube`, `~/.ssh`, `~/.config`,
    /// `~/.docker`, `~/.aws`, `~/.git-credentials`, `~/.netrc`, `$KUBECONFIG`, the
    /// repository cache). Repeatable.
    #[arg(
        long,
        value_name = "PATH",
        env = "FLEETSHARD_RENDER_HIDE",
        value_delimiter = ':'
    )]
    pub render_hide: Vec<PathBuf>,
}

/// How renders are confined (`--render-sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxMode {
    /// Namespaces when the kernel allows them, bounds always.
    Auto,
    /// Namespaces or no start.
    Required,
    /// No confinement.
    Off,
}

/// The paths every render sandbox hides: where a replica's credentials usually are.
fn default_hidden() -> Vec<PathBuf> {
    let mut hide: Vec<PathBuf> = ["/var/run/secrets", "/run/secrets"]
        .iter()
        .map(PathBuf::from)
        .collect();
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        let home = PathBuf::from(home);
        for name in [
            ".kube",
            ".ssh",
            ".config",
            ".docker",
            ".aws",
            ".gnupg",
            ".git-credentials",
            ".netrc",
        ] {
            hide.push(home.join(name));
        }
    }
    if let Some(kubeconfig) = std::env::var_os("KUBECONFIG") {
        hide.extend(std::env::split_paths(&kubeconfig).filter(|p| p.is_absolute()));
    }
    hide
}

impl RepoServerArgs {
    /// How this replica renders when no repo-server does. With a sandbox, whether the
    /// kernel gives namespaces is found now (a launcher is run) and said in the log;
    /// `required` without them is an error.
    pub fn standalone(&self) -> anyhow::Result<RenderConfig> {
        let sandbox = match self.render_sandbox {
            SandboxMode::Off => {
                tracing::warn!(
                    "--render-sandbox off: kustomize, helm and Jsonnet run unconfined and \
                     Jsonnet unbounded in memory and CPU"
                );
                None
            }
            mode => Some(self.sandbox(mode)?),
        };
        Ok(RenderConfig {
            timeout: self.exec_timeout,
            allow_remote_bases: self.kustomize_allow_remote_bases,
            allow_exec_plugins: self.kustomize_allow_exec_plugins,
            max_cached: self.render_cache_size as usize,
            sandbox,
            ..RenderConfig::default()
        })
    }

    fn sandbox(&self, mode: SandboxMode) -> anyhow::Result<RenderSandbox> {
        let namespaces = if mode == SandboxMode::Required {
            Namespaces::Required
        } else {
            Namespaces::IfAvailable
        };
        let launcher = Launcher::current(namespaces)?;
        match launcher.probe()? {
            Probe::Namespaces => tracing::info!(
                "render sandbox: tools and Jsonnet run in namespaces of their own (no \
                 network, credentials hidden), bounded, and die with the replica"
            ),
            Probe::BoundsOnly(reason) if mode == SandboxMode::Required => anyhow::bail!(
                "--render-sandbox required: this machine gives no user, mount and network \
                 namespaces ({reason})"
            ),
            Probe::BoundsOnly(reason) => tracing::warn!(
                %reason,
                "render sandbox: no namespaces on this machine; tools and Jsonnet run \
                 bounded and die with the replica, but share its network and files (the \
                 checks of what a kustomization names still hold)"
            ),
        }
        let mut hide = default_hidden();
        hide.extend(self.render_hide.iter().cloned());
        Ok(RenderSandbox {
            launcher,
            hide,
            jsonnet_max_memory: self.jsonnet_max_memory_mib << 20,
        })
    }

    /// The setting these options make.
    pub fn setting(&self) -> anyhow::Result<RepoServerSetting> {
        let addr = match self.repo_server.as_deref().map(str::trim) {
            None => {
                let default = fleetshard_reposerver::client::DEFAULT_ADDR;
                return Ok(RepoServerSetting::Auto(self.config(default)?));
            }
            Some("none") => return Ok(RepoServerSetting::Off),
            Some("") => {
                anyhow::bail!("--repo-server: empty address (use `none` to render on this replica)")
            }
            Some(addr) => addr,
        };
        Ok(RepoServerSetting::At(self.config(addr)?))
    }

    fn config(&self, addr: &str) -> anyhow::Result<ClientConfig> {
        let mut config = ClientConfig::new(addr);
        if self.repo_server_timeout_seconds == 0 {
            anyhow::bail!("--repo-server-timeout-seconds: must be at least 1");
        }
        config.timeout = Duration::from_secs(self.repo_server_timeout_seconds);
        config.tls = if self.repo_server_plaintext {
            TlsMode::Plaintext
        } else if self.repo_server_insecure_skip_tls_verify {
            TlsMode::InsecureSkipVerify
        } else {
            let ca_pem = match &self.repo_server_ca_cert_path {
                None => String::new(),
                Some(path) => std::fs::read_to_string(path).with_context(|| {
                    format!(
                        "--repo-server-ca-cert-path: reading {} (in a deployment: the ca.crt \
                         of Secret argocd-repo-server-tls, docs/deploying.md)",
                        path.display()
                    )
                })?,
            };
            TlsMode::Verified { ca_pem }
        };
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        render: RepoServerArgs,
    }

    #[test]
    fn standalone_render_options_reach_the_render_config() {
        let cli = Cli::try_parse_from([
            "x",
            "--exec-timeout",
            "2m30s",
            "--render-cache-size",
            "5",
            "--kustomize-allow-remote-bases",
        ])
        .unwrap();
        let config = cli.render.standalone().unwrap();
        assert_eq!(config.timeout, Duration::from_secs(150));
        assert_eq!(config.max_cached, 5);
        assert!(config.allow_remote_bases);
        let defaults = Cli::try_parse_from(["x"])
            .unwrap()
            .render
            .standalone()
            .unwrap();
        assert_eq!(
            defaults.timeout,
            fleetshard_gitops::source::DEFAULT_RENDER_TIMEOUT
        );
        assert!(!defaults.allow_remote_bases);
        assert!(!defaults.allow_exec_plugins);
        // The unit test binary is no launcher; the sandbox is tested through the binary.
        let sandbox = defaults.sandbox.expect("a sandbox by default");
        assert_eq!(
            sandbox.jsonnet_max_memory,
            fleetshard_gitops::source::DEFAULT_JSONNET_MAX_MEMORY
        );
        assert!(sandbox.hide.contains(&PathBuf::from("/var/run/secrets")));
        let zero = Cli::try_parse_from(["x", "--render-cache-size", "0"]);
        assert!(zero.is_err(), "a cache of no render is refused");
    }

    fn tls(args: &[&str]) -> anyhow::Result<TlsMode> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))?;
        match cli.render.setting()? {
            RepoServerSetting::Auto(c) | RepoServerSetting::At(c) => Ok(c.tls),
            RepoServerSetting::Off => anyhow::bail!("off"),
        }
    }

    #[test]
    fn the_certificate_is_verified_unless_told_otherwise() {
        assert_eq!(tls(&[]).unwrap(), TlsMode::default());
        assert_eq!(
            tls(&["--repo-server-strict-tls"]).unwrap(),
            TlsMode::default()
        );
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.crt");
        std::fs::write(&ca, "PEM").unwrap();
        let ca_arg = ca.to_str().unwrap();
        assert_eq!(
            tls(&["--repo-server-ca-cert-path", ca_arg]).unwrap(),
            TlsMode::Verified {
                ca_pem: "PEM".into()
            }
        );
        assert_eq!(
            tls(&["--repo-server-insecure-skip-tls-verify"]).unwrap(),
            TlsMode::InsecureSkipVerify
        );
        assert_eq!(
            tls(&["--repo-server-plaintext"]).unwrap(),
            TlsMode::Plaintext
        );
        let missing = dir.path().join("absent.crt");
        let err = tls(&["--repo-server-ca-cert-path", missing.to_str().unwrap()]).unwrap_err();
        assert!(
            format!("{err:#}").contains("argocd-repo-server-tls"),
            "{err:#}"
        );
        for both in [
            [
                "--repo-server-insecure-skip-tls-verify",
                "--repo-server-strict-tls",
            ],
            [
                "--repo-server-insecure-skip-tls-verify",
                "--repo-server-plaintext",
            ],
        ] {
            assert!(tls(&both).is_err(), "{both:?} conflict");
        }
        assert!(
            tls(&[
                "--repo-server-insecure-skip-tls-verify",
                "--repo-server-ca-cert-path",
                ca_arg
            ])
            .is_err()
        );
    }
}
