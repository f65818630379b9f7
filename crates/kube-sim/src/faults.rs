//! Request classification, per-verb/per-resource request counters, and fault injection:
//! fail the next N matching requests with a status, add latency, or partition (hold
//! matching requests — and stall open watch streams that match — until healed).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use super::status::ApiError;

/// What a request does, as the API server's authorizer names it (plus `Discovery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// GET of one object (or subresource).
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH (all patch types, apply included).
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
    /// `/api`, `/apis`, `/version` and the resource lists.
    Discovery,
}

impl Verb {
    /// The verb as RBAC rules and the authorizer's messages spell it; `None` for
    /// discovery, which is not a resource request.
    pub fn rbac_name(self) -> Option<&'static str> {
        Some(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
            Verb::Discovery => return None,
        })
    }

    /// Whether the verb writes.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        )
    }
}

/// A classified request, given to fault predicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// The verb (None only for paths that name no resource and are not discovery).
    pub verb: Option<Verb>,
    /// API group ("" for core).
    pub group: String,
    /// Plural resource ("" for discovery).
    pub resource: String,
    /// Subresource (`status`, `scale`).
    pub subresource: Option<String>,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Object name from the path (for a list or watch, from a `metadata.name=` field
    /// selector, as the real server's request info has it).
    pub name: Option<String>,
    /// The request path.
    pub path: String,
    /// The `User-Agent` header (which client sent it).
    pub user_agent: Option<String>,
    /// A write asked as a dry run (`dryRun=All` in the query).
    pub dry_run: bool,
}

impl RequestInfo {
    /// Whether this request is `verb` on `resource` (plural).
    pub fn is(&self, verb: Verb, resource: &str) -> bool {
        self.verb == Some(verb) && self.resource == resource
    }
}

/// What an injected fault does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this HTTP code and a matching `Status` (and `Retry-After` seconds).
    Fail {
        /// HTTP status code.
        code: u16,
        /// `Retry-After` header value, in seconds.
        retry_after: Option<u64>,
    },
    /// Delay the request by this much, then serve it.
    Delay(Duration),
    /// Hold the request until healed (`FakeApiServer::heal`) or the fault is removed.
    Hang,
    /// Serve the request (a write is applied), then never answer: the reply is lost, and
    /// the client learns nothing until it gives up.
    LoseReply,
    /// Hold the request until its client gives up (closes the connection), then serve it
    /// this much later: a write that lands after its sender stopped waiting for it.
    ServeAfterGiveUp(Duration),
}

/// What happens to a request's answer ([`Faults::answer_fate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerFate {
    /// Served and answered.
    Answered,
    /// Served, never answered ([`FaultAction::LoseReply`]).
    Lost,
    /// Served this long after the client gave up ([`FaultAction::ServeAfterGiveUp`]).
    AfterGiveUp(Duration),
}

type Predicate = Arc<dyn Fn(&RequestInfo) -> bool + Send + Sync>;

struct Rule {
    id: u64,
    matches: Predicate,
    remaining: Option<u64>,
    action: FaultAction,
}

impl Rule {
    /// Uses the rule once: false when its N are used up.
    fn take(&mut self) -> bool {
        match &mut self.remaining {
            Some(0) => false,
            Some(n) => {
                *n -= 1;
                true
            }
            None => true,
        }
    }
}

impl fmt::Debug for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rule")
            .field("id", &self.id)
            .field("remaining", &self.remaining)
            .field("action", &self.action)
            .finish()
    }
}

/// Identifies an injected fault, to remove it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultId(u64);

/// Requests by (verb, plural resource, namespace of the path: `None` for a cluster-wide
/// list or watch, or a cluster-scoped resource).
pub type ScopedCounts = BTreeMap<(Verb, String, Option<String>), u64>;

/// The fault rules and request counters of one server.
#[derive(Debug)]
pub struct Faults {
    rules: Mutex<(u64, Vec<Rule>)>,
    healed: watch::Sender<u64>,
    counts: Mutex<BTreeMap<(Verb, String), u64>>,
    /// The same requests by (verb, plural resource, namespace of the path).
    scoped: Mutex<ScopedCounts>,
    /// Objects served by lists, by plural resource.
    listed: Mutex<BTreeMap<String, u64>>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            rules: Mutex::new((0, Vec::new())),
            healed: watch::Sender::new(0),
            counts: Mutex::new(BTreeMap::new()),
            scoped: Mutex::new(BTreeMap::new()),
            listed: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Faults {
    /// Adds a rule; `remaining` None = until removed.
    pub fn add(
        &self,
        remaining: Option<u64>,
        action: FaultAction,
        matches: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static,
    ) -> FaultId {
        let mut g = self.rules.lock().expect("fault rules lock");
        g.0 += 1;
        let id = g.0;
        g.1.push(Rule {
            id,
            matches: Arc::new(matches),
            remaining,
            action,
        });
        FaultId(id)
    }

    /// Removes one rule (releasing requests it holds).
    pub fn remove(&self, id: FaultId) {
        self.rules
            .lock()
            .expect("fault rules lock")
            .1
            .retain(|r| r.id != id.0);
        self.healed.send_modify(|n| *n += 1);
    }

    /// Removes every partition (held requests proceed).
    pub fn heal(&self) {
        self.rules
            .lock()
            .expect("fault rules lock")
            .1
            .retain(|r| r.action != FaultAction::Hang);
        self.healed.send_modify(|n| *n += 1);
    }

    /// Removes every rule.
    pub fn clear(&self) {
        self.rules.lock().expect("fault rules lock").1.clear();
        self.healed.send_modify(|n| *n += 1);
    }

    /// Counts the request.
    pub fn count(&self, info: &RequestInfo) {
        if let Some(verb) = info.verb {
            let mut c = self.counts.lock().expect("counters lock");
            *c.entry((verb, info.resource.clone())).or_insert(0) += 1;
            drop(c);
            let key = (verb, info.resource.clone(), info.namespace.clone());
            *self
                .scoped
                .lock()
                .expect("counters lock")
                .entry(key)
                .or_insert(0) += 1;
        }
    }

    /// Counts `n` objects served by a list of `resource`.
    pub fn count_listed(&self, resource: &str, n: u64) {
        let mut listed = self.listed.lock().expect("counters lock");
        *listed.entry(resource.to_owned()).or_insert(0) += n;
    }

    /// A snapshot of the counters by (verb, plural resource, namespace of the path).
    pub fn counts_by_namespace(&self) -> ScopedCounts {
        self.scoped.lock().expect("counters lock").clone()
    }

    /// A snapshot of the objects served by lists, by plural resource.
    pub fn listed(&self) -> BTreeMap<String, u64> {
        self.listed.lock().expect("counters lock").clone()
    }

    /// A snapshot of the counters by (verb, plural resource).
    pub fn counts(&self) -> BTreeMap<(Verb, String), u64> {
        self.counts.lock().expect("counters lock").clone()
    }

    /// Zeroes the counters.
    pub fn reset_counts(&self) {
        self.counts.lock().expect("counters lock").clear();
        self.scoped.lock().expect("counters lock").clear();
        self.listed.lock().expect("counters lock").clear();
    }

    fn is_held(&self, info: &RequestInfo) -> bool {
        let g = self.rules.lock().expect("fault rules lock");
        g.1.iter()
            .any(|r| r.action == FaultAction::Hang && (r.matches)(info))
    }

    /// Waits while a partition holds requests like `info`.
    pub async fn wait_if_partitioned(&self, info: &RequestInfo) {
        let mut healed = self.healed.subscribe();
        while self.is_held(info) {
            if healed.changed().await.is_err() {
                return;
            }
        }
    }

    /// What happens to the answer of an arriving request: the first rule that loses it or
    /// serves it late decides (consuming one of its N).
    pub(crate) fn answer_fate(&self, info: &RequestInfo) -> AnswerFate {
        let mut g = self.rules.lock().expect("fault rules lock");
        let mut fate = AnswerFate::Answered;
        for r in g.1.iter_mut().filter(|r| (r.matches)(info)) {
            let this = match r.action {
                FaultAction::LoseReply => AnswerFate::Lost,
                FaultAction::ServeAfterGiveUp(d) => AnswerFate::AfterGiveUp(d),
                _ => continue,
            };
            if r.take() {
                fate = this;
                break;
            }
        }
        g.1.retain(|r| r.remaining != Some(0));
        fate
    }

    /// Applies the rules to an arriving request: waits out partitions and latency, then
    /// fails it if a counted failure rule matches (consuming one of its N).
    pub async fn apply(&self, info: &RequestInfo) -> Result<(), ApiError> {
        self.wait_if_partitioned(info).await;
        let (delay, failure) = {
            let mut g = self.rules.lock().expect("fault rules lock");
            let mut delay = Duration::ZERO;
            let mut failure = None;
            for r in g.1.iter_mut().filter(|r| (r.matches)(info)) {
                match r.action {
                    FaultAction::Delay(d) => delay += d,
                    FaultAction::Fail { code, retry_after } if failure.is_none() => {
                        if !r.take() {
                            continue;
                        }
                        let mut e = ApiError::for_code(code, format!("injected fault: {code}"));
                        e.details.retry_after = retry_after;
                        failure = Some(e);
                    }
                    _ => {}
                }
            }
            g.1.retain(|r| r.remaining != Some(0));
            (delay, failure)
        };
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        failure.map_or(Ok(()), Err)
    }
}
