-- oncefire schema 16: a crashed worker's deliveries are charged only for what may have run
-- (issue 11 point 24). ahead = 1: marked started a wave ahead, in a commit that marked others
-- too, so a lost lease does not tell whether it ran; it is handed back uncharged and solo.
-- solo = 1: leased only alone, by a worker holding nothing else, so its crash is charged.
ALTER TABLE oncefire_deliveries ADD COLUMN ahead INTEGER NOT NULL DEFAULT 0;
ALTER TABLE oncefire_deliveries ADD COLUMN solo INTEGER NOT NULL DEFAULT 0;
