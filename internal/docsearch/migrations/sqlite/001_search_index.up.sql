-- The full-text index of documents (outputs of kind 'document'), one row per document whose
-- rowid is its item's id, written in the transaction that records the document (see
-- docsearch.Domain). Core migration 009 created these in every store made before the index was
-- a domain; this migration adopts them as they are, and creates them where they are missing.
--
-- Title and body hold the tokens of search.Analyze (folded words, CJK as pairs of characters)
-- separated by spaces; unicode61 with remove_diacritics 2 splits them back and would fold them
-- the same way. Facets holds the tokens of search.Facets (job, content type, metadata values), so
-- that a filtered search is one lookup in the index. Contentless: the text is in items already,
-- and snippets are made from it. contentless_delete lets a row be deleted by rowid.
CREATE VIRTUAL TABLE IF NOT EXISTS search_index USING fts5(
    title, body, facets,
    content = '', contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Whatever deletes a document takes its index row with it.
CREATE TRIGGER IF NOT EXISTS outputs_search_delete AFTER DELETE ON outputs WHEN OLD.kind = 'document' BEGIN
    DELETE FROM search_index WHERE rowid = OLD.item_id;
END;
