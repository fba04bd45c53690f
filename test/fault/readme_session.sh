#!/usr/bin/env bash
# Live test of the README's first steps: the first ```sql block under "## First steps" runs,
# exactly as written, in psql against a fresh database, without an error, and shows what the
# README says it shows. Run as the postgres user; prints "readme_session: N passed, M failed".
TEST=readme_session; . "$(dirname "$0")/lib.sh"
here="$(cd "$(dirname "$0")/../.." && pwd)"
new_server readme 57900

# The session, as printed in the README.
awk '/^## First steps/ {s = 1} s && /^```sql$/ {b = 1; next} b && /^```$/ {exit} b {print}' "$here/README.md" > "$dir/session.sql"
check "the README has a first-steps psql session" "$([ -s "$dir/session.sql" ] && echo yes)" "yes"
for call in "awa.create_queue('emails', 4)" "awa.insert_job_compat('send', 'emails', '{\"to\": \"a@b\"}', p_priority => 1)" \
            "* FROM awa.queues" "* FROM awa.get_job(1)"; do
  check "the session has SELECT $call" "$(grep -cF "SELECT $call;" "$dir/session.sql")" "1"
done

start_server || give_up "the server did not start"
"$PGBIN/createdb" -h "$dir" -p "$port" first_steps
# As a user would type it: psql reading the block, stopping at the first error.
out=$("$PGBIN/psql" -h "$dir" -p "$port" -X -v ON_ERROR_STOP=1 -d first_steps -f "$dir/session.sql" 2>&1); rc=$?
echo "$out" > "$dir/session.out"
check "the session runs without an error" "$rc" "0"
check "no ERROR in its output" "$(grep -c 'ERROR' "$dir/session.out")" "0"
check "create_queue says it created the queue" "$(grep -A2 '^ create_queue' "$dir/session.out" | sed -n 3p | tr -d ' ')" "t"
check "insert_job_compat returns job 1 in queue emails, priority 1" \
      "$(grep -cE '^ \(1,send,emails,"\{""to"": ""a@b""\}",available,1,' "$dir/session.out")" "1"
check "awa.queues shows emails: 4 shards, not paused, depth 1, one available job" \
      "$(grep -cE '^ emails +\| +4 \| f +\| f +\| +1 \| +1 \|' "$dir/session.out")" "1"
check "get_job(1) shows the job available" "$(grep -cE '^ +1 \| send +\| emails \| \{"to": "a@b"\} \| available +\| +1 \|' "$dir/session.out")" "1"
check "after the worker's calls get_job(1) shows it completed" "$(grep -cE '^ completed$' "$dir/session.out")" "1"
[ "$failed" -gt 0 ] && cat "$dir/session.out"

summary
[ "$failed" -eq 0 ]
