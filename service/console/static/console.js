// ctxpack console: progressive enhancement only; every page works without this file.
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  document.addEventListener("DOMContentLoaded", function () {
    // Mark the current section in the navigation.
    var page = document.querySelector("[data-page]");
    var name = page ? page.getAttribute("data-page") : "";
    var map = { memory: "memories", edit: "memories", edited: "memories", forget: "memories",
                forgotten: "memories", "audit-row": "audit", replay: "audit" };
    var nav = document.querySelector('[data-nav="' + (map[name] || name) + '"]');
    if (nav) { nav.classList.add("active"); }
    // Copy a newly created key (shown once) to the clipboard.
    var copy = document.getElementById("copy-key");
    var key = document.getElementById("new-key");
    if (copy && key) {
      copy.addEventListener("click", function () {
        key.select();
        if (navigator.clipboard) { navigator.clipboard.writeText(key.value); }
        copy.textContent = "Copied";
      });
    }
  });
})();
