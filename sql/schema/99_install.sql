

-- A fresh install is served at once (the launcher looks for new databases only when told).
SELECT awa._maintenance_wake();
