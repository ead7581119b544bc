// Package tasktemplate is what the exec and http actions share of their settings' Go
// text/templates: the view of the item a template sees, the sample it is checked against when a
// workflow is validated, and rendering that refuses values the item does not have.
package tasktemplate

import (
	"fmt"
	"strings"
	"text/template"

	"github.com/sluice-project/sluice/internal/action"
)

// Item is the item as a template sees it: {{.Item.Name}}, {{.Item.Metadata.key}}, …
type Item struct {
	ID          int64
	Name        string
	ContentType string
	Metadata    map[string]any
	Options     map[string]any
}

// ItemOf returns the template view of it.
func ItemOf(it action.Item) Item {
	return Item{ID: it.ID, Name: it.Name, ContentType: it.ContentType, Metadata: it.Metadata, Options: it.Options}
}

// SampleItem is the item templates are executed with when a workflow is validated, to catch
// templates that name unknown fields.
var SampleItem = Item{ID: 1, Name: "dir/sample.pdf", ContentType: "application/pdf",
	Metadata: map[string]any{}, Options: map[string]any{}}

// Render executes tm with data. A map key the item lacks renders as "<no value>" in
// text/template; that would silently reach the command or request, so it is an error naming the
// template instead, as is a result holding any byte of forbidden (what describes them).
func Render(tm *template.Template, data any, forbidden, what string) (string, error) {
	var b strings.Builder
	if err := tm.Execute(&b, data); err != nil {
		return "", err
	}
	s := b.String()
	if strings.Contains(s, "<no value>") {
		return "", fmt.Errorf("%s: %q refers to a value the item does not have "+
			`(use {{or .Item.Metadata.key "default"}} for optional values)`, tm.Name(), tm.Root.String())
	}
	if strings.ContainsAny(s, forbidden) {
		return "", fmt.Errorf("%s: %q renders %s", tm.Name(), tm.Root.String(), what)
	}
	return s, nil
}

// Structural reports whether an error of executing a template comes from the template's shape
// (a field that does not exist, a call with the wrong arguments) rather than from the data it
// ran on: only those are reported when a workflow is validated.
func Structural(err error) bool {
	s := err.Error()
	return strings.Contains(s, "can't evaluate field") || strings.Contains(s, "wrong number of args")
}
