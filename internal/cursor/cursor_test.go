package cursor

import (
	"errors"
	"slices"
	"testing"
)

func TestCursor(t *testing.T) {
	t.Parallel()
	t.Run("round trip", func(t *testing.T) {
		t.Parallel()
		for _, key := range [][]string{{""}, {"0001.0002"}, {"zenodo", "https://zenodo.org/record/1?a=b\x00c"}, {"«»", "\"}"}} {
			c := Make("filesets", key...)
			got, err := Read("filesets", c, len(key))
			if err != nil || !slices.Equal(got, key) {
				t.Errorf("Read(Make(%q)) = %q, %v", key, got, err)
			}
		}
		id, err := ReadID("jobs", MakeID("jobs", 42))
		if err != nil || id != 42 {
			t.Errorf("ReadID(MakeID(42)) = %d, %v", id, err)
		}
	})
	t.Run("empty is the first page", func(t *testing.T) {
		t.Parallel()
		if key, err := Read("items/1/0", "", 1); key != nil || err != nil {
			t.Errorf("Read(\"\") = %q, %v", key, err)
		}
		if id, err := ReadID("jobs", ""); id != 0 || err != nil {
			t.Errorf("ReadID(\"\") = %d, %v", id, err)
		}
	})
	t.Run("foreign and malformed", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			list List
			c    string
			n    int
		}{
			{"another list", "errors/7", Make("documents/7", "3"), 1},
			{"another job's list", "items/8/0", Make("items/7/0", "0001"), 1},
			{"too few parts", "filesets", Make("filesets", "zenodo"), 2},
			{"too many parts", "jobs", Make("jobs", "1", "2"), 1},
			{"not base64", "jobs", "after=3", 1},
			{"not JSON", "jobs", "bm90IGpzb24", 1},
			{"padded base64", "jobs", Make("jobs", "1") + "=", 1},
			{"a bare id", "jobs", "17", 1},
		} {
			if key, err := Read(tc.list, tc.c, tc.n); !errors.Is(err, ErrForeign) {
				t.Errorf("%s: Read(%q) = %q, %v; want ErrForeign", tc.name, tc.c, key, err)
			}
		}
		for _, c := range []string{Make("jobs", "x"), Make("jobs", "0"), Make("jobs", "-4"), Make("jobs", "07"), MakeID("items", 3)} {
			if id, err := ReadID("jobs", c); !errors.Is(err, ErrForeign) {
				t.Errorf("ReadID(%q) = %d, %v; want ErrForeign", c, id, err)
			}
		}
	})
}

// FuzzRead checks that Read accepts exactly the cursors Make writes: whatever it reads, Make
// writes back as the same string.
func FuzzRead(f *testing.F) {
	f.Add("jobs", Make("jobs", "12"), 1)
	f.Add("filesets", Make("filesets", "a", "b"), 2)
	f.Add("jobs", "eyJqb2JzIiwiMSJd", 1)
	f.Fuzz(func(t *testing.T, name, c string, n int) {
		if n < 0 || n > 4 {
			return
		}
		list := List(name)
		key, err := Read(list, c, n)
		if err != nil || c == "" {
			return
		}
		if len(key) != n || Make(list, key...) != c {
			t.Fatalf("Read(%q, %q) = %q, which Make writes as %q", list, c, key, Make(list, key...))
		}
	})
}
