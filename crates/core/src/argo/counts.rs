//! Argo CD's application count per server (W4, W5): apps keyed by *name only*, the later
//! of two same-named apps winning, each winner counted under its raw
//! `spec.destination.server` (`""` when it has none, e.g. a by-name destination).
//!
//! The obvious count is two hash maps, by name (100k entries at 100k apps) and by server.
//! The by-name map is the expensive one, and it almost never changes the answer: names are
//! unique within a namespace, so only apps of several namespaces can share one. So names
//! are first checked for duplicates with a bitmap of their hashes (a few hundred kilobytes,
//! cache-resident), and only the apps whose hash bucket is shared go through the exact
//! by-name map; the others are unique by construction (an equal name has an equal hash).

use rustc_hash::FxHashMap;

use super::keys::{KeyTable, key_hash};
use crate::model::App;

/// Application counts per raw destination server, as Argo CD counts them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct ServerCounts {
    servers: KeyTable,
    counts: Vec<u64>,
}

impl ServerCounts {
    /// Counts `apps` (Argo CD's counting, see the module documentation).
    pub(super) fn new(apps: &[App]) -> Self {
        let losers = name_losers(apps);
        // Room for a server per 8 apps, of about 48 bytes each, before anything grows.
        let room = apps.len() / 8 + 16;
        let mut servers = KeyTable::with_capacity(room, room * 48);
        let mut counts: Vec<u64> = Vec::with_capacity(room);
        let mut losers = losers.into_iter().peekable();
        for (i, app) in apps.iter().enumerate() {
            if losers.next_if_eq(&i).is_some() {
                continue;
            }
            let k = servers.insert(app.destination.server.as_deref().unwrap_or(""));
            if k == counts.len() {
                counts.push(0);
            }
            counts[k] += 1;
        }
        ServerCounts { servers, counts }
    }

    /// The count for `server` (0 when no winning app names it).
    pub(super) fn get(&self, server: &str) -> u64 {
        self.servers.find(server).map_or(0, |k| self.counts[k])
    }

    /// Every counted server with its count, in first-seen order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.servers.keys().zip(self.counts.iter().copied())
    }
}

/// The apps that lose their name to a later app of the same name, in increasing order
/// (empty when every name is distinct).
fn name_losers(apps: &[App]) -> Vec<usize> {
    if apps.len() < 2 {
        return Vec::new();
    }
    // A bitmap of 16–32 bits per app: about n² / (2 × bits) apps share a bucket by chance
    // (a few thousand at 100k apps), and only those take the exact path.
    let bits = (apps.len() * 16).next_power_of_two().max(64);
    let shift = 64 - bits.trailing_zeros();
    let bucket = |name: &str| (key_hash(name) >> shift) as usize;
    let buckets: Vec<usize> = apps.iter().map(|a| bucket(&a.name)).collect();
    let mut seen = vec![0u64; bits / 64];
    let mut shared = vec![0u64; bits / 64];
    let mut any_shared = false;
    for &b in &buckets {
        let (word, bit) = (b / 64, 1u64 << (b % 64));
        if seen[word] & bit != 0 {
            shared[word] |= bit;
            any_shared = true;
        } else {
            seen[word] |= bit;
        }
    }
    if !any_shared {
        return Vec::new();
    }
    // The exact by-name map, over the apps of shared buckets only: the last of each name
    // wins, every earlier one loses.
    let mut last: FxHashMap<&str, usize> = FxHashMap::default();
    let mut losers = Vec::new();
    for (i, &b) in buckets.iter().enumerate() {
        if shared[b / 64] & (1u64 << (b % 64)) != 0
            && let Some(earlier) = last.insert(&apps[i].name, i)
        {
            losers.push(earlier);
        }
    }
    losers.sort_unstable();
    losers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::argo::{ArgoAlgorithm, ArgoControllerAssignment, argo_app_counts};
    use crate::model::{Cluster, Destination};

    /// The two-map count, as Argo CD writes it: the oracle for the fast path.
    fn reference(apps: &[App]) -> FxHashMap<String, u64> {
        let mut by_name: FxHashMap<&str, &App> = FxHashMap::default();
        for a in apps {
            by_name.insert(&a.name, a);
        }
        let mut counts = FxHashMap::default();
        for a in by_name.values() {
            let server = a.destination.server.clone().unwrap_or_default();
            *counts.entry(server).or_insert(0) += 1;
        }
        counts
    }

    fn fast(apps: &[App]) -> FxHashMap<String, u64> {
        ServerCounts::new(apps)
            .iter()
            .map(|(s, n)| (s.to_owned(), n))
            .collect()
    }

    fn app(namespace: &str, name: &str, server: Option<&str>, dest_name: Option<&str>) -> App {
        App {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            destination: Destination {
                server: server.map(str::to_owned),
                name: dest_name.map(str::to_owned),
                namespace: None,
            },
            ..App::default()
        }
    }

    #[test]
    fn duplicate_names_across_servers_count_the_last_only() {
        let apps = vec![
            app("a", "web", Some("https://one"), None),
            app("b", "web", Some("https://two"), None),
            app("a", "db", Some("https://one"), None),
            app("c", "web", Some("https://three"), None),
            app("a", "api", Some("https://two"), None),
        ];
        let counts = fast(&apps);
        assert_eq!(counts, reference(&apps));
        assert_eq!(counts.get("https://one"), Some(&1), "db only");
        assert_eq!(counts.get("https://two"), Some(&1), "api only");
        assert_eq!(counts.get("https://three"), Some(&1), "the last web");
        assert_eq!(name_losers(&apps), vec![0, 1]);
    }

    #[test]
    fn apps_without_a_server_count_under_the_empty_server() {
        // No server (a by-name destination, or none at all) counts under "", as Argo CD's
        // raw `destination.server` does; the destination's name is not resolved.
        let apps = vec![
            app("a", "by-name", None, Some("prod")),
            app("a", "nothing", None, None),
            app("a", "raw", Some("https://prod/"), None),
            app("a", "x", Some("https://prod"), None),
            // A later same-named app with a server replaces a by-name one.
            app("b", "by-name", Some("https://prod"), None),
        ];
        let counts = fast(&apps);
        assert_eq!(counts, reference(&apps));
        assert_eq!(counts.get(""), Some(&1));
        assert_eq!(counts.get("https://prod"), Some(&2));
        assert_eq!(counts.get("https://prod/"), Some(&1), "raw, not normalised");
        assert_eq!(counts.get("prod"), None, "names are not servers");
    }

    #[test]
    fn many_apps_with_duplicates_match_the_two_map_count() {
        // Enough apps that chance bucket collisions occur, plus real duplicates spread
        // over the input, unknown servers, and apps with no server.
        let mut x = 7u64;
        let mut apps = Vec::new();
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = x >> 24;
            let name = if r.is_multiple_of(10) {
                format!("dup-{}", r % 500)
            } else {
                format!("app-{i}")
            };
            let server = match (r >> 8) % 50 {
                0 => None,
                1 => Some(format!("https://unknown-{}", r % 7)),
                s => Some(format!("https://c{s}")),
            };
            apps.push(app("ns", &name, server.as_deref(), None));
        }
        assert!(!name_losers(&apps).is_empty());
        assert_eq!(fast(&apps), reference(&apps));
    }

    #[test]
    fn distinct_names_lose_nothing_and_tiny_inputs_work() {
        let apps: Vec<App> = (0..5000)
            .map(|i| app("ns", &format!("a{i}"), Some("https://s"), None))
            .collect();
        assert!(name_losers(&apps).is_empty());
        assert_eq!(fast(&apps).get("https://s"), Some(&5000));
        assert!(fast(&[]).is_empty());
        for n in 1..=5 {
            assert_eq!(fast(&apps[..n]), reference(&apps[..n]), "{n} apps");
        }
        let twins = [apps[0].clone(), apps[0].clone()];
        assert_eq!(name_losers(&twins), vec![0]);
    }

    /// Consistent hashing weighs clusters by Argo CD's count only: an app that a later app of
    /// the same name replaces (whatever its namespace), an app with no server (a by-name
    /// destination), and an app naming a server no cluster has must not weigh on any cluster.
    /// The answer must equal that of the apps Argo CD counts, and differ from the answers of
    /// counts that get one of these wrong (so the fleet is one where the counts matter).
    #[test]
    fn consistent_hashing_weighs_only_the_apps_argo_counts() {
        let clusters: Vec<Cluster> = (0..40)
            .map(|i| Cluster {
                name: format!("cluster-{i}"),
                ..Cluster::new(format!("{i:06}"), format!("https://c{i}"))
            })
            .collect();
        let counted: Vec<App> = clusters
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                (0..(i * 7) % 11)
                    .map(move |k| App::to_server("argocd", &format!("app-{i}-{k}"), &c.server))
            })
            .collect();
        let heavy = &clusters[0].server;
        let to = |ns: &str, name: &str, server: Option<&str>, dest: Option<&str>| {
            let mut app = App::to_server(ns, name, server.unwrap_or_default());
            app.destination.server = server.map(str::to_owned);
            app.destination.name = dest.map(str::to_owned);
            app
        };
        // Replaced later: every counted app's name first used on the heavy cluster, and a
        // by-name app replaced by one with a server.
        let shadows: Vec<App> = counted
            .iter()
            .map(|a| to("other", &a.name, Some(heavy), None))
            .collect();
        let by_name = |n: usize| -> Vec<App> {
            (0..n)
                .map(|k| {
                    to(
                        "argocd",
                        &format!("by-name-{k}"),
                        None,
                        Some(&clusters[0].name),
                    )
                })
                .collect()
        };
        let unknown: Vec<App> = (0..300)
            .map(|k| {
                to(
                    "argocd",
                    &format!("lost-{k}"),
                    Some("https://no-such"),
                    None,
                )
            })
            .collect();
        let tricky: Vec<App> = [
            shadows.clone(),
            by_name(300),
            unknown.clone(),
            counted.clone(),
        ]
        .concat();

        let shards = |apps: &[App], r| {
            ArgoControllerAssignment::compute(ArgoAlgorithm::ConsistentHashing, r, &clusters, apps)
                .shards()
                .to_vec()
        };
        // Wrong counts: every app counted (names not deduplicated), by-name destinations
        // resolved to their cluster, or the first app of a name winning.
        let renamed: Vec<App> = tricky
            .iter()
            .enumerate()
            .map(|(i, a)| {
                to(
                    "x",
                    &format!("{}-{i}", a.name),
                    a.destination.server.as_deref(),
                    None,
                )
            })
            .collect();
        let resolved: Vec<App> = [by_name(300), counted.clone()]
            .concat()
            .into_iter()
            .map(|mut a| {
                a.destination.server.get_or_insert_with(|| heavy.clone());
                a
            })
            .collect();
        let first_wins: Vec<App> = [counted.clone(), shadows].concat();
        let mut differs = [false; 3];
        for r in [2, 3, 5, 7] {
            let right = shards(&counted, r);
            assert_eq!(shards(&tricky, r), right, "r={r}");
            for (d, wrong) in differs.iter_mut().zip([&renamed, &resolved, &first_wins]) {
                *d |= shards(wrong, r) != right;
            }
        }
        assert_eq!(differs, [true; 3], "the fleet must tell wrong counts apart");
        let counts = argo_app_counts(&tricky);
        assert_eq!(counts[""], 300);
        assert_eq!(counts["https://no-such"], 300);
        assert_eq!(counts.values().sum::<u64>(), 600 + counted.len() as u64);
    }
}
