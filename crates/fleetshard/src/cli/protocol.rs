//! The coordination protocol of `run` and `status`, and the Argo CD settings that choose
//! and configure it: `--protocol`, else Argo CD's `ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION`.
//!
//! For `--protocol argocd` (Argo CD-compatible heartbeat mode), settings are Argo CD's
//! variables, read as Argo CD reads them (`Settings::from_env`, warnings logged):
//! `ARGOCD_CONTROLLER_SHARD` pins, `ARGOCD_CONTROLLER_HEARTBEAT_TIME` is H (10–60 s; stale
//! after 3H), `ARGOCD_CONTROLLER_SHARDING_ALGORITHM` picks the distribution. The replica
//! count: `--shards N` (or `FLEETSHARD_SHARDS=N`) if given as a number; with `--shards
//! deployment[:[NAMESPACE/]NAME]`, the Deployment's `spec.replicas`, followed as it changes
//! (as Argo CD's dynamic mode reads it; with no NAME, from `ARGOCD_APPLICATION_CONTROLLER_NAME`
//! as Argo CD does); else `ARGOCD_CONTROLLER_REPLICAS` if above 0, else the `stored:N`
//! default's N. The map lives
//! at the store key `configmap/argocd-app-controller-shard-cm/shardControllerMapping`
//! (Argo CD's own ConfigMap with the Kubernetes backend); `--root` is not used for it.
//!
//! `--heartbeat-ms` (hidden) is for tests only: it sets H below Argo CD's 10 s minimum so
//! that a process test runs in seconds. It has no environment variable (so a deployment
//! cannot pick it up by accident), is refused below 50 ms, and logs a warning.

use std::time::Duration;

use anyhow::bail;
use clap::ValueEnum;
use fleetshard_coord::argocd::{ENV_REPLICAS, STALE_AFTER_HEARTBEATS, Settings};
use fleetshard_coord::argocd_runner::ArgoConfig;
use fleetshard_coord::fenced::ShardCount;
use fleetshard_core::argo::ArgoAlgorithm;
use fleetshard_replica::ArgoSettings;

use super::shards::{Deployment, ShardsArg};

/// The environment variable of `--sharding-algorithm` (Argo CD's).
pub const ENV_ALGORITHM: &str = "ARGOCD_CONTROLLER_SHARDING_ALGORITHM";

/// The coordination protocol of `run` and `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// fleetshard's fenced lease mode (records under `--root`).
    Fenced,
    /// Argo CD's heartbeat map (`argocd-app-controller-shard-cm`).
    Argocd,
}

/// The options of `run` that choose and configure the protocol.
#[derive(Debug, Clone, clap::Args)]
pub struct ProtocolArgs {
    /// Coordination protocol. Default: `argocd` when
    /// `ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION=true`, else `fenced`.
    #[arg(long, value_enum, env = "FLEETSHARD_PROTOCOL")]
    pub protocol: Option<Protocol>,
    /// argocd protocol: Argo CD's distribution of clusters over shards (`legacy`,
    /// `round-robin`, `consistent-hashing`; default legacy). From the environment, an
    /// unknown name falls back to legacy with a warning, as in Argo CD.
    #[arg(long, value_name = "NAME", env = ENV_ALGORITHM)]
    pub sharding_algorithm: Option<String>,
    /// TEST ONLY: the heartbeat period in milliseconds, below Argo CD's 10 s minimum.
    #[arg(long, value_name = "MS", hide = true)]
    pub heartbeat_ms: Option<u64>,
}

/// The protocol chosen: the flag (or `FLEETSHARD_PROTOCOL`), else Argo CD's switch.
pub fn protocol(args: &ProtocolArgs, settings: &Settings) -> Protocol {
    args.protocol
        .unwrap_or(if settings.dynamic_cluster_distribution {
            Protocol::Argocd
        } else {
            Protocol::Fenced
        })
}

/// The process environment, as `Settings::from_env` reads it.
pub fn env_settings() -> Settings {
    Settings::from_env(|k| std::env::var(k).ok())
}

/// The algorithm: an unknown name from `--sharding-algorithm` is an error; from
/// `ARGOCD_CONTROLLER_SHARDING_ALGORITHM` it falls back to legacy with a warning (Argo CD).
pub fn algorithm(flag: Option<&str>) -> anyhow::Result<ArgoAlgorithm> {
    let Some(name) = flag else {
        return Ok(ArgoAlgorithm::Legacy);
    };
    let from_env = std::env::var(ENV_ALGORITHM).ok().as_deref() == Some(name);
    match ArgoAlgorithm::parse(name) {
        Ok(a) => Ok(a),
        Err(e) if from_env => {
            tracing::warn!("{ENV_ALGORITHM}: {e}; using legacy");
            Ok(ArgoAlgorithm::Legacy)
        }
        Err(e) => bail!("--sharding-algorithm: {e}"),
    }
}

/// The replica count (module docs).
fn replicas(shards: ShardCount, settings: &Settings) -> anyhow::Result<u32> {
    let from_argo = u32::try_from(settings.replicas).ok().filter(|n| *n > 0);
    match (shards, from_argo) {
        (ShardCount::Fixed(n), _) => Ok(n),
        // `deployment`: the Deployment's replicas, read when serving starts.
        (ShardCount::External { default }, _) => Ok(default),
        (_, Some(n)) => Ok(n),
        (ShardCount::Desired { default }, None) => Ok(default),
        (other, None) => bail!(
            "--shards {other:?}: the argocd protocol needs a fixed replica count (--shards N or {ENV_REPLICAS})"
        ),
    }
}

/// The heartbeat and stale-after durations: Argo CD's, or the test-only override.
fn timing(args: &ProtocolArgs, settings: &Settings) -> anyhow::Result<(Duration, Duration)> {
    match args.heartbeat_ms {
        None => Ok((settings.heartbeat(), settings.stale_after())),
        Some(ms) if ms < 50 => bail!("--heartbeat-ms {ms}: at least 50 ms"),
        Some(ms) => {
            tracing::warn!(
                ms,
                "--heartbeat-ms is for tests only: Argo CD requires at least 10 s"
            );
            let h = Duration::from_millis(ms);
            Ok((h, h * STALE_AFTER_HEARTBEATS))
        }
    }
}

/// Argo CD mode's settings from the command line and Argo CD's environment (`settings`),
/// warnings logged.
pub fn argo_settings(
    args: &ProtocolArgs,
    shards: &ShardsArg,
    settings: &Settings,
    identity: &str,
    incarnation: u64,
) -> anyhow::Result<ArgoSettings> {
    for w in &settings.warnings {
        tracing::warn!("{w}");
    }
    let (heartbeat, stale_after) = timing(args, settings)?;
    let config = ArgoConfig {
        pin: settings.pin(),
        heartbeat,
        stale_after,
        algorithm: algorithm(args.sharding_algorithm.as_deref())?,
        jitter_seed: incarnation,
        ..ArgoConfig::new(identity)
    };
    Ok(ArgoSettings {
        config,
        replicas: replicas(shards.0, settings)?,
        deployment: shards.1.as_ref().map(Deployment::resolve),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        Settings::from_env(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn the_protocol_follows_argo_cds_switch_unless_given() {
        let args = |p| ProtocolArgs {
            protocol: p,
            sharding_algorithm: None,
            heartbeat_ms: None,
        };
        let dynamic = settings(&[("ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION", "TRUE")]);
        assert_eq!(protocol(&args(None), &dynamic), Protocol::Argocd);
        assert_eq!(protocol(&args(None), &settings(&[])), Protocol::Fenced);
        assert_eq!(
            protocol(&args(Some(Protocol::Fenced)), &dynamic),
            Protocol::Fenced
        );
    }

    #[test]
    fn the_replica_count_prefers_a_given_number_then_argo_cds_variable() {
        let argo = settings(&[(ENV_REPLICAS, "4")]);
        assert_eq!(replicas(ShardCount::Fixed(2), &argo).unwrap(), 2);
        assert_eq!(
            replicas(ShardCount::Desired { default: 3 }, &argo).unwrap(),
            4
        );
        assert_eq!(
            replicas(ShardCount::Desired { default: 3 }, &settings(&[])).unwrap(),
            3
        );
        let e = replicas(ShardCount::Auto { min: 1, max: 5 }, &settings(&[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fixed replica count"), "{e}");
    }

    #[test]
    fn heartbeat_comes_from_argo_cd_unless_the_test_override_is_given() {
        let s = settings(&[("ARGOCD_CONTROLLER_HEARTBEAT_TIME", "20")]);
        let mut args = ProtocolArgs {
            protocol: None,
            sharding_algorithm: None,
            heartbeat_ms: None,
        };
        assert_eq!(
            timing(&args, &s).unwrap(),
            (Duration::from_secs(20), Duration::from_secs(60))
        );
        args.heartbeat_ms = Some(200);
        assert_eq!(
            timing(&args, &s).unwrap(),
            (Duration::from_millis(200), Duration::from_millis(600))
        );
        args.heartbeat_ms = Some(10);
        assert!(timing(&args, &s).is_err());
    }

    #[test]
    fn an_unknown_algorithm_on_the_command_line_is_an_error() {
        assert_eq!(algorithm(None).unwrap(), ArgoAlgorithm::Legacy);
        assert_eq!(
            algorithm(Some("round-robin")).unwrap(),
            ArgoAlgorithm::RoundRobin
        );
        let e = algorithm(Some("fastest")).unwrap_err().to_string();
        assert!(
            e.contains("--sharding-algorithm") && e.contains("fastest"),
            "{e}"
        );
    }
}
