"use strict";
// The statistics of the run history: the same tables as `rune council stats`, built from
// /v1/stats/tables, and the pictures the server draws. Every cell goes in as text.

function windowQuery() {
  const since = new URLSearchParams(location.search).get("since");
  return since ? "?since=" + encodeURIComponent(since) : "";
}

function table(t) {
  const head = el("tr", {}, ...t.headers.map((h) => el("th", {}, h)));
  const rows = t.rows.map((row) =>
    el("tr", {}, ...row.map((cell, i) => labelled(el("td", {}, cell), t.headers[i] || ""))));
  return el("section", { class: "stats-table" },
    el("h2", {}, t.title),
    t.rows.length
      ? el("table", { class: "stack" }, el("thead", {}, head), el("tbody", {}, ...rows))
      : el("p", { class: "muted" }, "(none)"),
    t.note ? el("p", { class: "muted" }, t.note) : null);
}

function picture(p) {
  return el("figure", { "data-picture": p.name },
    el("img", { src: safeHref(p.url), alt: p.caption, class: "stats-picture" }),
    el("figcaption", { class: "muted" }, p.caption));
}

async function load() {
  try {
    const view = await getJSON("/v1/stats/tables" + windowQuery());
    document.getElementById("summary").textContent = view.summary;
    replace(document.getElementById("tables"), ...view.tables.map(table));
    const pictures = document.getElementById("pictures");
    replace(pictures, ...view.pictures.map(picture),
      view.note ? el("p", { class: "muted" }, view.note) : null);
  } catch (err) {
    document.getElementById("conn").textContent = "(cannot load the statistics: " + err.message + ")";
  }
}

load();
