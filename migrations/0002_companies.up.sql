-- Company fields the API shows beyond 0001, and an index for activity filtered by action.
ALTER TABLE kernel.companies
    ADD COLUMN feedback_data_sharing_consent_at          timestamptz,
    ADD COLUMN feedback_data_sharing_consent_by_user_id  text,
    ADD COLUMN feedback_data_sharing_terms_version       text,
    ADD COLUMN logo_asset_id                             text;

CREATE INDEX activity_log_company_action_idx ON kernel.activity_log (company_id, action, created_at DESC, id DESC);
