-- Keyed claims (claim or park, store.Executor.ClaimTake): one row per claimed key, held by the
-- task that runs while the others park, then done with the result they reuse. Keys carry their
-- scope ("job/12/step/key" or "installation/workflow/step/key"); installation claims stay as a
-- cache of results.
CREATE TABLE claims (
    key         text COLLATE "C" PRIMARY KEY,
    holder      bigint NOT NULL,
    state       text   NOT NULL,
    result      text,
    created_at  bigint NOT NULL,
    finished_at bigint NOT NULL DEFAULT 0
);
CREATE INDEX claims_holder ON claims (holder) WHERE state = 'held';
-- The tasks parked on a claim, readied together when it finishes. A row whose task is no longer
-- parked (its job was canceled) is harmless: release only readies parked tasks.
CREATE TABLE claim_parked (
    key     text COLLATE "C" NOT NULL,
    task_id bigint NOT NULL,
    PRIMARY KEY (key, task_id)
);
-- Per-key limits (limit: on a step): the key's row is locked while a slot is granted (so that
-- processes take turns) and holds the earliest next start (rate); a slot is a task running at
-- an attempt, freed once that task is no longer running it.
CREATE TABLE limit_keys (
    key        text COLLATE "C" PRIMARY KEY,
    next_start bigint NOT NULL DEFAULT 0
);
CREATE TABLE limit_slots (
    key     text COLLATE "C" NOT NULL,
    task_id bigint  NOT NULL,
    attempt integer NOT NULL,
    PRIMARY KEY (key, task_id)
);
-- Event correlation finds a job's items by a metadata value (metadata @> '{"k": v}').
-- jsonb_path_ops indexes values by path, so the lookup reads only matching items. State moves
-- do not change metadata, so they stay HOT updates.
CREATE INDEX items_metadata ON items USING gin (metadata jsonb_path_ops);
