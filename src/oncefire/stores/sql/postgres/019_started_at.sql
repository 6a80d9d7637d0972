-- oncefire schema 19: a delivery's claimed_at is named for what it holds, the moment its
-- current attempt's function started (NULL while it is leased and not started); "claim"
-- names only the key of tx.claim.
ALTER TABLE oncefire_deliveries RENAME COLUMN claimed_at TO started_at;
