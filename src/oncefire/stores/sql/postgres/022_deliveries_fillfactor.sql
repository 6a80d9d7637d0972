-- oncefire schema 22: deliveries' pages keep a tenth free. A page is offered to a new row (an
-- insert, or a delivery's next version that does not fit where it is) only while it has that
-- much room beyond the row. Without it, the slivers of room that a long history leaves on
-- most of its pages (too small for a finished delivery, large enough for a pending one) drew
-- each new delivery to a page of its own: 50,000 pending deliveries lay on 36,851 pages spread
-- over a 10 M history, and every lease and completion read and dirtied one page a delivery.
-- New deliveries now fill fresh or purged pages together, and a delivery's next version fits
-- beside it. Only pages written from now on are filled to nine tenths.
ALTER TABLE oncefire_deliveries SET (fillfactor = 90);
