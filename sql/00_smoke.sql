-- Smoke test: the extension installs, grants a token, and uninstalls.
CREATE EXTENSION fencing;
SELECT fencing.acquire('smoke')::bigint > 0;
-- Every object of the extension has a comment (what \dx+ and \df+ show).
SELECT pg_describe_object(classid, objid, objsubid) AS without_comment
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')
   AND obj_description(objid, (SELECT relname FROM pg_class WHERE oid = classid)) IS NULL
   -- (17 also records the row and array types of the tables and views)
   AND NOT (classid = 'pg_type'::regclass
            AND EXISTS (SELECT 1 FROM pg_type t WHERE t.oid = objid AND (t.typrelid <> 0 OR t.typelem <> 0)))
 ORDER BY 1;
DROP EXTENSION fencing;
