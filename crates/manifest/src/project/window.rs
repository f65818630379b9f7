//! Sync windows (`spec.syncWindows` of an AppProject): times when syncs of the matching
//! applications are allowed or denied.
//!
//! A window is `allow` or `deny`, opens at each time of its cron `schedule` (five fields:
//! minute, hour, day of month, month, day of week; lists, ranges, steps, month and day
//! names, and the `@yearly`/`@monthly`/`@weekly`/`@daily`/`@hourly` shorthands), read in its
//! `timeZone` (IANA name, default UTC), and stays open for `duration` (a Go duration). It
//! applies to the applications it selects by name (`applications`), by destination
//! namespace (`namespaces`) or by destination cluster, server or name (`clusters`), all
//! globs; any one selector matching is enough, all of the given ones with `andOperator`.
//!
//! The decision, as Argo CD documents it: no window matches → sync; an active deny window
//! → no sync (a manual sync still runs when every active deny window has `manualSync`);
//! else an active allow window → sync; else if allow windows match but none is active → no
//! sync (a manual sync runs when one of them has `manualSync`); else sync.
//!
//! Time is an argument ([`sync_windows_verdict`]); nothing here reads a clock. A window is
//! active at `now` when its schedule fired at some time `t` with `now - duration < t < now`.
//! Civil times are converted with the zone's rules (a time skipped by a daylight-saving
//! change fires at the first instant after the gap).

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan as _};
use serde::Deserialize;

use crate::glob::Glob;

/// A window's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// Syncs run only while an allow window is active.
    Allow,
    /// Syncs do not run while the window is active.
    Deny,
}

/// One sync window, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncWindow {
    /// `kind`.
    pub kind: WindowKind,
    /// `schedule`, as written.
    pub schedule: String,
    /// `duration`, in seconds.
    pub duration_secs: i64,
    /// `applications`: application name patterns.
    pub applications: Vec<Glob>,
    /// `namespaces`: destination namespace patterns.
    pub namespaces: Vec<Glob>,
    /// `clusters`: destination server or cluster name patterns.
    pub clusters: Vec<Glob>,
    /// `manualSync`: manual syncs run even when the window blocks syncs.
    pub manual_sync: bool,
    /// `andOperator`: every selector given must match (default: any one).
    pub and_operator: bool,
    /// `timeZone` (default `UTC`).
    pub time_zone: String,
    cron: Cron,
    tz: TimeZone,
}

/// A window as written.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct RawWindow {
    kind: String,
    schedule: String,
    duration: String,
    applications: Vec<Glob>,
    namespaces: Vec<Glob>,
    clusters: Vec<Glob>,
    #[serde(rename = "manualSync")]
    manual_sync: bool,
    #[serde(rename = "andOperator")]
    and_operator: bool,
    #[serde(rename = "timeZone")]
    time_zone: String,
}

impl SyncWindow {
    /// Validates a window; the error names the field and says what is wrong.
    pub(super) fn from_raw(raw: RawWindow) -> Result<Self, (&'static str, String)> {
        let kind = match raw.kind.as_str() {
            "allow" => WindowKind::Allow,
            "deny" => WindowKind::Deny,
            other => return Err(("kind", format!("{other:?}: expected allow or deny"))),
        };
        let cron = Cron::parse(&raw.schedule).map_err(|e| ("schedule", e))?;
        let duration = fleetshard_util::duration::parse_go_duration(&raw.duration)
            .map_err(|e| ("duration", e))?;
        let duration_secs = i64::try_from(duration.as_secs())
            .ok()
            .filter(|d| *d > 0)
            .ok_or_else(|| ("duration", format!("{:?}: must be positive", raw.duration)))?;
        let time_zone = if raw.time_zone.is_empty() {
            "UTC".to_owned()
        } else {
            raw.time_zone
        };
        let tz =
            TimeZone::get(&time_zone).map_err(|e| ("timeZone", format!("{time_zone:?}: {e}")))?;
        if raw.applications.is_empty() && raw.namespaces.is_empty() && raw.clusters.is_empty() {
            return Err((
                "applications",
                "the window selects nothing: give applications, namespaces or clusters".to_owned(),
            ));
        }
        Ok(SyncWindow {
            kind,
            schedule: raw.schedule,
            duration_secs,
            applications: raw.applications,
            namespaces: raw.namespaces,
            clusters: raw.clusters,
            manual_sync: raw.manual_sync,
            and_operator: raw.and_operator,
            time_zone,
            cron,
            tz,
        })
    }

    /// Whether the window applies to the application `app` deploying to `namespace` of
    /// the cluster `server`/`cluster_name`.
    pub fn matches(&self, app: &str, namespace: &str, server: &str, cluster_name: &str) -> bool {
        let any = |patterns: &[Glob], values: &[&str]| {
            patterns
                .iter()
                .any(|p| values.iter().any(|v| !v.is_empty() && p.is_match(v)))
        };
        let checks = [
            (&self.applications, any(&self.applications, &[app])),
            (&self.namespaces, any(&self.namespaces, &[namespace])),
            (&self.clusters, any(&self.clusters, &[server, cluster_name])),
        ];
        let mut given = checks.iter().filter(|(patterns, _)| !patterns.is_empty());
        if self.and_operator {
            given.all(|(_, hit)| *hit)
        } else {
            given.any(|(_, hit)| *hit)
        }
    }

    /// Whether the window is open at `now`.
    pub fn active_at(&self, now: Timestamp) -> bool {
        let Ok(since) = Timestamp::from_second(now.as_second().saturating_sub(self.duration_secs))
        else {
            return false;
        };
        self.cron
            .next_after(&self.tz, since)
            .is_some_and(|fired| fired < now)
    }

    fn describe(&self) -> String {
        format!(
            "{} window {:?} for {} ({})",
            match self.kind {
                WindowKind::Allow => "allow",
                WindowKind::Deny => "deny",
            },
            self.schedule,
            fmt_secs(self.duration_secs),
            self.time_zone
        )
    }
}

fn fmt_secs(s: i64) -> String {
    match (s / 3600, s % 3600 / 60, s % 60) {
        (h, m, 0) if h > 0 => format!("{h}h{m}m"),
        (0, m, 0) => format!("{m}m"),
        _ => format!("{s}s"),
    }
}

/// Whether the sync windows let a sync run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WindowVerdict {
    /// The sync may run.
    Allowed,
    /// It may not; why, naming the window.
    Blocked(String),
}

/// The project's `windows` decide on a sync (`manual`: asked for by hand) of the
/// application `app` deploying to `namespace` of cluster `server`/`cluster_name`, at `now`.
pub fn sync_windows_verdict(
    windows: &[SyncWindow],
    (app, namespace, server, cluster_name): (&str, &str, &str, &str),
    manual: bool,
    now: Timestamp,
) -> WindowVerdict {
    let matching: Vec<&SyncWindow> = windows
        .iter()
        .filter(|w| w.matches(app, namespace, server, cluster_name))
        .collect();
    let (active, inactive): (Vec<&SyncWindow>, Vec<&SyncWindow>) =
        matching.iter().partition(|w| w.active_at(now));
    let how = if manual { "manual" } else { "automated" };
    let denies: Vec<&&SyncWindow> = active
        .iter()
        .filter(|w| w.kind == WindowKind::Deny)
        .collect();
    if let Some(first) = denies.first() {
        if manual && denies.iter().all(|w| w.manual_sync) {
            return WindowVerdict::Allowed;
        }
        return WindowVerdict::Blocked(format!(
            "{how} sync blocked by the active {}",
            first.describe()
        ));
    }
    if active.iter().any(|w| w.kind == WindowKind::Allow) {
        return WindowVerdict::Allowed;
    }
    let allows: Vec<&&SyncWindow> = inactive
        .iter()
        .filter(|w| w.kind == WindowKind::Allow)
        .collect();
    match allows.first() {
        Some(_) if manual && allows.iter().any(|w| w.manual_sync) => WindowVerdict::Allowed,
        Some(first) => WindowVerdict::Blocked(format!(
            "{how} sync blocked: no allow window is active (next: {})",
            first.describe()
        )),
        None => WindowVerdict::Allowed,
    }
}

/// A parsed five-field cron schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cron {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// The day-of-month or day-of-week field is `*`/`?`: both must then match (else
    /// either).
    day_star: bool,
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Cron {
    fn parse(spec: &str) -> Result<Cron, String> {
        let spec = spec.trim();
        let expanded = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            s if s.starts_with('@') => {
                return Err(format!(
                    "{s:?}: unknown shorthand (@yearly, @monthly, @weekly, @daily, @hourly)"
                ));
            }
            s => s,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [mi, h, dom, mon, dow] = fields[..] else {
            return Err(format!(
                "{spec:?}: expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                fields.len()
            ));
        };
        let (minutes, _) = field(mi, 0, 59, &[], "minute")?;
        let (hours, _) = field(h, 0, 23, &[], "hour")?;
        let (days, dom_star) = field(dom, 1, 31, &[], "day of month")?;
        let (months, _) = field(mon, 1, 12, MONTHS, "month")?;
        let (mut weekdays, dow_star) = field(dow, 0, 7, WEEKDAYS, "day of week")?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        Ok(Cron {
            minutes,
            hours,
            days,
            months,
            weekdays,
            day_star: dom_star || dow_star,
        })
    }

    fn day_matches(&self, date: Date) -> bool {
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        if self.day_star {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first time strictly after `after` at which the schedule fires, in `tz`;
    /// `None` if there is none within five years.
    fn next_after(&self, tz: &TimeZone, after: Timestamp) -> Option<Timestamp> {
        let start = tz.to_datetime(after);
        let mut dt = DateTime::new(
            start.year(),
            start.month(),
            start.day(),
            start.hour(),
            start.minute(),
            0,
            0,
        )
        .ok()?
        .checked_add(1.minute())
        .ok()?;
        let limit = start.year().saturating_add(5);
        // Each step moves to the next candidate month, day, hour or minute: a bounded
        // number of steps per year.
        for _ in 0..200_000 {
            if dt.year() > limit {
                return None;
            }
            let date = dt.date();
            dt = if self.months & (1 << dt.month()) == 0 {
                date.first_of_month()
                    .checked_add(1.month())
                    .ok()?
                    .to_datetime(jiff::civil::Time::midnight())
            } else if !self.day_matches(date) {
                date.tomorrow()
                    .ok()?
                    .to_datetime(jiff::civil::Time::midnight())
            } else if self.hours & (1 << dt.hour()) == 0 {
                DateTime::new(dt.year(), dt.month(), dt.day(), dt.hour(), 0, 0, 0)
                    .ok()?
                    .checked_add(1.hour())
                    .ok()?
            } else if self.minutes & (1 << dt.minute()) == 0 {
                dt.checked_add(1.minute()).ok()?
            } else {
                let fired = tz.to_ambiguous_timestamp(dt).compatible().ok()?;
                if fired > after {
                    return Some(fired);
                }
                dt.checked_add(1.minute()).ok()?
            };
        }
        None
    }
}

/// One cron field as a bit set of `min..=max`, and whether it was written `*` or `?`
/// (without a step above 1).
fn field(
    text: &str,
    min: u32,
    max: u32,
    names: &[&str],
    what: &str,
) -> Result<(u64, bool), String> {
    let bad = |why: &str| format!("{what} field {text:?}: {why}");
    let value = |s: &str| -> Result<u32, String> {
        let lower = s.to_ascii_lowercase();
        let offset = if what == "month" { 1 } else { 0 };
        if let Some(i) = names.iter().position(|n| *n == lower) {
            return Ok(u32::try_from(i).unwrap_or(0) + offset);
        }
        let n: u32 = s
            .parse()
            .map_err(|_| bad(&format!("{s:?} is not a number")))?;
        if n < min || n > max {
            return Err(bad(&format!("{n} is outside {min}-{max}")));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| bad("the step is not a number"))?;
                if step == 0 {
                    return Err(bad("a step of 0"));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (lo, hi, is_star) = if range == "*" || range == "?" {
            (min, max, true)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a)?, value(b)?, false)
        } else {
            let v = value(range)?;
            // `N/step` runs from N to the end.
            (v, if step.is_some() { max } else { v }, false)
        };
        if lo > hi {
            return Err(bad(&format!("{lo} is after {hi}")));
        }
        let step = step.unwrap_or(1);
        star |= is_star && step == 1;
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}
