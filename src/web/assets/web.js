// thrum web: the one script, served from the binary. It only watches for
// new runs: every few seconds it asks /api/version (a few bytes), and when
// the store has changed since the page was drawn it draws the page again,
// unless the reader has started picking runs in a form, when it says so
// instead. Every page works without it.
(function () {
  "use strict";
  var body = document.body;
  var drawn = body.getAttribute("data-version");
  if (!drawn) { return; }
  var live = document.getElementById("live");
  var touched = false;
  document.addEventListener("change", function () { touched = true; });
  function say(text, fresh) {
    if (live) { live.textContent = text; live.className = fresh ? "fresh" : ""; }
  }
  function poll() {
    fetch("/api/version", { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (v) {
        if (!v) { say("live: no answer", false); return; }
        if (v.version !== drawn) {
          if (touched) {
            say("new runs: reload to see them", true);
            return;
          }
          window.location.reload();
          return;
        }
        say("live", false);
      })
      .catch(function () { say("live: no answer", false); })
      .then(function () { window.setTimeout(poll, 5000); });
  }
  say("live", false);
  window.setTimeout(poll, 5000);
})();
