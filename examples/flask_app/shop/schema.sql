CREATE TABLE IF NOT EXISTS items (
    sku    TEXT PRIMARY KEY,
    stock  INTEGER NOT NULL CHECK (stock >= 0)
);
CREATE TABLE IF NOT EXISTS orders (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    sku       TEXT NOT NULL REFERENCES items (sku),
    quantity  INTEGER NOT NULL,
    email     TEXT NOT NULL,
    status    TEXT NOT NULL DEFAULT 'placed'
);
CREATE TABLE IF NOT EXISTS reports (
    day     TEXT PRIMARY KEY,
    orders  INTEGER NOT NULL
);
INSERT OR IGNORE INTO items (sku, stock) VALUES ('tea', 10), ('mug', 2);
