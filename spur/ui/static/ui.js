// Spur dashboard: live updates over one server-sent-event stream per page (no framework, no build).
"use strict";
(function () {
  const url = document.body.dataset.events;
  if (!url || !window.EventSource) return;
  const status = document.getElementById("live-status");
  const say = (text) => { if (status) status.textContent = text; };
  const next = { stdout: 0, stderr: 0 };  // the next byte offset shown, per stream
  const source = new EventSource(url);
  source.addEventListener("open", () => say("live"));
  source.addEventListener("error", () => say("reconnecting…"));
  source.addEventListener("live", (ev) => {
    const live = document.getElementById("live");
    if (!live) return;
    // Keep what the user is typing: the live part is replaced only when no field in it has focus.
    const active = document.activeElement;
    if (active && live.contains(active) && active.matches("input, textarea, select")) return;
    live.innerHTML = ev.data;
    say("live · updated " + new Date().toLocaleTimeString());
  });
  source.addEventListener("output", (ev) => {
    const msg = JSON.parse(ev.data);
    const pre = document.getElementById(msg.stream);
    if (!pre) return;
    const end = msg.offset + new TextEncoder().encode(msg.data).length;
    if (end <= next[msg.stream]) return;  // already shown (the stream restarted after a reconnect)
    const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.append(document.createTextNode(msg.data));
    next[msg.stream] = end;
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  });
  source.addEventListener("end", (ev) => {
    const msg = JSON.parse(ev.data);
    const note = document.getElementById("output-end");
    if (note) note.textContent = "Ended: " + msg.state + ", exit code " + msg.exit_code;
  });
  source.addEventListener("refused", (ev) => {
    const msg = JSON.parse(ev.data);
    say("refused: " + msg.message);
    if (msg.status === 401) { source.close(); window.location.assign("/ui/login"); }
  });
})();
