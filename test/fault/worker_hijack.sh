#!/usr/bin/env bash
# Live test of the maintenance background worker against look-alikes: the (non-superuser)
# owner of the maintenance database plants functions and operators in schema public that
# would match the names the worker's statements use if they were resolved through the
# database's search_path (1.0 called an unqualified make_interval as the bootstrap
# superuser). The worker must keep doing its job (a due scheduled job is promoted, a
# sealed slot is pruned) and never call a look-alike. Run as the postgres user; prints
# "worker_hijack: N passed, M failed".
TEST=worker_hijack; . "$(dirname "$0")/lib.sh"
new_server hijack 58000
cat >> "$dir/data/postgresql.conf" <<EOF
shared_preload_libraries = 'awa_shard'
awa_shard.maintenance_database = 'owned'
awa_shard.maintenance_interval = 200
lc_messages = 'C'
EOF
start_server || give_up "the server did not start"

# The database belongs to an ordinary role; the extension is installed by a superuser.
q postgres -c "CREATE ROLE mallory LOGIN" -c "CREATE DATABASE owned OWNER mallory" || exit 1
q owned -c "CREATE EXTENSION awa_shard" -c "GRANT CREATE ON SCHEMA public TO mallory" || exit 1

# Look-alikes in public, each recording that it ran (and who it ran as) when called.
q owned -U mallory <<'SQL' || exit 1
CREATE TABLE public.hijacked (what text, as_role text, superuser boolean);
GRANT INSERT ON public.hijacked TO PUBLIC;
CREATE FUNCTION public.make_interval(secs integer) RETURNS interval LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacked VALUES ('make_interval', current_user,
        (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user));
    RETURN pg_catalog.make_interval(secs => secs);
END $$;
CREATE FUNCTION public.hijack_eq(name, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacked VALUES ('operator =(name, text)', current_user,
        (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user));
    RETURN $1::text = $2;
END $$;
CREATE OPERATOR public.= (LEFTARG = name, RIGHTARG = text, FUNCTION = public.hijack_eq);
CREATE FUNCTION public.hijack_eq_int(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacked VALUES ('operator =(int, int)', current_user, NULL);
    RETURN $1 OPERATOR(pg_catalog.=) $2;
END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.hijacked VALUES ('now', current_user, NULL);
    RETURN pg_catalog.now();
END $$;
ALTER DATABASE owned SET search_path = public, pg_catalog;
-- Defaults that would make the steps that need READ COMMITTED refuse every pass.
ALTER DATABASE owned SET default_transaction_isolation = 'serializable';
SQL
# The worker connects again, under the database's new defaults.
q postgres -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE backend_type = 'awa_shard maintenance' AND datname = 'owned'" >/dev/null || exit 1

# Work for the worker: a scheduled job already due, and a sealed ring slot with a finished job.
q owned <<'SQL' >/dev/null || exit 1
SELECT awa.insert_job_compat('due', 'hq', p_state => 'scheduled', p_run_at => pg_catalog.now() - interval '1 second');
SELECT awa.insert_job_compat('done', 'hq_done');
SELECT awa.complete_jobs(array_agg(job_id), array_agg(run_lease)) FROM awa.claim_ready_runtime('hq_done', 10, 0, 0);
SQL

# Let several passes run (interval 200 ms).
wait_for owned 10 "SELECT state FROM awa.jobs WHERE kind = 'due'" available
check "the worker promoted the due job" "$?" "0"
# Rings turn on every tenth pass (2 s here).
wait_for owned 10 "SELECT generation > 0 FROM awa.queue_ring_state" t
check "the worker turned the queue ring" "$?" "0"
check "no look-alike was called by the worker" \
  "$(q owned -c "SELECT coalesce(string_agg(what || ' as ' || as_role, ', '), 'none') FROM public.hijacked")" "none"
check "mallory is still not a superuser" "$(q owned -c "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'")" "f"
check "the worker logged no error" "$(grep -c 'ERROR' "$dir/log")" "0"

# A schema awa the database's owner made before the extension is refused: its owner could
# plant an overload of an extension function with more exact argument types, which a call
# of the extension's own code (the worker's, as the bootstrap superuser) would resolve to.
q postgres -c "CREATE DATABASE owned2 OWNER mallory" || exit 1
q owned2 -U mallory <<'SQL' >/dev/null || exit 1
CREATE SCHEMA awa;
CREATE FUNCTION awa.promote_due(p_limit integer) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
SQL
out=$(q owned2 -c "CREATE EXTENSION awa_shard" 2>&1)
check "CREATE EXTENSION refuses a schema awa owned by a role that is not a superuser (42501)" \
  "$(echo "$out" | grep -c 'ERROR:  schema awa is owned by role mallory, which is not a superuser')" "1"
q owned2 -c "ALTER SCHEMA awa OWNER TO postgres" -c "GRANT CREATE ON SCHEMA awa TO mallory" >/dev/null || exit 1
out=$(q owned2 -c "CREATE EXTENSION awa_shard" 2>&1)
check "... and one that grants CREATE to such a role" \
  "$(echo "$out" | grep -c 'ERROR:  schema awa grants CREATE to a role that is not a superuser')" "1"
q owned2 -c "REVOKE CREATE ON SCHEMA awa FROM mallory" >/dev/null || exit 1
out=$(q owned2 -c "CREATE EXTENSION awa_shard" 2>&1)
check "... and one that holds objects already" "$(echo "$out" | grep -c 'ERROR:  schema awa already holds objects')" "1"
q owned2 -c "DROP FUNCTION awa.promote_due(integer)" >/dev/null || exit 1
check "a superuser's empty schema awa is used" "$(q owned2 -c "CREATE EXTENSION awa_shard" -c "SELECT count(*) FROM awa.queues")" "0"
check "... and again after DROP EXTENSION (the schema stays, with its USAGE grants)" \
  "$(q owned2 -c "DROP EXTENSION awa_shard" -c "CREATE EXTENSION awa_shard" -c "SELECT count(*) FROM awa.queues")" "0"

# 1.0 (released, unchanged) did not check: its update to 1.1 does, before it changes anything.
q postgres -c "CREATE DATABASE owned3 OWNER mallory" || exit 1
q owned3 -U mallory -c "CREATE SCHEMA awa" >/dev/null || exit 1
q owned3 -c "CREATE EXTENSION awa_shard VERSION '1.0'" >/dev/null || exit 1
q owned3 -U mallory -c "CREATE FUNCTION awa.promote_due(p_limit smallint) RETURNS integer LANGUAGE sql AS 'SELECT 0'" >/dev/null || exit 1
out=$(q owned3 -c "ALTER EXTENSION awa_shard UPDATE TO '1.1'" 2>&1)
check "the update to 1.1 refuses a schema awa owned by a role that is not a superuser (42501)" \
  "$(echo "$out" | grep -c 'ERROR:  schema awa is owned by role mallory, which is not a superuser')" "1"
q owned3 -c "ALTER SCHEMA awa OWNER TO postgres" -c "REVOKE CREATE ON SCHEMA awa FROM mallory" >/dev/null || exit 1
out=$(q owned3 -c "ALTER EXTENSION awa_shard UPDATE TO '1.1'" 2>&1)
check "... and one holding a function that is not the extension's" \
  "$(echo "$out" | grep -c "ERROR:  schema awa holds functions or operators that are not the extension's")" "1"
check "... and nothing was updated" "$(q owned3 -c "SELECT extversion FROM pg_extension WHERE extname = 'awa_shard'")" "1.0"
q owned3 -c "DROP FUNCTION awa.promote_due(smallint)" >/dev/null || exit 1
# A role with CREATE on the database may install a trusted extension into awa (PostgreSQL does
# not check CREATE on the schema): its functions are another extension's, not awa_shard's.
q postgres -c "GRANT CREATE ON DATABASE owned3 TO mallory" >/dev/null || exit 1
q owned3 -U mallory -c "CREATE EXTENSION pgcrypto SCHEMA awa" >/dev/null || exit 1
out=$(q owned3 -c "ALTER EXTENSION awa_shard UPDATE TO '1.1'" 2>&1)
check "... and one holding another extension's functions (a trusted one its owner installed)" \
  "$(echo "$out" | grep -c "ERROR:  schema awa holds functions or operators that are not the extension's")" "1"
q owned3 -c "DROP EXTENSION pgcrypto" >/dev/null || exit 1
check "... which then updates" \
  "$(q owned3 -c "ALTER EXTENSION awa_shard UPDATE TO '1.1'" -c "SELECT extversion FROM pg_extension WHERE extname = 'awa_shard'")" "1.1"
[ "$failed" -gt 0 ] && tail -20 "$dir/log"
summary
[ "$failed" -eq 0 ]
