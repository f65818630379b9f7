//! `fleetshard plan` from code: a what-if report of a fleet over 3 to 5 replicas with
//! fleetshard's balanced placement and Argo CD's round-robin, rendered as the table the
//! command prints (JSON and SVG renderers take the same report).
//!
//! Run: `cargo run -p fleetshard-plan --example plan_from_code`

use fleetshard_core::{App, Cluster, Fleet};
use fleetshard_plan::{
    Algorithm, NoStopwatch, PlanInput, PlanOptions, TableOptions, build_report, parse_replicas,
    render_table,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clusters: Vec<Cluster> = (0..20)
        .map(|i| Cluster::new(format!("cluster-{i:02}"), format!("https://c{i}.example")))
        .collect();
    let apps: Vec<App> = clusters
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            (0..1 + i % 7)
                .map(move |a| App::to_server("argocd", &format!("{}-{a}", c.id), &c.server))
        })
        .collect();
    let options = PlanOptions {
        algorithms: Algorithm::parse_list("balanced,round-robin")?,
        replicas: parse_replicas("3..5")?,
        shard_template: vec![],
        config: Default::default(),
        previous: None,
        costs: Default::default(),
    };
    let input = PlanInput {
        fleet: Fleet { clusters, apps },
        warnings: vec![],
    };
    let report = build_report(&input, &options, &mut NoStopwatch)?;
    print!("{}", render_table(&report, TableOptions::default()));
    Ok(())
}
