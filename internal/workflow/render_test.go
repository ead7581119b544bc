package workflow_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sluice-project/sluice/internal/workflow"
)

func TestDOT(t *testing.T) {
	t.Parallel()
	def, _ := mustValid(t, mediathread)
	dot := workflow.DOT(def)
	for _, want := range []string{
		`digraph "mediathread-video" {`,
		`"e:start" [shape=ellipse`,
		`"e:et-job-finished" [shape=ellipse, style=filled, fillcolor="#fdebd0"`,
		`"s:submit" [shape=box, style="rounded,filled", fillcolor="#e8eefc", color="#3a5fb0", label="submit\n(http)"];`,
		`"e:start" -> "s:extract-metadata";`,
		`"e:metadata-extracted" -> "s:submit";`,
		`"s:submit" -> "e:submitted";`,
		`"s:submit" -> "e:failed" [style=dashed, color="#c0392b"];`,
		`"s:email-failure" -> "e:fail";`,
		`"s:email-failure" -> "e:fail" [style=dashed`,
	} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT lacks %s\n%s", want, dot)
		}
	}
	if !strings.HasSuffix(dot, "}\n") {
		t.Error("DOT not closed")
	}
}

func TestDOTOutcomes(t *testing.T) {
	t.Parallel()
	def, _ := mustValid(t, validExamples["router"])
	lk, _ := lookup()
	dot := workflow.NewGraph(def, lk).DOT()
	if !strings.Contains(dot, `"s:detect" -> "e:detected.pdf" [style=dotted];`) {
		t.Errorf("no outcome edge:\n%s", dot)
	}
	if strings.Contains(workflow.DOT(def), `[style=dotted]`) {
		t.Error("outcome edge without a lookup")
	}
}

// svgInfo parses an SVG document and returns its root element and the text of its <text> elements.
func svgInfo(t *testing.T, svg []byte) (root xml.StartElement, texts map[string]bool) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	texts = make(map[string]bool)
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root.Name.Local == "" {
				root = tok.Copy()
			}
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts[string(tok)] = true
			}
		case xml.EndElement:
			inText = false
		}
	}
	return root, texts
}

func TestSVG(t *testing.T) {
	t.Parallel()
	for name, src := range validExamples {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			def, _ := mustValid(t, src)
			lk, _ := lookup()
			svg := workflow.NewGraph(def, lk).SVG()
			root, texts := svgInfo(t, svg)
			if root.Name.Local != "svg" || root.Name.Space != "http://www.w3.org/2000/svg" {
				t.Fatalf("root %v", root.Name)
			}
			attrs := make(map[string]string)
			for _, a := range root.Attr {
				attrs[a.Name.Local] = a.Value
			}
			if !strings.HasPrefix(attrs["viewBox"], "0 0 ") {
				t.Errorf("viewBox %q", attrs["viewBox"])
			}
			want := []string{workflow.EventStart}
			want = append(want, def.External...)
			for _, s := range def.Steps {
				want = append(want, s.Name, s.Action)
				want = append(want, s.Needs...)
				want = append(want, s.Success...)
				want = append(want, s.Failure...)
			}
			for _, w := range want {
				if !texts[w] {
					t.Errorf("SVG has no text %q", w)
				}
			}
			if c := strings.Count(string(svg), `class="step"`); c != len(def.Steps) {
				t.Errorf("%d steps drawn; want %d", c, len(def.Steps))
			}
			if !strings.Contains(string(svg), `marker-end="url(#sluice-arrow)"`) {
				t.Error("no arrowheads")
			}
		})
	}
}

func TestSVGEscapesText(t *testing.T) {
	t.Parallel()
	def := &workflow.Definition{Name: `a<b>&"c"`, Steps: []*workflow.Step{
		{Name: "s", Action: `<script>alert("x")</script>`, Needs: []string{"start"}, Success: []string{"done"}},
	}}
	svg := workflow.SVG(def)
	_, texts := svgInfo(t, svg)
	if !texts[`<script>alert("x")</script>`] {
		t.Errorf("action text not round-tripped: %v", texts)
	}
	if strings.Contains(string(svg), "<script>") {
		t.Error("unescaped markup in SVG")
	}
	dot := workflow.DOT(def)
	if !strings.Contains(dot, `digraph "a<b>&\"c\""`) {
		t.Errorf("DOT name not quoted:\n%s", dot)
	}
}

// TestSVGLayout checks the layered layout: every event is above the steps that need it,
// except along edges that close a cycle, and nothing overlaps within a layer.
func TestSVGLayout(t *testing.T) {
	t.Parallel()
	def, _ := mustValid(t, mediathread)
	svg := string(workflow.SVG(def))
	y := func(kind, name string) float64 {
		t.Helper()
		i := strings.Index(svg, fmt.Sprintf(`<g class="%s" data-name="%s">`, kind, name))
		if i < 0 {
			t.Fatalf("no %s %s", kind, name)
		}
		attr := "cy=\""
		if kind == "step" {
			attr = "y=\""
		}
		j := strings.Index(svg[i:], attr) + i + len(attr)
		var v float64
		if _, err := fmt.Sscanf(svg[j:], "%f", &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if !(y("event", "start") < y("step", "extract-metadata") && y("step", "extract-metadata") < y("event", "metadata-extracted") &&
		y("event", "metadata-extracted") < y("step", "submit") && y("step", "submit") < y("event", "submitted")) {
		t.Error("layers do not follow the events")
	}
	if !(y("event", "et-job-finished") < y("step", "pull-thumbnails")) {
		t.Error("external event below its consumer")
	}
}

func TestSVGBig(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("name: big\nsteps:\n")
	for i := range workflow.MaxSteps - 1 {
		prev := "start"
		if i > 0 {
			prev = fmt.Sprintf("e%d", i-1)
		}
		fmt.Fprintf(&b, "  s%d: {action: noop, needs: [%s], success: [e%d], failure: [failed]}\n", i, prev, i)
	}
	b.WriteString("  cleanup: {action: noop, needs: [failed], success: [fail]}\n")
	def, err := workflow.Parse([]byte(b.String()), "")
	if err != nil {
		t.Fatal(err)
	}
	svgInfo(t, workflow.SVG(def))
}

// TestSVGCounts: a job's diagram shows each step's counts under its action (none yet for a
// step without tasks), as well-formed SVG; the plain diagram shows none and is unchanged.
func TestSVGCounts(t *testing.T) {
	t.Parallel()
	def, err := workflow.Parse([]byte("name: c\nsteps:\n  one:\n    action: pass\n    needs: [start]\n    success: [one.done]\n  two:\n    action: pass\n    needs: [one.done]\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	g := workflow.NewGraph(def, nil)
	plain := g.SVG()
	counted := g.WithCounts(map[string]workflow.StepCounts{"one": {Queued: 2, Running: 1, Done: 3}}).SVG()
	_, texts := svgInfo(t, counted)
	for _, want := range []string{"2 queued · 1 running · 3 done · 0 failed", "0 queued · 0 running · 0 done · 0 failed"} {
		if !texts[want] {
			t.Errorf("the counted diagram lacks %q", want)
		}
	}
	if bytes.Contains(plain, []byte("queued")) || !bytes.Equal(plain, g.SVG()) {
		t.Error("WithCounts changed the plain diagram")
	}
}
