-- PgQ ticker loop (what pgqd does): tick every 50 ms.
SELECT pgq.ticker();
\sleep 50 ms
