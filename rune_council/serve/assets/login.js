"use strict";
document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = document.getElementById("token").value.trim();
  document.cookie = "rune_council_token=" + encodeURIComponent(token) + "; path=/; SameSite=Strict";
  location.reload();
});
