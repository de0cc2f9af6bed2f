"use strict";
// One council, live: the run file is re-read whenever its event stream reports a transition.
const runId = decodeURIComponent(location.pathname.replace(/^\/runs\//, ""));
const api = "/v1/councils/" + encodeURIComponent(runId);
let current = null;
let ended = null;
let pending = null;

document.getElementById("raw").setAttribute("href", api);

function voiceStart(run, voiceId) {
  let start = null;
  for (const event of run.events || []) {
    if (event.voice_id === voiceId && event.status === "running") start = event.at;
  }
  return start;
}

function voiceTime(run, voice) {
  if (voice.status === "running") {
    const start = voiceStart(run, voice.id);
    return { text: start ? seconds(since(start)) : "", start };
  }
  if (voice.latency_ms !== null && voice.latency_ms !== undefined) {
    return { text: seconds(voice.latency_ms / 1000), start: null };
  }
  return { text: "", start: null };
}

function voiceRow(run, voice) {
  const time = voiceTime(run, voice);
  const role = voice.slot_role + (voice.persona ? " (" + voice.persona + ")" : "");
  const who = el("td", {}, el("b", {}, voice.id), " ", voice.runtime,
    voice.model ? el("div", { class: "muted" }, voice.model) : null,
    voice.is_fallback ? el("div", { class: "muted" }, "fallback") : null);
  const stance = voice.status === "dropped"
    ? el("td", { class: "muted" }, voice.drop_reason || "")
    : el("td", {}, voice.stance || "");
  return el("tr", { "data-voice": voice.id, "data-status": voice.status },
    labelled(who, "Voice"),
    labelled(el("td", {}, voice.model_family,
      el("div", { class: "muted" }, voice.family_confidence)), "Family"),
    labelled(el("td", {}, role), "Role"),
    labelled(el("td", { class: "status" }, badge(voice.status)), "Status"),
    labelled(el("td", { class: "num timer", "data-started": time.start }, time.text), "Time"),
    labelled(stance, "Stance"));
}

function claimIndex(run) {
  const index = {};
  for (const voice of run.voices || []) {
    for (const claim of voice.claims || []) index[claim.id] = { claim, voice };
  }
  return index;
}

function section(title, ...children) {
  return [el("h2", {}, title), ...children];
}

function metaList(pairs) {
  const dl = el("dl", { class: "meta" });
  for (const [key, value] of pairs) {
    if (value === null || value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    const shown = Array.isArray(value)
      ? value.map((v) => (typeof v === "object" ? JSON.stringify(v) : v)).join(", ")
      : typeof value === "object" ? JSON.stringify(value) : String(value);
    dl.append(el("dt", {}, key), el("dd", {}, shown));
  }
  return dl;
}

function stampBlock(run) {
  const stamp = run.decorrelation || run.status;
  return el("div", { id: "stamp" },
    el("span", { class: "stamp s-" + stamp }, stamp),
    run.partial ? el("div", { class: "partial" }, "Partial council: " + run.partial.detail) : null,
    el("div", { class: "muted" },
      "families: " + ((run.distinct_families || []).join(", ") || "none") +
      " · valid voices " + run.voices_valid + "/" + run.voices_requested +
      (ended === "abandoned" ? " · the writer died: this run will not finish" : "")));
}

function consensusBlock(run, claims) {
  const list = (run.agreement && run.agreement.consensus_claims) || [];
  if (!list.length) return section("Consensus", el("p", { class: "muted" }, "No cross-family consensus."));
  return section("Consensus", ...list.map((item) => el("div", { class: "card consensus" },
    el("div", {}, item.severity ? badge(item.severity) : null, " ", item.claim),
    el("div", { class: "muted" }, "families: " + item.families.join(", ") +
      " · matched by " + item.matched_by.method + " on " + item.matched_by.key),
    ...item.claim_ids.map((id) => {
      const found = claims[id];
      if (!found) return el("div", { class: "wording" }, id);
      return el("div", { class: "wording" },
        el("b", {}, found.voice.id + " " + found.voice.runtime + " (" + found.voice.model_family + "): "),
        found.claim.text);
    }))));
}

function dissentBlock(run) {
  const list = (run.agreement && run.agreement.dissent) || [];
  if (!list.length) return section("Dissent", el("p", { class: "muted" }, "None recorded."));
  return section("Dissent", ...list.map((item) => el("div", { class: "card dissent" },
    el("div", {}, badge(item.label), " ", item.severity ? badge(item.severity) : null, " ", item.claim),
    el("div", { class: "muted" }, "voices: " + item.voice_ids.join(", ") +
      (item.families.length ? " · families: " + item.families.join(", ") : "")),
    item.detail ? el("div", { class: "muted" }, item.detail) : null)));
}

function checksBlock(run) {
  const checks = run.checks || {};
  const cards = [];
  for (const [name, check] of Object.entries(checks)) {
    if (!check) continue;
    cards.push(el("div", { class: "card" }, el("b", {}, name.replace("_", " ")), " ",
      badge(check.outcome), el("div", { class: "muted" },
        (check.voice_id ? check.voice_id + " · " : "") +
        (check.reserved ? "reserved" : "not reserved") + " · " +
        (check.dispatched ? "dispatched" : "not dispatched")),
      check.detail ? el("div", {}, check.detail) : null));
  }
  return section("Checks", ...(cards.length ? cards : [el("p", { class: "muted" }, "No slot checks.")]));
}

function decisionBlock(run) {
  return section("Needs decision", el("div", { class: "card", id: "needs-decision" },
    el("b", {}, run.needs_decision ? "Yes" : "No"),
    run.decision ? el("div", { class: "text" }, run.decision) : null));
}

function voteTable(vote) {
  const body = el("tbody", {}, ...vote.items.map((item) => el("tr", {},
    labelled(el("td", {}, String(item.number)), "#"),
    labelled(el("td", {}, item.text), "Item"),
    labelled(el("td", { class: "num" }, item.yes.length + " / " + item.no.length + " / " + item.abstain.length), "Yes/No/Abstain"),
    labelled(el("td", { class: "num" }, String(item.required)), "Needed"),
    labelled(el("td", {}, badge(item.outcome)), "Outcome"))));
  return [
    el("div", { class: "muted" }, "threshold " + vote.threshold.toFixed(2) + " · ballots counted " + vote.denominator +
      (vote.absent.length ? " · absent: " + vote.absent.map((a) => a.voice_id + " (" + a.reason + ")").join("; ") : "")),
    el("table", { class: "stack" }, el("thead", {}, el("tr", {}, ...["#", "Item", "Yes/No/Abstain", "Needed", "Outcome"].map((h) => el("th", {}, h)))), body),
  ];
}

function rankTable(rank) {
  const tally = rank.tally;
  const text = {};
  for (const p of rank.proposals) text[p.label] = p.voice_id + ": " + p.summary;
  const body = el("tbody", {}, ...tally.scores.map((score) => el("tr", {},
    labelled(el("td", {}, score.label), "Proposal"),
    labelled(el("td", {}, text[score.label] || score.text || ""), "Answer"),
    labelled(el("td", { class: "num" }, score.score.toFixed(2)), "Borda × conf"),
    labelled(el("td", {}, score.blocked ? badge("blocked") : ""), "Blocked"))));
  const w = tally.consensus;
  return [
    el("div", { class: "muted" }, "winner " + (tally.winner || "none") + " · Kendall's W " +
      (w.w === null ? "n/a" : w.w.toFixed(3)) + (w.label ? " (" + w.label + ")" : "") +
      (tally.dissenters.length ? " · dissent: " + tally.dissenters.join(", ") : "")),
    el("table", { class: "stack" }, el("thead", {}, el("tr", {}, ...["Proposal", "Answer", "Borda × conf", "Blocked"].map((h) => el("th", {}, h)))), body),
  ];
}

function deliberationBlock(run) {
  const d = run.deliberation;
  if (!d || !d.method) return [];
  const parts = [el("div", { class: "muted" }, d.method + " · " + d.council_type +
    (d.converged_early ? " · converged early" : "") + (d.divergence_detected ? " · divergence detected" : "") +
    (d.halted ? " · halted" : ""))];
  if (d.vote) parts.push(el("h3", {}, "Vote"), ...voteTable(d.vote));
  if (d.rank) parts.push(el("h3", {}, "Ranking"), ...rankTable(d.rank));
  if (d.synthesis) {
    parts.push(el("h3", {}, "Synthesis"), el("div", { class: "card text" }, d.synthesis.text),
      el("div", { class: "muted" }, d.synthesis.fallback ? "written by the arithmetic (" + (d.synthesis.fallback_reason || "") + ")" : "by " + (d.synthesis.by || "?")));
    if (d.synthesis.open_questions.length) {
      parts.push(el("div", {}, "Open questions:"), el("ul", {}, ...d.synthesis.open_questions.map((q) => el("li", {}, q))));
    }
  }
  if (d.risk_register) {
    parts.push(el("h3", {}, "Risk register"), el("div", { class: "card text" }, d.risk_register.summary),
      ...d.risk_register.risks.map((r) => el("div", { class: "card" }, badge(r.severity), " ", r.category + ": ", r.description)));
  }
  if (d.rounds && d.rounds.length) {
    parts.push(el("h3", {}, "Rounds"), el("table", { class: "stack" },
      el("thead", {}, el("tr", {}, ...["Round", "Consensus", "Delta", "Diverged"].map((h) => el("th", {}, h)))),
      el("tbody", {}, ...d.rounds.map((r) => el("tr", {},
        labelled(el("td", {}, String(r.round)), "Round"),
        labelled(el("td", { class: "num" }, r.consensus_score === null ? "n/a" : r.consensus_score.toFixed(3) + (r.confidence_label ? " " + r.confidence_label : "")), "Consensus"),
        labelled(el("td", { class: "num" }, r.delta === null ? "" : r.delta.toFixed(3)), "Delta"),
        labelled(el("td", {}, r.diverged ? "yes" : "no"), "Diverged"))))));
  }
  return section("Deliberation", ...parts);
}

function metadataBlock(run) {
  const v = run.verdict;
  if (!v) return [];
  return section("Verdict metadata", el("div", { class: "card", id: "metadata" }, metaList([
    ["consensus score", v.consensus_score], ["confidence", v.confidence_label],
    ["dissent detected", String(v.dissent_detected)], ["dissent basis", v.dissent_basis],
    ["dissenting members", v.dissenting_members], ["uncertainty markers", (v.uncertainty_markers || []).map((m) => m.text)],
    ["revisions", v.revision_count], ["members", v.member_count], ["council type", v.council_type],
    ["converged early", String(v.converged_early)], ["divergence detected", String(v.divergence_detected)],
    ["duration", seconds(v.duration_seconds)], ["closed at", v.closed_at],
  ])));
}

function render(run) {
  current = run;
  document.title = "rune-council: " + run.id;
  document.getElementById("question").textContent = run.question;
  const status = ended === "abandoned" ? "abandoned" : run.status;
  replace(document.getElementById("summary"), badge(status), " ", run.id + " · " + run.mode +
    " · started " + (run.started_at || "").replace("T", " ").slice(0, 19) + " ",
    el("span", { id: "elapsed", "data-started": run.finished_at ? null : run.started_at },
      run.finished_at ? seconds((Date.parse(run.finished_at) - Date.parse(run.started_at)) / 1000) : ""));
  const tbody = document.querySelector("#voices tbody");
  replace(tbody, ...(run.voices || []).map((v) => voiceRow(run, v)));
  if (!(run.voices || []).length) {
    tbody.append(el("tr", {}, el("td", { colspan: 6, class: "muted" },
      run.status === "queued" ? "Queued: waiting for a free council slot." : "No voices yet.")));
  }
  const verdict = document.getElementById("verdict");
  const done = run.status !== "running" && run.status !== "queued";
  if (done || run.decorrelation) {
    const claims = claimIndex(run);
    replace(verdict, el("h2", {}, "Verdict"), stampBlock(run), ...consensusBlock(run, claims),
      ...dissentBlock(run), ...checksBlock(run), ...decisionBlock(run), ...deliberationBlock(run),
      ...metadataBlock(run));
    verdict.hidden = false;
  } else {
    verdict.hidden = true;
  }
  const notes = run.notes || [];
  const dropped = run.voices_dropped || [];
  replace(document.getElementById("notes"),
    dropped.length ? el("h2", {}, "Dropped voices") : null,
    dropped.length ? el("ul", {}, ...dropped.map((d) => el("li", {}, d.voice_id + " " + d.runtime + ": " + d.reason))) : null,
    notes.length ? el("h2", {}, "Notes") : null,
    notes.length ? el("ul", {}, ...notes.map((n) => el("li", {}, n))) : null);
}

async function load() {
  pending = null;
  try {
    render(await getJSON(api));
  } catch (err) {
    document.getElementById("question").textContent = "Cannot load " + runId + ": " + err.message;
  }
}

function soon() {
  if (pending === null) pending = setTimeout(load, 50);
}

function tick() {
  for (const node of document.querySelectorAll("[data-started]")) {
    const start = node.getAttribute("data-started");
    if (start) node.textContent = seconds(since(start));
  }
}

const stream = new EventSource(api + "/events");
stream.addEventListener("status", soon);
stream.addEventListener("transition", soon);
stream.addEventListener("end", (event) => {
  try { ended = JSON.parse(event.data).status; } catch (e) { ended = "ended"; }
  stream.close();
  load();
});
load();
setInterval(tick, 250);
