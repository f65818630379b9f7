//! Turning a [`FleetSpec`] into a [`Fleet`], and replicas into [`ShardSpec`]s.

use std::collections::{BTreeMap, HashSet};

use fleetshard_core::model::{REGION_LABEL, ZONE_LABEL};
use fleetshard_core::{App, Cluster, Destination, Fleet, ShardSpec};

use crate::rng::{SplitMix64, pow_neg};
use crate::spec::{FleetSpec, Skew, SpecError};

/// `metadata.namespace` of every generated application.
pub const APP_NAMESPACE: &str = "argocd";
/// `spec.project` of every generated application.
pub const APP_PROJECT: &str = "default";
/// `spec.source.repoURL` of every generated application (for a caller that writes its
/// GitOps spec, which the model does not hold).
pub const REPO_URL: &str = "https://git.example/apps.git";
/// `spec.source.targetRevision` of every generated application.
pub const TARGET_REVISION: &str = "HEAD";

// One independent random stream per purpose, so e.g. adding zones never changes the ids.
const STREAM_IDS: u64 = 1;
const STREAM_ZONES: u64 = 2;
const STREAM_RANKS: u64 = 3;
const STREAM_PINS: u64 = 4;
const STREAM_APPS: u64 = 5;

/// The name of the generated cluster at `index`: `cluster-00042` (at least five digits).
pub fn cluster_name(index: usize) -> String {
    format!("cluster-{index:05}")
}

/// The server URL of the generated cluster at `index`: `https://cluster-00042.fleet.example`.
pub fn cluster_server(index: usize) -> String {
    format!("https://{}.fleet.example", cluster_name(index))
}

/// The region of an availability zone, by stripping its trailing zone letter:
/// `eu-west-1a` → `eu-west-1`, `europe-west4-b` → `europe-west4`. `None` when the zone
/// does not end in a letter that follows a digit or a `-` (e.g. `westeurope`, `a`).
pub fn region_of(zone: &str) -> Option<&str> {
    let bytes = zone.as_bytes();
    match bytes {
        [.., before, last] if last.is_ascii_alphabetic() => {
            let region = match before {
                b'-' => &zone[..zone.len() - 2],
                b if b.is_ascii_digit() => &zone[..zone.len() - 1],
                _ => return None,
            };
            (!region.is_empty()).then_some(region)
        }
        _ => None,
    }
}

/// `replicas` shards, spread round-robin over `zones` (replica `i` in `zones[i % len]`;
/// no zone when `zones` is empty), each with capacity 1.
pub fn shards<S: AsRef<str>>(replicas: usize, zones: &[S]) -> Vec<ShardSpec> {
    (0..replicas)
        .map(|i| ShardSpec {
            zone: (!zones.is_empty()).then(|| zones[i % zones.len()].as_ref().to_owned()),
            capacity: 1,
        })
        .collect()
}

impl FleetSpec {
    /// The fleet this spec describes.
    ///
    /// Clusters come in index order (`cluster-00000`, `cluster-00001`, ...); applications
    /// are grouped by cluster in the same order, `<cluster>-app-0`, `<cluster>-app-1`, ...
    ///
    /// # Panics
    /// If the spec is invalid (see [`FleetSpec::try_generate`]).
    pub fn generate(&self) -> Fleet {
        self.try_generate()
            .unwrap_or_else(|e| panic!("invalid FleetSpec: {e}"))
    }

    /// The fleet this spec describes, or why the spec is invalid.
    pub fn try_generate(&self) -> Result<Fleet, SpecError> {
        self.validate()?;
        let counts = self.app_counts();
        let zones = self.zone_assignment();
        let pins = self.pins();
        let ids = cluster_ids(self.clusters, self.seed);

        let mut clusters = Vec::with_capacity(self.clusters);
        let mut apps = Vec::with_capacity(self.total_apps());
        for (i, id) in ids.into_iter().enumerate() {
            let name = cluster_name(i);
            let server = format!("https://{name}.fleet.example");
            for k in 0..counts[i] {
                apps.push(App {
                    namespace: APP_NAMESPACE.to_owned(),
                    name: app_name(&name, k),
                    project: APP_PROJECT.to_owned(),
                    destination: Destination {
                        server: Some(server.clone()),
                        name: None,
                        namespace: None,
                    },
                });
            }
            let mut labels = BTreeMap::new();
            if let Some(zones) = &zones {
                let zone = &self.zones[zones[i]];
                if let Some(region) = region_of(zone) {
                    labels.insert(REGION_LABEL.to_owned(), region.to_owned());
                }
                labels.insert(ZONE_LABEL.to_owned(), zone.clone());
            }
            clusters.push(Cluster {
                id,
                name,
                server,
                shard: pins[i],
                labels,
                skip_reconcile: false,
                weight: None,
            });
        }
        Ok(Fleet { clusters, apps })
    }

    /// `spec.source.path` of each application of [`FleetSpec::generate`]'s fleet, in the
    /// same order: `apps/<k mod 10>` for `<cluster>-app-<k>`. With [`REPO_URL`] and
    /// [`TARGET_REVISION`], the source a caller writes for generated applications (the
    /// model holds no sources).
    ///
    /// # Panics
    /// If the spec is invalid (see [`FleetSpec::try_generate`]).
    pub fn app_paths(&self) -> Vec<String> {
        if let Err(e) = self.validate() {
            panic!("invalid FleetSpec: {e}");
        }
        let paths: Vec<String> = (0..10).map(|k| format!("apps/{k}")).collect();
        self.app_counts()
            .into_iter()
            .flat_map(|n| (0..n).map(|k| paths[k % 10].clone()))
            .collect()
    }

    /// Applications per cluster, in cluster order; sums to [`FleetSpec::total_apps`].
    fn app_counts(&self) -> Vec<usize> {
        let n = self.clusters;
        let total = self.total_apps();
        if n == 0 {
            return Vec::new();
        }
        let by_rank = match self.skew {
            Skew::Uniform => split_evenly(total, n),
            Skew::Zipf { exponent } => split_zipf(total, n, exponent),
            Skew::Random => {
                let mut rng = SplitMix64::stream(self.seed, STREAM_APPS);
                let mut counts = vec![0; n];
                for _ in 0..total {
                    counts[rng.index(n)] += 1;
                }
                return counts;
            }
        };
        // Rank r is played by cluster order[r]: the heaviest cluster is anywhere.
        let mut order: Vec<usize> = (0..n).collect();
        SplitMix64::stream(self.seed, STREAM_RANKS).shuffle(&mut order);
        let mut counts = vec![0; n];
        for (rank, &cluster) in order.iter().enumerate() {
            counts[cluster] = by_rank[rank];
        }
        counts
    }

    /// Each cluster's index into `zones`, or `None` when there are no zones.
    fn zone_assignment(&self) -> Option<Vec<usize>> {
        if self.zones.is_empty() {
            return None;
        }
        let n = self.clusters as u128;
        let weights: Vec<u128> = if self.zone_weights.is_empty() {
            vec![1; self.zones.len()]
        } else {
            self.zone_weights.iter().map(|&w| u128::from(w)).collect()
        };
        let sum: u128 = weights.iter().sum();
        // Cumulative rounding: zone j ends at round(n × cum_j / sum), so sizes add to n.
        let mut assignment = Vec::with_capacity(self.clusters);
        let (mut cum, mut end) = (0u128, 0u128);
        for (zone, w) in weights.into_iter().enumerate() {
            cum += w;
            let next = (2 * n * cum + sum) / (2 * sum);
            assignment.extend(std::iter::repeat_n(zone, (next - end) as usize));
            end = next;
        }
        SplitMix64::stream(self.seed, STREAM_ZONES).shuffle(&mut assignment);
        Some(assignment)
    }

    /// Each cluster's `shard` pin.
    fn pins(&self) -> Vec<Option<i64>> {
        let n = self.clusters;
        let mut pins = vec![None; n];
        let pinned = self.pinned_clusters().min(n);
        if pinned == 0 {
            return pins;
        }
        let mut rng = SplitMix64::stream(self.seed, STREAM_PINS);
        let mut order: Vec<usize> = (0..n).collect();
        // Partial Fisher–Yates: the first `pinned` entries are a uniform sample.
        for i in 0..pinned {
            let j = i + rng.index(n - i);
            order.swap(i, j);
            pins[order[i]] = Some(rng.below(self.replicas as u64) as i64);
        }
        pins
    }
}

/// `total` split over `n > 0` slots as evenly as possible: slot `r` ends at
/// `round(total × (r+1) / n)`, so the sizes are `⌊total/n⌋` or `⌈total/n⌉`.
fn split_evenly(total: usize, n: usize) -> Vec<usize> {
    let (total, n128) = (total as u128, n as u128);
    let mut prev = 0u128;
    (1..=n128)
        .map(|r| {
            let end = (2 * total * r + n128) / (2 * n128);
            let size = end - prev;
            prev = end;
            size as usize
        })
        .collect()
}

/// `total` split over `n > 0` ranks in proportion to `1 / (rank+1)^exponent`, by
/// cumulative rounding (rank `r` ends at `round(total × W_r / W)`), so the sizes add up to
/// `total` exactly, each is within one of its exact share, and no float quirk can lose or
/// invent an application.
fn split_zipf(total: usize, n: usize, exponent: f64) -> Vec<usize> {
    let weights: Vec<f64> = (1..=n).map(|r| pow_neg(r as f64, exponent)).collect();
    let sum: f64 = weights.iter().sum();
    let total_f = total as f64;
    let mut cum = 0.0;
    let mut prev = 0usize;
    let mut sizes = Vec::with_capacity(n);
    for (r, w) in weights.into_iter().enumerate() {
        cum += w;
        let end = if r + 1 == n {
            total
        } else {
            // Monotone in `cum` and never above total × sum / sum = total.
            ((total_f * cum / sum).round() as usize).min(total)
        };
        sizes.push(end - prev);
        prev = end;
    }
    sizes
}

/// `<cluster>-app-<k>`, without the formatting machinery (500k of these in a big fleet).
fn app_name(cluster: &str, k: usize) -> String {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut k = k;
    loop {
        start -= 1;
        digits[start] = b'0' + (k % 10) as u8;
        k /= 10;
        if k == 0 {
            break;
        }
    }
    let digits = &digits[start..];
    let mut name = String::with_capacity(cluster.len() + 5 + digits.len());
    name.push_str(cluster);
    name.push_str("-app-");
    name.extend(digits.iter().map(|&d| char::from(d)));
    name
}

/// `n` distinct UUID-shaped ids (`xxxxxxxx-xxxx-4xxx-8xxx-xxxxxxxxxxxx`, lowercase hex),
/// like Kubernetes `metadata.uid`s, drawn from the seed.
fn cluster_ids(n: usize, seed: u64) -> Vec<String> {
    let mut rng = SplitMix64::stream(seed, STREAM_IDS);
    let mut seen = HashSet::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        // Version nibble 4, variant nibble 8: 120 random bits, so a redraw never happens
        // in practice; the set makes uniqueness a guarantee rather than a likelihood.
        let hi = (rng.next_u64() & !0xF000) | 0x4000;
        let lo = (rng.next_u64() & !(0xF << 60)) | (0x8 << 60);
        if seen.insert((hi, lo)) {
            ids.push(format!(
                "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                hi >> 32,
                (hi >> 16) & 0xFFFF,
                hi & 0xFFFF,
                lo >> 48,
                lo & 0xFFFF_FFFF_FFFF
            ));
        }
    }
    ids
}

#[cfg(test)]
#[path = "generate_tests.rs"]
mod tests;
