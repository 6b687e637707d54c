-- _jobs_proxy_unreachable: whether an error raised by a PL/Proxy call means its shard could
-- not be reached (rather than that the shard's function refused).
--
-- Promises: true for SQLSTATE class 08 (connection exceptions), 57P01 to 57P03 (the shard
--           is shutting down or starting: PL/Proxy passes on the FATAL of a cached connection
--           that the shard's shutdown ended) and for PL/Proxy's own connection errors, raised
--           as XX000 with a message naming the shard's database and the libpq call that
--           failed ('PL/Proxy function ...: [jobs2] PQconnectPoll: ...', PQconsumeInput,
--           PQsendQuery, ...) or PL/Proxy's poll() failure. Not for PL/Proxy's other XX000
--           errors, such as 'Got too few fields from remote end' from a shard whose functions
--           do not match the proxy's: skipping that shard would leave its jobs unclaimed with
--           nothing but a WARNING.
-- Locks:    none. States: none.
CREATE OR REPLACE FUNCTION _jobs_proxy_unreachable(state text, message text)
RETURNS boolean
LANGUAGE sql
IMMUTABLE
SET search_path FROM CURRENT
AS $$
    SELECT state LIKE '08%'
        OR state IN ('57P01', '57P02', '57P03')
        OR (state = 'XX000' AND message ~ '^PL/Proxy function [^ ]+: (\[[^]]*\] PQ[A-Za-z]+: |poll\(\) failed)')
$$;

COMMENT ON FUNCTION _jobs_proxy_unreachable(text, text) IS
    'skiplock proxy (private): whether a PL/Proxy error means the shard could not be reached.';
