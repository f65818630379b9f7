//! The report as an SVG chart of load per shard, for design reviews: one panel per plan
//! (algorithm × replica count) on a shared load axis so panels compare at a glance; bars
//! coloured by the replica's zone, a dashed mean line and the `(1 + ε) × mean` bound line,
//! over-bound bars outlined in red, hover titles with the numbers.
//!
//! Hand-written SVG 1.1 text: no dependency, and the output is stable byte for byte, so it
//! diffs well when committed next to a design doc.

use std::fmt::Write as _;

use crate::report::{PlanReport, Report};

const FONT: &str = "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
/// Tableau 10: distinguishable, colour-blind friendlier than most, prints well.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
    "#bab0ac", "#e15759",
];
const NO_ZONE: &str = "#4e79a7";
const BOUND: &str = "#d62728";
const MEAN: &str = "#444444";
const MUTED: &str = "#666666";
const GRID: &str = "#e6e6e6";

const MARGIN: f64 = 24.0;
const GAP: f64 = 20.0;
const LEGEND_Y: f64 = 78.0;
const LEGEND_ROW: f64 = 20.0;
const PANEL_H: f64 = 270.0;
// Inside a panel: room for the title, the tick labels and the axis labels.
const PAD_TOP: f64 = 60.0;
const PAD_LEFT: f64 = 56.0;
const PAD_RIGHT: f64 = 64.0;
const PAD_BOTTOM: f64 = 40.0;

/// XML-escapes text for element content and attribute values.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0 at all.
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about `ticks` intervals up to `max`.
fn tick_step(max: f64, ticks: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / ticks;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    (nice * mag).max(1.0)
}

fn fmt_num(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// A line label's value: two decimals for small loads, where rounding to one would hide
/// why a bar at 8 is over a bound of 7.975; trailing zeros trimmed.
pub(crate) fn label_num(x: f64) -> String {
    let text = if x.abs() >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

/// Renders every plan of the report as one SVG document.
pub fn render_svg(report: &Report) -> String {
    let plans = &report.plans;
    let n = plans.len();
    let cols = match n {
        1 => 1,
        2..=4 => 2,
        _ => 3,
    };
    let rows = n.div_ceil(cols);
    let panel_w = if cols == 1 { 760.0 } else { 460.0 };
    let width = 2.0 * MARGIN + cols as f64 * panel_w + (cols - 1) as f64 * GAP;
    let zones = &report.primary().fleet.zones;
    // The legend wraps to the width, so it is laid out first to know the header's height.
    let (legend, legend_rows) = legend(report, zones, width);
    let header_h = LEGEND_Y + legend_rows as f64 * LEGEND_ROW + 8.0;
    let height = header_h + rows as f64 * PANEL_H + (rows - 1) as f64 * GAP + MARGIN;

    // One load scale for all panels, high enough for the tallest bar and bound.
    let top = plans
        .iter()
        .flat_map(|p| &p.shards)
        .map(|s| s.load.max(s.bound))
        .fold(0.0, f64::max);
    let step = tick_step(top, 5.0);
    let y_max = ((top * 1.05) / step).ceil().max(1.0) * step;

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="{FONT}">"#,
        w = width,
        h = height
    );
    let _ = writeln!(
        s,
        r##"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="#ffffff"/>"##
    );
    header(&mut s, report);
    s.push_str(&legend);
    for (i, p) in plans.iter().enumerate() {
        let x = MARGIN + (i % cols) as f64 * (panel_w + GAP);
        let y = header_h + (i / cols) as f64 * (PANEL_H + GAP);
        panel(&mut s, p, zones, x, y, panel_w, y_max, step);
    }
    s.push_str("</svg>\n");
    s
}

fn header(s: &mut String, report: &Report) {
    let p = report.primary();
    let f = &p.fleet;
    let mut algorithms: Vec<&str> = Vec::new();
    let mut replicas: Vec<u32> = Vec::new();
    for p in &report.plans {
        if !algorithms.contains(&p.algorithm.as_str()) {
            algorithms.push(&p.algorithm);
        }
        if !replicas.contains(&p.replicas) {
            replicas.push(p.replicas);
        }
    }
    let reps = match replicas.as_slice() {
        [one] => format!("{one} replicas"),
        [first, .., last] => format!("{first}–{last} replicas"),
        [] => String::new(),
    };
    let title = format!("Load per shard: {}", algorithms.join(" vs "));
    let sub = format!(
        "{reps} · {} clusters ({} managed) · {} apps · total load {} · ε = {:.2}{}",
        f.clusters,
        f.managed_clusters,
        f.apps,
        label_num(f.load),
        p.tolerance,
        if f.zones.is_empty() {
            String::new()
        } else {
            format!(" · zones {}", f.zones.join(", "))
        }
    );
    let _ = writeln!(
        s,
        r##"<text x="{MARGIN}" y="34" font-size="20" font-weight="600" fill="#222222">{}</text>
<text x="{MARGIN}" y="54" font-size="12.5" fill="{MUTED}">{}</text>"##,
        esc(&title),
        esc(&sub),
    );
}

fn zone_colour<'a>(zones: &[String], zone: Option<&str>) -> &'a str {
    match zone.and_then(|z| zones.iter().position(|x| x == z)) {
        Some(i) => PALETTE[i % PALETTE.len()],
        None => NO_ZONE,
    }
}

/// Lays legend items out left to right, wrapping at the document's width.
struct Legend {
    out: String,
    x: f64,
    row: usize,
    right: f64,
}

impl Legend {
    /// Adds an item: `swatch(x, y)` draws the sample at the current position.
    fn item(&mut self, swatch: impl FnOnce(f64, f64) -> String, label: &str) {
        // No text metrics in SVG: ~7.4 px per character at 12 px covers the common sans
        // fonts (DejaVu Sans is among the widest), so items never overlap.
        let w = 20.0 + 7.4 * label.chars().count() as f64 + 18.0;
        if self.x > MARGIN && self.x + w > self.right {
            self.x = MARGIN;
            self.row += 1;
        }
        let y = LEGEND_Y + self.row as f64 * LEGEND_ROW;
        let _ = writeln!(
            self.out,
            r##"<g class="legend-item">{}<text x="{:.1}" y="{:.1}" font-size="12" fill="#333333">{}</text></g>"##,
            swatch(self.x, y),
            self.x + 20.0,
            y + 4.0,
            esc(label)
        );
        self.x += w;
    }
}

fn box_swatch(fill: &str, extra: &str) -> impl FnOnce(f64, f64) -> String {
    let (fill, extra) = (fill.to_owned(), extra.to_owned());
    move |x, y| {
        format!(
            r#"<rect x="{x:.1}" y="{:.1}" width="14" height="10" rx="2" fill="{fill}"{extra}/>"#,
            y - 5.0
        )
    }
}

fn line_swatch(colour: &str, dash: &str) -> impl FnOnce(f64, f64) -> String {
    let (colour, dash) = (colour.to_owned(), dash.to_owned());
    move |x, y| {
        format!(
            r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="{dash}"/>"#,
            x + 14.0
        )
    }
}

/// Whether every shard of the plan has the same target (equal capacities, one zone
/// share): then the target is the mean and is drawn as one straight line.
fn uniform_targets(p: &PlanReport) -> bool {
    p.shards
        .windows(2)
        .all(|w| (w[0].target - w[1].target).abs() <= 1e-9 * w[0].target.abs().max(1.0))
}

/// The legend as SVG text and the number of rows it takes.
fn legend(report: &Report, zones: &[String], width: f64) -> (String, usize) {
    let mut legend = Legend {
        out: String::new(),
        x: MARGIN,
        row: 0,
        right: width - MARGIN,
    };
    let shard_zones: Vec<&String> = zones
        .iter()
        .filter(|z| {
            report
                .plans
                .iter()
                .any(|p| p.shards.iter().any(|s| s.zone.as_ref() == Some(*z)))
        })
        .collect();
    if shard_zones.is_empty() {
        legend.item(box_swatch(NO_ZONE, ""), "shard load");
    } else {
        for z in shard_zones {
            let fill = zone_colour(zones, Some(z));
            legend.item(box_swatch(fill, ""), &format!("replica in {z}"));
        }
    }
    if report.plans.iter().all(uniform_targets) {
        legend.item(line_swatch(MEAN, "4 3"), "mean");
        legend.item(line_swatch(BOUND, "7 3"), "(1+ε) × mean");
    } else {
        legend.item(line_swatch(MEAN, "4 3"), "fair share (by capacity / zone)");
        legend.item(line_swatch(BOUND, "7 3"), "(1+ε) × fair share");
    }
    let over = format!(r#" fill-opacity="0.35" stroke="{BOUND}" stroke-width="1.5""#);
    legend.item(box_swatch(NO_ZONE, &over), "over bound");
    (legend.out, legend.row + 1)
}

/// A step line across the plot: one horizontal segment per shard slot at `value(shard)`.
fn step_path(
    p: &PlanReport,
    x0: f64,
    slot: f64,
    ys: impl Fn(f64) -> f64,
    value: impl Fn(&crate::report::ShardRow) -> f64,
) -> String {
    let mut d = String::new();
    for (i, sh) in p.shards.iter().enumerate() {
        let y = ys(value(sh));
        let (a, b) = (x0 + i as f64 * slot, x0 + (i + 1) as f64 * slot);
        if i == 0 {
            let _ = write!(d, "M{a:.1},{y:.1}");
        } else {
            let _ = write!(d, " V{y:.1}");
        }
        let _ = write!(d, " H{b:.1}");
    }
    d
}

#[allow(clippy::too_many_arguments)] // A layout function: its arguments are the layout.
fn panel(
    s: &mut String,
    p: &PlanReport,
    zones: &[String],
    x: f64,
    y: f64,
    w: f64,
    y_max: f64,
    step: f64,
) {
    let plot_x = x + PAD_LEFT;
    let plot_y = y + PAD_TOP;
    let plot_w = w - PAD_LEFT - PAD_RIGHT;
    let plot_h = PANEL_H - PAD_TOP - PAD_BOTTOM;
    let ys = |v: f64| plot_y + plot_h - v / y_max * plot_h;
    let _ = writeln!(
        s,
        r##"<g class="panel" data-algorithm="{alg}" data-replicas="{r}">
<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{PANEL_H:.1}" rx="8" fill="#fbfbfc" stroke="#dddddd"/>
<text x="{tx:.1}" y="{ty:.1}" font-size="14" font-weight="600" fill="#222222">{alg} · {r} replicas</text>"##,
        alg = esc(&p.algorithm),
        r = p.replicas,
        tx = x + 14.0,
        ty = y + 22.0
    );
    let b = &p.balance;
    let mut facts = vec![if uniform_targets(p) {
        format!("max/mean {:.2}", b.max_over_mean)
    } else {
        format!("max/fair share {:.2}", b.max_over_target)
    }];
    if let Some(m) = &p.movement {
        facts.push(format!("moved {:.1}% of load", m.load_fraction * 100.0));
    }
    let split = p.clusters.iter().filter(|c| !c.slices.is_empty()).count();
    if split > 0 {
        facts.push(format!("{split} split clusters"));
    }
    if p.zones.cross_zone.zoned_load > 0.0 {
        facts.push(format!(
            "cross-zone {:.0}%",
            p.zones.cross_zone.fraction * 100.0
        ));
    }
    let _ = writeln!(
        s,
        r#"<text x="{tx:.1}" y="{ty:.1}" font-size="11.5" fill="{MUTED}">{}</text>"#,
        esc(&facts.join(" · ")),
        tx = x + 14.0,
        ty = y + 38.0
    );
    if p.unassigned.clusters > 0 {
        let _ = writeln!(
            s,
            r#"<text x="{tx:.1}" y="{ty:.1}" font-size="11.5" fill="{BOUND}" text-anchor="end">unassigned: {} clusters, load {}</text>"#,
            p.unassigned.clusters,
            label_num(p.unassigned.load),
            tx = x + w - 14.0,
            ty = y + 22.0
        );
    }

    // Grid and y axis.
    let mut v = 0.0;
    while v <= y_max + 1e-9 {
        let gy = ys(v);
        let _ = writeln!(
            s,
            r#"<line x1="{plot_x:.1}" y1="{gy:.1}" x2="{:.1}" y2="{gy:.1}" stroke="{GRID}" stroke-width="1"/><text x="{:.1}" y="{:.1}" font-size="10.5" fill="{MUTED}" text-anchor="end">{}</text>"#,
            plot_x + plot_w,
            plot_x - 6.0,
            gy + 3.5,
            fmt_num(v)
        );
        v += step;
    }
    let _ = writeln!(
        s,
        r##"<text transform="translate({:.1},{:.1}) rotate(-90)" font-size="11" fill="{MUTED}" text-anchor="middle">load</text>
<text x="{:.1}" y="{:.1}" font-size="11" fill="{MUTED}" text-anchor="middle">shard</text>
<line x1="{plot_x:.1}" y1="{base:.1}" x2="{:.1}" y2="{base:.1}" stroke="#999999" stroke-width="1"/>"##,
        x + 16.0,
        plot_y + plot_h / 2.0,
        plot_x + plot_w / 2.0,
        y + PANEL_H - 8.0,
        plot_x + plot_w,
        base = plot_y + plot_h
    );

    let n = p.shards.len();
    if n == 0 {
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="13" fill="{MUTED}" text-anchor="middle">no replicas: nothing is managed</text>"#,
            plot_x + plot_w / 2.0,
            plot_y + plot_h / 2.0
        );
        s.push_str("</g>\n");
        return;
    }
    let slot = plot_w / n as f64;
    let bar_w = (slot * 0.72).max(1.0);
    let label_every = ((n as f64 * 22.0 / plot_w).ceil() as usize).max(1);
    for sh in &p.shards {
        let bx = plot_x + sh.shard as f64 * slot + (slot - bar_w) / 2.0;
        let top = ys(sh.load);
        let colour = zone_colour(zones, sh.zone.as_deref());
        let stroke = if sh.over_bound {
            format!(r#" stroke="{BOUND}" stroke-width="1.5""#)
        } else {
            String::new()
        };
        let tip = format!(
            "shard {}{}: load {} ({:.1}% of total), {} clusters, {} apps, target {:.1}{}",
            sh.shard,
            sh.zone
                .as_deref()
                .map_or_else(String::new, |z| format!(" ({z})")),
            label_num(sh.load),
            sh.share * 100.0,
            sh.clusters,
            sh.apps,
            sh.target,
            if sh.over_bound { ", over bound" } else { "" }
        );
        let _ = writeln!(
            s,
            r#"<rect class="bar" data-shard="{}" x="{bx:.2}" y="{top:.2}" width="{bar_w:.2}" height="{:.2}" rx="{:.1}" fill="{colour}"{stroke}><title>{}</title></rect>"#,
            sh.shard,
            (plot_y + plot_h - top).max(0.0),
            (bar_w / 6.0).min(2.0),
            esc(&tip)
        );
        if (sh.shard as usize).is_multiple_of(label_every) {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" font-size="10.5" fill="{MUTED}" text-anchor="middle">{}</text>"#,
                bx + bar_w / 2.0,
                plot_y + plot_h + 14.0,
                sh.shard
            );
        }
    }

    // Fair share and bound on top of the bars, as step lines (straight when every shard
    // has the same target), labelled in the right margin. They are the values each bar's
    // "over bound" outline is judged against.
    let uniform = uniform_targets(p);
    let last = &p.shards[n - 1];
    let mut label_ys = Vec::new();
    for (value, colour, dash, name) in [
        (
            last.target,
            MEAN,
            "4 3",
            if uniform { "mean" } else { "fair share" },
        ),
        (last.bound, BOUND, "7 3", "bound"),
    ] {
        let d = step_path(p, plot_x, slot, ys, |sh| {
            if colour == BOUND { sh.bound } else { sh.target }
        });
        let _ = writeln!(
            s,
            r#"<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}"/>"#
        );
        let label = if uniform {
            format!("{name} {}", label_num(value))
        } else {
            name.to_owned()
        };
        // Keep the two labels apart when the lines are close.
        let mut ly = ys(value);
        if let Some(&prev) = label_ys.last()
            && prev - ly < 11.0
        {
            ly = prev - 11.0;
        }
        label_ys.push(ly);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" font-size="10.5" fill="{colour}">{}</text>"#,
            plot_x + plot_w + 5.0,
            ly + 3.5,
            esc(&label)
        );
    }
    s.push_str("</g>\n");
}
