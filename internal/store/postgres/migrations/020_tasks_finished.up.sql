-- Tasks completed lately, by when: the throughput GET /v1/queues and the autoscaler read.
CREATE INDEX tasks_finished ON tasks (finished_at) WHERE state = 'complete';
