// What every page shares. No inline script anywhere (the Content-Security-Policy forbids
// it): behaviour is in these files, wired by ids and data attributes.
(function () {
  "use strict";
  // A confirmation asked in the page itself is a server-rendered form; nothing here.
  document.body.addEventListener("htmx:responseError", function (event) {
    if (event.detail.xhr.status === 401) {
      window.location.assign(document.body.dataset.prefix + "/signin");
    }
  });
  // A sandbox page's own buttons change what the page shows: show it again.
  document.body.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful && event.detail.elt.closest("#sandbox-actions")) {
      window.location.reload();
    }
  });
})();
