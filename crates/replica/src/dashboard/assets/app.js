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

    table($("shards-table"), ["shard", "holder", "zone", "lease", "clusters", "apps", "load"],
      f.shards.map(function (s) {
        return { cells: [s.shard, s.holder, s.zone, leaseCell(s), s.clusters, s.apps, s.load] };
      }));
    $("unowned-count").textContent = f.unowned ? f.unowned + " without an owner" : "all owned";
    table($("clusters-table"), ["cluster", "server", "zone", "shard", "owner", "apps", "synced", "healthy", "errors"],
      f.clusters.map(function (c) {
        return {
          attrs: { cls: c.state === "unowned" ? "unowned" : "", "data-state": c.state },
          cells: [c.name || c.id, c.server, c.zone, c.shard, c.owner || c.state, c.apps,
            { text: String(c.synced), cls: c.synced < c.apps ? "warn" : "ok" },
            { text: String(c.healthy), cls: c.healthy < c.apps ? "warn" : "ok" },
            { text: String(c.errors), cls: c.errors ? "bad" : "" }],
        };
      }));
    table($("apps-table"), ["app", "cluster", "sync", "health", "condition"],
      f.app_problems.map(function (p) { return { cells: [p.app, p.cluster, p.sync, p.health, p.condition] }; }));

    var tl = $("timeline");
    tl.replaceChildren();
    f.timeline.slice().reverse().forEach(function (e) {
      var li = h("li", { "data-kind": e.kind, value: e.seq + 1, text: e.at_secs.toFixed(1) + " s  " + e.text });
      tl.appendChild(li);
    });

    if (controls) renderProcesses(page.processes, f);
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
