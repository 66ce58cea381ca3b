-- CLI auth challenges carry the board API key they will hand out: its hash (so approval can
-- activate it for the approving user) and its plaintext sealed under the challenge token,
-- which the server never stores. The sealed copy is wiped when the CLI picks the key up.
ALTER TABLE kernel.cli_auth_challenges
    ADD COLUMN pending_key_hash    text,
    ADD COLUMN pending_key_sealed  bytea,
    ADD COLUMN key_delivered_at    timestamptz,
    ADD COLUMN approved_at         timestamptz,
    ADD COLUMN cancelled_at        timestamptz;

CREATE INDEX board_api_keys_user_idx ON kernel.board_api_keys (user_id);
CREATE INDEX sessions_user_idx ON kernel.sessions (user_id);
