-- Tasks' pages are filled to 40 %: a task's row is updated once or twice in its life (the
-- lease, the finish), and a batch updates the rows of whole pages in one transaction, so a page
-- needs room for a new version of each of its rows, a little longer than the old (the finish
-- writes the worker's name). With it the new version goes on the same page: the update finds its
-- space there and logs no lock of the old row while it looks for a page elsewhere. At 50 % a
-- tenth of a batch's rows still moved (TestFinishStaysOnPage). A burndown of 100,000 tasks went
-- from 34,000 to 42,500 a second, Postgres's CPU per task from 40 to 31 µs (docs/performance.md,
-- session 23). It applies to the pages written from now on.
ALTER TABLE tasks SET (fillfactor = 40);
