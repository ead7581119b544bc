package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sluice-project/sluice/internal/builtin"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
	"github.com/sluice-project/sluice/internal/workflow"
)

// workflowVersions is one stored workflow with its versions, newest first.
type workflowVersions struct {
	Name     string
	Versions []versionRow
}

// versionRow is a version in the library, with the number of lines it changed.
type versionRow struct {
	*record.Workflow
	Changes *versionChanges
}

func (w *Web) workflowsPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	wfs, err := w.rec.WorkflowList(r.Context())
	if err != nil {
		return err
	}
	by := map[string]*workflowVersions{}
	var names []string
	for _, wf := range wfs {
		v := by[wf.Name]
		if v == nil {
			v = &workflowVersions{Name: wf.Name}
			by[wf.Name] = v
			names = append(names, wf.Name)
		}
		v.Versions = append(v.Versions, versionRow{Workflow: wf})
	}
	sort.Strings(names)
	var list []*workflowVersions
	for _, n := range names {
		v := by[n]
		sort.Slice(v.Versions, func(i, j int) bool { return v.Versions[i].Version > v.Versions[j].Version })
		for i := range v.Versions {
			var prev *record.Workflow
			if i+1 < len(v.Versions) {
				prev = v.Versions[i+1].Workflow
			}
			v.Versions[i].Changes = diffVersions(prev, v.Versions[i].Workflow)
		}
		list = append(list, v)
	}
	w.render(rw, r, http.StatusOK, "workflows", s, pageData{Title: "Workflows", Nav: "workflows", Data: list})
	return nil
}

func (w *Web) workflowPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	name := r.PathValue("name")
	version, _ := strconv.Atoi(r.URL.Query().Get("version"))
	changes, wf, versions, err := w.changesOf(r, name, version)
	if err != nil {
		return err
	}
	w.render(rw, r, http.StatusOK, "workflow", s, pageData{Title: "Workflow " + name, Nav: "workflows", Data: struct {
		Workflow *record.Workflow
		Source   string
		Versions []*record.Workflow
		Changes  *versionChanges
	}{wf, string(wf.Source), versions, changes}})
	return nil
}

// newWorkflowSource is where a new workflow starts.
const newWorkflowSource = `name: my-workflow
steps:
  detect:
    action: detect
    needs: [start]
`

func (w *Web) editorPage(rw http.ResponseWriter, r *http.Request, s *session) error {
	src, name, version := newWorkflowSource, "", 0
	if n := r.PathValue("name"); n != "" {
		wf, err := w.rec.WorkflowGet(r.Context(), n, 0)
		if errors.Is(err, store.ErrNotFound) {
			return notFoundf("there is no workflow %q", n)
		} else if err != nil {
			return err
		}
		src, name, version = string(wf.Source), wf.Name, wf.Version
	}
	title := "New workflow"
	if name != "" {
		title = "Edit " + name
	}
	w.render(rw, r, http.StatusOK, "editor", s, pageData{Title: title, Nav: "workflows", Data: struct {
		Source  string
		Name    string
		Version int
	}{src, name, version}})
	return nil
}

// catalogAction is an action of the catalog as the editor uses it.
type catalogAction struct {
	Name     string           `json:"name"`
	Doc      string           `json:"doc"`
	Settings []catalogSetting `json:"settings"`
	Outcomes []string         `json:"outcomes"`
	// Owner is the built-in workflow whose own action this is ([builtin.Owner]): internal, not
	// offered in the editor's pickers.
	Owner string `json:"owner,omitempty"`
}

type catalogSetting struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	Doc      string `json:"doc"`
}

func (w *Web) catalog(rw http.ResponseWriter, r *http.Request, s *session) error {
	cat := w.b.Engine().Catalog()
	out := struct {
		Actions  []catalogAction `json:"actions"`
		Builtins []string        `json:"builtin_events"`
	}{Actions: []catalogAction{}, Builtins: []string{workflow.EventStart, workflow.EventChildrenDone, workflow.EventOK, workflow.EventFail}}
	for _, n := range cat.Names() {
		spec, _ := cat.Spec(n)
		a := catalogAction{Name: n, Doc: spec.Doc, Settings: []catalogSetting{}, Outcomes: append([]string{}, spec.Outcomes...), Owner: builtin.Owner(n)}
		for _, st := range spec.Settings {
			a.Settings = append(a.Settings, catalogSetting{st.Name, string(st.Type), st.Required, st.Doc})
		}
		out.Actions = append(out.Actions, a)
	}
	writeJSON(rw, out)
	return nil
}

func writeJSON(rw http.ResponseWriter, v any) {
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(rw)
	enc.SetEscapeHTML(true)
	_ = enc.Encode(v)
}

// draftModel is the editor's form: a workflow with its steps as a list.
type draftModel struct {
	Name     string      `json:"name"`
	External []string    `json:"external"`
	Steps    []draftStep `json:"steps"`
}

type draftStep struct {
	Name           string         `json:"name"`
	Action         string         `json:"action"`
	Needs          []string       `json:"needs"`
	Success        []string       `json:"success"`
	Failure        []string       `json:"failure"`
	With           map[string]any `json:"with"`
	Concurrency    int            `json:"concurrency,omitempty"`
	Timeout        string         `json:"timeout,omitempty"`
	Attempts       int            `json:"attempts,omitempty"`
	ProgressWeight *float64       `json:"progress_weight,omitempty"`
}

// draftResult is what the editor shows for a draft: its YAML, its form, its diagram and its
// problems (from the same validation as POST /v1/workflows/validate, with lines of the YAML).
type draftResult struct {
	YAML     string                `json:"yaml"`
	Model    *draftModel           `json:"model,omitempty"`
	SVG      string                `json:"svg,omitempty"`
	Valid    bool                  `json:"valid"`
	Errors   []workflow.Diagnostic `json:"errors"`
	Warnings []workflow.Diagnostic `json:"warnings"`
	// Changes is what saving the draft would change from the newest stored version of its
	// name, as HTML; empty for a name not stored yet.
	Changes string `json:"changes,omitempty"`
}

// draft takes the editor's form ({"model": …}) or its YAML tab ({"yaml": "…"}) and answers
// with the other, the diagnostics and the diagram.
func (w *Web) draft(rw http.ResponseWriter, r *http.Request, s *session) error {
	var req struct {
		Model *draftModel `json:"model"`
		YAML  *string     `json:"yaml"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&req); err != nil {
		return errorf(http.StatusBadRequest, "send {\"model\": …} or {\"yaml\": …}")
	}
	out := draftResult{Errors: []workflow.Diagnostic{}, Warnings: []workflow.Diagnostic{}}
	switch {
	case req.Model != nil:
		src, err := modelYAML(req.Model)
		if err != nil {
			return errorf(http.StatusBadRequest, "%v", err)
		}
		out.YAML = src
	case req.YAML != nil:
		out.YAML = *req.YAML
	default:
		return errorf(http.StatusBadRequest, "send {\"model\": …} or {\"yaml\": …}")
	}
	def, err := workflow.Parse([]byte(out.YAML), "draft")
	if err != nil {
		var pe *workflow.ParseError
		if !errors.As(err, &pe) {
			return err
		}
		out.Errors = append(out.Errors, pe.Diagnostic())
		writeJSON(rw, out)
		return nil
	}
	cat := w.b.Engine().Catalog()
	warnings, err := workflow.Validate(def, cat.Spec, cat.Names()...)
	var ve *workflow.ValidationError
	switch {
	case err == nil:
		out.Valid = true
	case errors.As(err, &ve):
		out.Errors = ve.Diagnostics
	default:
		return err
	}
	if warnings != nil {
		out.Warnings = warnings
	}
	out.Model = defModel(def)
	out.SVG = string(workflow.NewGraph(def, cat.Spec).SVG())
	if out.Changes, err = w.draftChanges(r, def.Name, out.YAML); err != nil {
		return err
	}
	writeJSON(rw, out)
	return nil
}

// defModel turns a parsed definition into the editor's form.
func defModel(def *workflow.Definition) *draftModel {
	m := &draftModel{Name: def.Name, External: nonNil(def.External), Steps: []draftStep{}}
	for _, st := range def.Steps {
		ds := draftStep{Name: st.Name, Action: st.Action, Needs: nonNil(st.Needs), Success: nonNil(st.Success),
			Failure: nonNil(st.Failure), With: st.With, Concurrency: st.Concurrency, Attempts: st.Attempts,
			ProgressWeight: st.ProgressWeight}
		if ds.With == nil {
			ds.With = map[string]any{}
		}
		if st.Timeout != 0 {
			ds.Timeout = time.Duration(st.Timeout).String()
		}
		m.Steps = append(m.Steps, ds)
	}
	return m
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// modelYAML writes the editor's form as the workflow's YAML, in the form's order.
func modelYAML(m *draftModel) (string, error) {
	doc := mapping()
	addScalar(doc, "name", m.Name)
	if len(m.External) > 0 {
		addKey(doc, "external", flowSeq(m.External))
	}
	steps := mapping()
	for _, st := range m.Steps {
		sm := mapping()
		addScalar(sm, "action", st.Action)
		addKey(sm, "needs", flowSeq(st.Needs))
		if len(st.Success) > 0 {
			addKey(sm, "success", flowSeq(st.Success))
		}
		if len(st.Failure) > 0 {
			addKey(sm, "failure", flowSeq(st.Failure))
		}
		if len(st.With) > 0 {
			var n yaml.Node
			if err := n.Encode(st.With); err != nil {
				return "", fmt.Errorf("step %q: with: %v", st.Name, err)
			}
			addKey(sm, "with", &n)
		}
		if st.Concurrency != 0 {
			addScalar(sm, "concurrency", strconv.Itoa(st.Concurrency))
			sm.Content[len(sm.Content)-1].Tag = "!!int"
		}
		if st.Timeout != "" {
			addScalar(sm, "timeout", st.Timeout)
		}
		if st.Attempts != 0 {
			addScalar(sm, "attempts", strconv.Itoa(st.Attempts))
			sm.Content[len(sm.Content)-1].Tag = "!!int"
		}
		if st.ProgressWeight != nil {
			addScalar(sm, "progress_weight", strconv.FormatFloat(*st.ProgressWeight, 'g', -1, 64))
			sm.Content[len(sm.Content)-1].Tag = "!!float"
		}
		addKey(steps, st.Name, sm)
	}
	addKey(doc, "steps", steps)
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{doc}}); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	return b.String(), nil
}

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

func addKey(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
}

func addScalar(m *yaml.Node, key, value string) {
	addKey(m, key, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

func flowSeq(l []string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, s := range l {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s})
	}
	return n
}
