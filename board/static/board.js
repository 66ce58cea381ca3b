// board.js sends the CSRF token of the page's <meta name="csrf-token"> with every htmx
// request (header X-CSRF-Token); plain forms carry it as the hidden _csrf field.
(function () {
  "use strict";
  document.addEventListener("htmx:configRequest", function (e) {
    var m = document.querySelector('meta[name="csrf-token"]');
    if (m) {
      e.detail.headers["X-CSRF-Token"] = m.getAttribute("content");
    }
  });
})();
