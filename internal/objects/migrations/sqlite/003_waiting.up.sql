-- Action states use Meadow's vocabulary: an action waiting for an outside event is waiting.
UPDATE objects_action_states SET outcome = 'waiting' WHERE outcome = 'pending';
