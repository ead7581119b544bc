package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
	"unicode"
)

// schemas derives the OpenAPI schemas of Go types by reflection, from the same types the
// handlers encode and decode, so the document cannot drift from the JSON on the wire. Every
// named struct becomes a component (referenced by $ref); a field is required unless its json
// tag has omitempty or omitzero.
type schemas struct {
	comps map[string]any
	names map[reflect.Type]string
}

func newSchemas() *schemas {
	return &schemas{comps: map[string]any{}, names: map[reflect.Type]string{}}
}

// schemaNames renames types whose Go name would not make a good schema name or would collide.
var schemaNames = map[string]string{
	"workerproto.Task":     "WorkerTask",
	"workerproto.TaskBlob": "WorkerTaskBlob",
	"remote.Task":          "WorkerTask",
	"remote.TaskBlob":      "WorkerTaskBlob",
	"docsearch.Hit":        "SearchHit",
	"api.diagnosticsJSON":  "Diagnostics",

	"graph.Request":   "GraphRequest",
	"graph.Result":    "GraphResult",
	"graph.Edge":      "GraphEdge",
	"graph.NodeError": "GraphNodeError",
	"graph.Counts":    "GraphCounts",
	"graph.Status":    "GraphStatus",
	"graph.LogEntry":  "GraphLogEntry",

	"fileset.Row":          "FilesetRow",
	"fileset.Result":       "FilesetResult",
	"fileset.Terminal":     "FilesetTerminal",
	"fileset.ManifestFile": "FilesetManifestFile",
	"fileset.FileResult":   "FilesetFileResult",
	"fileset.FileMeta":     "FilesetFileMeta",
	"fileset.HTMLBiblio":   "FilesetHTMLBiblio",
	"fileset.CDX":          "FilesetCDX",

	"objects.Row":        "SheetRow",
	"objects.Checks":     "SheetChecks",
	"objects.FieldError": "SheetError",
	"objects.Progress":   "SheetProgress",
	"objects.Transcoded": "TranscodedResult",
	"api.objectJSON":     "Object",
	"api.sheetJSON":      "SheetDetail",
}

// componentName is the schema name of a named type: its entry in schemaNames, or its Go name
// without a "JSON" suffix and with an upper-case first letter (jobJSON is Job).
func componentName(t reflect.Type) string {
	if n, ok := schemaNames[t.String()]; ok {
		return n
	}
	n := strings.TrimSuffix(t.Name(), "JSON")
	r := []rune(n)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}

var (
	timeType = reflect.TypeFor[time.Time]()
	rawType  = reflect.TypeFor[json.RawMessage]()
)

// of returns the schema of the type of v (a value or a nil pointer of the type).
func (s *schemas) of(v any) map[string]any { return s.schema(reflect.TypeOf(v)) }

func (s *schemas) schema(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case rawType:
		// Stored JSON: metadata, options, a workflow's definition, an output's value. The
		// API always sends an object for them.
		return map[string]any{"type": "object", "additionalProperties": true}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer", "format": "int32"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number", "format": "double"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": s.schema(t.Elem())}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			return map[string]any{"type": "object", "additionalProperties": true}
		}
		return map[string]any{"type": "object", "additionalProperties": s.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" {
			return s.object(t)
		}
		name := componentName(t)
		if _, ok := s.names[t]; !ok {
			if _, taken := s.comps[name]; taken {
				panic("api: the schema name " + name + " of " + t.String() + " is another type's: give it one in schemaNames")
			}
			s.names[t] = name
			s.comps[name] = nil // placeholder: a recursive type refers to itself
			s.comps[name] = s.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic("api: no OpenAPI schema for " + t.String())
}

// object is the schema of a struct's fields, embedded structs' fields included, as
// encoding/json sees them.
func (s *schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	s.fields(t, props, &required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func (s *schemas) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				s.fields(ft, props, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		props[name] = s.schema(f.Type)
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			*required = append(*required, name)
			if sc, ok := props[name].(map[string]any); ok && f.Type.Kind() == reflect.Pointer {
				if ty, ok := sc["type"].(string); ok {
					// Always sent, null when unset (eta_seconds while unknown): OpenAPI
					// 3.1's type array, which makes the generated client's field a pointer.
					sc["type"] = []string{ty, "null"}
				}
			}
		}
	}
}
