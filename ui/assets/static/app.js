// Governor web UI: live updates of the overview over Server-Sent Events.
// Every page works without this file; it only keeps the overview fresh.
//
// While the stream is down the rows stay as they were, marked stale, and
// the label says since when (in UTC, as every time the pages print). The
// browser reconnects by itself after a dropped connection; when it gives
// up (an answer that is no event stream: a proxy's 502 while the server
// restarts, a login page), the stream is opened again after 1, 2, 4 … up
// to 60 seconds, without a reload.
"use strict";
(function () {
  var body = document.getElementById("overview-rows");
  var live = document.getElementById("live");
  if (!body || !window.EventSource) return;
  var table = body.closest("table");
  var asOf = live && live.dataset.at ? new Date(live.dataset.at) : null;
  var src = null, retries = 0, timer = null, ended = false;

  function utc(d) {
    return d && !isNaN(d) ? d.toISOString().slice(11, 19) + " UTC" : "an unknown time";
  }
  function show(state, text) {
    if (live) { live.dataset.state = state; live.textContent = text; }
    if (table) table.classList.toggle("stale", state !== "live");
  }
  function down(what) {
    show("down", what + " · showing data as of " + utc(asOf));
  }
  function open() {
    timer = null;
    src = new EventSource("/events/overview");
    src.addEventListener("open", function () { retries = 0; });
    src.addEventListener("rows", function (ev) {
      // The server renders the rows with html/template (escaped); they
      // replace the table body as is.
      body.innerHTML = ev.data;
      asOf = new Date();
      show("live", "live · updated " + utc(asOf));
    });
    src.addEventListener("summary", function (ev) {
      var s = document.getElementById("overview-summary");
      if (s) s.innerHTML = ev.data;
    });
    src.addEventListener("end", function () {
      ended = true;
      src.close();
      show("down", "session ended: reload to log in · showing data as of " + utc(asOf));
    });
    src.onerror = function () {
      if (ended) return;
      if (src.readyState !== EventSource.CLOSED) {
        down("connection lost, reconnecting…");
        return;
      }
      // The browser gave up on this stream: open a new one, backing off.
      src.close();
      // Jittered, so that every open overview does not return at once.
      var delay = Math.min(60, Math.pow(2, retries)) * (750 + Math.random() * 500);
      retries++;
      down("connection lost, retrying in " + Math.round(delay / 1000) + " s");
      if (!timer) timer = window.setTimeout(open, delay);
    };
  }
  open();
})();
