-------------------------------------------------------------------------------
-- The store
-------------------------------------------------------------------------------

CREATE FUNCTION statesman.store_info(
    OUT store text, OUT epoch uuid, OUT head_position bigint, OUT oldest_position bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    -- (plpgsql: the feed's functions are defined further on, in 07_sequencer.sql)
    SELECT COALESCE(s.store_name, pg_catalog.current_database()), s.epoch INTO store, epoch
    FROM statesman.store s;
    head_position := statesman.head_position();
    oldest_position := (SELECT p.global_position FROM statesman._feed_page(NULL, NULL, 1, NULL) p);
END
$$;
COMMENT ON FUNCTION statesman.store_info() IS
    'the store''s name, its position lineage (epoch) and the feed''s head and oldest positions';

CREATE FUNCTION statesman.set_store_name(name text) RETURNS text
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_name(name, 'name');
    -- Message ids embed the store name; renaming after records exist would change them.
    LOCK TABLE statesman.history IN SHARE MODE;
    IF EXISTS (SELECT FROM statesman.history) THEN
        RAISE EXCEPTION 'the store name can only change while the feed is empty'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Message ids contain the store name.';
    END IF;
    UPDATE statesman.store SET store_name = name;
    RETURN name;
END
$$;
COMMENT ON FUNCTION statesman.set_store_name(text) IS
    'renames the store; allowed only while the feed is empty';

CREATE FUNCTION statesman.reset_epoch() RETURNS uuid
    LANGUAGE sql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
    UPDATE statesman.store SET epoch = pg_catalog.gen_random_uuid() RETURNING epoch
$$;
COMMENT ON FUNCTION statesman.reset_epoch() IS
    'starts a new position lineage, for a copy that must not share positions with its source';

CREATE FUNCTION statesman.address_of(root text, path text, partition text DEFAULT '') RETURNS text
    LANGUAGE c IMMUTABLE PARALLEL SAFE
    AS 'MODULE_PATHNAME', 'statesman_address_of';
COMMENT ON FUNCTION statesman.address_of(text, text, text) IS
    'the canonical address of (root, path, partition), validating each part';

CREATE FUNCTION statesman.declare_root(
    root text, fingerprint text DEFAULT NULL, content_type text DEFAULT NULL,
    max_revisions integer DEFAULT NULL, max_bytes bigint DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$
BEGIN
    PERFORM statesman._check_name(declare_root.root, 'root');
    IF declare_root.max_revisions < 1 THEN
        RAISE EXCEPTION 'max_revisions must be at least 1 (or NULL to keep all)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Messages fall back to these (see read_feed): the append functions' size check counts
    -- at most 1024 bytes for each, as for an outbox's fallbacks.
    IF octet_length(declare_root.fingerprint) > 1024 OR octet_length(declare_root.content_type) > 1024 THEN
        RAISE EXCEPTION 'fingerprint and content_type must be at most 1024 bytes'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF declare_root.max_bytes < 1 THEN
        RAISE EXCEPTION 'max_bytes must be at least 1 (or NULL to keep all)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO statesman.roots AS r (root, fingerprint, content_type, max_revisions, max_bytes)
    VALUES (lower(declare_root.root), declare_root.fingerprint, declare_root.content_type,
            declare_root.max_revisions, declare_root.max_bytes)
    ON CONFLICT ON CONSTRAINT roots_pkey DO UPDATE
        SET fingerprint = EXCLUDED.fingerprint, content_type = EXCLUDED.content_type,
            max_revisions = EXCLUDED.max_revisions, max_bytes = EXCLUDED.max_bytes,
            declared_at = pg_catalog.now();
END
$$;
COMMENT ON FUNCTION statesman.declare_root(text, text, text, integer, bigint) IS
    'declares a root''s envelope (fingerprint, content type) and retention; NULL limits keep all';
