//! `fleetshard pin`'s diff as text: the changes (cluster, server, Secret, old shard → new
//! shard), what is left alone and why, the per-shard load before and after, and the notes.

use std::fmt::Write as _;

use super::{PinAction, PinPlan};
use crate::table::{Align, Table};

/// Renders `plan` for people; `dry_run` says nothing will be written.
pub fn render_pin_text(plan: &PinPlan, dry_run: bool) -> String {
    let mut out = String::new();
    let writes = plan.writes().count();
    let _ = writeln!(
        out,
        "Argo CD's controller, {} replica(s): {} cluster(s), {} to pin{}; zones: {}",
        plan.replicas,
        plan.rows.len(),
        writes,
        if dry_run {
            " (dry run: nothing written)"
        } else {
            ""
        },
        plan.zones
    );
    let shard = |s: i64| {
        if s < 0 {
            "none".to_owned()
        } else {
            s.to_string()
        }
    };
    if writes > 0 {
        out.push_str("\nChanges (the Secret's shard, and the shard Argo CD runs it on):\n");
        let mut t = Table::new(&[
            ("CLUSTER", Align::Left),
            ("SERVER", Align::Left),
            ("SECRET", Align::Left),
            ("SHARD", Align::Left),
            ("RUNS ON", Align::Left),
        ]);
        for r in plan.rows.iter() {
            if let PinAction::Write(to) = r.action {
                t.row(vec![
                    r.name.clone(),
                    r.server.clone(),
                    r.secret.clone().unwrap_or_default(),
                    format!("{} -> {to}", r.current),
                    format!("{} -> {}", shard(r.before), shard(r.after)),
                ]);
            }
        }
        t.render(&mut out);
    }
    let alone: Vec<_> = plan
        .rows
        .iter()
        .filter(|r| !matches!(r.action, PinAction::Write(_) | PinAction::Keep))
        .collect();
    if !alone.is_empty() {
        out.push_str("\nLeft alone:\n");
        let mut t = Table::new(&[
            ("CLUSTER", Align::Left),
            ("SERVER", Align::Left),
            ("SECRET", Align::Left),
            ("SHARD", Align::Left),
            ("RUNS ON", Align::Left),
            ("WHY", Align::Left),
        ]);
        for r in alone {
            let why = match &r.action {
                PinAction::Manual => "pinned by hand (fleetshard.io/pin: manual)".to_owned(),
                PinAction::BuiltIn => "Argo CD's built-in entry, no Secret".to_owned(),
                PinAction::Untouched(why) => why.clone(),
                PinAction::Keep | PinAction::Write(_) => String::new(),
            };
            t.row(vec![
                r.name.clone(),
                r.server.clone(),
                r.secret.clone().unwrap_or_else(|| "-".to_owned()),
                r.current.to_string(),
                shard(r.before),
                why,
            ]);
        }
        t.render(&mut out);
    }
    let _ = writeln!(
        out,
        "\nShards (load: the cluster's weight, else its base load plus its apps; \
         bound: (1 + {}) x target):",
        plan.tolerance
    );
    let mut t = Table::new(&[
        ("SHARD", Align::Right),
        ("CLUSTERS", Align::Right),
        ("LOAD", Align::Right),
        ("TARGET", Align::Right),
        ("BOUND", Align::Right),
    ]);
    for s in &plan.shards {
        t.row(vec![
            s.shard.to_string(),
            format!("{} -> {}", s.clusters_before, s.clusters_after),
            format!("{} -> {}", s.load_before, s.load_after),
            format!("{:.1}", s.target),
            format!("{:.1}", s.target * (1.0 + plan.tolerance)),
        ]);
    }
    t.render(&mut out);
    if !plan.notes.is_empty() {
        out.push_str("\nNotes:\n");
        for n in &plan.notes {
            let _ = writeln!(out, "  {n}");
        }
    }
    out
}
