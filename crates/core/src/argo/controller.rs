//! What Argo CD's controller does with a distribution function (`ClusterSharding`,
//! `controller/sharding/cache.go`): the authoritative cluster → shard map.

use super::keys::KeyTable;
use super::{ArgoAlgorithm, ArgoDistribution, ArgoPrepared, ArgoShard, Probe};
use crate::model::{App, Cluster};

/// The shard Argo CD's controller assigns to each cluster, computed in one pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgoControllerAssignment {
    algorithm: ArgoAlgorithm,
    replicas: u32,
    /// Per input cluster: `Shards[cluster.server]`.
    shards: Vec<ArgoShard>,
    /// The servers of the input clusters.
    servers: KeyTable,
    /// Per server of `servers`: the index of the cluster that holds it (the later of
    /// duplicates).
    holder: Vec<usize>,
    /// Input clusters whose server a later cluster also uses (the later one wins).
    superseded: Vec<usize>,
}

impl ArgoControllerAssignment {
    /// `ClusterSharding.Init(clusters, apps)` followed by `updateDistribution`.
    pub fn compute(
        algorithm: ArgoAlgorithm,
        replicas: u32,
        clusters: &[Cluster],
        apps: &[App],
    ) -> Self {
        Self::compute_prepared(algorithm, replicas, clusters, &mut ArgoPrepared::new(apps))
    }

    /// As [`ArgoControllerAssignment::compute`], with the apps' counts and the rings
    /// prepared once for many computations.
    pub fn compute_prepared(
        algorithm: ArgoAlgorithm,
        replicas: u32,
        clusters: &[Cluster],
        prepared: &mut ArgoPrepared,
    ) -> Self {
        // `Clusters[c.Server] = c`: the later of two clusters with one server wins. The
        // members keep input order, which only matters for equal ids under consistent
        // hashing (upstream: map order, so unspecified).
        let bytes = clusters.iter().map(|c| c.server.len()).sum();
        let mut servers = KeyTable::with_capacity(clusters.len(), bytes);
        let mut holder: Vec<usize> = Vec::with_capacity(clusters.len());
        let server_of: Vec<usize> = clusters
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let k = servers.insert(&c.server);
                if k == holder.len() {
                    holder.push(i);
                } else {
                    holder[k] = i;
                }
                k
            })
            .collect();
        let winner_of: Vec<usize> = server_of.iter().map(|&k| holder[k]).collect();
        let superseded: Vec<usize> = (0..clusters.len()).filter(|&i| winner_of[i] != i).collect();
        // Sized up front: a vector grown by doubling right after a large load pays for
        // glibc's sorting of freed chunks at every step (several ms at 10k clusters).
        let mut members: Vec<usize> = Vec::with_capacity(holder.len());
        members.extend((0..clusters.len()).filter(|&i| winner_of[i] == i));

        // One replica or none: `NoShardingDistributionFunction`, always 0.
        let function = (replicas > 1).then(|| {
            let list = members.iter().map(|&i| &clusters[i]);
            ArgoDistribution::prepared(algorithm, replicas, list, prepared)
        });

        let mut member_shard = vec![0; clusters.len()];
        for (pos, &i) in members.iter().enumerate() {
            member_shard[i] = match clusters[i].shard {
                // The function is not consulted; out-of-range pins collapse to 0, negative
                // ones pass through.
                Some(pin) if pin < i64::from(replicas) => pin,
                Some(_) => 0,
                None => function.as_ref().map_or(0, |f| f.shard(Probe::Member(pos))),
            };
        }
        let shards = winner_of.iter().map(|&w| member_shard[w]).collect();
        ArgoControllerAssignment {
            algorithm,
            replicas,
            shards,
            servers,
            holder,
            superseded,
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> ArgoAlgorithm {
        self.algorithm
    }

    /// The replica count.
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// The shard of each input cluster, in input order.
    pub fn shards(&self) -> &[ArgoShard] {
        &self.shards
    }

    /// `Shards[server]`, which is 0 for a server the controller does not know (W22).
    pub fn shard_of_server(&self, server: &str) -> ArgoShard {
        self.servers
            .find(server)
            .map_or(0, |k| self.shards[self.holder[k]])
    }

    /// Input clusters dropped because a later cluster has the same server.
    pub fn superseded(&self) -> &[usize] {
        &self.superseded
    }

    /// `IsManagedCluster` on the replica that owns `own_shard`, for a resolved cluster.
    pub fn is_managed(&self, cluster: &Cluster, own_shard: ArgoShard) -> bool {
        !cluster.skip_reconcile && self.shard_of_server(&cluster.server) == own_shard
    }
}
