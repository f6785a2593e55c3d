// Postmill local mail: the list page refreshes itself when new mail arrives, and offers "Delete all".
// The pages work without this script; it only saves a click.
(function () {
  "use strict";
  var list = document.getElementById("messages");
  var clear = document.getElementById("clear");
  if (clear) {
    clear.hidden = false;
    clear.addEventListener("click", function () {
      if (!window.confirm("Delete every caught message?")) {
        return;
      }
      fetch("/local/api/messages", { method: "DELETE" }).then(function () {
        window.location.reload();
      });
    });
  }
  if (!list) {
    return;
  }
  var newest = list.getAttribute("data-newest") || "";
  var count = document.getElementById("count");
  var shown = count ? count.getAttribute("data-count") : "";
  window.setInterval(function () {
    fetch("/local/api/messages").then(function (r) {
      return r.ok ? r.json() : null;
    }).then(function (messages) {
      if (!messages) {
        return;
      }
      var top = messages.length ? messages[0].id : "";
      if (top !== newest || String(messages.length) !== shown) {
        window.location.reload();
      }
    }).catch(function () {});
  }, 3000);
})();
