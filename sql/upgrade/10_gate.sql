
-- Step 1, the gate. The transition state is locked first (SHARE: no engine switch can
-- start until this upgrade commits), then checked: reshaping primary keys under live
-- cutover traffic would block both engines, so mixed_transition refuses with 55000.
-- Nothing has been changed when it refuses.
LOCK TABLE awa.storage_transition_state IN SHARE MODE;
DO $$
DECLARE
    v_state text;
BEGIN
    SELECT s.state INTO v_state FROM awa.storage_transition_state s;
    IF v_state = 'mixed_transition' THEN
        RAISE EXCEPTION 'awa_shard cannot be updated to 1.0 while awa.storage_transition_state is %', v_state
            USING ERRCODE = '55000',
                  HINT = 'Finish or roll back the storage transition, then run ALTER EXTENSION awa_shard UPDATE again.';
    END IF;
END
$$;
