-- Postgres's 022 has its pick function plan once per connection; SQLite has no such function.
-- This file keeps the two drivers' migration numbers alike.
SELECT 1;
