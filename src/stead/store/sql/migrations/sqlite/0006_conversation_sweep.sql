-- A worker's sweep for messages whose sender died before their run was created reads the
-- messages recorded since its last sweep: by time, not the whole table.
CREATE INDEX conversation_messages_created ON conversation_messages (created_at);
