//! The store is the store: the etcd cluster that first answered is recorded, and another
//! cluster answering at the same endpoint (here: a TCP proxy switched from one real etcd
//! to another) is `StoreError::Replaced`, which the store guard makes final.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetshard_coord::store::guard::GuardedStore;
use fleetshard_coord::store::{Precondition, Store, StoreError, StoreIdentity};
use fleetshard_store_etcd::{EtcdOptions, EtcdStore};
use fleetshard_testsupport::etcd::EtcdServer;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Every wait is bounded by this, so a broken build fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(15);

/// A TCP proxy on a loopback port to one upstream at a time; switching it drops every
/// connection made so far (as a load balancer moved to another backend would).
struct Proxy {
    addr: std::net::SocketAddr,
    upstream: Arc<Mutex<String>>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

impl Proxy {
    async fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let upstream = Arc::new(Mutex::new(upstream.to_owned()));
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let accept = tokio::spawn({
            let (upstream, connections) = (upstream.clone(), connections.clone());
            async move {
                while let Ok((mut client, _)) = listener.accept().await {
                    let to = upstream.lock().unwrap().clone();
                    let conn = tokio::spawn(async move {
                        if let Ok(mut server) = TcpStream::connect(&to).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        }
                    });
                    connections.lock().unwrap().push(conn);
                }
            }
        });
        Proxy {
            addr,
            upstream,
            connections,
            accept,
        }
    }

    fn switch(&self, upstream: &str) {
        *self.upstream.lock().unwrap() = upstream.to_owned();
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.switch("127.0.0.1:1");
    }
}

fn options() -> EtcdOptions {
    EtcdOptions {
        timeout: Duration::from_secs(1),
        ..EtcdOptions::default()
    }
}

/// The cluster id etcd reports, read with a client of its own.
async fn cluster_id(etcd: &EtcdServer) -> u64 {
    let mut c = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    c.get("x", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .cluster_id()
}

#[tokio::test]
async fn the_first_cluster_is_the_identity_and_another_one_is_refused() {
    let (a, b) = (EtcdServer::start().unwrap(), EtcdServer::start().unwrap());
    if !a.is_local() {
        eprintln!("skipped: one external etcd (FLEETSHARD_TEST_ETCD) cannot be two clusters");
        return;
    }
    let (id_a, id_b) = (cluster_id(&a).await, cluster_id(&b).await);
    assert_ne!(id_a, id_b, "two fresh etcds are two clusters");
    let proxy = Proxy::start(a.endpoint()).await;
    let endpoint = proxy.addr.to_string();
    let store = EtcdStore::new([endpoint.as_str()], options()).unwrap();

    // Recorded at first contact (the check makes it when nothing else has).
    let id = store.check_identity().await.unwrap();
    assert_eq!(
        id,
        StoreIdentity::Recorded(format!("etcd://{endpoint}: etcd cluster {id_a:#018x}"))
    );
    store
        .put("fs/k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert_eq!(store.check_identity().await.unwrap(), id);

    // Another cluster behind the same endpoint: its first answer is refused.
    let guarded = GuardedStore::new(Arc::new(store.clone()), Duration::from_secs(3600));
    guarded.get("fs/k").await.unwrap();
    proxy.switch(b.endpoint());
    let what = tokio::time::timeout(LIMIT, async {
        loop {
            match guarded.get("fs/k").await {
                // The dropped connection first.
                Err(StoreError::Unavailable(_)) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(StoreError::Replaced { what }) => return what,
                other => panic!("{other:?}"),
            }
        }
    })
    .await
    .expect("another cluster noticed");
    assert!(
        what.contains(&format!("{id_b:#018x}")) && what.contains(&format!("{id_a:#018x}")),
        "{what}"
    );
    assert!(matches!(
        store.check_identity().await,
        Err(StoreError::Replaced { .. })
    ));
    // Final: nothing more reaches either cluster through the guard, even when the first
    // one is back behind the endpoint.
    assert!(matches!(
        guarded.put("fs/x", b"w".to_vec(), Precondition::Any).await,
        Err(StoreError::Replaced { .. })
    ));
    proxy.switch(a.endpoint());
    assert!(matches!(
        guarded.list("fs/").await,
        Err(StoreError::Replaced { .. })
    ));
    for etcd in [&a, &b] {
        let mut c = etcd_client::Client::connect([etcd.endpoint()], None)
            .await
            .unwrap();
        assert_eq!(c.get("fs/x", None).await.unwrap().kvs().len(), 0);
    }
}

#[tokio::test]
async fn a_restarted_etcd_is_the_same_cluster() {
    let mut etcd = EtcdServer::start().unwrap();
    if !etcd.is_local() {
        eprintln!("skipped: an external etcd cannot be restarted");
        return;
    }
    let store = EtcdStore::from_url_with(&etcd.url(), options()).unwrap();
    let id = store.check_identity().await.unwrap();
    etcd.restart().unwrap();
    // The first answers after the restart (the old connection fails first) come from the
    // same cluster: nothing is refused.
    tokio::time::timeout(LIMIT, async {
        loop {
            match store.list("").await {
                Ok(_) => return,
                Err(StoreError::Unavailable(_)) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(store.check_identity().await.unwrap(), id);
}
