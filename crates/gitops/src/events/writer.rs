//! The task that writes the queued events: one at a time, each call bounded, every
//! failure counted and logged, never retried (an event is a record, not a state).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::correlate::{Correlation, Correlator};
use super::{COMPONENT, Counters, Queued, epoch_of};
use crate::apply::LeaseCheck;
use crate::reconciler::Clock;

/// The core/v1 Event, for dynamic calls.
fn event_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".to_owned(),
        api_version: "v1".to_owned(),
        kind: "Event".to_owned(),
        plural: "events".to_owned(),
    }
}

/// The Application as an event names it.
struct Involved {
    name: String,
    namespace: String,
    uid: String,
    resource_version: String,
    labels: BTreeMap<String, String>,
    dest_server: String,
    dest_namespace: String,
}

impl Involved {
    fn of(app: &DynamicObject) -> Self {
        let text = |pointer: &str| {
            app.data
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Involved {
            name: app.metadata.name.clone().unwrap_or_default(),
            namespace: app.metadata.namespace.clone().unwrap_or_default(),
            uid: app.metadata.uid.clone().unwrap_or_default(),
            resource_version: app.metadata.resource_version.clone().unwrap_or_default(),
            labels: app.metadata.labels.clone().unwrap_or_default(),
            dest_server: text("/spec/destination/server"),
            dest_namespace: text("/spec/destination/namespace"),
        }
    }
}

pub(super) struct Writer {
    pub(super) client: kube::Client,
    pub(super) call_timeout: Duration,
    pub(super) correlator: Correlator<String, String>,
    pub(super) lease: Arc<dyn LeaseCheck>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) counters: Arc<Counters>,
    pub(super) epochs: Arc<Mutex<HashMap<String, u64>>>,
    /// The last name's nanoseconds: names stay unique when the clock does not move.
    pub(super) last_nanos: i128,
}

/// Why an event was not written.
enum Failed {
    /// The earlier event to bump is gone.
    Gone,
    /// Anything else.
    Other(String),
}

impl Writer {
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Queued>) {
        while let Some(queued) = rx.recv().await {
            self.write(queued).await;
        }
    }

    /// Whether the event may still be written: its cluster not stopped since it was
    /// queued, the lease valid (else it is counted as dropped).
    fn still_owner(&self, q: &Queued) -> bool {
        let owner = q.epoch == epoch_of(&self.epochs, &q.cluster) && self.lease.lease_valid();
        if !owner {
            Counters::add(&self.counters.dropped_not_owner);
        }
        owner
    }

    async fn write(&mut self, q: Queued) {
        if !self.still_owner(&q) {
            return;
        }
        let (namespace, name) = q.app.parts();
        let apps: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            namespace,
            &fleetshard_controller::inventory::application_resource(),
        );
        let app = match tokio::time::timeout(self.call_timeout, apps.get_opt(name)).await {
            Ok(Ok(Some(app))) => Involved::of(&app),
            outcome => {
                let why = match outcome {
                    Ok(Ok(_)) => "the Application is gone".to_owned(),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("no answer within {:?}", self.call_timeout),
                };
                self.refused(&q, &why);
                return;
            }
        };
        let object = format!("{}/{}/{}", app.namespace, app.name, app.uid);
        let key = format!(
            "{object}\n{}\n{}\n{}",
            q.event.kind.as_str(),
            q.event.reason,
            q.event.message
        );
        let events: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &app.namespace, &event_resource());
        // Checked again after the read, which may have taken a while.
        if !self.still_owner(&q) {
            return;
        }
        let now = self.clock.now_rfc3339();
        match self
            .correlator
            .correlate(&object, &key, tokio::time::Instant::now())
        {
            Correlation::RateLimited => {
                Counters::add(&self.counters.dropped_rate_limited);
                tracing::debug!(app = %q.app, reason = q.event.reason, "event dropped by the rate limit");
            }
            Correlation::Bump { name, count } => {
                match self.bump(&events, &name, count, &now).await {
                    Ok(()) => {
                        self.correlator.written(&key, &name, count);
                        Counters::add(&self.counters.aggregated);
                    }
                    Err(Failed::Gone) => {
                        // Expired on the server (events live an hour): a new one.
                        self.correlator.forget(&key);
                        self.create(&q, &app, &events, &key, &now).await;
                    }
                    Err(Failed::Other(why)) => self.refused(&q, &why),
                }
            }
            Correlation::Create => self.create(&q, &app, &events, &key, &now).await,
        }
    }

    async fn bump(
        &self,
        events: &Api<DynamicObject>,
        name: &str,
        count: i32,
        now: &str,
    ) -> Result<(), Failed> {
        let patch = json!({"count": count, "lastTimestamp": now});
        let (params, patch) = (PatchParams::default(), Patch::Merge(&patch));
        let call = events.patch(name, &params, &patch);
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => Err(Failed::Gone),
            Ok(Err(e)) => Err(Failed::Other(e.to_string())),
            Err(_) => Err(Failed::Other(format!(
                "no answer within {:?}",
                self.call_timeout
            ))),
        }
    }

    async fn create(
        &mut self,
        q: &Queued,
        app: &Involved,
        events: &Api<DynamicObject>,
        key: &String,
        now: &str,
    ) {
        // Argo CD's name: the Application's, then the time in nanoseconds, in hex.
        let nanos = self.clock.now_unix_nanos().max(self.last_nanos + 1);
        self.last_nanos = nanos;
        let name = format!("{}.{nanos:x}", app.name);
        let body = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": name,
                "namespace": app.namespace,
                "labels": q.labels.select(&app.labels),
                "annotations": {
                    "dest-server": app.dest_server,
                    "dest-namespace": app.dest_namespace,
                },
            },
            "involvedObject": {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Application",
                "name": app.name,
                "namespace": app.namespace,
                "uid": app.uid,
                "resourceVersion": app.resource_version,
            },
            "source": {"component": COMPONENT},
            "reason": q.event.reason,
            "message": q.event.message,
            "type": q.event.kind.as_str(),
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
        });
        let body: DynamicObject = match serde_json::from_value(body) {
            Ok(body) => body,
            Err(e) => return self.refused(q, &e.to_string()),
        };
        let params = PostParams::default();
        let call = events.create(&params, &body);
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(Ok(_)) => {
                self.correlator.written(key, &name, 1);
                Counters::add(&self.counters.created);
                tracing::info!(
                    app = %q.app,
                    r#type = q.event.kind.as_str(),
                    reason = q.event.reason,
                    message = %q.event.message,
                    "event recorded"
                );
            }
            Ok(Err(e)) => self.refused(q, &e.to_string()),
            Err(_) => self.refused(q, &format!("no answer within {:?}", self.call_timeout)),
        }
    }

    fn refused(&self, q: &Queued, why: &str) {
        Counters::add(&self.counters.refused);
        tracing::warn!(
            app = %q.app,
            reason = q.event.reason,
            error = %why,
            "event not recorded"
        );
    }
}
