package html

import (
	"strings"
	"testing"
)

// TestParseDepth: a document of nothing but nested elements (100,000 <div>s) stops the parser at
// MaxDepth with an error in plain words, promptly — the parser's work per tag and the text walk's
// recursion grow with the depth — while a page nested to the limit parses and its text is read.
func TestParseDepth(t *testing.T) {
	t.Parallel()
	_, _, err := parse(strings.Repeat("<div>", 100_000) + "x")
	if err == nil || err.Error() != "the HTML nests elements more than 512 levels deep (the limit)" {
		t.Errorf("100,000 nested divs: %v, want the depth limit named", err)
	}
	root, _, err := parse("<html><body>" + strings.Repeat("<div>", MaxDepth-3) + "deep")
	if err != nil {
		t.Fatalf("nested to the limit: %v", err)
	}
	if got := Text(root); got != "deep" {
		t.Errorf("text at the limit = %q", got)
	}
}
