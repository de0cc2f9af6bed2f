// Shared helpers. Every piece of text from a run file goes through textContent, never
// innerHTML: run files hold untrusted voice output.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "href") node.setAttribute("href", safeHref(value));
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Only links this page builds itself, to this server.
function safeHref(value) {
  const text = String(value);
  return text.startsWith("/") && !text.startsWith("//") ? text : "#";
}

function badge(status) {
  return el("span", { class: "badge s-" + String(status).replace(/[^A-Za-z_-]/g, "") }, status);
}

function seconds(value) {
  if (value === null || value === undefined || isNaN(value)) return "";
  if (value < 60) return value.toFixed(1) + " s";
  const m = Math.floor(value / 60);
  return m + " min " + Math.round(value - 60 * m) + " s";
}

function since(stamp) {
  const t = Date.parse(stamp);
  return isNaN(t) ? null : Math.max(0, (Date.now() - t) / 1000);
}

async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return response.json();
}

function replace(target, ...children) {
  target.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
}

function labelled(cell, label) {
  cell.setAttribute("data-label", label);
  return cell;
}
