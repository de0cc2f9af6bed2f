"use strict";
// The list of runs, polled: a run started by the CLI in the same directory shows up too.
const POLL_MS = 1000;
let rows = [];

// What sets a finished run apart from a plain verdict: no voice answered, or the
// deliberation halted for a person to decide.
function marks(run) {
  const list = [];
  if (run.status === "no_verdict" || (run.status === "complete" && run.voices_valid === 0)) {
    list.push(["empty", "no verdict"]);
  }
  if (run.halted) list.push(["halted", "halted"]);
  return list;
}

function stampCell(run, running, empty) {
  // A running council's stamp is from a round that is not the last: not its verdict yet.
  if (running) return [el("span", { class: "muted" }, "pending")];
  if (empty) return [el("span", { class: "muted" }, "none: no voice answered")];
  return [run.decorrelation ? badge(run.decorrelation) : "",
    run.partial ? el("span", { class: "muted" }, " partial") : null];
}

function row(run) {
  const running = run.status === "running" || run.status === "queued";
  const time = running ? seconds(since(run.started_at)) : seconds(run.duration_s);
  const found = marks(run);
  const empty = found.some(([kind]) => kind === "empty");
  const tr = el("tr", {
    "data-run": run.id, "data-status": run.status,
    "data-marks": found.length ? found.map(([kind]) => kind).join(" ") : null,
  },
  labelled(el("td", {}, empty ? null : badge(run.status),
    ...found.map(([kind, text]) => el("div", {}, el("span", { class: "badge mark s-" + kind, "data-mark": kind }, text)))), "Status"),
  labelled(el("td", {}, el("a", { href: "/runs/" + encodeURIComponent(run.id) },
    run.question || run.id), el("div", { class: "muted" }, run.id)), "Question"),
  labelled(el("td", {}, ...stampCell(run, running, empty)), "Stamp"),
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
