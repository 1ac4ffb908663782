// The fleet table, live: its rows are fetched again when the server's event stream says
// a sandbox the viewer sees changed (within a second), and every few seconds for the
// samples, while the tab is visible. Filters, the sort, the page and the ticked rows
// travel with each fetch, so a refresh keeps them.
(function () {
  "use strict";
  const prefix = document.body.dataset.prefix;
  const table = document.getElementById("fleet-table");
  const filters = document.getElementById("filters");
  const live = document.getElementById("live");
  const pageInput = document.getElementById("f-page");
  let busy = false;
  let again = false;

  function query() {
    const params = new URLSearchParams(new FormData(filters));
    for (const box of table.querySelectorAll("input.pick:checked")) {
      params.append("ids", box.value);
    }
    return params.toString();
  }

  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(prefix + "/fleet/rows?" + query(),
        {credentials: "same-origin", headers: {"Accept": "text/html"}});
      if (response.status === 401) { window.location.assign(prefix + "/signin"); return; }
      if (response.ok) {
        table.innerHTML = await response.text();
        table.dataset.refreshed = String(Date.now());
        // The server's page (it clamps one past the end, when rows went away).
        const pager = document.getElementById("pager");
        if (pager) { pageInput.value = pager.dataset.page; }
      }
    } catch (err) {
      live.classList.remove("on");
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }

  const source = new EventSource(prefix + "/fleet/events");
  source.addEventListener("open", function () {
    live.classList.add("on");
    refresh();  // what changed between the page's rendering and the stream's start
  });
  source.addEventListener("error", function () { live.classList.remove("on"); });
  source.addEventListener("change", function () { if (!document.hidden) { refresh(); } });
  // A hidden tab costs the server nothing: it catches up when shown again.
  window.setInterval(function () { if (!document.hidden) { refresh(); } }, 5000);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { refresh(); }
  });
  document.getElementById("f-per").addEventListener("change", function () {
    pageInput.value = "1";
    refresh();
  });
  filters.addEventListener("submit", function () { pageInput.value = "1"; });

  table.addEventListener("click", function (event) {
    const link = event.target.closest("a.sort");
    if (link) {
      event.preventDefault();
      const sort = document.getElementById("f-sort");
      const order = document.getElementById("f-order");
      order.value = sort.value === link.dataset.sort && order.value === "asc" ? "desc" : "asc";
      sort.value = link.dataset.sort;
      pageInput.value = "1";
      refresh();
      return;
    }
    const to = event.target.closest("button.page-to");
    if (to) {
      pageInput.value = to.dataset.page;
      refresh();
      return;
    }
    if (event.target.id === "select-all") {
      for (const box of table.querySelectorAll("input.pick")) {
        box.checked = event.target.checked;
      }
    }
  });
  document.body.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.elt && event.detail.elt.id === "fleet-form") { refresh(); }
  });
})();
