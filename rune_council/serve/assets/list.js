"use strict";
// The list of runs, polled: a run started by the CLI in the same directory shows up too.
const POLL_MS = 1000;
let rows = [];

function row(run) {
  const running = run.status === "running" || run.status === "queued";
  const time = running ? seconds(since(run.started_at)) : seconds(run.duration_s);
  const tr = el("tr", { "data-run": run.id, "data-status": run.status },
    labelled(el("td", {}, badge(run.status)), "Status"),
    labelled(el("td", {}, el("a", { href: "/runs/" + encodeURIComponent(run.id) },
      run.question || run.id), el("div", { class: "muted" }, run.id)), "Question"),
    labelled(el("td", {}, run.decorrelation ? badge(run.decorrelation) : "",
      run.partial ? el("span", { class: "muted" }, " partial") : null), "Stamp"),
    labelled(el("td", { class: "num" }, run.voices_valid + "/" + run.voices_requested), "Voices"),
    labelled(el("td", { class: "num", "data-started": running ? run.started_at : null }, time), "Time"),
    labelled(el("td", { class: "muted" }, (run.started_at || "").replace("T", " ").slice(0, 19)), "Started"));
  return tr;
}

async function refresh() {
  try {
    const page = await getJSON("/v1/councils?limit=100");
    rows = page.items;
    replace(document.querySelector("#runs tbody"), ...rows.map(row));
    document.getElementById("empty").hidden = rows.length > 0;
    document.getElementById("conn").textContent = "";
  } catch (err) {
    document.getElementById("conn").textContent = "(cannot reach the server: " + err.message + ")";
  }
}

function tick() {
  for (const cell of document.querySelectorAll("td[data-started]")) {
    cell.textContent = seconds(since(cell.getAttribute("data-started")));
  }
}

refresh();
setInterval(refresh, POLL_MS);
setInterval(tick, 250);
