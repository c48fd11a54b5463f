// kgate status page: reads this node's admin API every two seconds and
// redraws. Plain DOM, no framework; every name from the cluster goes in as
// text, never as HTML.
"use strict";

const REFRESH_MS = 2000;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

function badge(text, kind) {
  return el("span", { class: "badge " + kind }, text);
}

const nodeStateKind = { alive: "ok", suspect: "warn", failed: "bad", left: "off" };
const groupStateKind = {
  Stable: "ok", PreparingRebalance: "warn", CompletingRebalance: "warn", Empty: "off", Dead: "bad",
};

function num(n) {
  return n === null || n === undefined || n < 0 ? "–" : n.toLocaleString("en-US");
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store" });
  if (!r.ok) throw new Error(path + " answered " + r.status);
  return r.json();
}

function fill(tbody, rows, emptyText, cols) {
  tbody.replaceChildren(...(rows.length ? rows : [el("tr", { class: "empty" }, el("td", { colspan: cols }, emptyText))]));
}

function renderCluster(c) {
  document.getElementById("cluster-id").textContent = c.cluster_id || "(not yet assigned)";
  document.getElementById("leader").textContent = c.leader_id === null ? "none" : "node " + c.leader_id;
  const alive = c.nodes.filter((n) => n.gossip_state === "alive").length;
  document.getElementById("nodes-alive").textContent = alive + " / " + c.nodes.length;
  fill(document.querySelector("#nodes tbody"), c.nodes.map((n) => {
    const here = n.admin_addr === location.host ? el("span", { class: "this" }, " (this page)") : null;
    const role = n.leader ? el("span", { class: "role-leader" }, "leader") : n.voter ? "voter" : n.suffrage === "nonvoter" ? "non-voter, catching up" : "not a voter";
    const admin = n.admin_addr ? el("a", { href: "http://" + n.admin_addr + "/" }, n.admin_addr) : "–";
    return el("tr", { "data-node": n.id },
      el("td", {}, "node " + n.id, here),
      el("td", {}, badge(n.gossip_state, nodeStateKind[n.gossip_state] || "off")),
      el("td", {}, role),
      el("td", { class: "mono" }, n.kafka_addr || "–"),
      el("td", { class: "mono" }, n.raft_addr || "–"),
      el("td", { class: "mono" }, admin));
  }), "no nodes", 6);
}

function renderTopics(t) {
  document.getElementById("topic-count").textContent = t.topics.length;
  const rows = [];
  for (const topic of t.topics) {
    const records = topic.partitions.reduce((s, p) => s + Math.max(p.high_watermark - p.log_start_offset, 0), 0);
    rows.push(el("tr", { class: "main", "data-topic": topic.name },
      el("td", {}, topic.name),
      el("td", {}, topic.partitions.length + (topic.partitions.length === 1 ? " partition" : " partitions")),
      el("td", { class: "num" }), el("td", { class: "num" }),
      el("td", { class: "num" }, num(records)),
      el("td", { class: "num" }, bytes(topic.size_bytes))));
    for (const p of topic.partitions) {
      rows.push(el("tr", { class: "sub" },
        el("td", {}, "partition " + p.partition),
        el("td", {}, p.error ? badge(p.error, "bad") : p.leader < 0 ? "none" : "node " + p.leader),
        el("td", { class: "num" }, num(p.log_start_offset)),
        el("td", { class: "num" }, num(p.high_watermark)),
        el("td", { class: "num" }, num(p.high_watermark - p.log_start_offset)),
        el("td", { class: "num" }, bytes(p.size_bytes))));
    }
  }
  fill(document.querySelector("#topics tbody"), rows, "no topics yet", 6);
}

function renderGroups(details) {
  document.getElementById("group-count").textContent = details.length;
  let total = 0;
  const rows = [];
  for (const g of details) {
    total += g.total_lag;
    const members = g.members.length
      ? g.members.map((m) => el("span", { class: "member" }, m.client_id || m.member_id,
          el("span", { class: "host" }, " " + m.client_host)))
      : ["no members"];
    rows.push(el("tr", { class: "main", "data-group": g.group },
      el("td", {}, g.group),
      el("td", {}, badge(g.state, groupStateKind[g.state] || "off")),
      el("td", { class: "num" }, g.generation),
      el("td", {}, ...members),
      el("td", { class: "num" }),
      el("td", { class: "num" + (g.total_lag > 0 ? " lag-high" : "") }, num(g.total_lag))));
    const clientOf = Object.fromEntries(g.members.map((m) => [m.member_id, m.client_id || m.member_id]));
    for (const o of g.offsets) {
      rows.push(el("tr", { class: "sub" },
        el("td", {}, o.topic + " / " + o.partition),
        el("td", {}), el("td", {}),
        el("td", {}, o.member ? clientOf[o.member] || o.member : "unassigned"),
        el("td", { class: "num" }, num(o.committed)),
        el("td", { class: "num" + (o.lag > 0 ? " lag-high" : "") }, o.lag === null ? "–" : num(o.lag))));
    }
  }
  document.getElementById("total-lag").textContent = num(total);
  fill(document.querySelector("#groups tbody"), rows, "no consumer groups yet", 6);
}

function setStatus(kind, text) {
  const s = document.getElementById("status");
  s.className = "status " + kind;
  s.textContent = text;
}

async function refresh() {
  try {
    const [cluster, topics, list] = await Promise.all([getJSON("/v1/cluster"), getJSON("/v1/topics"), getJSON("/v1/groups")]);
    // A group deleted between the list and its detail answers 404: skip it.
    const details = (await Promise.all(list.groups.map((g) =>
      getJSON("/v1/groups/" + encodeURIComponent(g.group)).catch(() => null)))).filter((d) => d);
    renderCluster(cluster);
    renderTopics(topics);
    renderGroups(details);
    setStatus("ok", "live · " + new Date().toLocaleTimeString());
  } catch (e) {
    setStatus("error", "cannot reach this node: " + e.message);
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

getJSON("/v1/version").then((v) => {
  document.getElementById("version").textContent = "version " + v.version;
}).catch(() => {});
refresh();
