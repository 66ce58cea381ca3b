-- Cheaper issue writes: every index on issues is one more insert per created issue. These
-- go or shrink without taking any read off its index (TestIssueListUsesIndexes EXPLAINs
-- the list and the lookups by identifier, parent and project):
--
-- * One unique text_pattern_ops index on upper(identifier) serves both the equality lookups
--   (an issue by identifier, fingerprints, the list's q) and the search's prefix LIKE, and
--   keeps identifiers unique; the plain unique index and the prefix index were two.
-- * UNIQUE (company_id, issue_number) guarded nothing the identifier index does not: an
--   identifier is "<issue_prefix>-<issue_number>", and a prefix belongs to one company and
--   never changes. No read looks issues up by number.
-- * issues_origin_idx (company_id, origin_kind, origin_id): the list's originKind filters use
--   issues_company_origin_prefix_idx, its originId filter issues_company_origin_id_idx.
-- * The parent and project lookups only ever ask for a given parent or project, so their
--   indexes leave out top-level issues and issues in no project (the list's parentId=null
--   uses issues_company_parent_idx, which keeps them).
DROP INDEX issues_identifier_prefix_idx;
DROP INDEX issues_identifier_key;
CREATE UNIQUE INDEX issues_identifier_key ON issues (upper(identifier) text_pattern_ops);
ALTER TABLE issues DROP CONSTRAINT issues_company_id_issue_number_key;
DROP INDEX issues_origin_idx;
DROP INDEX issues_parent_idx;
CREATE INDEX issues_parent_idx ON issues (parent_id) WHERE parent_id IS NOT NULL;
DROP INDEX issues_company_project_idx;
CREATE INDEX issues_company_project_idx ON issues (company_id, project_id, updated_at DESC) WHERE project_id IS NOT NULL;
