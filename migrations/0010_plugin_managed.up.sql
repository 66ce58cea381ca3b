-- Managed resources: the agents, projects, routines and skills a plugin declares, created
-- through their owners (never in their tables) per company. A row binds a declared key to
-- the owner's id, so a re-enable, an upgrade or a second node never creates a duplicate;
-- rows follow their extension's registry row and their company.
CREATE TABLE kernel.plugin_managed_resources (
    extension_key text NOT NULL REFERENCES kernel.extensions (key) ON DELETE CASCADE ON UPDATE CASCADE,
    company_id    uuid NOT NULL REFERENCES kernel.companies (id) ON DELETE CASCADE,
    kind          text NOT NULL CHECK (kind IN ('agent', 'project', 'routine', 'skill')),
    resource_key  text NOT NULL,
    resource_id   text,
    status        text NOT NULL,
    name          text NOT NULL DEFAULT '',
    owner_status  text NOT NULL DEFAULT '',
    last_error    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    checked_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (extension_key, company_id, kind, resource_key)
);

-- Every node follows extension moves made on another node: a change of what a node runs
-- (installed package, enabled, config, uninstalled, purged), of the experimental flags or
-- of a plugin's local folders wakes the others at once through NOTIFY; their periodic pass
-- stays as the fallback.
CREATE FUNCTION kernel.notify_extensions_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('keel_extensions', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;

CREATE TRIGGER extensions_changed
    AFTER INSERT OR DELETE ON kernel.extensions
    FOR EACH STATEMENT EXECUTE FUNCTION kernel.notify_extensions_changed();

CREATE TRIGGER extensions_moved
    AFTER UPDATE ON kernel.extensions
    FOR EACH ROW
    WHEN (OLD.enabled IS DISTINCT FROM NEW.enabled
        OR OLD.config IS DISTINCT FROM NEW.config
        OR OLD.package_digest IS DISTINCT FROM NEW.package_digest
        OR (OLD.status = 'uninstalled') IS DISTINCT FROM (NEW.status = 'uninstalled'))
    EXECUTE FUNCTION kernel.notify_extensions_changed();

CREATE TRIGGER experimental_flags_changed
    AFTER INSERT OR UPDATE ON kernel.instance_settings
    FOR EACH ROW
    WHEN (NEW.section = 'experimental')
    EXECUTE FUNCTION kernel.notify_extensions_changed();

-- A company's local folder set on one node is mounted into a wasm plugin on the others.
CREATE TRIGGER plugin_local_folders_changed
    AFTER INSERT OR UPDATE OR DELETE ON kernel.plugin_local_folders
    FOR EACH STATEMENT EXECUTE FUNCTION kernel.notify_extensions_changed();
