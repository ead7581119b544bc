-- The full-text index of documents (outputs of kind 'document'), one row per document, written
-- by OutputPut in the transaction that records the document. tsv is built in Go from the tokens
-- of search.Analyze (folded words, diacritics removed, CJK as pairs of characters, the title's
-- at weight A). So it needs neither unaccent nor pg_trgm (extensions a managed database may not
-- allow; pg_trgm also drops non-ASCII letters in a database of the C locale), a query mixing CJK
-- and other words is one tsquery on one GIN index, two-character CJK words (most of them) are
-- found through the index (trigrams need three), and it finds exactly what the SQLite index finds.
CREATE TABLE search_index (
    item_id bigint PRIMARY KEY,
    tsv     tsvector NOT NULL
);
CREATE INDEX search_index_tsv ON search_index USING gin (tsv);
