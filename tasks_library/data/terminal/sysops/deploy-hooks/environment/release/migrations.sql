BEGIN;
ALTER TABLE products ADD COLUMN price_cents INTEGER NOT NULL DEFAULT 0;
UPDATE products SET price_cents = CAST(ROUND(price * 100) AS INTEGER);
CREATE INDEX products_by_name ON products(name);
COMMIT;
