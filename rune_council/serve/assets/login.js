"use strict";
// The token is traded for a session cookie (HttpOnly, SameSite=Strict) that the server
// sets; this page never stores it. A link ending in #token=... signs in by itself: the
// fragment is never sent to a server, and it is dropped from the address bar at once.
const problem = document.getElementById("problem");

async function signIn(token) {
  problem.textContent = "";
  let response;
  try {
    response = await fetch("/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: token }),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch (err) {
    problem.textContent = "cannot reach the server: " + err.message;
    return;
  }
  if (response.ok) {
    location.replace(location.pathname + location.search);
    return;
  }
  let message = response.status + " " + response.statusText;
  try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
  problem.textContent = message;
}

const fromLink = new URLSearchParams(location.hash.slice(1)).get("token");
if (fromLink) {
  history.replaceState(null, "", location.pathname + location.search);
  signIn(fromLink.trim());
}

document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  signIn(document.getElementById("token").value.trim());
});
