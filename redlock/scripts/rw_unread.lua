-- Release a read lock on one master (docs/design.md §17): remove the reader.
-- KEYS[1] the readers; ARGV[1] token. Returns 1 when removed, 0 when it was
-- not there (expired, or never registered).
return redis.call('ZREM', KEYS[1], ARGV[1])
