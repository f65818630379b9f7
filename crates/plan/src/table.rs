//! The human form of a report: aligned plain-text tables, readable in a terminal and
//! pasteable into a ticket (no colour, no box-drawing beyond ASCII).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use crate::report::{PlanReport, Report, SliceRow, Warning};
use crate::svg::label_num;

/// What to include in the table output.
#[derive(Debug, Clone, Copy, Default)]
pub struct TableOptions {
    /// Also list every cluster and its shard (long for big fleets).
    pub clusters: bool,
    /// List every warning, not just the first [`MAX_WARNINGS`].
    pub all_warnings: bool,
}

/// Warnings listed by default: enough to see what kind of trouble there is without
/// burying the tables under thousands of unresolved destinations.
pub const MAX_WARNINGS: usize = 25;

/// A column's alignment.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A minimal aligned table.
pub(crate) struct Table {
    header: Vec<&'static str>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(columns: &[(&'static str, Align)]) -> Self {
        Table {
            header: columns.iter().map(|c| c.0).collect(),
            align: columns.iter().map(|c| c.1).collect(),
            rows: Vec::new(),
        }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub(crate) fn render(&self, out: &mut String) {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |out: &mut String, cells: &[String]| {
            let mut s = String::from(" ");
            for (i, c) in cells.iter().enumerate() {
                let pad = widths[i].saturating_sub(c.chars().count());
                if self.align[i] == Align::Right {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    s.push_str(&" ".repeat(pad));
                }
                s.push_str("  ");
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        let header: Vec<String> = self.header.iter().map(|h| (*h).to_owned()).collect();
        line(out, &header);
        let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        line(out, &rule);
        for r in &self.rows {
            line(out, r);
        }
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn opt(s: Option<&str>) -> String {
    s.unwrap_or("-").to_owned()
}

/// Renders the report as text: a fleet line, a comparison table when there are several
/// plans, then each plan (shards, balance, movement, zones, warnings).
pub fn render_table(report: &Report, options: TableOptions) -> String {
    let mut out = String::new();
    let p0 = report.primary();
    let f = &p0.fleet;
    let _ = write!(
        out,
        "fleet: {} clusters ({} managed), {} apps, load {}",
        f.clusters,
        f.managed_clusters,
        f.apps,
        label_num(f.load)
    );
    if !f.zones.is_empty() {
        let _ = write!(out, "; zones: {}", f.zones.join(", "));
    }
    out.push('\n');
    if report.plans.len() > 1 {
        out.push_str("\ncomparison\n");
        comparison(report, &mut out);
    }
    for p in &report.plans {
        out.push('\n');
        plan(p, options, &mut out);
    }
    // Warnings common to all plans would repeat; print each distinct one once, at the end,
    // marking those that only some plans have. Hash sets keep this linear: a big fleet
    // can have thousands of warnings in each of hundreds of plans.
    let mut counts: HashMap<&Warning, usize> = HashMap::new();
    for p in &report.plans {
        let distinct: HashSet<&Warning> = p.warnings.iter().collect();
        for w in distinct {
            *counts.entry(w).or_default() += 1;
        }
    }
    let mut printed = HashSet::new();
    let mut seen = Vec::new();
    for p in &report.plans {
        for w in &p.warnings {
            let common = counts.get(w) == Some(&report.plans.len());
            let line = if common {
                format!("[{}] {}", w.source, w.message)
            } else {
                format!(
                    "[{}] {} ({} × {})",
                    w.source, w.message, p.algorithm, p.replicas
                )
            };
            if printed.insert(line.clone()) {
                seen.push(line);
            }
        }
    }
    if !seen.is_empty() {
        let _ = writeln!(out, "\nwarnings ({})", seen.len());
        let shown = if options.all_warnings {
            seen.len()
        } else {
            MAX_WARNINGS
        };
        for w in seen.iter().take(shown) {
            let _ = writeln!(out, "  - {w}");
        }
        if seen.len() > shown {
            let _ = writeln!(
                out,
                "  … and {} more (--all-warnings lists them; --output json has them all)",
                seen.len() - shown
            );
        }
    }
    out
}

fn comparison(report: &Report, out: &mut String) {
    let mut t = Table::new(&[
        ("algorithm", Align::Left),
        ("replicas", Align::Right),
        ("max", Align::Right),
        ("mean", Align::Right),
        ("min", Align::Right),
        ("max/mean", Align::Right),
        ("over bound", Align::Right),
        ("unassigned", Align::Right),
        ("moved (load)", Align::Right),
        ("cross-zone", Align::Right),
        ("ms", Align::Right),
    ]);
    for p in &report.plans {
        let b = &p.balance;
        let over = p.shards.iter().filter(|s| s.over_bound).count();
        t.row(vec![
            p.algorithm.clone(),
            p.replicas.to_string(),
            b.max.to_string(),
            num(b.mean),
            b.min.to_string(),
            format!("{:.2}", b.max_over_mean),
            over.to_string(),
            p.unassigned.clusters.to_string(),
            p.movement
                .as_ref()
                .map_or_else(|| "-".to_owned(), |m| pct(m.load_fraction)),
            if p.zones.cross_zone.zoned_load == 0.0 {
                "-".to_owned()
            } else {
                pct(p.zones.cross_zone.fraction)
            },
            format!("{:.1}", p.timings.distribute_ms),
        ]);
    }
    t.render(out);
}

fn plan(p: &PlanReport, options: TableOptions, out: &mut String) {
    let _ = writeln!(
        out,
        "{} × {} replicas (ε = {:.2})",
        p.algorithm, p.replicas, p.tolerance
    );
    let mut t = Table::new(&[
        ("shard", Align::Right),
        ("zone", Align::Left),
        ("cap", Align::Right),
        ("clusters", Align::Right),
        ("apps", Align::Right),
        ("load", Align::Right),
        ("share", Align::Right),
        ("target", Align::Right),
        ("load/target", Align::Right),
        ("note", Align::Left),
    ]);
    for s in &p.shards {
        t.row(vec![
            s.shard.to_string(),
            opt(s.zone.as_deref()),
            s.capacity.to_string(),
            s.clusters.to_string(),
            s.apps.to_string(),
            label_num(s.load),
            pct(s.share),
            num(s.target),
            if s.target > 0.0 {
                format!("{:.2}", s.load / s.target)
            } else {
                "-".to_owned()
            },
            if s.over_bound { "over bound" } else { "" }.to_owned(),
        ]);
    }
    let u = &p.unassigned;
    if u.clusters > 0 {
        t.row(vec![
            "-".into(),
            "(unassigned)".into(),
            String::new(),
            u.clusters.to_string(),
            u.apps.to_string(),
            label_num(u.load),
            pct(u.share),
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    t.render(out);
    let b = &p.balance;
    let _ = writeln!(
        out,
        "balance: max {}  mean {}  min {}  max/mean {:.2}  max/target {:.2}  {}",
        label_num(b.max),
        num(b.mean),
        label_num(b.min),
        b.max_over_mean,
        b.max_over_target,
        if b.within_bound {
            format!("(every shard within (1+{:.2}) × target)", p.tolerance)
        } else {
            format!("(some shard above (1+{:.2}) × target)", p.tolerance)
        }
    );
    if let Some(m) = &p.movement {
        let from = match (&m.from.algorithm, m.from.replicas) {
            (Some(a), Some(r)) => format!("{} {a} × {r}", m.from.kind),
            (None, Some(r)) => format!("{} × {r}", m.from.kind),
            _ => m.from.kind.clone(),
        };
        let _ = writeln!(
            out,
            "movement from {from}: {} of {} clusters moved ({}), load {} of {} ({}); {} added, {} removed",
            m.clusters_moved,
            m.clusters_total,
            pct(m.cluster_fraction),
            label_num(m.load_moved),
            label_num(m.load_total),
            pct(m.load_fraction),
            m.clusters_added,
            m.clusters_removed
        );
    }
    for c in p.clusters.iter().filter(|c| !c.slices.is_empty()) {
        let _ = writeln!(
            out,
            "cluster {} split in {}: shards {} (load {} in all)",
            if c.name.is_empty() { &c.id } else { &c.name },
            c.slices.len(),
            slice_shards(&c.slices),
            label_num(c.load)
        );
    }
    zones(p, out);
    if options.clusters {
        clusters(p, out);
    }
}

fn zones(p: &PlanReport, out: &mut String) {
    let z = &p.zones;
    match (z.mode.as_str(), &z.reason) {
        ("unused", _) => return,
        (mode, Some(reason)) => {
            let _ = writeln!(out, "zones: {mode} ({reason})");
        }
        (mode, None) => {
            let _ = writeln!(out, "zones: {mode}");
        }
    }
    // Without a zone on any replica the per-zone shares say nothing about placement.
    if z.zones.iter().all(|r| r.shards == 0) {
        let _ = writeln!(
            out,
            "  (no replica has a zone: give --shard-zones or a shards: section to plan by zone)"
        );
        return;
    }
    let mut t = Table::new(&[
        ("zone", Align::Left),
        ("shards", Align::Right),
        ("clusters", Align::Right),
        ("capacity", Align::Right),
        ("demand", Align::Right),
        ("overload", Align::Right),
        ("placed", Align::Right),
        ("mode", Align::Left),
    ]);
    for r in &z.zones {
        t.row(vec![
            r.zone.clone(),
            r.shards.to_string(),
            r.clusters.to_string(),
            pct(r.capacity_share),
            pct(r.demand_share),
            r.expected_overload
                .map_or_else(|| "-".to_owned(), |o| format!("{:+.1}%", o * 100.0)),
            pct(r.load_share),
            match r.local {
                Some(true) => "local",
                Some(false) => "spilling",
                None => "",
            }
            .to_owned(),
        ]);
    }
    t.render(out);
    let c = &z.cross_zone;
    let _ = writeln!(
        out,
        "cross-zone: {} clusters, load {} of {} ({})",
        c.clusters,
        label_num(c.load),
        label_num(c.zoned_load),
        pct(c.fraction)
    );
}

fn clusters(p: &PlanReport, out: &mut String) {
    let mut t = Table::new(&[
        ("cluster", Align::Left),
        ("id", Align::Left),
        ("zone", Align::Left),
        ("apps", Align::Right),
        ("load", Align::Right),
        ("pin", Align::Right),
        ("shard", Align::Right),
    ]);
    for c in &p.clusters {
        t.row(vec![
            if c.name.is_empty() {
                c.server.clone()
            } else {
                c.name.clone()
            },
            c.id.clone(),
            opt(c.zone.as_deref()),
            c.apps.to_string(),
            label_num(c.load),
            c.pin.map_or_else(|| "-".to_owned(), |s| s.to_string()),
            if c.skip_reconcile {
                "skip".to_owned()
            } else if !c.slices.is_empty() {
                slice_shards(&c.slices)
            } else {
                c.shard.map_or_else(|| "-".to_owned(), |s| s.to_string())
            },
        ]);
    }
    t.render(out);
}

/// A split cluster's slices' shards, in slice order: `2,0,1` (`-` for none).
fn slice_shards(slices: &[SliceRow]) -> String {
    slices
        .iter()
        .map(|s| s.shard.map_or_else(|| "-".to_owned(), |s| s.to_string()))
        .collect::<Vec<_>>()
        .join(",")
}
