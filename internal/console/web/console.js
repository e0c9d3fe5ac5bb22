// The console's one script: live updates over server-sent events. The
// server names what changed; the page fetches those fragments from the
// console (its model of the fleet and its cache), never from the API
// server. Without it the pages work as they are, reloaded by hand.
(function () {
  "use strict";
  var live = document.getElementById("live");
  function setLive(state, text) { live.dataset.live = state; live.textContent = text; }
  // asked[name] numbers the fetches of a row: responses can arrive out of
  // order, and only the newest may replace the row.
  var asked = {};
  function replaceRow(name) {
    if (!document.querySelector('tr[data-runtime="' + CSS.escape(name) + '"]')) { return; }
    var n = (asked[name] || 0) + 1;
    asked[name] = n;
    fetch("/fragments/row/" + encodeURIComponent(name), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : ""; })
      .then(function (html) {
        var row = document.querySelector('tr[data-runtime="' + CSS.escape(name) + '"]');
        if (!html || !row || asked[name] !== n) { return; }
        var t = document.createElement("tbody");
        t.innerHTML = html.trim();
        if (t.firstElementChild) { row.replaceWith(t.firstElementChild); }
      });
  }
  var countsDue = null;
  function refreshCounts() {
    var counts = document.getElementById("counts");
    if (!counts || countsDue) { return; }
    countsDue = setTimeout(function () {
      countsDue = null;
      fetch("/fragments/counts", { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : ""; })
        .then(function (html) { if (html) { counts.outerHTML = html.trim(); } });
    }, 500);
  }
  function refreshAll() {
    document.querySelectorAll("tr[data-runtime]").forEach(function (r) { replaceRow(r.dataset.runtime); });
    refreshCounts();
  }
  var page = document.body.dataset.page;
  var es = new EventSource("/events");
  // After a reconnect, changes made meanwhile were never named: refresh
  // what the page shows.
  var lost = false;
  es.onopen = function () { setLive("connected", "live"); if (lost) { lost = false; refreshAll(); } };
  es.onerror = function () { lost = true; setLive("disconnected", "not live: reconnecting"); };
  es.addEventListener("runtime", function (e) { replaceRow(e.data); });
  es.addEventListener("all", refreshAll);
  es.addEventListener("fleet", function () {
    refreshCounts();
    if (page === "rollouts" || page === "rollout" || page === "backups" || page === "module") {
      // Small pages: fetched whole, the focus kept where it was.
      fetch(location.href, { credentials: "same-origin" }).then(function (r) { return r.ok ? r.text() : ""; }).then(function (html) {
        if (!html) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var main = doc.getElementById("main");
        if (main) { document.getElementById("main").innerHTML = main.innerHTML; }
      });
    }
  });
  // "/" focuses the filter, as in many consoles; Escape leaves it.
  document.addEventListener("keydown", function (e) {
    var q = document.querySelector('input[name="q"]');
    if (e.key === "/" && q && document.activeElement !== q) { e.preventDefault(); q.focus(); }
    if (e.key === "Escape" && document.activeElement) { document.activeElement.blur(); }
  });
})();
