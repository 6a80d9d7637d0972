/* oncefire dashboard: badge refresh, confirmations and the JSON editor's check. No inline
   script is allowed by the Content-Security-Policy, so every behaviour lives here. */
(function () {
  "use strict";

  document.querySelectorAll("[data-refresh-url]").forEach(function (badge) {
    var every = Number(badge.getAttribute("data-refresh-ms")) || 15000;
    setInterval(function () {
      fetch(badge.getAttribute("data-refresh-url"), {
        credentials: "same-origin",
        headers: { Accept: "application/json" }
      })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (body) {
          if (body === null) { return; }
          badge.textContent = String(body.count);
          badge.classList.toggle("zero", body.count === 0);
        })
        .catch(function () { /* the next refresh tries again */ });
    }, every);
  });

  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      if (!window.confirm(form.getAttribute("data-confirm"))) { e.preventDefault(); }
    });
  });

  document.querySelectorAll("textarea[data-json]").forEach(function (area) {
    var status = document.getElementById(area.getAttribute("data-json"));
    function check() {
      try {
        var value = JSON.parse(area.value);
        if (value === null || typeof value !== "object" || Array.isArray(value)) {
          throw new Error("The payload must be a JSON object.");
        }
        status.textContent = "Valid JSON.";
        status.className = "ok";
        return true;
      } catch (err) {
        status.textContent = err.message;
        status.className = "bad";
        return false;
      }
    }
    area.addEventListener("input", check);
    area.form.addEventListener("submit", function (e) { if (!check()) { e.preventDefault(); } });
  });
})();
