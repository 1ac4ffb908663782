// The metrics tab: CPU % and memory over the sandbox's life, drawn with uPlot from the
// samples the server keeps (metrics.json).
(function () {
  "use strict";
  const box = document.getElementById("chart");
  if (!box) { return; }
  const prefix = document.body.dataset.prefix;
  fetch(prefix + "/sandboxes/" + encodeURIComponent(box.dataset.sandbox) + "/metrics.json",
        {credentials: "same-origin"})
    .then(function (response) { return response.json(); })
    .then(function (data) {
      if (!data.t.length) { box.textContent = "No samples yet."; return; }
      const mib = data.mem.map(function (b) { return b / 1048576; });
      const opts = {
        width: Math.max(box.clientWidth - 20, 300), height: 280,
        series: [{}, {label: "CPU %", stroke: "#2f5bd3", scale: "%"},
                 {label: "Memory MiB", stroke: "#12805c", scale: "MiB"}],
        axes: [{}, {scale: "%", label: "CPU %"}, {scale: "MiB", side: 1, label: "MiB", grid: {show: false}}],
      };
      box.dataset.samples = String(data.t.length);
      new window.uPlot(opts, [data.t, data.cpu, mib], box);
    });
})();
