-- Smoke test: the extension installs, grants a token, and uninstalls.
CREATE EXTENSION fencing;
SELECT fencing.acquire('smoke')::bigint > 0;
-- Every object of the extension has a comment (what \dx+ and \df+ show).
SELECT pg_describe_object(classid, objid, objsubid) AS without_comment
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')
   AND obj_description(objid, (SELECT relname FROM pg_class WHERE oid = classid)) IS NULL
 ORDER BY 1;
DROP EXTENSION fencing;
