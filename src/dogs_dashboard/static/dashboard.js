// The dashboard's only script: confirm each action, and refresh the page's live part.
(function () {
  "use strict";
  var seconds = parseFloat(document.body.dataset.refresh || "0");
  var confirming = false;
  var busy = false;

  // An action form posts only after confirm(); the server shows a confirm page to a form
  // without confirmed=yes, so without this script every action still asks first.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (!question) { return; }
    confirming = true;
    var ok = window.confirm(question);
    confirming = false;
    if (!ok) { event.preventDefault(); return; }
    var field = form.querySelector('input[name="confirmed"]');
    if (field) { field.value = "yes"; }
  }, true);

  function status(text) {
    var badge = document.getElementById("live-status");
    if (badge) { badge.textContent = text; }
  }

  // Fetch this page's live part again and swap it in only when it changed, so that a page
  // whose data stands still is never redrawn (a click or a selection is not lost).
  function refresh() {
    var region = document.getElementById("live");
    if (!region || confirming || busy || document.hidden) { return; }
    busy = true;
    var url = new URL(window.location.href);
    url.searchParams.set("fragment", "1");
    url.searchParams.delete("msg");
    url.searchParams.delete("level");
    fetch(url.toString(), { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var parsed = document.createElement("template");
        parsed.innerHTML = html;
        if (!confirming && parsed.innerHTML !== region.innerHTML) {
          region.innerHTML = parsed.innerHTML;
        }
        status("live, updated " + new Date().toLocaleTimeString());
      })
      .catch(function (error) { status("refresh failed: " + error.message); })
      .then(function () { busy = false; });
  }

  if (seconds > 0) { window.setInterval(refresh, seconds * 1000); }
  window.dogsRefresh = refresh;
})();
