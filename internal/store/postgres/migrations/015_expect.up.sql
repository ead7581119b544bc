-- sluice_expect fails the statement that calls it, with SQLSTATE SL001 and the message given,
-- unless ok. A transaction that writes ahead of a read (a root added in one round trip, its ids
-- reserved before and its job as the caller last read it) checks in the same batch what it
-- assumed; when that no longer holds, the transaction fails and is made again reading first
-- (store.ErrStale).
CREATE OR REPLACE FUNCTION sluice_expect(ok boolean, what text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	IF ok IS NOT TRUE THEN
		RAISE EXCEPTION USING ERRCODE = 'SL001', MESSAGE = what;
	END IF;
	RETURN true;
END
$$;
