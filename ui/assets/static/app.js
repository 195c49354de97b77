// Governor web UI: live updates of the overview over Server-Sent Events.
// Every page works without this file; it only keeps the overview fresh.
"use strict";
(function () {
  var body = document.getElementById("overview-rows");
  var live = document.getElementById("live");
  if (!body || !window.EventSource) return;
  var src = new EventSource("/events/overview");
  src.addEventListener("rows", function (ev) {
    // The server renders the rows with html/template (escaped); they replace
    // the table body as is.
    body.innerHTML = ev.data;
    if (live) { live.dataset.state = "live"; live.textContent = "live · updated " + new Date().toLocaleTimeString(); }
  });
  src.addEventListener("summary", function (ev) {
    var s = document.getElementById("overview-summary");
    if (s) s.innerHTML = ev.data;
  });
  src.addEventListener("end", function () {
    src.close();
    if (live) { live.dataset.state = "down"; live.textContent = "session ended: reload to log in"; }
  });
  src.onerror = function () {
    if (live) { live.dataset.state = "down"; live.textContent = "reconnecting…"; }
  };
})();
