-- Installed extension packages, content-addressed: the digest is the sha256 of the
-- canonical package archive keel stores. Every node sharing the database materialises a
-- package from its row alone, so no node needs a shared disk.
CREATE TABLE kernel.extension_packages (
    digest       text PRIMARY KEY CHECK (digest ~ '^[0-9a-f]{64}$'),
    plugin_key   text NOT NULL,
    version      text NOT NULL,
    source       text NOT NULL CHECK (source IN ('path', 'npm')),
    package_name text NOT NULL,
    manifest     jsonb NOT NULL,
    archive      bytea NOT NULL,
    size_bytes   bigint NOT NULL CHECK (size_bytes = octet_length(archive)),
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX extension_packages_plugin_key_idx ON kernel.extension_packages (plugin_key);
