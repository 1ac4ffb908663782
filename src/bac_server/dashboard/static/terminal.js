// The terminal tab: xterm.js drawing what a login shell in the sandbox writes, over a
// WebSocket the server relays to envd (the page never holds a key or envd's token).
(function () {
  "use strict";
  const box = document.getElementById("terminal");
  if (!box) { return; }
  const status = document.getElementById("terminal-status");
  const prefix = document.body.dataset.prefix;
  const term = new window.Terminal({fontSize: 13, cursorBlink: true, scrollback: 5000});
  const fit = new window.FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  const scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
  const socket = new WebSocket(scheme + window.location.host + prefix + "/sandboxes/" +
    encodeURIComponent(box.dataset.sandbox) + "/terminal");
  socket.binaryType = "arraybuffer";
  const encoder = new TextEncoder();
  socket.addEventListener("open", function () {
    socket.send(JSON.stringify({csrf: document.body.dataset.csrf, rows: term.rows, cols: term.cols}));
    status.textContent = "connected";
    box.dataset.connected = "yes";
    term.focus();
  });
  socket.addEventListener("message", function (event) {
    if (event.data instanceof ArrayBuffer) { term.write(new Uint8Array(event.data)); }
  });
  socket.addEventListener("close", function (event) {
    status.textContent = "closed" + (event.reason ? ": " + event.reason : "");
    box.dataset.connected = "no";
  });
  term.onData(function (data) {
    if (socket.readyState === WebSocket.OPEN) { socket.send(encoder.encode(data)); }
  });
  term.onResize(function (size) {
    if (socket.readyState === WebSocket.OPEN) {
      socket.send(JSON.stringify({rows: size.rows, cols: size.cols}));
    }
  });
  window.addEventListener("resize", function () { fit.fit(); });
})();
