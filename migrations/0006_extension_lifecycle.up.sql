-- Extension lifecycle (install, upgrade, uninstall while keel serves): the package an
-- extension was installed from, the capabilities an admin granted, an upgrade waiting for
-- approval, and a generation every node compares to follow changes made on another node.
ALTER TABLE kernel.extensions
    ADD COLUMN package_name          text NOT NULL DEFAULT '',
    ADD COLUMN package_digest        text NOT NULL DEFAULT '',
    ADD COLUMN granted_capabilities  jsonb NOT NULL DEFAULT '[]'::jsonb,
    ADD COLUMN pending_version       text,
    ADD COLUMN pending_manifest      jsonb,
    ADD COLUMN pending_digest        text,
    ADD COLUMN pending_path          text,
    ADD COLUMN generation            bigint NOT NULL DEFAULT 0;

-- Rows found at start before this migration granted what their manifest declares.
UPDATE kernel.extensions SET granted_capabilities = COALESCE(manifest->'capabilities', '[]'::jsonb);
