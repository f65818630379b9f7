//! How long an acquisition of a cluster takes to reach each phase, counted on this
//! replica's monotonic clock from the moment it acquired the cluster: `connect` (the
//! warm-up reached the cluster's API server), `render` (it rendered and placed every app
//! no refresh had reached), `list` (every kind it watches completed its first list) and
//! `compare` (every app of the cluster was compared, and its status recorded, by this
//! owner). The detection of a dead holder and the acquisition itself happen before, in
//! the coordination runner (its audit log has their times).
//!
//! When the last app is compared, the acquisition logs one line with every phase (info
//! level: acquisitions are rare) and adds each phase to
//! `fleetshard_acquisition_phase_seconds{phase}`. An acquisition stopped before that (the
//! cluster handed on) records nothing.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fleetshard_controller::AppKey;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use tokio::time::Instant;

/// The phases, in the order an acquisition reaches them.
pub(super) const PHASES: [&str; 4] = ["connect", "render", "list", "compare"];

/// Buckets of the phase histogram, in seconds: 10 ms to about 5 minutes.
fn buckets() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.01, 2.0, 15,
    ))
}

/// The phase histogram's family, labelled by `phase`.
pub type PhaseHistogram = Family<[(&'static str, &'static str); 1], Histogram, fn() -> Histogram>;

/// One acquisition in progress.
#[derive(Debug)]
struct InProgress {
    acquired: Instant,
    /// Time from `acquired` to each phase reached so far, by its index in [`PHASES`].
    reached: [Option<Duration>; 4],
    /// Apps of the cluster not compared yet by this owner.
    pending: HashSet<AppKey>,
    apps: usize,
}

/// The acquisitions in progress, by cluster, and the phases' histogram.
#[derive(Debug)]
pub(super) struct Acquisitions {
    in_progress: Mutex<HashMap<String, InProgress>>,
    histogram: PhaseHistogram,
}

impl Default for Acquisitions {
    fn default() -> Self {
        Acquisitions {
            in_progress: Mutex::default(),
            histogram: Family::new_with_constructor(buckets),
        }
    }
}

impl Acquisitions {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, InProgress>> {
        // One map operation per critical section: a poisoned lock is still consistent.
        self.in_progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// `cluster` was acquired now, with `apps` to compare (none: nothing to time).
    pub(super) fn started(&self, cluster: &str, apps: &[AppKey]) {
        if apps.is_empty() {
            self.lock().remove(cluster);
            return;
        }
        let progress = InProgress {
            acquired: Instant::now(),
            reached: [None; 4],
            apps: apps.len(),
            pending: apps.iter().cloned().collect(),
        };
        self.lock().insert(cluster.to_owned(), progress);
    }

    /// The acquisition of `cluster` reached `phase` (one of [`PHASES`] but `compare`) now;
    /// a phase already reached keeps its first time.
    pub(super) fn reached(&self, cluster: &str, phase: &str) {
        let Some(i) = PHASES.iter().position(|p| *p == phase) else {
            return;
        };
        if let Some(p) = self.lock().get_mut(cluster) {
            let at = p.acquired.elapsed();
            p.reached[i].get_or_insert(at);
        }
    }

    /// `app` of `cluster` was compared and its status recorded: the last one ends the
    /// acquisition (its line logged, its phases observed).
    pub(super) fn compared(&self, cluster: &str, app: &AppKey) {
        let done = {
            let mut all = self.lock();
            let Some(p) = all.get_mut(cluster) else {
                return;
            };
            if !p.pending.remove(app) || !p.pending.is_empty() {
                return;
            }
            let mut p = all.remove(cluster).expect("present");
            p.reached[3] = Some(p.acquired.elapsed());
            p
        };
        let ms = |i: usize| done.reached[i].map(|d| d.as_millis());
        tracing::info!(
            cluster,
            apps = done.apps,
            connect_ms = ms(0),
            render_ms = ms(1),
            list_ms = ms(2),
            compare_ms = ms(3),
            "cluster taken over: every app compared"
        );
        for (phase, at) in PHASES.iter().zip(done.reached) {
            if let Some(at) = at {
                self.histogram
                    .get_or_create(&[("phase", *phase)])
                    .observe(at.as_secs_f64());
            }
        }
    }

    /// `cluster` was stopped: its acquisition in progress, if any, records nothing.
    pub(super) fn stopped(&self, cluster: &str) {
        self.lock().remove(cluster);
    }

    /// The phase histogram (shared: a clone observes the same figures).
    pub(super) fn histogram(&self) -> PhaseHistogram {
        self.histogram.clone()
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    fn scrape(a: &Acquisitions) -> String {
        let mut registry = Registry::default();
        registry.register("acquisition_phase_seconds", "phases", a.histogram());
        let mut out = String::new();
        encode(&mut out, &registry).unwrap();
        out
    }

    #[tokio::test(start_paused = true)]
    async fn the_phases_are_timed_from_the_acquisition_and_end_with_the_last_comparison() {
        let a = Acquisitions::default();
        let apps = [AppKey::new("argocd", "x"), AppKey::new("argocd", "y")];
        a.started("c1", &apps);
        tokio::time::advance(Duration::from_millis(100)).await;
        a.reached("c1", "connect");
        tokio::time::advance(Duration::from_millis(400)).await;
        a.reached("c1", "render");
        a.reached("c1", "connect"); // reached before: kept
        tokio::time::advance(Duration::from_millis(500)).await;
        a.reached("c1", "list");
        a.compared("c1", &apps[0]);
        a.compared("c1", &apps[0]); // twice: still one app left
        assert!(
            !scrape(&a).contains("phase=\"compare\""),
            "y not compared yet"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        a.compared("c2", &apps[1]); // another cluster: not this acquisition
        a.compared("c1", &apps[1]);
        let text = scrape(&a);
        for (phase, secs) in [
            ("connect", "0.1"),
            ("render", "0.5"),
            ("list", "1.0"),
            ("compare", "2.0"),
        ] {
            assert!(
                text.contains(&format!(
                    "acquisition_phase_seconds_sum{{phase=\"{phase}\"}} {secs}"
                )),
                "{phase}: {text}"
            );
        }
        // Ended: a later comparison records nothing more.
        a.compared("c1", &apps[1]);
        assert_eq!(scrape(&a), text);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_acquisition_records_nothing() {
        let a = Acquisitions::default();
        let app = AppKey::new("argocd", "x");
        a.started("c1", std::slice::from_ref(&app));
        a.reached("c1", "connect");
        a.stopped("c1");
        a.compared("c1", &app);
        assert!(!scrape(&a).contains("phase="), "{}", scrape(&a));
    }
}
