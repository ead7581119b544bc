// Sluice's web UI: live progress, the item tree, uploads. No framework, no build step.
// User text is only ever set with textContent; HTML comes from the server's escaped templates.
"use strict";

function csrfToken() {
  const m = document.querySelector('meta[name="csrf-token"]');
  return m ? m.content : "";
}

function humanDuration(s) {
  if (!(s > 0)) return "";
  s = Math.round(s);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
}

const stateWords = { running: "running", complete: "complete", failed: "failed", canceled: "canceled" };

// leaving is set once a form of the page is submitted: the page is being replaced by the
// answer, which a reload must not cut short (a job ending as its event is sent from the job
// page's form reloaded the page over the form's answer, and its notice was lost).
let leaving = false;
document.addEventListener("submit", (e) => { if (!e.defaultPrevented) leaving = true; });

// Live progress: each [data-live-job] follows its job's server-sent progress events.
function followProgress() {
  const bars = Array.from(document.querySelectorAll("[data-live-job]")).slice(0, 4);
  for (const box of bars) {
    const id = box.dataset.liveJob;
    const scope = box.closest("[data-job]") || document;
    const es = new EventSource("/ui/api/jobs/" + encodeURIComponent(id) + "/progress");
    es.addEventListener("progress", (ev) => {
      const p = JSON.parse(ev.data);
      const pct = p.state === "complete" ? 100 : Math.floor(p.fraction * 100); // 100 % means done
      box.querySelector("progress").value = pct;
      box.querySelector(".pct").textContent = pct + " %";
      const eta = box.querySelector(".eta");
      if (eta) eta.textContent = (p.waiting ? " · time left unknown: waiting for an external event" : p.eta_seconds > 0 ? " · about " + humanDuration(p.eta_seconds) + " left" : "") + (p.waiting_for_downstream ? " · waiting for downstream" : "");
      refreshSteps(scope);
      const counts = scope.querySelector("[data-counts]");
      if (counts && p.items) {
        let total = 0;
        for (const k in p.items) total += p.items[k];
        const failed = (p.tasks && p.tasks.failed) || 0;
        counts.textContent = (p.items.ingested || 0) + " of " + total + " done" + (failed ? ", " + failed + (failed > 1 ? " tasks" : " task") + " failed" : "");
      }
    });
    es.addEventListener("end", (ev) => {
      es.close();
      const st = JSON.parse(ev.data).state;
      if (st === "complete") { // a canceled or failed job keeps the fraction it really reached
        box.querySelector("progress").value = 100;
        box.querySelector(".pct").textContent = "100 %";
      }
      const eta = box.querySelector(".eta");
      if (eta) eta.textContent = "";
      const badge = scope.querySelector("[data-job-state]");
      if (badge) {
        badge.textContent = stateWords[st] || st;
        badge.className = "state state-" + st;
      }
      // A job or documents page shows the finished tree and errors once the job has ended.
      if (scope === document && !leaving) location.reload();
    });
    es.onerror = () => { if (es.readyState === EventSource.CLOSED) box.removeAttribute("data-live-job"); };
  }
}

// The job page's steps (the diagram with each step's counts, and their table) are fetched again
// as progress arrives, at most once every 2 s; the diagram's address changes only with the counts.
let stepsAt = 0;
async function refreshSteps(scope) {
  const box = scope.querySelector("[data-live-steps]");
  if (!box || Date.now() - stepsAt < 2000) return;
  stepsAt = Date.now();
  try {
    const res = await fetch(box.dataset.steps, { headers: { Accept: "text/html" } });
    if (res.ok) box.innerHTML = await res.text();
  } catch (e) {
    // The page reloads itself when the job ends, cutting a fetch short: the reload shows them.
  }
}

// The item tree: children are fetched one level (and one page) at a time.
async function loadItems(button, append) {
  const q = new URLSearchParams({ parent_id: button.dataset.parent });
  if (button.dataset.cursor) q.set("cursor", button.dataset.cursor);
  const res = await fetch("/jobs/" + encodeURIComponent(button.dataset.job) + "/items?" + q, { headers: { Accept: "text/html" } });
  if (!res.ok) throw new Error("could not load the items (" + res.status + ")");
  const html = await res.text(); // rendered and escaped by the server's templates
  append(html);
}

document.addEventListener("click", async (ev) => {
  const b = ev.target.closest("button.children, button.more");
  if (!b) return;
  b.disabled = true;
  try {
    if (b.classList.contains("children")) {
      const ul = document.getElementById(b.getAttribute("aria-controls"));
      if (!ul.dataset.loaded) {
        await loadItems(b, (html) => { ul.innerHTML = html; });
        ul.dataset.loaded = "1";
      }
      const open = b.getAttribute("aria-expanded") !== "true";
      b.setAttribute("aria-expanded", String(open));
      ul.hidden = !open;
      b.textContent = b.textContent.replace(open ? /^Show/ : /^Hide/, open ? "Hide" : "Show");
    } else {
      const li = b.closest("li");
      await loadItems(b, (html) => { li.insertAdjacentHTML("afterend", html); li.remove(); });
    }
  } catch (e) {
    b.textContent = e.message;
  } finally {
    b.disabled = false;
  }
});

// New job: files from the input or dropped on the zone, uploaded with per-file progress.
function newJobForm() {
  const form = document.getElementById("new-job-form");
  if (!form) return;
  const input = document.getElementById("files");
  const drop = document.getElementById("drop");
  const list = document.getElementById("uploads");
  const status = document.getElementById("upload-status");
  const rows = [];

  function showFiles() {
    list.replaceChildren();
    rows.length = 0;
    for (const f of input.files) {
      const li = document.createElement("li");
      const name = document.createElement("span");
      name.className = "file-name";
      name.textContent = f.name;
      const bar = document.createElement("progress");
      bar.max = 100;
      bar.value = 0;
      bar.setAttribute("aria-label", "Upload of " + f.name);
      const pct = document.createElement("span");
      pct.className = "file-pct";
      pct.textContent = "0 %";
      li.append(name, bar, pct);
      list.append(li);
      rows.push({ file: f, bar, pct });
    }
  }
  input.addEventListener("change", showFiles);
  for (const t of ["dragenter", "dragover"]) drop.addEventListener(t, (e) => { e.preventDefault(); drop.classList.add("over"); });
  for (const t of ["dragleave", "drop"]) drop.addEventListener(t, () => drop.classList.remove("over"));
  drop.addEventListener("drop", (e) => {
    e.preventDefault();
    if (e.dataTransfer && e.dataTransfer.files.length) {
      input.files = e.dataTransfer.files;
      showFiles();
    }
  });

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!input.files.length) {
      status.textContent = "Choose or drop at least one file.";
      return;
    }
    const options = {};
    if (document.getElementById("opt-ocr").checked) options.ocr = true;
    if (document.getElementById("opt-split").checked) options.split_by_page = true;
    const lang = document.getElementById("opt-lang").value.trim();
    if (lang) options.lang = lang;
    // key=value keeps the value a string as typed ("01234" stays "01234"); key:=JSON types it.
    // The JSON is passed on as written, never through a JavaScript number: a 20-digit id
    // stays whole.
    const fields = [];
    for (const line of document.getElementById("metadata").value.split("\n")) {
      const i = line.indexOf("=");
      if (i <= 0) continue;
      const typed = line[i - 1] === ":";
      const k = line.slice(0, typed ? i - 1 : i).trim(), v = line.slice(i + 1).trim();
      if (!k) continue;
      if (typed) {
        try { JSON.parse(v); } catch (_) {
          status.textContent = `Metadata ${k}:= is not JSON: write key=value for text.`;
          return;
        }
        fields.push(JSON.stringify(k) + ":" + v);
      } else {
        fields.push(JSON.stringify(k) + ":" + JSON.stringify(v));
      }
    }
    const head = JSON.stringify({ workflow: document.getElementById("workflow").value, options });
    const job = head.slice(0, -1) + ',"metadata":{' + fields.join(",") + "}}";
    const fd = new FormData();
    fd.append("job", new Blob([job], { type: "application/json" }), "job.json");
    for (const r of rows) fd.append("file", r.file, r.file.name);
    // Where each file's bytes lie in the body, to turn upload progress into per-file progress.
    let offset = job.length;
    const spans = rows.map((r) => { const s = offset; offset += r.file.size + 200; return [s, r.file.size]; });
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/ui/api/jobs");
    xhr.setRequestHeader("X-CSRF-Token", csrfToken());
    xhr.upload.addEventListener("progress", (p) => {
      rows.forEach((r, i) => {
        const [start, size] = spans[i];
        const f = size === 0 ? (p.loaded >= start ? 1 : 0) : Math.max(0, Math.min(1, (p.loaded - start) / size));
        r.bar.value = Math.round(f * 100);
        r.pct.textContent = Math.round(f * 100) + " %";
      });
    });
    xhr.addEventListener("load", () => {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch (_) { /* not JSON */ }
      if (xhr.status === 200 || xhr.status === 201) {
        for (const r of rows) { r.bar.value = 100; r.pct.textContent = "100 %"; }
        status.textContent = "Uploaded. Opening job " + body.id + "…";
        location.assign("/jobs/" + encodeURIComponent(body.id) + "?notice=created");
      } else {
        status.textContent = "The upload was refused: " + (body.message || xhr.statusText);
        document.getElementById("start").disabled = false;
      }
    });
    xhr.addEventListener("error", () => {
      status.textContent = "The upload failed: the connection was lost.";
      document.getElementById("start").disabled = false;
    });
    document.getElementById("start").disabled = true;
    status.textContent = "Uploading " + rows.length + " file" + (rows.length > 1 ? "s" : "") + "…";
    xhr.send(fd);
  });
}

// timelineZoom widens a timeline by its zoom slider's factor: the bars grow, and the table's
// wrapper scrolls sideways to pan.
function timelineZoom() {
  for (const input of document.querySelectorAll("input.zoom[data-zoom-target]")) {
    const table = document.getElementById(input.dataset.zoomTarget);
    if (!table) continue;
    const apply = () => { table.style.minWidth = (Number(input.value) * 100) + "%"; };
    input.addEventListener("input", apply);
    apply();
  }
}

// selectAll ticks or unticks every checkbox of its class (data-select-all), and follows them.
function selectAll() {
  for (const all of document.querySelectorAll("input[data-select-all]")) {
    const boxes = () => [...document.querySelectorAll("input." + all.dataset.selectAll)];
    all.addEventListener("change", () => { for (const b of boxes()) b.checked = all.checked; });
    document.addEventListener("change", (e) => {
      if (!e.target.classList?.contains(all.dataset.selectAll)) return;
      const bs = boxes();
      all.checked = bs.every((b) => b.checked);
      all.indeterminate = !all.checked && bs.some((b) => b.checked);
    });
  }
}

// diagramZoom sizes a zoomable diagram: Larger and Smaller scale it from its natural size,
// Fit makes it fit its frame again; dragging the frame pans it.
function diagramZoom() {
  for (const fig of document.querySelectorAll("figure.zoomable")) {
    const view = fig.querySelector(".zoom-view"), img = view.querySelector("img");
    let scale = 0; // 0: fit
    const apply = () => {
      fig.dataset.zoom = scale === 0 ? "1" : "0";
      img.style.width = scale === 0 ? "" : Math.round(img.naturalWidth * scale) + "px";
    };
    fig.addEventListener("click", (e) => {
      const b = e.target.closest("button");
      if (!b) return;
      if (b.hasAttribute("data-zoom-fit")) scale = 0;
      else {
        const base = scale || img.clientWidth / Math.max(img.naturalWidth, 1);
        scale = Math.min(8, Math.max(0.1, base * Number(b.dataset.zoomBy)));
      }
      apply();
    });
    let drag = null;
    view.addEventListener("pointerdown", (e) => { drag = {x: e.clientX, y: e.clientY, l: view.scrollLeft, t: view.scrollTop}; });
    view.addEventListener("pointermove", (e) => {
      if (!drag) return;
      view.scrollLeft = drag.l - (e.clientX - drag.x);
      view.scrollTop = drag.t - (e.clientY - drag.y);
    });
    for (const end of ["pointerup", "pointerleave"]) view.addEventListener(end, () => { drag = null; });
    img.addEventListener("dragstart", (e) => e.preventDefault());
  }
}

document.addEventListener("DOMContentLoaded", () => {
  diagramZoom();
  followProgress();
  newJobForm();
  timelineZoom();
  selectAll();
});
