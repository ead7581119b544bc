-- task_pick (010) plans its query once per connection: its SET clauses pin the plan's shape (the
-- ordered scan of tasks_ready) whatever the arguments, so planning it again for each call's
-- arguments, as PL/pgSQL does while custom plans look no dearer than the generic one, bought
-- nothing and cost ~40 µs a call on an idle machine, ~120 under load — most of a one-task lease,
-- which is how a remote worker leases (docs/performance.md, session 27). TestLeasePlanAtScale
-- checks the generic plan at a large backlog.
ALTER FUNCTION task_pick(text[], bigint, integer[], bigint[], text[], bigint[]) SET plan_cache_mode = force_generic_plan;
