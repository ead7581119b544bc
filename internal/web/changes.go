package web

import (
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/sluice-project/sluice/internal/linediff"
	"github.com/sluice-project/sluice/internal/record"
	"github.com/sluice-project/sluice/internal/store"
)

// diffContext is how many unchanged lines a version's changes show around each change.
const diffContext = 3

// versionChanges is what changed in a workflow's YAML from one version to the next.
type versionChanges struct {
	Name string
	// From is the version compared with, 0 for the first version (all of it is new); To the
	// version shown.
	From, To int
	// Draft says To is the editor's draft, not a stored version.
	Draft          bool
	Hunks          []linediff.Hunk
	Trailing       int
	Added, Removed int
}

// Same says the two versions' YAML is the same.
func (c *versionChanges) Same() bool { return c.From != 0 && c.Added == 0 && c.Removed == 0 }

// diffVersions compares cur with prev (nil for the first version).
func diffVersions(prev, cur *record.Workflow) *versionChanges {
	c := &versionChanges{Name: cur.Name, To: cur.Version}
	var old []string
	if prev != nil {
		c.From = prev.Version
		old = linediff.Split(string(prev.Source))
	}
	d := linediff.Diff(old, linediff.Split(string(cur.Source)))
	c.Added, c.Removed = linediff.Counts(d)
	c.Hunks, c.Trailing = linediff.Hunks(d, diffContext)
	return c
}

// versionsOf returns the stored versions of the workflow name, newest first.
func (w *Web) versionsOf(r *http.Request, name string) ([]*record.Workflow, error) {
	all, err := w.rec.WorkflowList(r.Context())
	if err != nil {
		return nil, err
	}
	var versions []*record.Workflow
	for _, v := range all {
		if v.Name == name {
			versions = append(versions, v)
		}
	}
	sort.Slice(versions, func(i, j int) bool { return versions[i].Version > versions[j].Version })
	return versions, nil
}

// changesOf returns the changes of version (0: the newest) of a workflow against the version
// before it, and every version, newest first.
func (w *Web) changesOf(r *http.Request, name string, version int) (*versionChanges, *record.Workflow, []*record.Workflow, error) {
	versions, err := w.versionsOf(r, name)
	if err != nil {
		return nil, nil, nil, err
	}
	for i, v := range versions {
		if version != 0 && v.Version != version {
			continue
		}
		var prev *record.Workflow
		if i+1 < len(versions) {
			prev = versions[i+1]
		}
		return diffVersions(prev, v), v, versions, nil
	}
	if version != 0 {
		return nil, nil, nil, notFoundf("workflow %q has no version %d", name, version)
	}
	return nil, nil, nil, notFoundf("there is no workflow %q", name)
}

// changesFragment serves a version's changes as an HTML fragment: the editor shows it once it
// saved a version.
func (w *Web) changesFragment(rw http.ResponseWriter, r *http.Request, s *session) error {
	version, _ := strconv.Atoi(r.URL.Query().Get("version"))
	c, _, _, err := w.changesOf(r, r.PathValue("name"), version)
	if errors.Is(err, store.ErrNotFound) {
		return notFoundf("there is no workflow %q", r.PathValue("name"))
	} else if err != nil {
		return err
	}
	w.render(rw, r, http.StatusOK, "frag-changes", s, pageData{Data: c})
	return nil
}

// mark is how a diff line shows: its row's class, the sign seen and the word read aloud.
type mark struct{ Class, Sign, Word string }

func diffMark(k linediff.Kind) mark {
	switch k {
	case linediff.Insert:
		return mark{"ins", "+", "added"}
	case linediff.Delete:
		return mark{"del", "−", "removed"}
	}
	return mark{"eq", "", "unchanged"}
}

// draftChanges renders what saving the draft src of workflow name would change from its newest
// stored version; "" when no version of the name is stored.
func (w *Web) draftChanges(r *http.Request, name, src string) (string, error) {
	latest, err := w.rec.WorkflowGet(r.Context(), name, 0)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	c := diffVersions(latest, &record.Workflow{Name: name, Source: []byte(src)})
	c.Draft = true
	var b strings.Builder
	if err := w.pages["frag-changes"].ExecuteTemplate(&b, "fragment", pageData{Data: c}); err != nil {
		return "", err
	}
	return b.String(), nil
}
