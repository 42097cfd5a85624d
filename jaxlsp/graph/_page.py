"""The static parts of the HTML export (see :func:`jaxlsp.graph.export.to_html`).

No URL anywhere: the page is one offline file, and its Content-Security-Policy forbids every
network request. The script builds elements with ``textContent`` only and renders a group's
children when it is first opened, in chunks, so 20,000 nodes cost one ``JSON.parse`` up front.
"""

from __future__ import annotations

HEAD = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; \
script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="jaxlsp">
<title>jaxlsp graph: $TITLE</title>
"""

STYLE = """:root { color-scheme: light dark; --dim: #777; --hl: rgba(255, 200, 0, 0.25);
  --line: rgba(127, 127, 127, 0.3); }
body { font: 13px/1.45 system-ui, sans-serif; margin: 0 1.2em 2em; }
.banner { margin: 0 -1.2em 1em; padding: 0.5em 1.2em; background: rgba(255, 170, 0, 0.18);
  border-bottom: 1px solid var(--line); }
h1 { font-size: 1.25em; margin: 0.4em 0; font-family: ui-monospace, monospace; word-break: break-all; }
pre#summary { font: 12px/1.4 ui-monospace, monospace; padding: 0.6em 0.8em; border: 1px solid var(--line);
  border-radius: 4px; overflow-x: auto; }
.bar { position: sticky; top: 0; padding: 0.5em 0; display: flex; gap: 0.8em; align-items: center;
  background: Canvas; z-index: 1; }
#search { flex: 1; max-width: 40em; font: inherit; padding: 0.3em 0.5em; }
#count { color: var(--dim); }
details { margin-left: 1.1em; }
details > summary { cursor: pointer; padding: 1px 0; }
details > summary:hover, .node:hover { background: var(--hl); }
.kind { display: inline-block; min-width: 6.5em; font-size: 11px; color: var(--dim); text-transform: uppercase; }
.glabel { font-family: ui-monospace, monospace; }
.cnt, .dim { color: var(--dim); }
.children { border-left: 1px solid var(--line); margin-left: 0.35em; }
.node { margin-left: 1.1em; padding: 1px 0 1px 1.1em; font: 12px/1.45 ui-monospace, monospace; cursor: pointer;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.prim { font-weight: 600; }
.shape { color: #2a7ab0; }
.scope { color: #8a5a00; margin-left: 1em; }
.src { color: var(--dim); margin-left: 1em; }
.detail { margin: 0 0 0.4em 2.2em; padding: 0.4em 0.6em; border-left: 3px solid var(--line);
  font: 12px/1.4 ui-monospace, monospace; white-space: pre-wrap; word-break: break-all; }
button.more { margin: 0.3em 0 0.3em 2.2em; font: inherit; }
"""

BODY = """<div class="banner" role="note"><strong>Static export.</strong> This page is a snapshot of a
traced program (traced, not executed). Go-to-source, hover and live updates need the language
server (<code>jaxlsp serve</code> in your editor); source positions below are plain text.</div>
<h1>$TITLE</h1>
"""

TREE = """<div class="bar"><input id="search" type="search" autocomplete="off" spellcheck="false"
placeholder="Filter by op, scope or shape: dot_general  Dense_0  f32[4,128]" aria-label="Filter nodes">
<span id="count"></span></div>
<div id="tree"></div>
<div id="results" hidden></div>
<noscript><p>The group tree needs JavaScript; the summary above is complete.</p></noscript>
"""

SCRIPT = r"""(function () {
  "use strict";
  var CHUNK = 300;
  var MAX_RESULTS = 500;
  var G = JSON.parse(document.getElementById("graph-data").textContent);
  var values = new Map();
  var groups = new Map();
  var nodeIndex = new Map();
  var i;
  for (i = 0; i < G.values.length; i++) values.set(G.values[i].id, G.values[i]);
  for (i = 0; i < G.groups.length; i++) groups.set(G.groups[i].id, G.groups[i]);
  for (i = 0; i < G.nodes.length; i++) nodeIndex.set(G.nodes[i].id, i);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function shortDtype(d) {
    return d.replace(/float/g, "f").replace(/uint/g, "u").replace(/int/g, "i").replace(/complex/g, "c");
  }
  function shapeOf(id) {
    var v = values.get(id);
    if (!v) return "?" + id;
    var s = shortDtype(v.dtype) + "[" + v.shape.join(",") + "]";
    if (v.kind === "literal" && v.literal !== undefined) {
      var lit = JSON.stringify(v.literal);
      if (lit.length > 24) lit = lit.slice(0, 23) + "\u2026";
      s = lit + ":" + s;
    }
    return s;
  }
  function where(n) {
    return n.source ? n.source.path + ":" + n.source.line : "";
  }
  function parentOf(g) {
    return g.parent !== null && groups.has(g.parent) ? g.parent : "";
  }

  // Children of each container ("" is the top level), and each group's inclusive node count.
  var kids = new Map();
  function slot(key) {
    var s = kids.get(key);
    if (!s) { s = { groups: [], nodes: [] }; kids.set(key, s); }
    return s;
  }
  var size = new Map();
  var first = new Map();
  G.groups.forEach(function (g) { slot(parentOf(g)).groups.push(g); size.set(g.id, 0); });
  G.nodes.forEach(function (n, idx) {
    var key = n.group !== null && groups.has(n.group) ? n.group : "";
    slot(key).nodes.push(n);
    var seen = 0;
    while (key !== "" && seen++ <= G.groups.length) {
      size.set(key, size.get(key) + 1);
      if (!first.has(key)) first.set(key, idx);
      key = parentOf(groups.get(key));
    }
  });
  function orderOf(g) {
    var k = first.has(g.id) ? first.get(g.id) : Infinity;
    if (g.node !== null && nodeIndex.has(g.node)) k = Math.min(k, nodeIndex.get(g.node) + 0.5);
    return k;
  }
  // A container's children in program order: a region sits right after the equation owning it.
  function childrenOf(key) {
    var s = kids.get(key);
    if (!s) return [];
    var items = [];
    s.nodes.forEach(function (n) { items.push({ k: nodeIndex.get(n.id), node: n }); });
    s.groups.forEach(function (g) { items.push({ k: orderOf(g), group: g }); });
    items.sort(function (a, b) { return a.k - b.k; });
    return items;
  }
  function groupPath(id) {
    var names = [];
    var seen = 0;
    while (id !== null && groups.has(id) && seen++ <= G.groups.length) {
      var g = groups.get(id);
      names.unshift(g.label || g.kind);
      id = g.parent;
    }
    return names.join(" \u203a ");
  }

  function nodeRow(n, withPath) {
    var row = el("div", "node");
    row.title = n.id;
    row.appendChild(el("span", "prim", n.primitive));
    row.appendChild(document.createTextNode(" "));
    row.appendChild(el("span", "shape", "(" + n.inputs.map(shapeOf).join(", ") + ") \u2192 " +
      n.outputs.map(shapeOf).join(", ")));
    if (n.scope) row.appendChild(el("span", "scope", n.scope));
    if (withPath && n.group !== null) row.appendChild(el("span", "dim", "  in " + groupPath(n.group)));
    var at = where(n);
    if (at) row.appendChild(el("span", "src", at));
    var detail = null;
    row.addEventListener("click", function () {
      if (detail) { detail.hidden = !detail.hidden; return; }
      var text = "node " + n.id + "  " + n.primitive;
      if (n.transforms.length) text += "\ntransforms: " + n.transforms.join(", ");
      text += "\ninputs:  " + n.inputs.map(function (v) { return v + " " + shapeOf(v); }).join(", ");
      text += "\noutputs: " + n.outputs.map(function (v) { return v + " " + shapeOf(v); }).join(", ");
      var params = JSON.stringify(n.params, null, 1);
      if (params.length > 4000) params = params.slice(0, 4000) + "\u2026";
      text += "\nparams: " + params;
      if (n.frames.length) {
        text += "\nframes (innermost first):";
        n.frames.forEach(function (f) {
          text += "\n  " + f.path + ":" + f.line + ":" + (f.column + 1) + (f.function ? "  " + f.function : "");
        });
      }
      detail = el("div", "detail", text);
      row.parentNode.insertBefore(detail, row.nextSibling);
    });
    return row;
  }

  function groupBox(g) {
    var box = el("details", "group");
    var head = el("summary");
    head.appendChild(el("span", "kind", g.kind));
    head.appendChild(el("span", "glabel", g.label));
    var n = size.get(g.id) || 0;
    head.appendChild(el("span", "cnt", "  " + n.toLocaleString() + (n === 1 ? " op" : " ops")));
    box.appendChild(head);
    var body = null;
    box.addEventListener("toggle", function () {
      if (box.open && body === null) {
        body = el("div", "children");
        box.appendChild(body);
        fill(body, childrenOf(g.id), 0);
      }
    });
    return box;
  }

  // Render items[from...] in chunks: a "show more" button stands for the rest.
  function fill(parent, items, from) {
    var end = Math.min(items.length, from + CHUNK);
    for (var j = from; j < end; j++) {
      var it = items[j];
      parent.appendChild(it.node ? nodeRow(it.node, false) : groupBox(it.group));
    }
    if (end < items.length) {
      var more = el("button", "more", "show " + Math.min(CHUNK, items.length - end) + " more of " +
        (items.length - end).toLocaleString());
      more.addEventListener("click", function () {
        parent.removeChild(more);
        fill(parent, items, end);
      });
      parent.appendChild(more);
    }
  }

  var tree = document.getElementById("tree");
  var results = document.getElementById("results");
  var count = document.getElementById("count");
  var search = document.getElementById("search");
  fill(tree, childrenOf(""), 0);
  count.textContent = G.nodes.length.toLocaleString() + " ops";

  var hay = null;
  function haystack() {
    if (hay === null) {
      hay = G.nodes.map(function (n) {
        var g = n.group !== null && groups.has(n.group) ? groups.get(n.group) : null;
        return [n.id, n.primitive, n.scope, n.inputs.map(shapeOf).join(" "), n.outputs.map(shapeOf).join(" "),
          where(n), n.transforms.join(" "), g ? g.kind + " " + g.label : ""].join("\n").toLowerCase();
      });
    }
    return hay;
  }
  function runSearch() {
    var terms = search.value.toLowerCase().split(/\s+/).filter(function (t) { return t.length > 0; });
    results.textContent = "";
    if (terms.length === 0) {
      results.hidden = true;
      tree.hidden = false;
      count.textContent = G.nodes.length.toLocaleString() + " ops";
      return;
    }
    var h = haystack();
    var hits = [];
    for (var j = 0; j < h.length; j++) {
      var ok = true;
      for (var t = 0; t < terms.length && ok; t++) ok = h[j].indexOf(terms[t]) >= 0;
      if (ok) hits.push({ k: j, node: G.nodes[j] });
    }
    count.textContent = hits.length.toLocaleString() + " of " + G.nodes.length.toLocaleString() + " ops match";
    tree.hidden = true;
    results.hidden = false;
    var shown = hits.slice(0, MAX_RESULTS);
    shown.forEach(function (it) { results.appendChild(nodeRow(it.node, true)); });
    if (hits.length > MAX_RESULTS) {
      results.appendChild(el("div", "dim", "\u2026 " + (hits.length - MAX_RESULTS).toLocaleString() +
        " more: refine the filter"));
    }
  }
  var timer = null;
  search.addEventListener("input", function () {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(runSearch, 120);
  });
  window.jaxlspGraph = { graph: G, childrenOf: childrenOf, runSearch: runSearch };
})();
"""
