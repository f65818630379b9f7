// fleetshard dashboard: renders /api/dashboard/events (Server-Sent Events, one JSON
// snapshot per message). Text is always set with textContent: names come from users.
"use strict";
(function () {
  var meta = function (n) { return document.querySelector('meta[name="' + n + '"]').content; };
  var token = meta("fs-token");
  var controls = meta("fs-controls") === "1";
  var $ = function (id) { return document.getElementById(id); };

  function h(tag, attrs) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") el.textContent = attrs[k];
      else if (k === "cls") el.className = attrs[k];
      else el.setAttribute(k, attrs[k]);
    });
    for (var i = 2; i < arguments.length; i++) if (arguments[i]) el.appendChild(arguments[i]);
    return el;
  }
  function table(el, head, rows) {
    el.replaceChildren(h("thead", {}, h("tr", {})));
    head.forEach(function (c) { el.tHead.rows[0].appendChild(h("th", { text: c })); });
    var body = h("tbody", {});
    rows.forEach(function (r) {
      var tr = h("tr", r.attrs || {});
      r.cells.forEach(function (c) {
        tr.appendChild(typeof c === "object" && c !== null ? h("td", c) : h("td", { text: c == null ? "-" : String(c) }));
      });
      body.appendChild(tr);
    });
    el.appendChild(body);
  }
  function leaseCell(s) {
    var l = s.lease || "vacant";
    var cls = l === "live" ? "ok" : l === "unknown" ? "" : "bad";
    return { text: l + (s.lease ? " " + s.lease_age_secs.toFixed(1) + " s" : ""), cls: cls };
  }

  function render(page) {
    var f = page.fleet;
    var a = f.apps;
    var sum = $("summary");
    sum.replaceChildren();
    [
      "generation " + f.generation,
      f.shard_count + " shards" + (f.desired_shards != null ? " (desired " + f.desired_shards + ")" : ""),
      "distributor " + (f.distributor || "-"),
      f.clusters.length + " clusters",
      a.good + "/" + a.total + " apps Synced and Healthy",
      a.errors + " with errors",
    ].forEach(function (t) { sum.appendChild(h("span", { text: t })); });
    var un = h("span", { id: "unowned", text: f.unowned + " unowned", cls: f.unowned ? "bad" : "ok" });
    un.dataset.count = f.unowned;
    sum.appendChild(un);
    if (f.spares.length) sum.appendChild(h("span", { text: "spares: " + f.spares.join(", ") }));
    f.warnings.forEach(function (w) { sum.appendChild(h("span", { text: w, cls: "bad" })); });

    // Measured costs (millicore-equivalents), once any replica has published one.
    var costed = f.clusters.some(function (c) { return c.cost != null; });
    var cost = function (v) { return v == null ? "-" : v.toFixed(1); };
    table($("shards-table"), ["shard", "holder", "zone", "lease", "clusters", "apps", "load"]
      .concat(costed ? ["cost"] : []),
      f.shards.map(function (s) {
        return { cells: [s.shard, s.holder, s.zone, leaseCell(s), s.clusters, s.apps, s.load]
          .concat(costed ? [cost(s.cost)] : []) };
      }));
    $("unowned-count").textContent = f.unowned ? f.unowned + " without an owner" : "all owned";
    table($("clusters-table"), ["cluster", "server", "zone", "shard", "owner", "apps", "synced", "healthy", "errors"]
      .concat(costed ? ["cost"] : []),
      f.clusters.map(function (c) {
        return {
          attrs: { cls: c.owner ? "" : "unowned", "data-state": c.state },
          cells: [c.name || c.id, c.server, c.zone, c.shard, c.owner || c.state, c.apps,
            { text: String(c.synced), cls: c.synced < c.apps ? "warn" : "ok" },
            { text: String(c.healthy), cls: c.healthy < c.apps ? "warn" : "ok" },
            { text: String(c.errors), cls: c.errors ? "bad" : "" }]
            .concat(costed ? [cost(c.cost)] : []),
        };
      }));
    table($("apps-table"), ["app", "cluster", "sync", "health", "condition"],
      f.app_problems.map(function (p) { return { cells: [p.app, p.cluster, p.sync, p.health, p.condition] }; }));

    renderPicture(f.picture);

    var tl = $("timeline");
    tl.replaceChildren();
    f.timeline.slice().reverse().forEach(function (e) {
      var li = h("li", { "data-kind": e.kind, value: e.seq + 1, text: e.at_secs.toFixed(1) + " s  " + e.text });
      tl.appendChild(li);
    });

    if (controls) renderProcesses(page.processes, f);
  }

  // The picture: one lane per shard (each holder in its own colour, with its cluster
  // count), a lane of clusters without an owner, a time axis in seconds before now.
  var SVG = "http://www.w3.org/2000/svg";
  function s(tag, attrs) {
    var el = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") el.textContent = attrs[k];
      else el.setAttribute(k, attrs[k]);
    });
    return el;
  }
  // Holders take distinct colours by name order (no red: red means trouble here).
  var PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#9c755f", "#bab0ac", "#86bcb6", "#d4a6c8"];
  var colours = {};
  function setColours(p) {
    var names = {};
    p.lanes.forEach(function (l) { l.segments.forEach(function (g) { if (g.holder) names[g.holder] = 1; }); });
    colours = {};
    Object.keys(names).sort().forEach(function (n, i) {
      colours[n] = i < PALETTE.length ? PALETTE[i] : "hsl(" + Math.round(i * 137.5) % 360 + ",45%,60%)";
    });
  }
  function colour(name) { return colours[name] || "#bbb"; }
  var FILL = { released: "#e0e0e0", expired: "#ffcdd2", vacant: "#ffcdd2", unowned: "#c62828" };
  function bar(svg, x0, x1, y, h, seg, lane, label, tip) {
    var held = seg.holder && (seg.state === "live" || seg.state === "unknown" || seg.state === "not_renewed");
    var r = s("rect", { x: x0, y: y, width: x1 - x0, height: h, fill: held ? colour(seg.holder) : FILL[seg.state] || "#fff" });
    r.dataset.lane = lane;
    r.dataset.state = seg.state;
    r.dataset.holder = seg.holder || "";
    r.appendChild(s("title", { text: tip }));
    svg.appendChild(r);
    if (seg.state === "not_renewed") svg.appendChild(s("rect", { x: x0, y: y, width: x1 - x0, height: h, fill: "url(#fs-risk)" }));
    if (label && x1 - x0 > 7 * label.length + 8) svg.appendChild(s("text", { x: x0 + 4, y: y + h - 6, text: label }));
  }
  function renderPicture(p) {
    var box = $("ownership");
    setColours(p);
    var W = Math.max(box.clientWidth || 1000, 480), LABEL = 64, ROW = 24, AXIS = 18;
    var rows = p.lanes.length + 1;
    var svg = s("svg", { viewBox: "0 0 " + W + " " + (rows * ROW + AXIS), width: "100%", role: "img", "aria-label": "shard holders over time" });
    var pat = s("pattern", { id: "fs-risk", patternUnits: "userSpaceOnUse", width: 6, height: 6, patternTransform: "rotate(45)" });
    pat.appendChild(s("rect", { width: 2, height: 6, fill: "#c62828" }));
    var defs = s("defs");
    defs.appendChild(pat);
    svg.appendChild(defs);
    var span = Math.max(p.to_secs - p.from_secs, 1);
    var x = function (t) { return LABEL + (t - p.from_secs) / span * (W - LABEL - 4); };
    var ago = function (t) { return (p.to_secs - t).toFixed(0) + " s ago"; };
    var seg = function (lane, y, label, tip) {
      return function (g) {
        var x0 = x(g.from_secs), x1 = Math.max(x(g.to_secs), x0 + 2);
        bar(svg, x0, x1, y + 2, ROW - 4, g, lane, label(g), tip(g) + " (" + ago(g.from_secs) + " to " + ago(g.to_secs) + ")");
      };
    };
    p.lanes.forEach(function (lane, i) {
      var y = i * ROW;
      svg.appendChild(s("text", { x: 4, y: y + ROW - 8, text: "shard " + lane.shard }));
      lane.segments.forEach(seg(String(lane.shard), y,
        function (g) { return g.holder && g.state !== "released" ? g.holder + " · " + g.clusters : ""; },
        function (g) { return "shard " + lane.shard + ": " + (g.holder || "no holder") + ", " + g.state.replace("_", " ") + ", " + g.clusters + " cluster(s)"; }));
    });
    var y = p.lanes.length * ROW;
    svg.appendChild(s("text", { x: 4, y: y + ROW - 8, text: "unowned" }));
    p.unowned.filter(function (g) { return g.clusters > 0; }).forEach(seg("unowned", y,
      function (g) { return String(g.clusters); },
      function (g) { return g.clusters + " cluster(s) without an owner"; }));
    [0, 0.25, 0.5, 0.75, 1].forEach(function (f) {
      var t = p.from_secs + f * span;
      svg.appendChild(s("text", { x: Math.min(x(t), W - 40), y: rows * ROW + AXIS - 4, "class": "axis", text: f === 1 ? "now" : "-" + (p.to_secs - t).toFixed(0) + " s" }));
    });
    box.replaceChildren(svg);
    $("ownership-span").textContent = "last " + span.toFixed(0) + " s";
  }

  function renderProcesses(procs, f) {
    var box = $("processes");
    box.replaceChildren();
    procs.forEach(function (p) {
      var held = f.shards.filter(function (s) { return s.holder === p.identity; }).map(function (s) { return s.shard; });
      var row = h("div", { cls: "proc", "data-replica": p.identity },
        h("b", { text: p.identity }),
        h("span", { text: p.state + (p.pid ? " pid " + p.pid : "") + (held.length ? ", shard " + held.join(",") : ""), cls: p.state === "running" ? "ok" : "bad" }),
        h("a", { href: p.url, text: "own page", target: "_blank" }));
      ["kill", "pause", "resume", "restart"].forEach(function (act) {
        row.appendChild(h("button", { "data-action": act, "data-replica": p.identity, text: act }));
      });
      box.appendChild(row);
    });
    var input = $("shards");
    if (document.activeElement !== input && !input.value) input.value = f.desired_shards || f.shard_count;
  }

  function act(body) {
    $("result").textContent = body.action + "…";
    return fetch("/api/dashboard/control", {
      method: "POST",
      headers: { "content-type": "application/json", "x-fleetshard-token": token },
      body: JSON.stringify(body),
    }).then(function (r) { return r.text(); })
      .then(function (t) { $("result").textContent = t; })
      .catch(function (e) { $("result").textContent = "failed: " + e; });
  }

  if (controls) {
    $("controls").hidden = false;
    $("controls").addEventListener("click", function (ev) {
      var b = ev.target.closest("button");
      if (!b) return;
      var body = { action: b.dataset.action };
      if (b.dataset.replica) body.replica = b.dataset.replica;
      if (body.action === "scale") body.shards = parseInt($("shards").value, 10);
      act(body);
    });
  }

  function connect() {
    var es = new EventSource("/api/dashboard/events");
    es.onopen = function () { $("conn").textContent = "live"; };
    es.onmessage = function (m) {
      window.lastUpdate = Date.now();
      render(JSON.parse(m.data));
    };
    es.onerror = function () { $("conn").textContent = "reconnecting…"; };
  }
  connect();
})();
