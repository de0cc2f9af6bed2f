"use strict";
// One council, live: the run file is re-read whenever its event stream reports a transition.
// The page leads with the answer (the stamp and its qualifiers, then the bottom line), then
// the dissent by kind, then who said what, then the details. While the council still runs it
// shows how far it got and no verdict: a round's draft is not the council's answer.
const runId = decodeURIComponent(location.pathname.replace(/^\/runs\//, ""));
const api = "/v1/councils/" + encodeURIComponent(runId);
let ended = null;
let pending = null;

document.getElementById("raw").setAttribute("href", api);

// The kinds of dissent, most decisive first; any kind this page does not know goes last.
const DISSENT_KINDS = [
  ["disagreement", "Disagreement", "voices said opposite things"],
  ["framing-sensitive", "Framing-sensitive", "the answer changed with how the question was put"],
  ["correlated-penalty", "Correlated", "agreement only among voices of one family"],
  ["unverified", "Unverified", "the evidence cited was not found in the artifact"],
  ["single-voice", "Single voice", "only one voice made the claim"],
];
// Kinds with many entries are folded so the answer stays near the top.
const FOLD_AFTER = 3;

function isDone(run) {
  return ended === "abandoned" || (run.status !== "running" && run.status !== "queued");
}

// Ran to its end (not cancelled, failed or abandoned by its writer).
function isFinished(run) {
  return isDone(run) && ended !== "abandoned" && (run.status === "complete" || run.status === "no_verdict");
}

// No voice answered: whatever the stamp field says, there is no verdict to show. A file
// written before the no_verdict status existed calls such a run complete.
function isEmpty(run) {
  return isFinished(run) && (run.status === "no_verdict" || run.voices_valid === 0);
}

function dissenters(run) {
  const v = run.verdict;
  if (!v) return new Set();
  const ids = (v.dissenting_members || []).slice();
  if (v.dissenting_member && !ids.includes(v.dissenting_member)) ids.push(v.dissenting_member);
  return new Set(ids);
}

function rounds(run) {
  const asked = run.request && run.request.deliberation && run.request.deliberation.rounds;
  const max = asked && asked.max_rounds ? asked.max_rounds : 1;
  const records = (run.deliberation && run.deliberation.rounds) || [];
  return { max, done: records.length, records };
}

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

function voiceRow(run, voice, against) {
  const time = voiceTime(run, voice);
  const role = voice.slot_role + (voice.persona ? " (" + voice.persona + ")" : "");
  const dissenting = against.has(voice.id);
  const who = el("td", {}, el("b", {}, voice.id), " ", voice.runtime,
    dissenting ? el("span", { class: "badge s-dissent" }, "dissenter") : null,
    voice.model ? el("div", { class: "muted" }, voice.model) : null,
    voice.is_fallback ? el("div", { class: "muted" }, "fallback") : null);
  const stance = voice.status === "dropped"
    ? el("td", { class: "muted" }, voice.drop_reason || "")
    : el("td", {}, voice.stance || "");
  return el("tr", {
    "data-voice": voice.id, "data-status": voice.status,
    class: dissenting ? "dissenter" : null, "data-dissenter": dissenting ? "true" : null,
  },
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

// --- while the council runs ------------------------------------------------------------

function progressBlock(run) {
  const r = rounds(run);
  const voices = run.voices || [];
  const answered = voices.filter((v) => v.status === "complete" || v.status === "dropped").length;
  let where;
  if (run.status === "queued") where = "Queued: waiting for a free council slot.";
  else if (r.max > 1 && r.done >= r.max) where = "All " + r.max + " rounds done: closing the verdict.";
  else where = "";
  const parts = [
    el("div", { class: "progress-head" },
      el("span", { class: "stamp s-running" }, run.status === "queued" ? "QUEUED" : "IN PROGRESS"),
      r.max > 1 && run.status !== "queued"
        ? el("span", { class: "round", id: "round" }, "round " + Math.min(r.done + 1, r.max) + " of " + r.max)
        : null),
    el("p", {}, where, voices.length
      ? (where ? " " : "") + answered + " of " + voices.length + " voices have finished" + (r.max > 1 ? " this round." : ".")
      : ""),
    el("p", { class: "muted" }, "No verdict yet: it is shown when the council ends."),
  ];
  const last = r.records[r.records.length - 1];
  if (last) {
    const score = last.consensus_score === null || last.consensus_score === undefined
      ? "" : " at consensus " + last.consensus_score.toFixed(3) + (last.confidence_label ? " (" + last.confidence_label + ")" : "");
    const draft = el("details", { class: "provisional", "data-key": "draft-" + last.round },
      el("summary", {}, "Round " + last.round + " closed" + score + ": its draft, which later rounds may change"),
      last.verdict ? el("div", { class: "text" }, last.verdict) : el("div", { class: "muted" }, "No draft text."));
    parts.push(draft);
  }
  return parts;
}

// --- the answer ------------------------------------------------------------------------

function qualifiers(run) {
  const list = [];
  const r = rounds(run);
  if (isEmpty(run)) {
    list.push(["empty", "no voice answered: " + run.voices_valid + " of " + run.voices_requested + " valid"]);
  }
  if (run.partial) list.push(["partial", "partial: " + run.partial.detail]);
  if (run.deliberation && run.deliberation.halted) {
    list.push(["halted", "halted after round " + r.done + " of " + r.max + ": the council diverged"]);
  }
  if (ended === "abandoned") list.push(["abandoned", "the writer died: this run will not finish"]);
  return list;
}

function stampBlock(run) {
  const status = ended === "abandoned" ? "abandoned" : run.status;
  let stamp = run.decorrelation || "NO STAMP";
  let cls = "s-" + String(stamp).replace(/[^A-Za-z_-]/g, "");
  if (isEmpty(run)) [stamp, cls] = ["NO VERDICT", "s-empty"];
  else if (!isFinished(run)) [stamp, cls] = [String(status).toUpperCase(), "s-" + status];
  const r = rounds(run);
  return el("div", { id: "stamp" },
    el("span", { class: "stamp " + cls }, stamp),
    ...qualifiers(run).map(([kind, text]) => el("span", { class: "qualifier q-" + kind, "data-qualifier": kind }, text)),
    el("div", { class: "muted" },
      "families: " + ((run.distinct_families || []).join(", ") || "none") +
      " · valid voices " + run.voices_valid + "/" + run.voices_requested +
      (r.max > 1 ? " · rounds " + r.done + "/" + r.max : "")));
}

function consensusCards(run, claims) {
  const list = (run.agreement && run.agreement.consensus_claims) || [];
  return list.map((item) => el("div", { class: "card consensus" },
    el("div", { class: "claim" }, item.severity ? badge(item.severity) : null, " ", item.claim),
    el("div", { class: "muted" }, "families: " + item.families.join(", ") +
      " · matched by " + item.matched_by.method + " on " + item.matched_by.key),
    ...item.claim_ids.map((id) => {
      const found = claims[id];
      if (!found) return el("div", { class: "wording" }, id);
      return el("div", { class: "wording" },
        el("b", {}, found.voice.id + " " + found.voice.runtime + " (" + found.voice.model_family + "): "),
        found.claim.text);
    })));
}

function bottomLine(run, claims) {
  const parts = [el("h2", {}, "Bottom line")];
  if (isEmpty(run)) {
    parts.push(el("p", { class: "headline no-verdict" },
      "No voice answered, so the council has no verdict. The dropped voices below say why."));
  } else {
    if (!isFinished(run)) {
      parts.push(el("p", { class: "headline no-verdict" },
        "The council did not finish: what it recorded before it stopped is below; it is not a verdict."));
    }
    const list = (run.agreement && run.agreement.consensus_claims) || [];
    parts.push(list.length
      ? el("p", { class: "headline" }, "Cross-family consensus on " + list.length +
        (list.length === 1 ? " point:" : " points:"))
      : el("p", { class: "headline no-consensus" }, "No cross-family consensus."));
    parts.push(...consensusCards(run, claims));
    const synthesis = run.deliberation && run.deliberation.synthesis;
    if (synthesis && synthesis.text) {
      parts.push(el("h3", {}, "Synthesis"), el("div", { class: "card text", id: "synthesis" }, synthesis.text),
        el("div", { class: "muted" }, synthesis.fallback
          ? "written by the arithmetic (" + (synthesis.fallback_reason || "") + ")"
          : "verdict by " + (synthesis.by || "?")));
    }
  }
  const decide = run.needs_decision ? "Yes: a person should decide."
    : isEmpty(run) ? "Nothing to decide on: there is no verdict." : "No.";
  parts.push(el("h3", {}, "Needs decision"), el("div", {
    class: "card decision " + (run.needs_decision ? "decide-yes" : "decide-no"), id: "needs-decision",
  },
  el("b", {}, decide),
  run.decision ? el("div", { class: "text" }, run.decision) : null));
  return el("div", { id: "bottom-line" }, ...parts);
}

function dissentCard(item, against) {
  return el("div", { class: "card dissent", "data-kind": item.label },
    el("div", {}, item.severity ? badge(item.severity) : null, " ", item.claim),
    el("div", { class: "voices-line" }, "voices: ",
      ...item.voice_ids.map((id) => el("span", {
        class: "voice-chip" + (against.has(id) ? " dissenter" : ""),
        "data-dissenter": against.has(id) ? "true" : null,
      }, id)),
      item.families.length ? el("span", { class: "muted" }, " · families: " + item.families.join(", ")) : null),
    item.detail ? el("div", { class: "muted" }, item.detail) : null);
}

function dissentBlock(run) {
  const list = (run.agreement && run.agreement.dissent) || [];
  const against = dissenters(run);
  const head = el("h2", {}, "Dissent" + (list.length ? " (" + list.length + ")" : ""));
  if (!list.length) return el("div", { id: "dissent" }, head, el("p", { class: "muted" }, "None recorded."));
  const known = DISSENT_KINDS.map(([kind]) => kind);
  const kinds = DISSENT_KINDS.concat(
    [...new Set(list.map((d) => d.label).filter((k) => !known.includes(k)))].map((k) => [k, k, ""]));
  const groups = [];
  if (against.size) {
    groups.push(el("p", { id: "dissenters" }, "Dissenting member" + (against.size > 1 ? "s" : "") + ": ",
      ...[...against].map((id) => el("span", { class: "voice-chip dissenter", "data-dissenter": "true" }, id))));
  }
  for (const [kind, title, meaning] of kinds) {
    const items = list.filter((d) => d.label === kind);
    if (!items.length) continue;
    const group = el("details", {
      class: "dissent-group", "data-kind": kind, "data-key": "dissent-" + kind,
      open: items.length <= FOLD_AFTER ? "" : null,
    },
      el("summary", {}, el("b", {}, title + " (" + items.length + ")"), meaning ? el("span", { class: "muted" }, " · " + meaning) : null),
      ...items.map((item) => dissentCard(item, against)));
    groups.push(group);
  }
  return el("div", { id: "dissent" }, head, ...groups);
}

// --- the details -----------------------------------------------------------------------

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
  if (d.synthesis && d.synthesis.open_questions.length) {
    parts.push(el("h3", {}, "Open questions"), el("ul", {}, ...d.synthesis.open_questions.map((q) => el("li", {}, q))));
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

// The page is drawn anew on every transition; a section the reader opened or folded stays so.
function foldedState() {
  const state = {};
  for (const node of document.querySelectorAll("details[data-key]")) state[node.getAttribute("data-key")] = node.open;
  return state;
}

function restoreFolds(state) {
  for (const node of document.querySelectorAll("details[data-key]")) {
    const key = node.getAttribute("data-key");
    if (key in state) node.open = state[key];
  }
}

function render(run) {
  const folds = foldedState();
  document.title = "rune-council: " + run.id;
  document.getElementById("question").textContent = run.question;
  const done = isDone(run);
  const status = ended === "abandoned" ? "abandoned" : run.status;
  const shown = isEmpty(run) ? el("span", { class: "badge s-empty" }, "no verdict") : badge(status);
  replace(document.getElementById("summary"), shown, " ", run.id + " · " + run.mode +
    " · started " + (run.started_at || "").replace("T", " ").slice(0, 19) + " ",
    el("span", { id: "elapsed", "data-started": run.finished_at || done ? null : run.started_at },
      run.finished_at ? seconds((Date.parse(run.finished_at) - Date.parse(run.started_at)) / 1000) : ""));

  const progress = document.getElementById("progress");
  const verdict = document.getElementById("verdict");
  const details = document.getElementById("details");
  if (done) {
    const claims = claimIndex(run);
    replace(verdict, stampBlock(run), bottomLine(run, claims), dissentBlock(run));
    replace(details, ...checksBlock(run), ...deliberationBlock(run), ...metadataBlock(run));
    replace(progress);
  } else {
    replace(progress, ...progressBlock(run));
    replace(verdict);
    replace(details);
  }
  progress.hidden = done;
  verdict.hidden = !done;
  details.hidden = !done;

  const against = done ? dissenters(run) : new Set();
  const tbody = document.querySelector("#voices tbody");
  replace(tbody, ...(run.voices || []).map((v) => voiceRow(run, v, against)));
  if (!(run.voices || []).length) {
    tbody.append(el("tr", {}, el("td", { colspan: 6, class: "muted" },
      run.status === "queued" ? "Queued: waiting for a free council slot." : "No voices yet.")));
  }
  const notes = run.notes || [];
  const dropped = run.voices_dropped || [];
  replace(document.getElementById("notes"),
    dropped.length ? el("h2", {}, "Dropped voices") : null,
    dropped.length ? el("ul", {}, ...dropped.map((d) => el("li", {}, d.voice_id + " " + d.runtime + ": " + d.reason))) : null,
    notes.length ? el("h2", {}, "Notes") : null,
    notes.length ? el("ul", {}, ...notes.map((n) => el("li", {}, n))) : null);
  restoreFolds(folds);
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
