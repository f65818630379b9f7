//! `fleetshard simulate`: simulated Kubernetes clusters for demos and black-box checks.
//!
//! Serves N simulated Kubernetes API servers (`fleetshard_kube_sim`, the fake the tests
//! run against: discovery, CRUD, server-side apply, watch, strict resourceVersion, the
//! common built-in kinds and any CRD applied to it) on free 127.0.0.1 ports, over plain
//! HTTP (or, with `--tls`, HTTPS with a CA generated per cluster, written in its Secret
//! as `tlsClientConfig.caData`), each requiring its own random bearer token. Writes `OUT/clusters.yaml`, a `List`
//! of Argo CD cluster Secrets `sim-0`, `sim-1`, … that reach them (what `fleetshard run
//! --fleet-dir OUT` reads), prints `ready` on stdout once every server answers, and runs
//! until SIGINT or SIGTERM (exit 0). Objects live in memory: they are gone when it stops.
//! Tokens are never logged; the file holding them is written with mode 0600.
//! Several processes can serve one fleet between them (`--first`: `fleetshard up` starts
//! one per 500 clusters, so that no process needs tens of thousands of descriptors), and
//! one can seed its clusters and play their Deployment controller (`simulate/seed.rs`).

mod seed;

use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use fleetshard_core::model::ZONE_LABEL;
use fleetshard_kube_sim::{FakeApiServer, FakeConfig, TlsOptions};
use fleetshard_manifest::SECRET_TYPE_LABEL;

/// The file written under `--out`.
pub const CLUSTERS_FILE: &str = "clusters.yaml";

/// `fleetshard simulate` options.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  \
    fleetshard simulate --clusters 3 --out sim &\n  \
    fleetshard run --store sqlite://fleetshard.db --fleet-dir sim --identity r1")]
pub struct SimulateArgs {
    /// How many simulated clusters to serve.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 3,
        value_parser = clap::value_parser!(u16).range(1..=i64::from(MAX_CLUSTERS)),
        env = "FLEETSHARD_SIMULATE_CLUSTERS"
    )]
    pub clusters: u16,
    /// The number of the first cluster: they are `sim-FIRST`, `sim-FIRST+1`, …, their
    /// zones continuing round-robin from it (several processes serving one fleet).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        env = "FLEETSHARD_SIMULATE_FIRST"
    )]
    pub first: u32,
    /// Directory for `clusters.yaml`, the clusters' Argo CD Secrets (created if missing;
    /// the file is replaced, and left in place on exit).
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_SIMULATE_OUT")]
    pub out: PathBuf,
    /// Namespace written in the Secrets.
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "argocd",
        env = "FLEETSHARD_SIMULATE_NAMESPACE"
    )]
    pub namespace: String,
    /// Zones given to the clusters round-robin, as the Secrets' `topology.kubernetes.io/zone`
    /// label (sim-0 in the first, sim-1 in the second, …). Default: no zones.
    #[arg(
        long,
        value_name = "ZONE,...",
        value_delimiter = ',',
        env = "FLEETSHARD_SIMULATE_ZONES"
    )]
    pub zones: Vec<String>,
    /// Serve HTTPS, each cluster with a CA of its own, given in its Secret as
    /// `tlsClientConfig.caData` (default: plain HTTP).
    #[arg(long, env = "FLEETSHARD_SIMULATE_TLS")]
    pub tls: bool,
    /// Namespaces created on every cluster before `ready`.
    #[arg(
        long,
        value_name = "NAMESPACE,...",
        value_delimiter = ',',
        env = "FLEETSHARD_SIMULATE_NAMESPACES"
    )]
    pub namespaces: Vec<String>,
    /// Objects created before `ready`: a JSON file mapping cluster names (`sim-N`, of this
    /// process) to lists of objects (`apiVersion`, `kind`, `metadata`, …; status included).
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_SIMULATE_OBJECTS")]
    pub objects: Option<PathBuf>,
    /// Play the Deployment controller: a Deployment whose spec changed becomes ready (its
    /// status observes the new generation, every replica ready) within 250 ms.
    #[arg(long, env = "FLEETSHARD_SIMULATE_READY_DEPLOYMENTS")]
    pub ready_deployments: bool,
}

/// The most clusters one `simulate` process serves (each listens on a port of its own,
/// and holds the connections of whoever watches it: about
/// [`super::limits::PER_SIMULATED_CLUSTER`] descriptors).
pub const MAX_CLUSTERS: u16 = 1000;

/// One simulated cluster as its Secret describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimCluster {
    /// Secret and cluster name: `sim-N`.
    pub name: String,
    /// The Secret's `metadata.uid` (the cluster's id).
    pub uid: String,
    /// `http://127.0.0.1:PORT` (`https://` with `--tls`).
    pub server: String,
    /// With `--tls`: the base64 of the PEM CA that signed the server's certificate.
    pub ca_data: Option<String>,
    /// The bearer token the server requires.
    pub token: String,
    /// Its zone, if zones were given.
    pub zone: Option<String>,
}

/// Serves the clusters until SIGINT or SIGTERM.
pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    check_label("--namespace", &args.namespace, false)?;
    for zone in &args.zones {
        check_label("--zones", zone, true)?;
    }
    for ns in &args.namespaces {
        check_label("--namespaces", ns, false)?;
    }
    let objects = match &args.objects {
        Some(path) => seed::read_objects(path)?,
        None => seed::Objects::new(),
    };
    super::limits::require_open_files(
        super::limits::for_simulated_clusters(u64::from(args.clusters)),
        &format!("serving {} simulated clusters", args.clusters),
    )?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating the output directory {}", args.out.display()))?;
    let file = args.out.join(CLUSTERS_FILE);
    super::runtime(super::Runtime::Replica)?.block_on(async move {
        let first = args.first as usize;
        let (servers, clusters) =
            start_clusters(first, usize::from(args.clusters), &args.zones, args.tls).await?;
        let source = args
            .objects
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string());
        seed::seed(&servers, &clusters, &args.namespaces, &objects, &source)?;
        let servers = std::sync::Arc::new(servers);
        let controller = args
            .ready_deployments
            .then(|| tokio::spawn(seed::deployment_controller(servers.clone())));
        eprintln!(
            "fleetshard simulate: {} SIMULATED Kubernetes API servers (in memory, not real \
             clusters) on 127.0.0.1, {} with a bearer token each; their Argo CD \
             cluster Secrets are in {}. SIGINT or SIGTERM stops them.",
            clusters.len(),
            if args.tls {
                "HTTPS (a CA of their own, in the Secrets)"
            } else {
                "plain HTTP"
            },
            file.display()
        );
        write_private(&file, &secrets_yaml(&args.namespace, &clusters))?;
        for c in &clusters {
            tracing::info!(
                cluster = %c.name,
                server = %c.server,
                zone = c.zone.as_deref().unwrap_or(""),
                "simulated cluster serving"
            );
        }
        super::print_stdout("ready\n")?;
        super::run::wait_for_signal().await?;
        tracing::info!("signal received: stopping the simulated clusters");
        if let Some(c) = controller {
            c.abort();
        }
        drop(servers);
        Ok(())
    })
}

/// Starts `count` simulated clusters `sim-FIRST`, `sim-FIRST+1`, … on free 127.0.0.1
/// ports, each requiring its own random bearer token (HTTPS with a CA of its own with
/// `tls`), zones given round-robin by number, and waits until every one answers. The
/// servers stop when dropped.
pub async fn start_clusters(
    first: usize,
    count: usize,
    zones: &[String],
    tls: bool,
) -> anyhow::Result<(Vec<FakeApiServer>, Vec<SimCluster>)> {
    let mut random = std::fs::File::open("/dev/urandom").context("opening /dev/urandom")?;
    let mut servers = Vec::with_capacity(count);
    let mut clusters = Vec::with_capacity(count);
    for i in first..first + count {
        let token = hex(&random_bytes(&mut random, 32)?);
        let server = FakeApiServer::start_with(server_config(token.clone(), tls))
            .await
            .with_context(|| format!("starting simulated cluster sim-{i}"))?;
        clusters.push(SimCluster {
            name: format!("sim-{i}"),
            uid: uuid(&random_bytes(&mut random, 16)?),
            server: server.url(),
            ca_data: server.tls().map(|t| {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(&t.ca_pem)
            }),
            token,
            zone: (!zones.is_empty()).then(|| zones[i % zones.len()].clone()),
        });
        servers.push(server);
    }
    for (server, cluster) in servers.iter().zip(&clusters) {
        probe(server)
            .await
            .with_context(|| format!("simulated cluster {} does not answer", cluster.name))?;
    }
    Ok((servers, clusters))
}

/// A served cluster's settings: its token, TLS if asked, a write log of one record (the
/// log is for tests holding the server; kept whole here it held every write's body, up to
/// 100,000 per cluster, for as long as the process ran), and a watch bookmark a minute, as
/// the real API server's watch cache sends them (the fake's default, a second, suits tests
/// that wait for one; at 10,000 clusters with about 8 watches each it was 80,000 bookmarks
/// a second to encode and decode).
fn server_config(token: String, tls: bool) -> FakeConfig {
    FakeConfig {
        bearer_token: Some(token),
        tls: tls.then(TlsOptions::default),
        write_log_limit: 1,
        bookmark_interval: SIMULATED_BOOKMARK_INTERVAL,
        ..FakeConfig::default()
    }
}

/// How often a simulated cluster's watches get a bookmark: the real API server's
/// `bookmarkFrequency` (a minute, besides one before a watch's deadline).
const SIMULATED_BOOKMARK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// Random bytes as lower-case hexadecimal (`n` bytes, 2n digits): tokens and the like.
pub fn random_hex(n: usize) -> anyhow::Result<String> {
    let mut random = std::fs::File::open("/dev/urandom").context("opening /dev/urandom")?;
    Ok(hex(&random_bytes(&mut random, n)?))
}

/// A DNS-1123 label (namespaces) or a label value (zones: also upper case, `_` and `.`).
fn check_label(flag: &str, value: &str, label_value: bool) -> anyhow::Result<()> {
    let inner = |c: char| {
        c.is_ascii_lowercase()
            || c.is_ascii_digit()
            || c == '-'
            || (label_value && (c.is_ascii_uppercase() || c == '_' || c == '.'))
    };
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() && inner(c));
    if value.len() <= 63
        && value.chars().all(inner)
        && ends(value.chars().next())
        && ends(value.chars().last())
    {
        return Ok(());
    }
    let what = if label_value {
        "a Kubernetes label value (letters, digits, '-', '_', '.'; at most 63; alphanumeric at both ends)"
    } else {
        "a DNS-1123 label (lower-case letters, digits and '-'; at most 63; alphanumeric at both ends)"
    };
    bail!("{flag}: {value:?} is not {what}")
}

fn random_bytes(random: &mut std::fs::File, n: usize) -> anyhow::Result<Vec<u8>> {
    let mut buf = vec![0; n];
    random
        .read_exact(&mut buf)
        .context("reading /dev/urandom")?;
    Ok(buf)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A version-4 UUID from 16 random bytes.
fn uuid(bytes: &[u8]) -> String {
    let mut b = [0u8; 16];
    b.copy_from_slice(&bytes[..16]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The Secrets, as YAML a person can read: a `List` of `Secret`s with `stringData`.
/// Every value is generated here or checked by [`check_label`], so none needs escaping;
/// the ones YAML could read as another type are quoted.
pub fn secrets_yaml(namespace: &str, clusters: &[SimCluster]) -> String {
    let mut y = String::from(
        "# Argo CD cluster Secrets of the clusters `fleetshard simulate` serves: SIMULATED\n\
         # Kubernetes API servers in that process's memory, not real clusters. Valid while it\n\
         # runs; the tokens are random per run. Read with: fleetshard run --fleet-dir DIR\n\
         apiVersion: v1\nkind: List\nitems:\n",
    );
    for c in clusters {
        let ca = c
            .ca_data
            .as_ref()
            .map(|ca| format!(r#","caData":"{ca}""#))
            .unwrap_or_default();
        let config = format!(
            r#"{{"bearerToken":"{}","tlsClientConfig":{{"insecure":false{ca}}}}}"#,
            c.token
        );
        let _ = write!(
            y,
            "- apiVersion: v1\n  kind: Secret\n  type: Opaque\n  metadata:\n    \
             name: {name}\n    namespace: {namespace}\n    uid: {uid}\n    labels:\n      \
             {SECRET_TYPE_LABEL}: cluster\n",
            name = c.name,
            uid = c.uid,
        );
        if let Some(zone) = &c.zone {
            let _ = writeln!(y, "      {ZONE_LABEL}: \"{zone}\"");
        }
        let _ = write!(
            y,
            "  stringData:\n    name: {name}\n    server: {server}\n    config: '{config}'\n",
            name = c.name,
            server = c.server,
        );
    }
    y
}

/// Writes `text` to `path` with mode 0600 (it holds tokens), through a hidden temporary
/// file renamed over it, so a reader (a `--fleet-dir` watcher) never sees half of it.
pub fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map_or_else(
        || CLUSTERS_FILE.into(),
        |n| n.to_string_lossy().into_owned(),
    );
    let tmp = dir.join(format!(".{name}.tmp"));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()));
    written.with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// `GET /version` answers, through kube with the server's own kubeconfig (its token, and
/// its CA with `--tls`): the server serves and takes its token.
async fn probe(server: &FakeApiServer) -> anyhow::Result<()> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&server.kubeconfig_yaml())
        .context("reading the simulated cluster's kubeconfig")?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .context("the simulated cluster's kubeconfig")?;
    let client = kube::Client::try_from(config).context("a client for the simulated cluster")?;
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.apiserver_version(),
    )
    .await
    .context("no answer in 10 s")?
    .context("GET /version")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(i: usize, zone: Option<&str>) -> SimCluster {
        SimCluster {
            name: format!("sim-{i}"),
            uid: uuid(&[i as u8; 16]),
            server: format!("http://127.0.0.1:{}", 40000 + i),
            ca_data: (i == 1).then(|| "Q0E=".to_owned()),
            token: hex(&[0xab; 32]),
            zone: zone.map(str::to_owned),
        }
    }

    #[test]
    fn fleetshard_reads_the_secrets_without_warnings() {
        let clusters = [
            cluster(0, Some("a")),
            cluster(1, Some("1")),
            cluster(2, None),
        ];
        let yaml = secrets_yaml("argocd", &clusters);
        let loaded = fleetshard_manifest::parse_input(&yaml, "clusters.yaml").unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let fleet = &loaded.value.fleet;
        assert_eq!(fleet.clusters.len(), 3);
        for (read, sim) in fleet.clusters.iter().zip(&clusters) {
            assert_eq!(read.id, sim.uid);
            assert_eq!(read.name, sim.name);
            assert_eq!(read.server, sim.server);
            assert_eq!(read.zone(), sim.zone.as_deref());
            let creds = &loaded.value.credentials[&sim.uid];
            assert_eq!(creds.bearer_token.as_deref(), Some(sim.token.as_str()));
            assert!(!creds.insecure);
            assert_eq!(creds.ca_data, sim.ca_data);
        }
    }

    #[test]
    fn uuids_are_version_4() {
        let u = uuid(&[0xff; 16]);
        assert_eq!(u, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid(&[0; 16]), "00000000-0000-4000-8000-000000000000");
    }

    #[test]
    fn names_and_zones_are_checked() {
        assert!(check_label("--namespace", "argocd", false).is_ok());
        assert!(check_label("--namespace", "Argo", false).is_err());
        assert!(check_label("--namespace", "", false).is_err());
        assert!(check_label("--zones", "eu-west-1a", true).is_ok());
        assert!(check_label("--zones", "Zone_A.1", true).is_ok());
        assert!(check_label("--zones", "a b", true).is_err());
        assert!(check_label("--zones", "-a", true).is_err());
        assert!(check_label("--zones", "a\"", true).is_err());
    }
}
