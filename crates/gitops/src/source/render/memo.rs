//! What a [`StandaloneRenderer`](super::StandaloneRenderer) keeps: renders of executables
//! by key (bounded, oldest forgotten first), discovered source types, and one render in
//! flight per key — apps sharing a source at one commit wait for the render already
//! running instead of starting their own — with counters of the work saved.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{Rendered, SourceType};
use crate::source::cache::Refresh;
use crate::source::error::SourceError;

/// Counters of a [`StandaloneRenderer`](super::StandaloneRenderer)'s renders of
/// executables (Kustomize, Helm), for figures and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RenderStats {
    /// Renders asked for.
    pub requests: u64,
    /// Answered from a render kept or finished while waiting (no executable run).
    pub hits: u64,
    /// Executables run.
    pub renders: u64,
}

impl RenderStats {
    /// The share of requests answered without running an executable (0 with none).
    pub fn hit_rate(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.hits as f64 / self.requests as f64
        }
    }
}

/// A renderer's memory, shared by its clones.
pub(super) struct RenderMemo {
    max_entries: usize,
    inner: Mutex<Inner>,
}

type Gate = Arc<tokio::sync::Mutex<()>>;

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Rendered>,
    order: VecDeque<String>,
    /// Discovered types per (repository, commit, path): a commit's tree never changes.
    types: HashMap<String, SourceType>,
    /// One gate per key being rendered: a second request of the key waits on it.
    in_flight: HashMap<String, Gate>,
    stats: RenderStats,
}

impl RenderMemo {
    /// Keeps up to `max_entries` renders (at least one), and 16 times as many types.
    pub(super) fn new(max_entries: usize) -> Self {
        RenderMemo {
            max_entries: max_entries.max(1),
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counters so far.
    pub(super) fn stats(&self) -> RenderStats {
        self.lock().stats
    }

    /// The source type discovered at `key`, if known.
    pub(super) fn source_type(&self, key: &str) -> Option<SourceType> {
        self.lock().types.get(key).copied()
    }

    /// Remembers a discovered type (all forgotten at once past the bound).
    pub(super) fn remember_type(&self, key: String, found: SourceType) {
        let mut inner = self.lock();
        if inner.types.len() >= self.max_entries * 16 {
            inner.types.clear();
        }
        inner.types.insert(key, found);
    }

    /// The render kept at `key`, or `render`'s, run once per key at a time: a request
    /// arriving while the key renders waits and takes that render. A hard refresh
    /// renders again (after a render in flight, never beside it). A failed render is not
    /// kept.
    pub(super) async fn render_once<F>(
        &self,
        key: String,
        refresh: Refresh,
        render: F,
    ) -> Result<Rendered, SourceError>
    where
        F: Future<Output = Result<Rendered, SourceError>>,
    {
        let gate = {
            let mut inner = self.lock();
            inner.stats.requests += 1;
            if refresh != Refresh::Hard
                && let Some(hit) = inner.entries.get(&key).cloned()
            {
                inner.stats.hits += 1;
                return Ok(hit);
            }
            Arc::clone(inner.in_flight.entry(key.clone()).or_default())
        };
        let flight = InFlight {
            memo: self,
            key: &key,
            gate,
        };
        let _turn = flight.gate.lock().await;
        if refresh != Refresh::Hard {
            let mut inner = self.lock();
            if let Some(hit) = inner.entries.get(&key).cloned() {
                inner.stats.hits += 1;
                return Ok(hit);
            }
        }
        self.lock().stats.renders += 1;
        let rendered = render.await?;
        self.remember(key.clone(), rendered.clone());
        Ok(rendered)
    }

    fn remember(&self, key: String, rendered: Rendered) {
        let mut inner = self.lock();
        if inner.entries.insert(key.clone(), rendered).is_none() {
            inner.order.push_back(key);
        }
        while inner.entries.len() > self.max_entries {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            inner.entries.remove(&oldest);
        }
    }
}

/// A request's hold on its key's gate; the gate goes when no other request holds it.
struct InFlight<'a> {
    memo: &'a RenderMemo,
    key: &'a str,
    gate: Gate,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut inner = self.memo.lock();
        // Held by the map and by this request only: nobody waits (new holders clone it
        // under the same lock).
        if Arc::strong_count(&self.gate) <= 2 {
            inner.in_flight.remove(self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::cache::Manifests;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn rendered(commit: &str) -> Rendered {
        Rendered {
            source_type: SourceType::Kustomize,
            manifests: Arc::new(Manifests {
                commit: commit.to_owned(),
                objects: Vec::new(),
            }),
        }
    }

    /// Ten requests of one key at once run one render; the others wait for it. A hard
    /// refresh renders again; a failure is not kept; the bound holds.
    #[tokio::test(start_paused = true)]
    async fn one_render_per_key_at_a_time_and_hits_are_counted() {
        let memo = RenderMemo::new(2);
        let runs = AtomicUsize::new(0);
        let render = |commit: &'static str| {
            let runs = &runs;
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                Ok(rendered(commit))
            }
        };
        let all = futures::future::join_all(
            (0..10).map(|_| memo.render_once("k".into(), Refresh::Normal, render("c1"))),
        )
        .await;
        assert!(all.iter().all(|r| r.as_ref().unwrap().revision() == "c1"));
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "one render for ten requests"
        );
        assert_eq!(
            memo.stats(),
            RenderStats {
                requests: 10,
                hits: 9,
                renders: 1
            }
        );
        assert!(memo.lock().in_flight.is_empty(), "gates go");

        memo.render_once("k".into(), Refresh::Hard, render("c2"))
            .await
            .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 2, "a hard refresh renders");
        let failed = memo
            .render_once("bad".into(), Refresh::Normal, async {
                Err(SourceError::Task {
                    repo: "r".into(),
                    message: "broken".into(),
                })
            })
            .await;
        assert!(failed.is_err());
        assert!(!memo.lock().entries.contains_key("bad"), "not kept");
        for key in ["a", "b", "c"] {
            memo.render_once(key.into(), Refresh::Normal, render("c3"))
                .await
                .unwrap();
        }
        assert_eq!(memo.lock().entries.len(), 2, "bounded");
        assert!(!memo.lock().entries.contains_key("k"), "oldest forgotten");
        assert!((memo.stats().hit_rate() - 9.0 / 15.0).abs() < 1e-9);
    }
}
