// The console works without this script, but for passkeys. It adds copy buttons for
// secrets shown once; on the WebSockets page, a live connection count and delivery log that
// update without a reload, with Send test sent in place; and passkeys: registering one, and
// signing an approval's decision with it (WebAuthn, navigator.credentials).
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

// Passkeys. WebAuthn gives and takes bytes; the server speaks base64url.
const b64u = {
  encode: (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""),
  decode: (s) => Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(s.length / 4) * 4, "=")), (c) => c.charCodeAt(0)),
};

(() => {
  const form = document.getElementById("register-passkey");
  if (!form) return;
  const say = (text) => { form.querySelector("[role=status]").textContent = text; };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (!window.PublicKeyCredential) return say("This browser has no passkeys (WebAuthn).");
    try {
      const res = await fetch(form.dataset.options, { method: "POST", credentials: "same-origin",
        body: new URLSearchParams({ csrf: form.elements.csrf.value, password: form.elements.password.value }) });
      form.elements.password.value = "";
      if (!res.ok) return say(await res.text());
      const { publicKey } = await res.json();
      publicKey.challenge = b64u.decode(publicKey.challenge);
      publicKey.user.id = b64u.decode(publicKey.user.id);
      (publicKey.excludeCredentials || []).forEach((c) => { c.id = b64u.decode(c.id); });
      say("Waiting for your passkey…");
      const cred = await navigator.credentials.create({ publicKey });
      form.elements.credential.value = JSON.stringify({
        id: cred.id, rawId: b64u.encode(cred.rawId), type: cred.type,
        response: { clientDataJSON: b64u.encode(cred.response.clientDataJSON), attestationObject: b64u.encode(cred.response.attestationObject) },
        clientExtensionResults: cred.getClientExtensionResults(),
      });
      form.submit();
    } catch (err) {
      say("No passkey was registered: " + err.message);
    }
  });
})();

document.addEventListener("submit", async (e) => {
  const form = e.target.closest("form[data-passkeys]");
  if (!form) return;
  e.preventDefault();
  const decision = (e.submitter && e.submitter.value) || "APPROVE";
  const keys = JSON.parse(form.dataset.passkeys);
  const field = (name, value) => {
    const input = form.querySelector(`input[name="${name}"]`) || form.appendChild(Object.assign(document.createElement("input"), { type: "hidden", name }));
    input.value = value;
  };
  try {
    // The challenge is the decision's digest over the item's statement: the passkey's
    // signature is the decision itself, checkable by the signer.
    const assertion = await navigator.credentials.get({ publicKey: {
      challenge: b64u.decode(decision === "REJECT" ? form.dataset.reject : form.dataset.approve),
      allowCredentials: Object.keys(keys).map((id) => ({ type: "public-key", id: b64u.decode(id) })),
      userVerification: "required", timeout: 120000 } });
    field("decision", decision);
    field("keyId", keys[b64u.encode(assertion.rawId)]);
    field("authenticatorData", b64u.encode(assertion.response.authenticatorData));
    field("clientDataJSON", b64u.encode(assertion.response.clientDataJSON));
    field("signature", b64u.encode(assertion.response.signature));
    form.submit();
  } catch (err) {
    let said = form.querySelector(".passkey-error");
    if (!said) said = form.appendChild(Object.assign(document.createElement("p"), { className: "passkey-error error", role: "alert" }));
    said.textContent = "Not decided: your passkey did not sign (" + err.message + ").";
  }
});
