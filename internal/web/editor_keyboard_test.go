package web_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sluice-project/sluice/internal/builtin"
)

// press sends keys to whatever has the focus, as a keyboard does.
func (tb *tab) press(keys string, opts ...chromedp.KeyOption) {
	tb.t.Helper()
	tb.do(chromedp.KeyEvent(keys, opts...))
}

// focusedJS names the focused element: its id, else its accessible label or text.
const focusedJS = `(() => { const e = document.activeElement; if (!e || e === document.body) return "(body)";
	return e.id ? "#" + e.id : e.tagName.toLowerCase() + ":" + (e.getAttribute("aria-label") || e.textContent.trim()); })()`

// tabTo presses Tab until the element named (as focusedJS names it: #id, or tag:label) has the
// focus, failing after max presses with the path the focus took.
func (tb *tab) tabTo(name string, max int) {
	tb.t.Helper()
	var path []string
	for range max {
		tb.press(kb.Tab)
		f := eval[string](tb, focusedJS)
		if f == name {
			return
		}
		path = append(path, f)
	}
	tb.t.Fatalf("%s not reached in %d presses of Tab; the focus went %s", name, max, strings.Join(path, " → "))
}

// TestBrowserEditorKeyboard drives the workflow editor with the keyboard alone: Tab reaches
// every control in reading order (each chip toolbar one stop), the Form/YAML tabs follow the
// WAI-ARIA tabs pattern (arrows wrap, Home/End, roving tabindex), and a workflow is named, given
// an exec step from the catalog, filled and saved without a click.
func TestBrowserEditorKeyboard(t *testing.T) {
	tools := requireTools(t, "chromium")
	b := setup(t)
	ctx := browser(t, tools["chromium"])
	admin := &tab{t: t, ctx: ctx, base: b.url, shot: screenshotDir(t), axe: axeScript(t)}
	admin.signIn(b.admin)
	admin.open("/workflows/new")
	admin.waitJS(10*time.Second, "the editor's form", `document.querySelector("#s0-needs") !== null && document.querySelector("#validity").textContent !== "" && document.querySelector("#add-action").value !== ""`, `document.querySelector("main").innerText`)

	// Tab from the top of the page to Save: every control once, in reading order.
	eval[chromedp.Void](admin, `document.activeElement?.blur()`)
	var path []string
	for len(path) < 200 && !slices.Contains(path, "#save") {
		admin.press(kb.Tab)
		f := eval[string](admin, focusedJS)
		if strings.HasPrefix(f, "summary:") && strings.Contains(f, "warning") {
			f = "summary:N warnings" // the step's folded warnings
		}
		path = append(path, f)
	}
	want := []string{"#tab-form", "#wf-name", "#wf-external", "#s0-name", "#s0-action", "#s0-needs",
		"button:Add start to needs", "#s0-success", "#s0-failure", "summary:N warnings", "button:Remove step detect",
		"#add-action", "#add-step", "#save"}
	at := -1
	for _, w := range want {
		i := slices.Index(path, w)
		if i <= at {
			t.Fatalf("Tab reaches %s out of order or not at all; the focus went %s", w, strings.Join(path, " → "))
		}
		at = i
	}
	editorStops := path[slices.Index(path, "#tab-form"):]
	if !slices.Equal(editorStops, want) {
		t.Errorf("in the editor Tab goes %s\nwant %s", strings.Join(editorStops, " → "), strings.Join(want, " → "))
	}
	if slices.Contains(path, "#tab-yaml") {
		t.Error("Tab stops on the unselected YAML tab: a tablist is one stop")
	}
	// Shift+Tab goes back the same way.
	admin.press(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift))
	if f := eval[string](admin, focusedJS); f != "#add-step" {
		t.Errorf("Shift+Tab from Save focuses %s, want #add-step", f)
	}

	// The tabs: arrows move and select (wrapping), Home and End, the selected tab is the one stop.
	tabState := `(() => { const f = document.querySelector("#tab-form"), y = document.querySelector("#tab-yaml");
		return document.activeElement.id + " selected=" + (f.getAttribute("aria-selected") === "true" ? "form" : "") + (y.getAttribute("aria-selected") === "true" ? "yaml" : "") +
			" tabindex=" + f.tabIndex + "," + y.tabIndex + " shown=" + (document.querySelector("#panel-form").hidden ? "" : "form") + (document.querySelector("#panel-yaml").hidden ? "" : "yaml"); })()`
	eval[chromedp.Void](admin, `document.querySelector("#tab-form").focus()`)
	for _, step := range []struct{ key, want string }{
		{kb.ArrowRight, "tab-yaml selected=yaml tabindex=-1,0 shown=yaml"},
		{kb.ArrowRight, "tab-form selected=form tabindex=0,-1 shown=form"},
		{kb.ArrowLeft, "tab-yaml selected=yaml tabindex=-1,0 shown=yaml"},
		{kb.Home, "tab-form selected=form tabindex=0,-1 shown=form"},
		{kb.End, "tab-yaml selected=yaml tabindex=-1,0 shown=yaml"},
	} {
		admin.press(step.key)
		if got := eval[string](admin, tabState); got != step.want {
			t.Fatalf("after %q the tabs are %q, want %q", step.key, got, step.want)
		}
	}
	admin.press(kb.Tab)
	if f := eval[string](admin, focusedJS); f != "#yaml" {
		t.Errorf("Tab from the YAML tab focuses %s, want its panel's #yaml", f)
	}
	admin.checkA11y("editor's YAML tab, by keyboard")
	admin.press(kb.Tab, chromedp.KeyModifiers(chromedp.ModifierShift))
	admin.press(kb.Home)
	if got := eval[string](admin, tabState); got != "tab-form selected=form tabindex=0,-1 shown=form" {
		t.Fatalf("back on the form: %q", got)
	}

	// Build and save a workflow by keyboard alone. Tabbing into a field selects its text, so
	// typing replaces it.
	admin.tabTo("#wf-name", 3)
	admin.press("kbflow")
	admin.tabTo("#add-action", 40)
	admin.press("exec") // a select picks the option one types
	if v := eval[string](admin, `document.querySelector("#add-action").value`); v != "exec" {
		t.Fatalf("typing exec on the action list chose %q", v)
	}
	admin.tabTo("#add-step", 2)
	admin.press(kb.Enter)
	admin.waitJS(10*time.Second, "the new step, its name focused and selected", `document.activeElement?.id === "s1-name" && document.activeElement.selectionStart === 0 && document.activeElement.selectionEnd === 4 && document.querySelector("#s1-with-command") !== null`, focusedJS)
	admin.press("hash")
	// Its toolbar of events: one stop; the arrows move within it.
	admin.tabTo("#s1-needs", 3)
	admin.press(kb.Tab)
	first := eval[string](admin, focusedJS)
	admin.press(kb.ArrowRight)
	second := eval[string](admin, focusedJS)
	admin.press(kb.End)
	last := eval[string](admin, focusedJS)
	admin.press(kb.Home)
	if back := eval[string](admin, focusedJS); first != "button:Add start to needs" || second == first || last == second || back != first {
		t.Errorf("the needs toolbar: first %s, → %s, End %s, Home %s", first, second, last, back)
	}
	admin.tabTo("#s1-with-command", 20)
	admin.press("sha256sum")
	admin.waitJS(10*time.Second, "the workflow valid with the hash step",
		`document.querySelector("#validity").textContent.startsWith("Valid") && document.querySelector("#yaml").value.includes("sha256sum") && document.querySelector("#yaml").value.includes("name: kbflow")`,
		`document.querySelector("#validity").textContent + "\n" + document.querySelector("#yaml").value`)
	admin.checkA11y("editor, by keyboard")
	admin.tabTo("#save", 40)
	admin.press(kb.Enter)
	admin.waitJS(10*time.Second, "version 1 saved", `document.querySelector("#save-status").textContent.includes("Saved version 1 of kbflow")`, `document.querySelector("#save-status").textContent`)
	// Saved, the page is the workflow's editor; the renamed step's legend has its new name; the
	// action picker offers no built-in workflow's own action.
	if p := eval[string](admin, `location.pathname`); p != "/workflows/kbflow/edit" {
		t.Errorf("after the first save the address is %s, want /workflows/kbflow/edit", p)
	}
	if l := eval[string](admin, `document.querySelector('fieldset.step[data-index="1"] legend').textContent`); l != "Step hash" {
		t.Errorf("the step renamed hash has the legend %q", l)
	}
	offered := eval[[]string](admin, `[...document.querySelectorAll("#add-action option")].map((o) => o.value)`)
	if !slices.Contains(offered, "exec") {
		t.Errorf("the action picker lacks exec: %v", offered)
	}
	for _, a := range offered {
		if builtin.Owner(a) != "" {
			t.Errorf("the action picker offers %s, the %s workflow's own action", a, builtin.Owner(a))
		}
	}
	wf, err := b.n.Store.WorkflowGet(t.Context(), "kbflow", 1)
	if err != nil {
		t.Fatalf("kbflow was not saved: %v", err)
	}
	for _, want := range []string{"  hash:\n    action: exec", "sha256sum"} {
		if !strings.Contains(string(wf.Source), want) {
			t.Errorf("the saved source lacks %q:\n%s", want, wf.Source)
		}
	}

	// Removing a step by keyboard leaves the focus on the step that took its place.
	eval[chromedp.Void](admin, `document.querySelector("#s0-name").focus()`)
	admin.tabTo("button:Remove step detect", 10)
	admin.press(kb.Enter)
	admin.waitJS(10*time.Second, "the focus on the step left", `document.activeElement?.id === "s0-name" && document.activeElement.value === "hash"`, focusedJS)
}
