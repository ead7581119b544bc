package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-project/sluice/internal/store"
)

// TestItemTextPacked: an item's long text is kept deflated (a BLOB of the text column), a short
// one as text, and a row written as text before compression reads back too — through ItemGet,
// ItemGetMany, ItemList and Export, which gives the text itself.
func TestItemTextPacked(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ctx := t.Context()
	now := time.UnixMicro(1_000_000).UTC()
	long := strings.Repeat("A letter from the north about the river and the market. ", 30)
	short := "a few words"
	texts := map[int64]string{}
	for i, text := range []string{long, short} {
		it, _, err := db.ItemInsert(ctx, store.ItemInsertParams{JobID: 1, Ordinal: i, SortKey: string(rune('a' + i)), Name: "doc", Text: &text, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		texts[it.ID] = text
	}
	// A row as written before: its text in the column as it is.
	old := strings.Repeat("an older row, kept as text. ", 20)
	res, err := db.w.ExecContext(ctx, `INSERT INTO items (job_id, parent_id, root_id, step, ordinal, depth, sort_key, name, text, state, created_at) VALUES (1, 0, 0, '', 2, 0, 'c', 'old', ?, 'written', 1)`, old)
	if err != nil {
		t.Fatal(err)
	}
	oldID, _ := res.LastInsertId()
	texts[oldID] = old

	kinds := map[int64]string{}
	rows, err := db.w.QueryContext(ctx, `SELECT id, typeof(text) FROM items`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var kind string
		if err := rows.Scan(&id, &kind); err != nil {
			t.Fatal(err)
		}
		kinds[id] = kind
	}
	rows.Close()
	for id, text := range texts {
		want := "text"
		if text == long {
			want = "blob"
		}
		if kinds[id] != want {
			t.Errorf("item %d (%d bytes of text) kept as %s, want %s", id, len(text), kinds[id], want)
		}
		it, err := db.ItemGet(ctx, id)
		if err != nil || it.Text != text || !it.HasText {
			t.Errorf("ItemGet(%d): text %.20q (has %v), %v; want %.20q", id, it.Text, it.HasText, err, text)
		}
	}
	many, err := db.ItemGetMany(ctx, []int64{1, 2, oldID})
	if err != nil || len(many) != 3 {
		t.Fatalf("ItemGetMany: %d items, %v", len(many), err)
	}
	for _, it := range many {
		if it.Text != texts[it.ID] {
			t.Errorf("ItemGetMany: item %d text %.20q, want %.20q", it.ID, it.Text, texts[it.ID])
		}
	}
	list, err := db.ItemList(ctx, store.ItemListParams{JobID: 1, WithText: true})
	if err != nil || len(list) != 3 {
		t.Fatalf("ItemList: %d items, %v", len(list), err)
	}
	for _, it := range list {
		if it.Text != texts[it.ID] {
			t.Errorf("ItemList: item %d text %.20q, want %.20q", it.ID, it.Text, texts[it.ID])
		}
	}
	exported := 0
	if err := db.Export(ctx, func(et *ExportTable) error {
		for et.Next() {
			if et.Name != "items" {
				continue
			}
			vals, err := et.Values()
			if err != nil {
				return err
			}
			id := vals[0].(int64)
			for i, c := range et.Columns {
				if c == "text" && vals[i] != texts[id] {
					t.Errorf("Export: item %d text %T %.20v, want the string %.20q", id, vals[i], vals[i], texts[id])
				}
			}
			exported++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if exported != 3 {
		t.Errorf("Export gave %d items, want 3", exported)
	}
}
