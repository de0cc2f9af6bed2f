"use strict";
// Interactive API docs built from the OpenAPI document; no third-party bundle.

function example(op) {
  if (!op.requestBody) return "";
  return JSON.stringify({ question: "Should we shard the orders table?", n: 3, multi_round: { max_rounds: 2 } }, null, 2);
}

function operation(path, method, op) {
  const params = (op.parameters || []).filter((p) => p.in === "path" || p.in === "query");
  const inputs = params.map((p) => el("label", {}, p.name + (p.in === "path" ? " (path)" : " (query)") + " ",
    el("input", { "data-name": p.name, "data-in": p.in })));
  const body = op.requestBody ? el("textarea", { rows: 6, cols: 60 }) : null;
  if (body) body.value = example(op);
  const out = el("pre", { class: "card" });
  const go = el("button", { type: "button" }, "Send");
  go.addEventListener("click", async () => {
    let url = path;
    const query = new URLSearchParams();
    for (const input of inputs.map((l) => l.querySelector("input"))) {
      const name = input.getAttribute("data-name");
      if (input.getAttribute("data-in") === "path") url = url.replace("{" + name + "}", encodeURIComponent(input.value));
      else if (input.value) query.set(name, input.value);
    }
    if ([...query].length) url += "?" + query;
    if (op.responses && op.responses["200"] && op.responses["200"].content && op.responses["200"].content["text/event-stream"]) {
      out.textContent = "Event streams are read with EventSource or curl -N " + url;
      return;
    }
    const init = { method: method.toUpperCase(), headers: {} };
    if (body) { init.body = body.value; init.headers["Content-Type"] = "application/json"; }
    try {
      const response = await fetch(url, init);
      out.textContent = response.status + " " + response.statusText + "\n" + await response.text();
    } catch (err) {
      out.textContent = String(err);
    }
  });
  const codes = Object.entries(op.responses || {}).map(([code, r]) => code + " " + (r.description || "")).join("\n");
  return el("div", { class: "card" },
    el("h3", {}, method.toUpperCase() + " " + path), el("div", {}, op.summary || ""),
    op.description ? el("div", { class: "muted" }, op.description) : null,
    ...inputs, body, el("div", {}, go), el("pre", { class: "muted" }, codes), out);
}

async function main() {
  const spec = await getJSON("/openapi.json");
  const ops = [];
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(methods)) ops.push(operation(path, method, op));
  }
  replace(document.getElementById("ops"), ...ops);
  const schemas = Object.entries(spec.components.schemas).map(([name, schema]) => {
    const details = el("details", {}, el("summary", {}, name), el("pre", {}, JSON.stringify(schema, null, 2)));
    return details;
  });
  replace(document.getElementById("schemas"), ...schemas);
}

main();
