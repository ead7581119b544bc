-- A second migration, so that the tests see migrations applied in order and once.
CREATE INDEX testdomain_rows_job ON testdomain_rows (job_id);
