-- Smoke test: the extension installs, grants a token, and uninstalls.
CREATE EXTENSION fencing;
SELECT fencing.acquire('smoke')::bigint > 0;
DROP EXTENSION fencing;
