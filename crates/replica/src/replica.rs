//! [`Replica`]: every part of one replica, built and not yet running; [`ReplicaHandle`]:
//! the same parts running, and the order in which they are drained.

use std::fs::File;
use std::net::SocketAddr;
use std::sync::Arc;

use fleetshard_controller::inventory::Inventory;
use fleetshard_controller::{ControllerInputs, ControllerRuntime, NoopReconciler, Reconciler};
use fleetshard_coord::ownership::{OwnershipChange, ReplicaStatus};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::controller::{self, ControllerPart, ReconcilerPart};
use crate::coordination::{self, Coordination, CoordinationInputs, CoordinationRunner};
use crate::costs::CostPublisher;
use crate::http::{View, ViewFn};
use crate::inventory::{self, StartedInventory};
use crate::metrics::Metrics;
use crate::store::OpenedStore;
use crate::{ProtocolSettings, ReplicaError, ReplicaSettings, audit};

/// One replica, built: each field is one of its parts. Nothing runs yet but the
/// inventory's source (the replica is built only once the inventory is complete, or an
/// empty "not known yet" fleet would be placed).
pub struct Replica {
    /// Its identity.
    pub identity: String,
    /// The clusters and applications, kept current by their source.
    pub inventory: StartedInventory,
    /// The coordination store.
    pub store: OpenedStore,
    /// The coordination runner (fenced or Argo CD's heartbeat protocol).
    pub coordination: CoordinationRunner,
    /// The controller's work, the reconciler on it, and their stop hook.
    pub controller: ControllerPart,
    /// The HTTP server's socket, bound, and the metrics it serves.
    pub http: HttpPart,
    /// The audit log, open.
    pub audit: Option<File>,
    /// What each owned cluster costs, measured and published (`costs.rs`).
    pub costs: CostPublisher,
}

/// The HTTP server, bound and not serving yet.
pub struct HttpPart {
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    /// What the read-only dashboard reads (`None`: no dashboard is served).
    dashboard: Option<DashboardPart>,
}

/// The read-only dashboard's inputs, but the inventory: the store, the root, how long a
/// record may stay unchanged (fenced: the lease duration; Argo CD's protocol: its
/// stale-after), and under Argo CD's protocol what it places.
struct DashboardPart {
    store: Arc<dyn fleetshard_coord::store::Store>,
    root: String,
    lease: std::time::Duration,
    /// How often a live holder renews (fenced: the renew period; Argo CD: H).
    renew: std::time::Duration,
    argocd: Option<crate::dashboard::ArgoSource>,
}

impl Replica {
    /// Builds every part from `settings`: validates them, starts the inventory and waits
    /// for its first complete load, opens the store, builds the controller and the
    /// coordination runner, opens the audit log and binds the HTTP socket. Must run on a
    /// tokio runtime.
    pub async fn build(settings: ReplicaSettings) -> Result<Replica, ReplicaError> {
        settings.validate()?;
        let store = settings.store.open_as(&settings.user_agent())?;
        Self::build_on(settings, store).await
    }

    /// [`Replica::build`] on a store already open: replicas of one process share a
    /// `memory://` store this way (`settings.store` still names its kind).
    pub async fn build_on(
        settings: ReplicaSettings,
        store: OpenedStore,
    ) -> Result<Replica, ReplicaError> {
        settings.validate()?;
        let identity = settings.identity.trim().to_owned();
        let user_agent = settings.user_agent();
        let mut metrics = Metrics::new();
        let inventory = inventory::start(
            settings.fleet.clone(),
            metrics.inventory_problems(),
            &user_agent,
        )
        .await?;
        // Everything else is put together with the inventory's tasks running: if any part
        // fails, they are ended before the error is returned.
        let parts = async {
            // An empty fleet placed by the distributor unassigns every cluster: refused unless
            // the operator says it is meant (a new install, say).
            if inventory.inventory.snapshot().clusters.is_empty() && !settings.allow_empty_fleet {
                return Err(ReplicaError::Inventory(format!(
                    "{}: the fleet has no clusters; refusing to start, because placing an empty \
                     fleet would leave every cluster unowned (give --allow-empty-fleet if an \
                     empty fleet is meant)",
                    settings.fleet
                )));
            }
            let sink = controller::status_sink(
                inventory.kube.clone(),
                &store,
                &settings.store,
                &settings.root,
            )?;
            let controller = controller::build(
                &settings.controller,
                &inventory.inventory,
                sink,
                inventory.kube.clone(),
                metrics.registry_mut(),
                &user_agent,
                matches!(settings.fleet, crate::FleetSource::Kubernetes(_)),
                controller::OwnCluster::find(inventory.kube_config.as_ref(), &settings.store),
            )?;
            metrics.argocd_registry_mut().register_collector(Box::new(
                crate::argocd_metrics::ArgoCdQueues::of(&controller.work),
            ));
            if let controller::ReconcilerPart::GitOps(r) = &controller.reconciler {
                metrics.argocd_registry_mut().register_collector(Box::new(
                    crate::argocd_metrics::ArgoCdCollector {
                        reconciler: r.clone(),
                        app_labels: settings.controller.metrics_application_labels.clone(),
                        app_conditions: settings.controller.metrics_application_conditions.clone(),
                    },
                ));
            }
            let (figures, costs_rx) = watch::channel(crate::costs::FleetCosts::default());
            let cost_metrics = crate::costs::CostMetrics::default();
            cost_metrics.register(metrics.registry_mut());
            let costs = CostPublisher {
                store: store.store.clone(),
                root: settings.root.clone(),
                identity: identity.clone(),
                incarnation: settings.incarnation,
                settings: settings.controller.costs,
                records: matches!(settings.protocol, ProtocolSettings::Fenced(_)),
                placement: match &settings.protocol {
                    ProtocolSettings::Fenced(f) => f.placement.clone(),
                    ProtocolSettings::Argocd(_) => Default::default(),
                },
                work: controller.work.clone(),
                reconciler: match &controller.reconciler {
                    controller::ReconcilerPart::GitOps(r) => Some(r.clone()),
                    controller::ReconcilerPart::Noop => None,
                },
                inventory: inventory.inventory.clone(),
                metrics: cost_metrics,
                figures,
            };
            // Argo CD's protocol places the clusters known now, and its dashboard the same.
            let start_fleet = inventory.inventory.snapshot();
            let inputs = CoordinationInputs {
                identity: &identity,
                incarnation: settings.incarnation,
                root: &settings.root,
                zone: settings.zone.clone(),
                capacity: settings.capacity,
                store: store.store.clone(),
                kube: store.kube.as_ref(),
                inventory: &inventory.inventory,
                stop_hook: controller.stop_hook.clone(),
                metrics: Arc::new(metrics.store_latency()),
                costs: costs_rx,
                cost_rebalance_every: settings.controller.costs.meter.window * 2,
            };
            let coordination = match &settings.protocol {
                ProtocolSettings::Fenced(fenced) => {
                    CoordinationRunner::Fenced(coordination::fenced(fenced, inputs).await?)
                }
                ProtocolSettings::Argocd(argo) => CoordinationRunner::Argocd(
                    coordination::argocd(argo, inputs, &start_fleet).await?,
                ),
            };
            let audit = audit::open(settings.audit_log.as_deref())?;
            let dashboard = settings.dashboard.then(|| DashboardPart {
                store: store.store.clone(),
                root: settings.root.clone(),
                lease: match &settings.protocol {
                    ProtocolSettings::Fenced(f) => f.timing.duration,
                    ProtocolSettings::Argocd(a) => a.config.stale_after,
                },
                renew: match &settings.protocol {
                    ProtocolSettings::Fenced(f) => f.timing.renew_every,
                    ProtocolSettings::Argocd(a) => a.config.heartbeat,
                },
                argocd: match (&settings.protocol, &coordination) {
                    (ProtocolSettings::Argocd(a), CoordinationRunner::Argocd(c)) => {
                        Some(argo_dashboard(a, c.status.clone(), &start_fleet))
                    }
                    _ => None,
                },
            });
            let listener = tokio::net::TcpListener::bind(settings.listen)
                .await
                .map_err(|source| ReplicaError::Io {
                    what: format!("cannot listen on {}", settings.listen),
                    source,
                })?;
            Ok((controller, coordination, audit, dashboard, listener, costs))
        }
        .await;
        let (controller, coordination, audit, dashboard, listener, costs) = match parts {
            Ok(parts) => parts,
            Err(e) => {
                inventory.abort();
                return Err(e);
            }
        };
        tracing::info!(
            %identity,
            incarnation = %fleetshard_coord::fenced::incarnation_text(settings.incarnation),
            store = %settings.store,
            listen = %settings.listen,
            protocol = match settings.protocol {
                ProtocolSettings::Fenced(_) => "fenced",
                ProtocolSettings::Argocd(_) => "argocd",
            },
            "replica starting"
        );
        Ok(Replica {
            identity,
            inventory,
            store,
            coordination,
            controller,
            http: HttpPart {
                listener,
                metrics,
                dashboard,
            },
            audit,
            costs,
        })
    }

    /// The address the HTTP server is bound to.
    pub fn local_addr(&self) -> Result<SocketAddr, ReplicaError> {
        self.http
            .listener
            .local_addr()
            .map_err(|source| ReplicaError::Io {
                what: "reading the HTTP socket's address".into(),
                source,
            })
    }

    /// Starts every part. Returns the handle that drains them.
    pub fn spawn(self) -> Result<ReplicaHandle, ReplicaError> {
        let replaced = self.store.replaced.clone();
        // Cancelled with the coordination's feeders.
        let costs = tokio::spawn(self.costs.run());
        let handle = match self.coordination {
            CoordinationRunner::Fenced(c) => spawn_with(
                self.identity,
                self.inventory,
                c,
                self.controller,
                self.http,
                self.audit,
                replaced,
            ),
            CoordinationRunner::Argocd(c) => spawn_with(
                self.identity,
                self.inventory,
                c,
                self.controller,
                self.http,
                self.audit,
                replaced,
            ),
        };
        match handle {
            Ok(mut h) => {
                h.feeders.push(costs);
                Ok(h)
            }
            Err(e) => {
                costs.abort();
                Err(e)
            }
        }
    }
}

/// A running replica.
pub struct ReplicaHandle {
    /// The HTTP server's address.
    pub addr: SocketAddr,
    /// The inventory (a test can publish a new fleet into a fixed one).
    pub inventory: Inventory,
    shutdown: watch::Sender<bool>,
    /// The runner's verdict, sent from its own thread when it returns.
    runner: oneshot::Receiver<bool>,
    feeders: Vec<JoinHandle<()>>,
    controller: ControllerRuntime,
    audit: JoinHandle<Result<(), ReplicaError>>,
    source: Option<JoinHandle<()>>,
    reporter: JoinHandle<()>,
    http: JoinHandle<()>,
    http_stop: watch::Sender<bool>,
    view: ViewFn,
}

impl ReplicaHandle {
    /// What `/readyz` and `/metrics` would say now.
    pub fn view(&self) -> View {
        (self.view)(tokio::time::Instant::now())
    }

    /// Drains the replica, in this order:
    /// 1. the coordination runner hands its hold over (its clusters' work stops first,
    ///    then it releases) and returns;
    /// 2. its feeders (fleet, Deployment count) are cancelled;
    /// 3. the controller's feed ends with the runner's events, its followers are cancelled
    ///    and its workers drain;
    /// 4. the audit writer writes the last event and ends (the log is complete);
    /// 5. the inventory's source and its problem reporter are cancelled;
    /// 6. the HTTP server stops (it answered `/readyz` with "stopping" until now).
    ///
    /// Every task is joined. Returns whether the runner released its hold cleanly.
    pub async fn shutdown(self) -> Result<bool, ReplicaError> {
        let _ = self.shutdown.send(true);
        let released = self
            .runner
            .await
            .map_err(|_| ReplicaError::Task("coordination runner"))?;
        cancel(self.feeders).await;
        self.controller.shutdown().await;
        let audited = self
            .audit
            .await
            .map_err(|_| ReplicaError::Task("audit writer"));
        cancel(self.source.into_iter().chain([self.reporter])).await;
        let _ = self.http_stop.send(true);
        let _ = self.http.await;
        audited??;
        tracing::info!(released, "replica stopped");
        Ok(released)
    }
}

async fn cancel(tasks: impl IntoIterator<Item = JoinHandle<()>>) {
    let tasks: Vec<_> = tasks.into_iter().collect();
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// How often a replica's dashboard reads the store.
const DASHBOARD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

fn spawn_with<S: ReplicaStatus>(
    identity: String,
    inventory: StartedInventory,
    coordination: Coordination<S>,
    controller: ControllerPart,
    http: HttpPart,
    audit_file: Option<File>,
    replaced: watch::Receiver<Option<String>>,
) -> Result<ReplicaHandle, ReplicaError> {
    let Coordination {
        events,
        status,
        stops,
        run,
        feeders,
        deployment,
        thread,
    } = coordination;
    let inputs = ControllerInputs {
        ownership: events,
        stops,
        status: status.clone(),
        inventory: inventory.inventory.subscribe(),
        project_finalizer: inventory.project_finalizer.clone(),
    };
    let (runtime, audited) = match controller.reconciler {
        ReconcilerPart::Noop => start_controller(
            controller.config,
            controller.work,
            Arc::new(NoopReconciler),
            inputs,
        ),
        ReconcilerPart::GitOps(r) => {
            start_controller(controller.config, controller.work, r, inputs)
        }
    }?;
    // The store guard's verdict applies whatever the protocol: a replaced store fences.
    let view: ViewFn = Arc::new(move |now| {
        View::of(&*status.borrow(), now).with_store_replaced(replaced.borrow().clone())
    });
    let addr = http
        .listener
        .local_addr()
        .map_err(|source| ReplicaError::Io {
            what: "reading the HTTP socket's address".into(),
            source,
        })?;
    let (http_stop, mut stop_rx) = watch::channel(false);
    let mut router = crate::http::router(view.clone(), http.metrics);
    let inventory_rx = inventory.inventory.subscribe();
    // Cluster servers and app names: served only when asked for (`--dashboard`).
    let dashboard = http.dashboard.map(|d| {
        crate::dashboard::Dashboard::start(
            crate::dashboard::Source {
                store: d.store,
                root: d.root,
                clusters: Arc::new(move || crate::dashboard::clusters_of(&inventory_rx.borrow())),
                interval: DASHBOARD_INTERVAL,
                lease: d.lease,
                renew: d.renew,
                argocd: d.argocd,
            },
            None,
        )
    });
    if let Some(d) = &dashboard {
        router = router.merge(d.router());
    }
    let server = tokio::spawn(async move {
        // The dashboard's reader stops with the server.
        let _dashboard = dashboard;
        let stopped = async move {
            let _ = stop_rx.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(http.listener, router)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::error!("the HTTP server failed: {e}");
        }
    });
    let audit = tokio::spawn(audit::audit_loop(audited, audit_file, identity));
    let (shutdown, shutdown_rx) = watch::channel(false);
    // The Deployment watch lives as long as the runner that reads it.
    let runner = thread.run(async move {
        let released = run(shutdown_rx).await;
        drop(deployment);
        released
    });
    Ok(ReplicaHandle {
        addr,
        inventory: inventory.inventory,
        shutdown,
        runner,
        feeders,
        controller: runtime,
        audit,
        source: inventory.source,
        reporter: inventory.reporter,
        http: server,
        http_stop,
        view,
    })
}

/// What the dashboard of a replica running Argo CD's protocol places: the fleet the runner
/// was built with, by the configured algorithm, among the runner's replica count (the
/// configured one until the runner has published it).
fn argo_dashboard(
    settings: &crate::ArgoSettings,
    status: watch::Receiver<fleetshard_coord::argocd_runner::ArgoStatus>,
    fleet: &fleetshard_controller::inventory::InventorySnapshot,
) -> crate::dashboard::ArgoSource {
    let configured = settings.replicas;
    crate::dashboard::ArgoSource {
        key: settings.config.key.clone(),
        algorithm: settings.config.algorithm,
        replicas: Arc::new(move || match status.borrow().replicas {
            0 => configured,
            n => n,
        }),
        fleet: fleet.clusters.to_vec(),
        apps: fleet.apps.to_vec(),
    }
}

fn start_controller<R: Reconciler, S: ReplicaStatus>(
    config: fleetshard_controller::RuntimeConfig,
    work: Arc<fleetshard_controller::ShardWork>,
    reconciler: Arc<R>,
    inputs: ControllerInputs<S>,
) -> Result<(ControllerRuntime, mpsc::UnboundedReceiver<OwnershipChange>), ReplicaError> {
    ControllerRuntime::start(config, work, reconciler, inputs).map_err(|e| ReplicaError::Start {
        part: "the controller runtime",
        reason: e.to_string(),
    })
}
