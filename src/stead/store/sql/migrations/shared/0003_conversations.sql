-- Conversations: the messages sent to one, in order (a new run answers each), and the bytes
-- of images and documents, stored once by digest and referenced from messages.
CREATE TABLE conversation_messages (
    conversation_id TEXT NOT NULL,
    position        {BIGINT} NOT NULL,
    message_id      TEXT NOT NULL,
    run_id          TEXT NOT NULL,
    agent           TEXT NOT NULL,
    input           TEXT NOT NULL,  -- JSON: {"content": ..., "attachments": [...]}
    created_at      {DOUBLE} NOT NULL,
    PRIMARY KEY (conversation_id, position)
){WITHOUT_ROWID};

-- A message sent again under its id is the same message (idempotent send).
CREATE UNIQUE INDEX conversation_message_ids ON conversation_messages (conversation_id, message_id);
CREATE UNIQUE INDEX conversation_message_runs ON conversation_messages (run_id);

CREATE TABLE blobs (
    digest     TEXT PRIMARY KEY,
    media_type TEXT NOT NULL,
    data       {BYTES} NOT NULL,
    created_at {DOUBLE} NOT NULL
){WITHOUT_ROWID};
