// The console works without this script. It adds two things: copy buttons for secrets
// shown once, and, on the WebSockets page, a live connection count and delivery log that
// update without a reload, with Send test sent in place.
"use strict";

document.addEventListener("click", (e) => {
  const button = e.target.closest("[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  const said = button.parentElement.querySelector(".copied");
  const done = () => { if (said) said.textContent = "Copied."; };
  field.select();
  if (navigator.clipboard) {
    navigator.clipboard.writeText(field.value).then(done, () => { document.execCommand("copy"); done(); });
  } else {
    document.execCommand("copy");
    done();
  }
});

(() => {
  const root = document.getElementById("live-configs");
  if (!root) return;
  const app = root.dataset.app;
  const csrf = document.querySelector('meta[name="csrf-token"]').content;

  const render = (cfg) => {
    const live = root.querySelector(`[data-live="${cfg.id}"]`);
    if (live) live.textContent = String(cfg.liveConnections);
    const log = root.querySelector(`[data-log="${cfg.id}"]`);
    if (!log) return;
    const key = cfg.deliveryLog.map((d) => d.eventId).join(",");
    if (log.dataset.key === key) return;
    log.dataset.key = key;
    log.replaceChildren(...(cfg.deliveryLog.length ? cfg.deliveryLog.map((d) => {
      const tr = document.createElement("tr");
      const cells = [d.at, d.event, d.eventId];
      cells.forEach((text, i) => {
        const td = document.createElement("td");
        if (i === 2) {
          const code = document.createElement("code");
          code.textContent = text;
          td.append(code);
        } else {
          td.textContent = text;
        }
        tr.append(td);
      });
      return tr;
    }) : [emptyRow()]));
  };
  const emptyRow = () => {
    const tr = document.createElement("tr");
    tr.className = "empty";
    const td = document.createElement("td");
    td.colSpan = 3;
    td.textContent = "Nothing delivered yet.";
    tr.append(td);
    return tr;
  };

  let timer;
  const poll = async () => {
    clearTimeout(timer);
    try {
      const res = await fetch(`/console/${encodeURIComponent(app)}/websockets/live`, { credentials: "same-origin" });
      if (res.ok) (await res.json()).data.forEach(render);
    } catch (_) { /* the next poll tries again */ }
    timer = setTimeout(poll, document.hidden ? 10000 : 2000);
  };
  document.addEventListener("visibilitychange", () => { if (!document.hidden) poll(); });
  poll();

  root.addEventListener("submit", async (e) => {
    const form = e.target.closest("[data-send-test]");
    if (!form) return;
    e.preventDefault();
    const button = form.querySelector("button");
    button.disabled = true;
    try {
      const res = await fetch(`/developer/websockets/${encodeURIComponent(form.dataset.sendTest)}/test?app=${encodeURIComponent(app)}`,
        { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
      if (!res.ok) {
        const problem = await res.json().catch(() => ({}));
        alert(problem.detail || `Send test failed (${res.status}).`);
      }
    } finally {
      button.disabled = false;
    }
    setTimeout(poll, 300);
  });
})();
