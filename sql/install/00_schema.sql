-- statesman: a ledger store with a lossless change feed (base install script).
-- Every name is schema-qualified and every function pins search_path, so objects that a
-- user creates in other schemas can never capture a call made here.

\echo Use "CREATE EXTENSION statesman" to load this file. \quit

-- Every function here finds statesman's objects by the schema's name, so the schema's owner
-- could put its own objects in their place (rename the schema, create another). CREATE
-- EXTENSION uses a schema `statesman` that already exists: refuse one that a role other than a
-- superuser owns.
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid = n.nspowner
               WHERE n.nspname = 'statesman' AND NOT r.rolsuper) THEN
        RAISE EXCEPTION 'schema "statesman" already exists and belongs to role %, which is not a superuser',
            (SELECT n.nspowner::pg_catalog.regrole FROM pg_catalog.pg_namespace n WHERE n.nspname = 'statesman')
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Its owner could replace the objects that statesman''s functions look up by name. '
                         'Drop the schema, or give it to a superuser, and create the extension again.';
    END IF;
END $$;
