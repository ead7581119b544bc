// The workflow editor (Banzai's promise): steps picked from the action catalog, settings from
// each action's declared settings, needs/success/failure wired from the events that exist, live
// validation at each step and field, the diagram redrawn as one types, a YAML tab kept in sync.
// The server turns the form into YAML (and back), validates it like POST /v1/workflows/validate
// and draws the diagram: POST /ui/draft. Saving posts the YAML to POST /v1/workflows.
"use strict";

(function () {
  const root = document.getElementById("editor");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const yaml = $("yaml"), steps = $("steps"), diagram = $("diagram"), validity = $("validity");
  let catalog = { actions: [], builtin_events: [] };
  let model = { name: "", external: [], steps: [] };
  let timer = null, pending = null, seq = 0;

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else if (k === "class") e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of kids) if (c) e.append(c);
    return e;
  }
  const spec = (name) => catalog.actions.find((a) => a.name === name);
  const list = (s) => s.split(",").map((x) => x.trim()).filter((x) => x);

  async function post(url, body, headers) {
    const res = await fetch(url, {
      method: "POST", body,
      headers: Object.assign({ "X-CSRF-Token": csrfToken() }, headers || {}),
    });
    let data = {};
    try { data = await res.json(); } catch (_) { /* not JSON */ }
    return { status: res.status, data };
  }

  // Every event some step could need: built-ins, external ones, what steps fire, outcomes.
  function knownEvents() {
    const set = new Set(["start", "children.done"]);
    for (const e of model.external) set.add(e);
    for (const s of model.steps) {
      for (const e of s.success.concat(s.failure)) set.add(e);
      const a = spec(s.action);
      if (a) for (const e of a.outcomes) set.add(e);
      if (s.action === "emit" && s.with && Array.isArray(s.with.events)) for (const e of s.with.events) set.add(e);
    }
    return Array.from(set);
  }

  function settingValue(st, v) {
    if (v === undefined || v === null) return "";
    if (st.type === "strings" && Array.isArray(v)) return v.join("\n");
    if (st.type === "object" || st.type === "any" || typeof v === "object") return JSON.stringify(v, null, 2);
    return String(v);
  }

  function settingInput(st, id, v) {
    const field = "with." + st.name;
    if (st.type === "bool") {
      const sel = el("select", { id, "data-field": field });
      for (const [val, text] of [["", "(default)"], ["true", "yes"], ["false", "no"]]) {
        const o = el("option", { value: val, text });
        if (String(v) === val || (v === undefined && val === "")) o.selected = true;
        sel.append(o);
      }
      return sel;
    }
    if (st.type === "strings" || st.type === "object" || st.type === "any") {
      const ta = el("textarea", { id, rows: "3", spellcheck: "false", "data-field": field, "data-type": st.type });
      ta.value = settingValue(st, v);
      return ta;
    }
    const inp = el("input", { id, type: st.type === "int" || st.type === "number" ? "number" : "text",
      autocomplete: "off", spellcheck: "false", "data-field": field, "data-type": st.type });
    if (st.type === "number") inp.step = "any";
    if (st.type === "duration") inp.placeholder = "30s";
    inp.value = settingValue(st, v);
    return inp;
  }

  function eventsField(i, s, key, label, chips) {
    const id = "s" + i + "-" + key;
    const inp = el("input", { id, type: "text", autocomplete: "off", spellcheck: "false", "data-field": key });
    inp.value = s[key].join(", ");
    const box = el("div", { class: "field" }, el("label", { for: id, text: label }), inp);
    if (chips) {
      // A toolbar (WAI-ARIA): one Tab stop, the arrow keys, Home and End move between its buttons.
      const c = el("div", { class: "chips", role: "toolbar", "aria-label": "Events to add to " + key + " of step " + s.name });
      for (const e of chips) {
        const b = el("button", { type: "button", text: "+ " + e, "aria-label": "Add " + e + " to " + key, tabindex: c.children.length ? "-1" : "0" });
        b.addEventListener("click", () => {
          const cur = list(inp.value);
          if (!cur.includes(e)) { cur.push(e); inp.value = cur.join(", "); changed(); }
        });
        c.append(b);
      }
      roving(c, "button", ["ArrowLeft", "ArrowUp"], ["ArrowRight", "ArrowDown"], false);
      box.append(c);
    }
    return box;
  }

  // roving gives a group of controls one Tab stop (the last one used, tabindex 0; the others -1):
  // the keys in prev and next move to the previous and next control, wrapping, Home and End to
  // the first and last. With activate the control moved to is also clicked (the tabs' pattern).
  function roving(group, selector, prev, next, activate) {
    group.addEventListener("keydown", (ev) => {
      const items = Array.from(group.querySelectorAll(selector));
      const i = items.indexOf(ev.target);
      if (i < 0) return;
      let j;
      if (prev.includes(ev.key)) j = (i - 1 + items.length) % items.length;
      else if (next.includes(ev.key)) j = (i + 1) % items.length;
      else if (ev.key === "Home") j = 0;
      else if (ev.key === "End") j = items.length - 1;
      else return;
      ev.preventDefault();
      for (const it of items) it.setAttribute("tabindex", it === items[j] ? "0" : "-1");
      items[j].focus();
      if (activate) items[j].click();
    });
  }

  function renderStep(s, i, events) {
    const fs = el("fieldset", { class: "step", "data-index": String(i), "data-step-name": s.name });
    fs.append(el("legend", { text: "Step " + s.name }));
    const grid = el("div", { class: "step-grid" });
    const nameInp = el("input", { id: "s" + i + "-name", type: "text", autocomplete: "off", spellcheck: "false", "data-field": "name" });
    nameInp.value = s.name;
    grid.append(el("div", { class: "field" }, el("label", { for: nameInp.id, text: "Step name" }), nameInp));
    const sel = el("select", { id: "s" + i + "-action", "data-field": "action" });
    // Internal actions (a built-in workflow's own) are not offered, but a step that uses one
    // keeps it.
    const names = catalog.actions.filter((a) => !a.owner).map((a) => a.name);
    if (!names.includes(s.action)) names.unshift(s.action);
    for (const n of names) {
      const o = el("option", { value: n, text: n });
      if (n === s.action) o.selected = true;
      sel.append(o);
    }
    sel.addEventListener("change", () => { collect(); render(); changed(true); $("s" + i + "-action").focus(); });
    const a = spec(s.action);
    grid.append(el("div", { class: "field" }, el("label", { for: sel.id, text: "Action" }), sel,
      a && a.doc ? el("p", { class: "muted", text: a.doc }) : null));
    grid.append(el("div", { class: "wide" }, eventsField(i, s, "needs", "Needs (runs once all of these events fired)", events)));
    grid.append(eventsField(i, s, "success", "On success, fire"));
    grid.append(eventsField(i, s, "failure", "On failure, fire"));
    fs.append(grid);
    if (a && a.settings.length) {
      const set = el("fieldset", { class: "settings" }, el("legend", { text: "Settings of " + a.name }));
      for (const st of a.settings) {
        const id = "s" + i + "-with-" + st.name;
        const label = el("label", { for: id, text: st.name + (st.required ? " (required)" : "") + " " });
        label.append(el("span", { class: "setting-doc", text: st.doc + (st.type === "strings" ? " One a line." : "") }));
        set.append(el("div", { class: "field" }, label, settingInput(st, id, (s.with || {})[st.name])));
      }
      fs.append(set);
    }
    fs.append(el("ul", { class: "problems", "data-problems": "" }));
    const rm = el("button", { type: "button", class: "link", text: "Remove step " + s.name });
    rm.addEventListener("click", () => {
      collect(); model.steps.splice(i, 1); render(); changed(true);
      // The button is gone: focus the step that took its place, else the one before, else Add.
      const next = $("s" + Math.min(i, model.steps.length - 1) + "-name");
      (next || $("add-action")).focus();
    });
    fs.append(rm);
    return fs;
  }

  function render() {
    $("wf-name").value = model.name;
    $("wf-external").value = model.external.join(", ");
    const events = knownEvents();
    steps.replaceChildren(...model.steps.map((s, i) => renderStep(s, i, events)));
  }

  function readSetting(inp) {
    const v = inp.value, t = inp.dataset.type;
    if (inp.tagName === "SELECT") return v === "" ? undefined : v === "true";
    if (v.trim() === "") return undefined;
    switch (t) {
      case "int": return /^-?\d+$/.test(v.trim()) ? parseInt(v, 10) : v;
      case "number": return isNaN(Number(v)) ? v : Number(v);
      case "strings": return v.split("\n").map((x) => x.trim()).filter((x) => x);
      case "object": case "any": try { return JSON.parse(v); } catch (_) { return v; }
    }
    return v;
  }

  // collect reads the form back into the model, keeping what the form does not show.
  function collect() {
    model.name = $("wf-name").value.trim();
    model.external = list($("wf-external").value);
    for (const fs of steps.querySelectorAll("fieldset.step")) {
      const s = model.steps[Number(fs.dataset.index)];
      const f = (k) => fs.querySelector('[data-field="' + k + '"]');
      s.name = f("name").value.trim();
      fs.dataset.stepName = s.name;
      s.action = f("action").value;
      s.needs = list(f("needs").value);
      s.success = list(f("success").value);
      s.failure = list(f("failure").value);
      const a = spec(s.action);
      const w = {};
      const declared = new Set(a ? a.settings.map((x) => x.name) : []);
      for (const k in s.with || {}) if (!declared.has(k)) w[k] = s.with[k];
      for (const inp of fs.querySelectorAll('[data-field^="with."]')) {
        const v = readSetting(inp);
        if (v !== undefined) w[inp.dataset.field.slice(5)] = v;
      }
      s.with = w;
    }
  }

  function showProblems(res) {
    for (const n of root.querySelectorAll(".field-problem")) n.remove();
    for (const n of root.querySelectorAll("[aria-invalid]")) { n.removeAttribute("aria-invalid"); n.removeAttribute("aria-describedby"); }
    for (const n of root.querySelectorAll(".has-problem")) n.classList.remove("has-problem");
    for (const n of root.querySelectorAll(".problems")) n.replaceChildren();
    const all = res.errors.map((d) => [d, "error"]).concat(res.warnings.map((d) => [d, "warning"]));
    let k = 0;
    for (const [d, sev] of all) {
      const where = (d.field ? d.field + ": " : "") + d.message;
      $("yaml-problems").append(el("li", { class: sev, text: (d.line ? "line " + d.line + ": " : "") + (d.step ? "step " + d.step + ": " : "") + where }));
      const fs = d.step ? steps.querySelector('fieldset.step[data-step-name="' + CSS.escape(d.step) + '"]') : null;
      if (!fs) {
        $("workflow-problems").append(el("li", { class: sev, text: (d.step ? "step " + d.step + ": " : "") + where }));
        continue;
      }
      if (sev === "error") {
        fs.classList.add("has-problem");
        fs.querySelector("[data-problems]").append(el("li", { class: sev, text: where }));
      } else {
        // Warnings (say, outcomes nothing needs yet) fold away: they do not stop a save.
        let box = fs.querySelector("details.warnings");
        if (!box) {
          box = el("details", { class: "warnings" }, el("summary"), el("ul", { class: "problems" }));
          fs.querySelector("[data-problems]").append(el("li", { class: "warning" }, box));
        }
        const ul = box.querySelector("ul");
        ul.append(el("li", { class: "warning", text: where }));
        const n = ul.children.length;
        box.querySelector("summary").textContent = n + " warning" + (n > 1 ? "s" : "");
      }
      let field = d.field && (fs.querySelector('[data-field="' + CSS.escape(d.field) + '"]') ||
        fs.querySelector('[data-field="' + CSS.escape(d.field.split(".").slice(0, 2).join(".")) + '"]'));
      if (!field && d.field === "with") {
        // "missing required setting "command"": the setting the message names.
        field = Array.from(fs.querySelectorAll('[data-field^="with."]')).find((f) => d.message.includes('"' + f.dataset.field.slice(5) + '"'));
      }
      if (field && sev === "error") {
        const id = "problem-" + (k++);
        field.setAttribute("aria-invalid", "true");
        field.setAttribute("aria-describedby", id);
        field.after(el("p", { class: "field-problem", id, text: d.message }));
      }
    }
    const n = res.errors.length;
    validity.textContent = n === 0 ? "Valid" + (res.warnings.length ? " (" + res.warnings.length + " warning" + (res.warnings.length > 1 ? "s" : "") + ")" : "") : n + " problem" + (n > 1 ? "s" : "") + " to fix";
    validity.className = n === 0 ? "valid" : "invalid";
  }

  function apply(res, fromForm) {
    if (fromForm && res.yaml !== undefined) yaml.value = res.yaml;
    if (res.model && !fromForm) { model = res.model; render(); }
    if (res.svg) diagram.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(res.svg);
    showProblems(res);
    // What saving would change from the newest stored version, rendered by the server.
    if (res.model) $("save-changes").innerHTML = res.changes || "";
  }

  // sync sends the form (or the YAML tab) to the server and shows what comes back.
  async function sync(fromForm) {
    const my = ++seq;
    const body = fromForm ? { model } : { yaml: yaml.value };
    const r = await post("/ui/draft", JSON.stringify(body), { "Content-Type": "application/json" });
    if (my !== seq) return; // a newer draft is on its way
    if (r.status !== 200) { validity.textContent = r.data.message || "The draft could not be checked."; return; }
    apply(r.data, fromForm);
  }

  function changed(now) {
    clearTimeout(timer);
    const run = () => { collect(); pending = sync(true); };
    if (now) run(); else timer = setTimeout(run, 250);
  }

  root.addEventListener("input", (e) => {
    if (e.target === yaml) {
      clearTimeout(timer);
      timer = setTimeout(() => { pending = sync(false); }, 250);
    } else if (e.target.closest("#panel-form") && e.target.tagName !== "SELECT") {
      // A step's legend names it as it is typed.
      const step = e.target.dataset.field === "name" && e.target.closest("fieldset.step");
      if (step) {
        step.dataset.stepName = e.target.value;
        step.querySelector("legend").textContent = "Step " + e.target.value;
      }
      changed();
    }
  });
  root.addEventListener("change", (e) => {
    if (e.target.tagName === "SELECT" && e.target.dataset.field && e.target.dataset.field.startsWith("with.")) changed();
  });

  // The Form and YAML tabs (the WAI-ARIA tabs pattern, activated as focus moves): the selected
  // tab is the tablist's one Tab stop; Left and Right (wrapping), Home and End select another.
  const tablist = root.querySelector('[role="tablist"]');
  for (const tab of tablist.querySelectorAll('[role="tab"]')) {
    tab.addEventListener("click", () => {
      for (const t of tablist.querySelectorAll('[role="tab"]')) {
        const on = t === tab;
        t.setAttribute("aria-selected", String(on));
        t.setAttribute("tabindex", on ? "0" : "-1");
        $(t.getAttribute("aria-controls")).hidden = !on;
      }
    });
  }
  roving(tablist, '[role="tab"]', ["ArrowLeft"], ["ArrowRight"], true);

  $("add-action").addEventListener("change", () => {
    const a = spec($("add-action").value);
    $("add-doc").textContent = a ? a.doc : "";
  });
  $("add-step").addEventListener("click", () => {
    collect();
    const action = $("add-action").value;
    let name = action, n = 2;
    while (model.steps.some((s) => s.name === name)) name = action + "-" + n++;
    model.steps.push({ name, action, needs: ["start"], success: [], failure: [], with: {} });
    render();
    changed(true);
    // The new step's name, selected: type to rename it, or Tab on to its action and settings.
    const nameInp = $("s" + (model.steps.length - 1) + "-name");
    nameInp.focus();
    nameInp.select();
  });

  // What the saved version changed from the one before it, as the server renders it (the same
  // section as the workflow's page).
  async function showChanges(name, version) {
    const box = $("save-changes");
    const res = await fetch("/workflows/" + encodeURIComponent(name) + "/changes?version=" + version);
    if (!res.ok) { box.replaceChildren(); return; }
    box.innerHTML = await res.text();
    $("save-status").append(" ", el("a", { href: "#changes", text: "What changed" }));
  }

  $("save").addEventListener("click", async () => {
    const status = $("save-status");
    clearTimeout(timer);
    if ($("panel-yaml").hidden) { collect(); await sync(true); } else { await sync(false); }
    $("save").disabled = true;
    status.textContent = "Saving…";
    try {
      const r = await post("/ui/api/workflows", yaml.value, { "Content-Type": "application/yaml" });
      if (r.status === 201 || r.status === 200) {
        const wf = r.data.workflow;
        status.replaceChildren("Saved version " + wf.version + " of ", el("a", { href: "/workflows/" + encodeURIComponent(wf.name) + "?version=" + wf.version, text: wf.name }), ".");
        root.dataset.version = String(wf.version);
        // Once saved, the page is the workflow's editor: its address says so (a reload or a
        // bookmark opens this workflow, not a new one).
        const own = "/workflows/" + encodeURIComponent(wf.name) + "/edit";
        if (location.pathname !== own) history.replaceState(null, "", own);
        await showChanges(wf.name, wf.version);
      } else if (r.status === 422) {
        status.textContent = "Not saved: fix the problems shown first.";
        showProblems(r.data);
      } else {
        status.textContent = "Not saved: " + (r.data.message || "error " + r.status);
      }
    } finally {
      $("save").disabled = false;
    }
  });

  (async () => {
    const res = await fetch("/ui/catalog");
    catalog = await res.json();
    const sel = $("add-action");
    for (const a of catalog.actions) if (!a.owner) sel.append(el("option", { value: a.name, text: a.name }));
    sel.dispatchEvent(new Event("change"));
    await sync(false);
  })();
})();
