-- The full-text index of documents (outputs of kind 'document'), one row per document, written
-- in the transaction that records the document (see docsearch.Domain). Core migration 009
-- created these in every store made before the index was a domain; this migration adopts them
-- as they are, and creates them where they are missing.
--
-- tsv is built in Go from the tokens of search.Analyze (folded words, diacritics removed, CJK as
-- pairs of characters, the title's at weight A). So it needs neither unaccent nor pg_trgm
-- (extensions a managed database may not allow; pg_trgm also drops non-ASCII letters in a
-- database of the C locale), a query mixing CJK and other words is one tsquery on one GIN index,
-- two-character CJK words (most of them) are found through the index (trigrams need three), and
-- it finds exactly what the SQLite index finds. It also holds, without positions, the tokens of
-- search.Facets (job, content type, metadata values), so that a filtered search is one lookup in
-- the GIN index.
--
-- A tsvector keeps at most 256 positions per lexeme and none past 16383: in a long document
-- ("the" past its 256th time, any word past the 16,383rd) phrases would go unfound. Such a
-- document is marked lossy and its body is also stored in overlapping chunks of 1,000 tokens,
-- each exact, where a phrase the document-wide tsv cannot confirm is looked for.
CREATE TABLE IF NOT EXISTS search_index (
    item_id bigint PRIMARY KEY,
    tsv     tsvector NOT NULL,
    lossy   boolean  NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS search_index_tsv ON search_index USING gin (tsv);
CREATE TABLE IF NOT EXISTS search_chunks (
    item_id bigint   NOT NULL,
    chunk   integer  NOT NULL,
    tsv     tsvector NOT NULL,
    PRIMARY KEY (item_id, chunk)
);

-- Whatever deletes a document takes its index rows with it.
CREATE OR REPLACE FUNCTION outputs_search_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM search_index WHERE item_id = OLD.item_id;
    DELETE FROM search_chunks WHERE item_id = OLD.item_id;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS outputs_search_delete ON outputs;
CREATE TRIGGER outputs_search_delete AFTER DELETE ON outputs
    FOR EACH ROW WHEN (OLD.kind = 'document') EXECUTE FUNCTION outputs_search_delete();
