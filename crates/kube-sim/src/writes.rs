//! The record of every write request a server received: who sent it (its User-Agent and
//! field manager), what it carried, when it arrived and when it ended — answered, or
//! abandoned because the client dropped the connection first — so that tests judge
//! ownership from the cluster's side ([`overlaps`]).
//!
//! A write is applied in one step after any injected delay (the store is changed under one
//! lock, with no await in between), so a write whose connection was dropped during the
//! delay is abandoned and never applied; one answered 2xx was applied at its completion.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::time::Instant;

use super::faults::Verb;
use super::state::Shared;

/// How a write request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Not answered yet (held by a partition or a delay).
    InFlight,
    /// Answered with this HTTP status code (2xx: applied).
    Answered(u16),
    /// The client went away before the server got to it: never applied.
    Abandoned,
    /// Served with this status code at `completed` (2xx: applied), but the answer was lost
    /// ([`FaultAction::LoseReply`](crate::FaultAction::LoseReply)).
    ReplyLost(u16),
    /// Served with this status code at `completed` (2xx: applied), after its client gave
    /// up at `gave_up`
    /// ([`FaultAction::ServeAfterGiveUp`](crate::FaultAction::ServeAfterGiveUp)).
    AfterGiveUp(u16),
}

/// One write request as the server saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteRecord {
    /// Order of arrival at this server, from 1.
    pub seq: u64,
    /// The verb (create, update, patch, delete, delete collection).
    pub verb: Verb,
    /// The HTTP method.
    pub method: String,
    /// The request path.
    pub path: String,
    /// The body as JSON (None when empty or not JSON).
    pub object: Option<Value>,
    /// The `fieldManager` query parameter.
    pub field_manager: Option<String>,
    /// Asked as a dry run (`dryRun=All`): never changes the server's state.
    pub dry_run: bool,
    /// The `User-Agent` header: which client sent it.
    pub user_agent: Option<String>,
    /// When it arrived (before any injected fault).
    pub received: Instant,
    /// When it arrived, in wall-clock milliseconds since the Unix epoch: comparable with
    /// other processes' logs (replicas' audit logs) on one machine.
    pub received_unix_ms: u64,
    /// When the server saw its client give up while it was unanswered (an abandoned write,
    /// or one served after that).
    pub gave_up: Option<Instant>,
    /// When it was answered or abandoned (None while in flight).
    pub completed: Option<Instant>,
    /// How it ended.
    pub outcome: WriteOutcome,
}

impl WriteRecord {
    /// Whether the write changed (or may still change) the server's state: not a dry run,
    /// and answered 2xx or still in flight.
    pub fn may_apply(&self) -> bool {
        !self.dry_run
            && match self.outcome {
                WriteOutcome::InFlight => true,
                WriteOutcome::Answered(code)
                | WriteOutcome::ReplyLost(code)
                | WriteOutcome::AfterGiveUp(code) => (200..300).contains(&code),
                WriteOutcome::Abandoned => false,
            }
    }
}

/// The log of one server's writes, the newest `limit` kept.
#[derive(Debug)]
pub struct WriteLog {
    inner: Mutex<LogState>,
}

#[derive(Debug)]
struct LogState {
    next: u64,
    limit: usize,
    records: VecDeque<WriteRecord>,
}

impl WriteLog {
    /// An empty log keeping the newest `limit` records.
    pub fn new(limit: usize) -> WriteLog {
        WriteLog {
            inner: Mutex::new(LogState {
                next: 1,
                limit: limit.max(1),
                records: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        // Every critical section leaves the log consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an arriving write; returns its sequence number.
    pub fn received(&self, mut record: WriteRecord) -> u64 {
        let mut s = self.lock();
        record.seq = s.next;
        s.next += 1;
        if s.records.len() >= s.limit {
            s.records.pop_front();
        }
        let seq = record.seq;
        s.records.push_back(record);
        seq
    }

    /// Write `seq`, if it is still kept and in flight.
    fn in_flight(s: &mut LogState, seq: u64) -> Option<&mut WriteRecord> {
        s.records
            .iter_mut()
            .rev()
            .find(|r| r.seq == seq)
            .filter(|r| r.outcome == WriteOutcome::InFlight)
    }

    /// Records how write `seq` ended (if it is still kept and in flight).
    pub fn ended(&self, seq: u64, outcome: WriteOutcome) {
        if let Some(r) = Self::in_flight(&mut self.lock(), seq) {
            let now = Instant::now();
            r.outcome = outcome;
            r.completed = Some(now);
            if outcome == WriteOutcome::Abandoned {
                r.gave_up = Some(now);
            }
        }
    }

    /// Records that the client of write `seq`, still in flight, gave up.
    fn gave_up(&self, seq: u64) {
        if let Some(r) = Self::in_flight(&mut self.lock(), seq) {
            r.gave_up = Some(Instant::now());
        }
    }

    /// The records kept, oldest first.
    pub fn snapshot(&self) -> Vec<WriteRecord> {
        self.lock().records.iter().cloned().collect()
    }

    /// Forgets every record (sequence numbers go on).
    pub fn clear(&self) {
        self.lock().records.clear();
    }
}

/// A write in progress: records its answer with [`WriteTicket::answered`], or, when the
/// request's future is dropped first (the client closed the connection), its abandonment.
pub(crate) struct WriteTicket {
    shared: Arc<Shared>,
    seq: u64,
    done: bool,
}

impl WriteTicket {
    pub(crate) fn new(shared: Arc<Shared>, record: WriteRecord) -> WriteTicket {
        let seq = shared.writes.received(record);
        WriteTicket {
            shared,
            seq,
            done: false,
        }
    }

    /// The request was answered with `code`.
    pub(crate) fn answered(self, code: u16) {
        self.end(WriteOutcome::Answered(code));
    }

    /// The request was served with `code`, and the answer lost.
    pub(crate) fn reply_lost(self, code: u16) {
        self.end(WriteOutcome::ReplyLost(code));
    }

    /// The client gave up; the request will be served later
    /// ([`WriteTicket::served_after_give_up`]).
    pub(crate) fn client_gave_up(&self) {
        self.shared.writes.gave_up(self.seq);
    }

    /// The request was served with `code` after its client gave up.
    pub(crate) fn served_after_give_up(self, code: u16) {
        self.end(WriteOutcome::AfterGiveUp(code));
    }

    fn end(mut self, outcome: WriteOutcome) {
        self.done = true;
        self.shared.writes.ended(self.seq, outcome);
    }
}

impl Drop for WriteTicket {
    fn drop(&mut self) {
        if !self.done {
            self.shared.writes.ended(self.seq, WriteOutcome::Abandoned);
        }
    }
}

/// G1 as a cluster sees it: **writes of different writers never interleave**. Each write
/// occupies the server from its arrival to its completion (answered, or abandoned when its
/// client cut the request — then it was never applied); a write still in flight occupies it
/// until the end of the record. Two writes whose writers differ (`writer` of each; `None`
/// is a writer of its own) must not share an instant: the later one arrived after the
/// earlier one was answered or abandoned. So a write cut at its sender's lease deadline
/// counts until the server saw the connection drop, and an apply that outlived its lease
/// into a successor's first write is an overlap.
///
/// Returns every overlapping pair (earlier arrival first), in arrival order.
pub fn overlaps<W: PartialEq>(
    records: &[WriteRecord],
    writer: impl Fn(&WriteRecord) -> W,
) -> Vec<(WriteRecord, WriteRecord)> {
    let mut sorted: Vec<&WriteRecord> = records.iter().collect();
    sorted.sort_by_key(|r| (r.received, r.seq));
    let mut out = Vec::new();
    for (i, a) in sorted.iter().enumerate() {
        let wa = writer(a);
        for b in &sorted[i + 1..] {
            // `b` arrived at or after `a`; they share an instant unless `a` ended first.
            if a.completed.is_some_and(|end| end < b.received) {
                continue;
            }
            if writer(b) != wa {
                out.push(((*a).clone(), (*b).clone()));
            }
        }
    }
    out
}
