package search

import (
	"slices"
	"testing"
)

func TestMatches(t *testing.T) {
	q, err := Parse(`"red fox" jump* -dog`)
	if err != nil {
		t.Fatal(err)
	}
	text := "The Red  Fox jumped; a dog, a red fox, JUMPS. Red foxes."
	var got []string
	for _, m := range Matches(text, q, 0) {
		got = append(got, text[m.Start:m.End])
	}
	want := []string{"Red  Fox", "jumped", "red fox", "JUMPS"}
	if !slices.Equal(got, want) {
		t.Errorf("Matches = %q, want %q", got, want)
	}
	if n := len(Matches(text, q, 2)); n != 2 {
		t.Errorf("Matches with a limit of 2 = %d spans", n)
	}
}
