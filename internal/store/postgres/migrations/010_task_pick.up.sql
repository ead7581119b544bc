-- task_pick is the pick of every lease, held (TaskHoldMany) or written (TaskLease,
-- TaskLeaseMany): up to lims[i] ready tasks of queues[i] due by now_us, at or after
-- (from_jobs[i], from_keys[i]) and not in skip, in the order of the tasks_ready index (job_id, sort_key), locked
-- FOR UPDATE SKIP LOCKED. Its plan is pinned: the function's SET clauses leave the planner only
-- the ordered scan of tasks_ready, which reads about as many entries as it returns whatever the
-- backlog. Left to its statistics, the planner once chose, as a burndown went on, a bitmap scan
-- of every ready row and a sort of all of them (a sort below the row locks cannot stop at the
-- limit): a pick that cost 6 ms at the start cost 190 ms. It cannot know better: a pick's rows
-- are the first in index order, the ones its estimates (how many are ready, how they lie in the
-- heap) say least about. The lower bound lets a pick start past the entries finished tasks
-- leave at the front of the index until a vacuum. See docs/performance.md.
CREATE FUNCTION task_pick(queues text[], now_us bigint, lims integer[], from_jobs bigint[], from_keys text[], skip bigint[]) RETURNS SETOF tasks
LANGUAGE plpgsql VOLATILE
SET enable_sort = off SET enable_incremental_sort = off SET enable_bitmapscan = off SET enable_seqscan = off
AS $$
BEGIN
    RETURN QUERY SELECT p.* FROM unnest(queues, lims, from_jobs, from_keys) AS w(wq, lim, fj, fk)
        CROSS JOIN LATERAL (SELECT t.* FROM tasks t
            WHERE t.state = 'ready' AND t.queue = w.wq AND (t.job_id, t.sort_key) >= (w.fj, w.fk) AND t.run_after <= now_us AND NOT (t.id = ANY (skip))
            ORDER BY t.job_id, t.sort_key LIMIT w.lim FOR UPDATE OF t SKIP LOCKED) p;
END
$$;
