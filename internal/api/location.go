package api

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/sluice-project/sluice/internal/objects"
	"github.com/sluice-project/sluice/internal/pathroot"
)

// location checks a location a request names — a job's path, a sheet's files_dir, a graph's
// source — with the one path-root check ([pathroot.Roots.Check]) and accepts only the kinds the
// route reads. Every refusal is the same error: 400 bad_request, "<field> "<location>": <reason>".
// Nothing is read from a refused location; a local one may have been looked up (stat) inside
// its root only.
func (a *API) location(field, loc string, accept ...pathroot.Kind) (pathroot.Target, error) {
	l, err := pathroot.Classify(loc)
	if err != nil {
		return pathroot.Target{}, a.locationError(field, err)
	}
	if !slices.Contains(accept, l.Kind) {
		names := make([]string, len(accept))
		for i, k := range accept {
			names[i] = kindName(k)
		}
		return pathroot.Target{}, errf(CodeBadRequest, "%s %q: %s is not read here (want %s)", field, loc, kindName(l.Kind), strings.Join(names, " or "))
	}
	t, err := a.roots.Check(loc)
	if err != nil {
		return pathroot.Target{}, a.locationError(field, err)
	}
	return t, nil
}

// metadataLocation is a job metadata key a built-in workflow's actions read as a location: its
// path of keys, the kinds it may be, and whether a local one must be a directory.
type metadataLocation struct {
	keys   []string
	accept []pathroot.Kind
	dir    bool
}

// metadataLocations are, by workflow, the job metadata keys its actions read as locations: a
// sheet's files_dir and a file set's files (objects), a request's source (graph). The actions
// hold to the path roots themselves when they run, whatever made the job; POST /v1/jobs checks
// the same keys first, so an admin's job naming a location outside them is a 400 at once, not a
// failed task later.
var metadataLocations = map[string][]metadataLocation{
	objects.Name: {
		{keys: []string{"files_dir"}, accept: []pathroot.Kind{pathroot.Local, pathroot.S3}, dir: true},
		{keys: []string{"location"}, accept: []pathroot.Kind{pathroot.Local, pathroot.S3}},
		{keys: []string{"structure"}, accept: []pathroot.Kind{pathroot.Local, pathroot.S3}},
		{keys: []string{"transcription"}, accept: []pathroot.Kind{pathroot.Local, pathroot.S3}},
	},
	"graph": {{keys: []string{"request", "source"}, accept: []pathroot.Kind{pathroot.Local, pathroot.HTTP}, dir: true}},
}

// jobMetadataLocations checks the locations a job's metadata names for its workflow's actions
// ([metadataLocations]) with the route's own check ([API.location]); the field in an error is
// "metadata.<keys>".
func (a *API) jobMetadataLocations(workflow string, md map[string]any) error {
	for _, ml := range metadataLocations[workflow] {
		var v any = md
		for _, k := range ml.keys {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		if v == nil {
			continue
		}
		field := "metadata." + strings.Join(ml.keys, ".")
		loc, ok := v.(string)
		if !ok {
			return errf(CodeBadRequest, "%s: want a string (a location)", field)
		}
		t, err := a.location(field, loc, ml.accept...)
		if err != nil {
			return err
		}
		if ml.dir && t.Kind == pathroot.Local && !t.Info.IsDir() {
			return notKind(field, loc, t.Info.Mode(), "a directory")
		}
	}
	return nil
}

// locationError turns a refused location into the route's error; any other error is the
// server's (logged, not shown).
func (a *API) locationError(field string, err error) error {
	var pe *pathroot.Error
	if errors.As(err, &pe) {
		return errf(CodeBadRequest, "%s %q: %s", field, pe.Location, pe.Reason)
	}
	return err
}

// notKind is the error of a local location that is not the type of file a route reads.
func notKind(field, loc string, m fs.FileMode, want string) error {
	return errf(CodeBadRequest, "%s %q: it is %s, not %s", field, loc, fileKind(m), want)
}

func kindName(k pathroot.Kind) string {
	switch k {
	case pathroot.Local:
		return "a server-side path"
	case pathroot.HTTP:
		return "an http(s):// URL"
	case pathroot.S3:
		return "an s3:// location"
	}
	return fmt.Sprintf("a location of kind %d", k)
}

// fileKind names the type of a file, for errors.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	default:
		return "of type " + m.Type().String()
	}
}
