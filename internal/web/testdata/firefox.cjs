// firefox.cjs drives Firefox (Debian's firefox-esr) through the web UI over WebDriver BiDi with
// puppeteer-core, for TestFirefox: sign in, load the main pages, use the editor (its script,
// the draft round trip, a save and the changes it shows), upload a file and follow its job to
// the end, and check the jobs page at phone width. Every page must load its stylesheet and
// images, and raise no console error, no uncaught exception, no failed request and no
// Content-Security-Policy violation. It prints one JSON report and exits 1 on any problem.
//
// Environment: SLUICE_URL, SLUICE_TOKEN (an admin token), SLUICE_UPLOAD (a file to upload),
// FIREFOX (the executable), PUPPETEER (a directory whose node_modules holds puppeteer-core),
// SCREENSHOTS (a directory, optional), AXE (axe-core's axe.min.js, optional: every page checked
// is then checked with it too).
"use strict";

const fs = require("fs");
const path = require("path");
const puppeteer = require(path.join(process.env.PUPPETEER, "node_modules", "puppeteer-core"));

const base = process.env.SLUICE_URL;
// axe-core's script (AXE, optional): run on every page checked, every rule on, as the Chromium
// tests run it.
const axeSrc = process.env.AXE ? fs.readFileSync(process.env.AXE, "utf8") : "";
const problems = [];
const visited = [];
let canaryReport = [], canaryActive = false, axeChecked = 0;

// Recorded in the page before any of its scripts run: CSP violations and uncaught errors, which
// the page cannot hide from it.
function watch() {
  window.__sluice = { csp: [], errors: [] };
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__sluice.csp.push(e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
  });
  window.addEventListener("error", (e) => { window.__sluice.errors.push(String(e.message)); });
  window.addEventListener("unhandledrejection", (e) => { window.__sluice.errors.push("unhandled rejection: " + String(e.reason)); });
}

async function check(page, label) {
  // An image may still be decoding (the editor redraws its diagram, a data: URL, as one types):
  // wait for every image to load, up to a deadline; one not loaded by then is a problem below.
  // The wait and the reading are one evaluation: with a wait of its own before, a redraw that
  // set a new src in between was read while it decoded, and reported as not loaded.
  const state = await page.evaluate(async () => {
    const loaded = (i) => !i.getAttribute("src") || (i.complete && i.naturalWidth > 0);
    const deadline = Date.now() + 10000;
    for (let pending = [...document.images].filter((i) => !loaded(i)); pending.length && Date.now() < deadline; pending = [...document.images].filter((i) => !loaded(i))) {
      await Promise.race([Promise.all(pending.map((i) => i.decode().catch(() => {}))), new Promise((r) => setTimeout(r, 100))]);
    }
    return {
      url: location.pathname + location.search,
      h1: document.querySelector("h1")?.textContent.trim() || "",
      // The stylesheet applied: the header bar is the accent colour.
      styled: getComputedStyle(document.querySelector(".top") || document.body).backgroundColor,
      images: [...document.images].filter((i) => i.getAttribute("src")).map((i) => ({ src: i.src.slice(0, 80), ok: i.complete && i.naturalWidth > 0 })),
      csp: (window.__sluice || { csp: [] }).csp,
      errors: (window.__sluice || { errors: [] }).errors,
      width: document.documentElement.scrollWidth,
    };
  });
  visited.push({ label, url: state.url, h1: state.h1 });
  if (!state.h1) problems.push(label + ": no heading (" + state.url + ")");
  if (state.styled !== "rgb(24, 79, 120)") problems.push(label + ": the stylesheet is not applied (header " + state.styled + ")");
  for (const i of state.images) if (!i.ok) problems.push(label + ": image not loaded: " + i.src);
  for (const c of state.csp) problems.push(label + ": CSP violation: " + c);
  for (const e of state.errors) problems.push(label + ": script error: " + e);
  if (axeSrc) {
    const vs = await page.evaluate(async (src) => {
      if (!window.axe) (0, eval)(src);
      const r = await axe.run(document, { rules: Object.fromEntries(axe.getRules().map((x) => [x.ruleId, { enabled: true }])) });
      return r.violations.map((v) => "[" + v.impact + "] " + v.id + ": " + v.help + " at " + v.nodes.map((n) => n.target.join(" ")).join(", "));
    }, axeSrc);
    for (const v of vs) problems.push(label + ": axe-core: " + v);
    axeChecked++;
  }
  if (process.env.SCREENSHOTS) await page.screenshot({ path: path.join(process.env.SCREENSHOTS, "firefox-" + label.replace(/[^a-z0-9]+/gi, "-") + ".png"), fullPage: true });
  return state;
}

// waitFor polls a page expression until it is true, for up to ms.
async function waitFor(page, what, expr, ms) {
  try {
    await page.waitForFunction(expr, { timeout: ms, polling: 100 });
  } catch (e) {
    const shows = await page.evaluate(() => document.querySelector("main")?.innerText.slice(0, 500)).catch(() => "?");
    throw new Error("timed out waiting for " + what + "; the page shows: " + shows);
  }
}

async function open(page, p, label) {
  const res = await page.goto(base + p, { waitUntil: "load" });
  if (!res || res.status() !== 200) problems.push(label + ": " + p + " answered " + (res ? res.status() : "nothing"));
  return check(page, label);
}

(async () => {
  const browser = await puppeteer.launch({ browser: "firefox", executablePath: process.env.FIREFOX, headless: true,
    extraPrefsFirefox: { "browser.shell.checkDefaultBrowser": false } });
  let version = "";
  try {
    version = await browser.version();
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    await page.evaluateOnNewDocument(watch);
    // Firefox also reports a CSP violation as an error of the page: while the canary below
    // runs, that report is its, not a problem.
    const report = (msg) => {
      if (canaryActive && msg.includes("Content-Security-Policy")) canaryReport.push(msg);
      else problems.push(msg);
    };
    page.on("console", (m) => { if (m.type() === "error") report("console error: " + m.text()); });
    // Firefox's own PDF viewer (pdf.js, in the item page's frame) reports its messages to the
    // frame's parent as the page's errors; they are the viewer's, not the page's.
    page.on("pageerror", (e) => { if (!e.message.includes("resource://pdf.js")) report("uncaught: " + e.message); });
    page.on("requestfailed", (r) => {
      const why = r.failure()?.errorText || "";
      // Leaving a page ends its progress stream, and Firefox drops the page's favicon fetch
      // still in flight (NS_BINDING_ABORTED): neither is a failure of the page.
      if (r.url().includes("/progress")) return;
      // The same reload cuts short a refresh of the job's steps in flight.
      if (/\/jobs\/\d+\/steps$/.test(new URL(r.url()).pathname) && why === "NS_BINDING_ABORTED") return;
      if (r.url().endsWith("/static/favicon.svg") && why === "NS_BINDING_ABORTED") return;
      problems.push("request failed: " + r.url() + " " + why);
    });
    page.on("response", (r) => { if (r.status() >= 400) problems.push("HTTP " + r.status() + ": " + r.url()); });

    await open(page, "/signin", "sign-in");
    await page.type("#token", process.env.SLUICE_TOKEN);
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#signin")]);
    await check(page, "jobs");
    if (!page.url().endsWith("/jobs")) problems.push("sign-in led to " + page.url());

    // The watch works and the policy holds: an inline script added to the page is blocked and
    // reported (the canary is then forgotten).
    canaryActive = true;
    const canary = await page.evaluate(async () => {
      const s = document.createElement("script");
      s.textContent = "window.__inlineRan = true";
      document.body.append(s);
      for (let i = 0; i < 50 && window.__sluice.csp.length === 0; i++) await new Promise((r) => setTimeout(r, 100));
      const seen = window.__sluice.csp.splice(0);
      return { ran: window.__inlineRan === true, seen };
    });
    if (canary.ran) problems.push("an inline script ran: the Content-Security-Policy is not enforced");
    if (canary.seen.length === 0) problems.push("a blocked inline script was not reported: the CSP watch does not work");
    canaryReport.push(...canary.seen);
    for (let i = 0; i < 50 && canaryReport.length < 2; i++) await new Promise((r) => setTimeout(r, 100));
    canaryActive = false;

    await open(page, "/workflows", "workflows");
    await open(page, "/workflows/documents", "workflow");
    await open(page, "/search?q=sluice", "search");
    await open(page, "/operations", "operations");
    await open(page, "/audit", "audit");

    // The editor: its script builds the form from the catalog and draws the diagram through
    // POST /ui/draft (with the CSRF header); typing a name reaches the YAML; saving shows the
    // version's changes.
    await open(page, "/workflows/new", "editor");
    await waitFor(page, "the editor's form and diagram", `document.querySelector("#s0-needs") !== null && document.querySelector("#diagram").src.startsWith("data:")`, 30000);
    await page.evaluate(() => { const e = document.querySelector("#wf-name"); e.focus(); e.select(); });
    await page.keyboard.type("firefox-flow");
    await waitFor(page, "the YAML to follow the form", `document.querySelector("#yaml").value.includes("name: firefox-flow") && document.querySelector("#validity").textContent.startsWith("Valid")`, 30000);
    await page.click("#save");
    await waitFor(page, "version 1 saved with its changes", `document.querySelector("#save-status").textContent.includes("Saved version 1 of firefox-flow") && document.querySelector("#save-changes").textContent.includes("first version")`, 30000);
    await check(page, "editor saved");
    const savedAt = await page.evaluate(() => location.pathname);
    if (savedAt !== "/workflows/firefox-flow/edit") problems.push("editor saved: the address is " + savedAt + ", want /workflows/firefox-flow/edit");

    // A job: upload one file, watch it to the end through the progress stream.
    await open(page, "/jobs/new", "new job");
    const input = await page.$("#files");
    await input.uploadFile(process.env.SLUICE_UPLOAD);
    await waitFor(page, "the file listed", `document.querySelectorAll("#uploads li").length === 1`, 10000);
    await Promise.all([page.waitForNavigation({ waitUntil: "load", timeout: 60000 }), page.click("#start")]);
    // The page reloads itself when the job completes: wait for the page the server rendered
    // for the complete job, which follows no progress stream.
    await waitFor(page, "the job to complete", `document.readyState === "complete" && document.querySelector(".progress[data-live-job]") === null && document.querySelector("#job-state")?.textContent.trim() === "complete" && document.querySelector(".pct")?.textContent === "100 %"`, 90000);
    await check(page, "job");
    const jobPath = await page.evaluate(() => location.pathname);
    await open(page, jobPath + "/documents", "documents");
    await open(page, "/documents?sort=title", "documents of every job");
    const listed = await page.evaluate(() => document.querySelectorAll("#documents li.doc").length);
    if (listed !== 1) problems.push("documents of every job: " + listed + " listed, want 1");
    // A search's hit leads to the text, the matched word marked.
    await open(page, "/search?q=mill", "search for mill");
    await Promise.all([page.waitForNavigation({ waitUntil: "load" }), page.click("#hits a")]);
    await check(page, "text reached from a search");
    const marked = await page.evaluate(() => [...document.querySelectorAll("#text mark")].map((m) => m.textContent).join());
    if (marked !== "mill") problems.push("text reached from a search: marked " + JSON.stringify(marked) + ", want mill");
    // The job's timeline: a bar per attempt; the zoom widens it inside its scrolling wrapper.
    await open(page, jobPath + "/history", "timeline");
    const zoomed = await page.evaluate(() => {
      const z = document.querySelector("input.zoom"), w = document.querySelector(".timeline-scroll");
      if (!z || !w) return { bars: 0 };
      z.value = 4; z.dispatchEvent(new Event("input"));
      return { bars: document.querySelectorAll("svg.bar rect.run").length, wide: w.scrollWidth > 3 * w.clientWidth };
    });
    if (!zoomed.bars) problems.push("timeline: no attempt drawn");
    if (!zoomed.wide) problems.push("timeline: the zoom did not widen it");

    // Phone width.
    await page.setViewport({ width: 390, height: 844 });
    const phone = await open(page, "/jobs", "jobs at phone width");
    if (phone.width > 400) problems.push("jobs at phone width: " + phone.width + " px wide");
    const phoneDocs = await open(page, "/documents", "documents at phone width");
    if (phoneDocs.width > 400) problems.push("documents at phone width: " + phoneDocs.width + " px wide");
    const phoneTimeline = await open(page, jobPath + "/history", "timeline at phone width");
    if (phoneTimeline.width > 400) problems.push("timeline at phone width: " + phoneTimeline.width + " px wide");
  } catch (e) {
    problems.push("stopped: " + (e && e.stack || e));
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify({ browser: version, visited, canary: canaryReport, axe_checked: axeChecked, problems }) + "\n");
  process.exit(problems.length ? 1 : 0);
})();
