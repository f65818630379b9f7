//! Figures of the fake (run with `--ignored --nocapture`): how fast it serves
//! compare-and-swap writes and delivers watch events through kube-rs.

use std::time::Duration;

use fleetshard_kube_sim::FakeApiServer;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use kube::{Client, Config};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; prints figures"]
async fn measure_cas_writes_and_watch_latency() {
    let f = FakeApiServer::start().await.unwrap();
    let config = Config::new(f.url().parse().unwrap());
    let api: Api<ConfigMap> = Api::namespaced(Client::try_from(config).unwrap(), "default");
    let mut cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "m"}, "data": {"n": "0"}})).unwrap();
    cm = api.create(&PostParams::default(), &cm).await.unwrap();
    let n = 2000;
    let t0 = tokio::time::Instant::now();
    for i in 0..n {
        cm.data.as_mut().unwrap().insert("n".into(), i.to_string());
        cm = api.replace("m", &PostParams::default(), &cm).await.unwrap();
    }
    let cas = t0.elapsed();
    assert_eq!(f.write_count(), n + 1);
    let mut stream = api
        .watch(
            &WatchParams::default().disable_bookmarks(),
            &f.revision().to_string(),
        )
        .await
        .unwrap()
        .boxed();
    let mut lat = Vec::new();
    for i in 0..500 {
        cm.data
            .as_mut()
            .unwrap()
            .insert("n".into(), format!("w{i}"));
        let t = tokio::time::Instant::now();
        cm = api.replace("m", &PostParams::default(), &cm).await.unwrap();
        match tokio::time::timeout(Duration::from_secs(10), stream.next()).await {
            Ok(Some(Ok(WatchEvent::Modified(_)))) => lat.push(t.elapsed()),
            other => panic!("expected MODIFIED, got {other:?}"),
        }
    }
    lat.sort();
    println!(
        "sequential CAS replace via kube-rs: {n} in {cas:?} = {:.0}/s; write→watch event (incl. the write) p50 {:?} p99 {:?}",
        n as f64 / cas.as_secs_f64(),
        lat[lat.len() / 2],
        lat[lat.len() * 99 / 100]
    );
}
